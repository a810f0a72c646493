"""Decide what creating a table means given what already exists. Pure: no I/O, no Spark, no Kafka.

The plan says, for the Delta table and for the topic, whether to create it or use what exists, and
lists every difference between the definition and what exists; any difference is a conflict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from logstore_cli.catalog.schema import columns_from_delta_schema
from logstore_cli.catalog.warehouse import DeltaState
from logstore_cli.ddl.delta_properties import DELETED_FILE_RETENTION, LOG_RETENTION, retention_ms
from logstore_cli.ddl.registry import TOPIC_CONFIG_PREFIX
from logstore_cli.errors import TableConflictError, TableExistsError, TopicInUseError
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import TableSpec


class Step(StrEnum):
    CREATE = "create"
    EXISTS = "exists"  # already there and identical: used as it is
    NONE = "none"  # not part of this table (no log store)


@dataclass(frozen=True)
class Difference:
    what: str
    declared: str
    existing: str

    def __str__(self) -> str:
        return f"{self.what}: declared {self.declared}, existing {self.existing}"


@dataclass(frozen=True)
class TablePlan:
    spec: TableSpec
    path: Path | str  # a local directory, or the table's URI on object storage
    delta: Step
    topic: Step
    partitions: int | None = None
    replication: int | None = None  # None: a topic to create with the cluster's default
    topic_configs: dict[str, str] = field(default_factory=dict)
    differences: tuple[Difference, ...] = ()
    topic_users: tuple[str, ...] = ()  # other tables whose log is this topic
    topic_records: int = 0  # records an existing topic holds
    topic_end_offsets: Mapping[int, int] = field(default_factory=dict)
    adopt_topic: bool = False  # --adopt-topic: an existing topic with records may become the log

    @property
    def is_noop(self) -> bool:
        return self.delta is not Step.CREATE and self.topic is not Step.CREATE

    @property
    def adopts_topic(self) -> bool:
        """A new table takes an existing topic that already holds records."""
        return self.delta is Step.CREATE and self.topic is Step.EXISTS and self.topic_records > 0

    def to_json(self) -> dict[str, Any]:
        log = self.spec.log_store
        return {
            "table": self.spec.name,
            "path": str(self.path),
            "delta": self.delta.value,
            "topic": None
            if log is None
            else {
                "name": log.topic,
                "address": log.address,
                "action": self.topic.value,
                "partitions": self.partitions,
                "replication": self.replication,
                "configs": self.topic_configs,
                "adopted_records": self.topic_records if self.adopts_topic else 0,
            },
            "differences": [str(d) for d in self.differences],
        }


def topic_configs(properties: Mapping[str, str]) -> dict[str, str]:
    """Kafka topic configs declared with ``log.topic.<config>`` (a logstore extension)."""
    n = len(TOPIC_CONFIG_PREFIX)
    return {k[n:]: v for k, v in properties.items() if k.startswith(TOPIC_CONFIG_PREFIX)}


def table_differences(spec: TableSpec, existing: DeltaState) -> list[Difference]:
    diffs: list[Difference] = []
    have = {c.name.lower(): c for c in columns_from_delta_schema(existing.schema)}
    want = {c.name.lower(): c for c in spec.columns}
    for key, col in want.items():
        old = have.get(key)
        if old is None:
            diffs.append(Difference(f"column {col.name}", col.type, "missing"))
            continue
        if old.type != col.type:
            diffs.append(Difference(f"column {col.name} type", col.type, old.type))
        if old.nullable != col.nullable:
            diffs.append(
                Difference(
                    f"column {col.name} nullability",
                    _null(col.nullable),
                    _null(old.nullable),
                )
            )
    for key, old in have.items():
        if key not in want:
            diffs.append(Difference(f"column {old.name}", "missing", old.type))
    if [c.lower() for c in spec.primary_key] != [c.lower() for c in existing.primary_key]:
        diffs.append(
            Difference("primary key", _cols(spec.primary_key), _cols(existing.primary_key))
        )
    if tuple(spec.partitioned_by) != existing.partition_columns:
        diffs.append(
            Difference(
                "partitioning", _cols(spec.partitioned_by), _cols(existing.partition_columns)
            )
        )
    return diffs


def topic_differences(
    spec: TableSpec, topic: TopicInfo, partitions: int, replication: int | None
) -> list[Difference]:
    """What differs between the declared topic and ``topic``; an undeclared replication (the
    cluster's default) matches any."""
    diffs = []
    name = spec.log_store.topic if spec.log_store else topic.name
    if topic.partitions != partitions:
        diffs.append(Difference(f"topic {name} partitions", str(partitions), str(topic.partitions)))
    if replication is not None and topic.replication != replication:
        diffs.append(
            Difference(f"topic {name} replication", str(replication), str(topic.replication))
        )
    for key, value in topic_configs(spec.properties).items():
        if topic.configs.get(key) != value:
            diffs.append(
                Difference(f"topic {name} config {key}", value, topic.configs.get(key, "default"))
            )
    return diffs


def plan_table(
    spec: TableSpec,
    path: Path | str,
    existing_delta: DeltaState | None,
    existing_topic: TopicInfo | None,
    *,
    topic_users: tuple[str, ...] = (),
    topic_records: int = 0,
    topic_end_offsets: Mapping[int, int] | None = None,
    adopt_topic: bool = False,
) -> TablePlan:
    """What to do for ``spec``; differences with what exists are recorded, not raised."""
    diffs: list[Difference] = []
    delta = Step.CREATE
    if existing_delta is not None:
        delta = Step.EXISTS
        diffs += table_differences(spec, existing_delta)
    log = spec.log_store
    if log is None:
        return TablePlan(spec, path, delta, Step.NONE, differences=tuple(diffs))
    partitions, replication = log.partitions, log.replication
    topic = Step.CREATE
    if existing_topic is not None:
        topic = Step.EXISTS
        diffs += topic_differences(spec, existing_topic, partitions, replication)
        if replication is None:  # report what the topic has, not what a new one would get
            replication = existing_topic.replication
    return TablePlan(
        spec,
        path,
        delta,
        topic,
        partitions,
        replication,
        topic_configs(spec.properties),
        tuple(diffs),
        topic_users=topic_users,
        topic_records=topic_records,
        topic_end_offsets=dict(topic_end_offsets or {}),
        adopt_topic=adopt_topic,
    )


def check_plan(plan: TablePlan, *, if_not_exists: bool) -> None:
    """Raise when the plan may not go ahead: a conflict, or an existing table without the flag."""
    log = plan.spec.log_store
    if plan.topic_users and log is not None:
        raise TopicInUseError(
            f"table '{plan.spec.name}': {log.system_title} topic '{log.topic}' is the log of table "
            + ", ".join(f"'{u}'" for u in plan.topic_users),
            hint="a topic belongs to one table: choose another topic name (log-store.topic / "
            "kafka.topic), or drop the other table first",
        )
    if plan.differences:
        detail = "\n".join(f"  - {d}" for d in plan.differences)
        if plan.delta is Step.CREATE and log is not None:
            # Only the topic differs and no table uses it: an interrupted create-table, or a topic
            # someone else made.
            raise TableConflictError(
                f"table '{plan.spec.name}': {log.system_title} topic '{log.topic}' already "
                f"exists at {log.address}, is used by no table of the warehouse, and differs "
                "from the definition",
                detail=detail,
                hint="change the DDL to match it, or delete the topic ("
                + (
                    f"pulsar-admin topics delete-partitioned-topic -f {log.topic}"
                    if log.system == "pulsar"
                    else f"kafka-topics.sh --bootstrap-server {log.address} --delete --topic "
                    f"{log.topic}"
                )
                + ") and run this command again",
            )
        raise TableConflictError(
            f"table '{plan.spec.name}' already exists and differs from the definition",
            detail=detail,
            hint="drop it first ('logstore drop-table'), or change the DDL to match",
        )
    if plan.adopts_topic and not plan.adopt_topic and log is not None:
        n = plan.topic_records
        raise TableConflictError(
            f"table '{plan.spec.name}': {log.system_title} topic '{log.topic}' already exists "
            f"and holds {n} "
            f"record{'s' if n != 1 else ''}",
            hint="choose a new topic name, or pass --adopt-topic to make it the table's log "
            "anyway (verify starts after the records it holds now; readers skip what is not "
            "logstore's)",
        )
    if plan.delta is Step.EXISTS and not (if_not_exists or plan.spec.if_not_exists):
        raise TableExistsError(
            f"table '{plan.spec.name}' already exists at {plan.path}",
            hint="pass --if-not-exists (or write CREATE TABLE IF NOT EXISTS) to accept it",
        )


def _null(nullable: bool) -> str:
    return "NULL" if nullable else "NOT NULL"


def _cols(cols: tuple[str, ...] | list[str]) -> str:
    return "(" + ", ".join(cols) + ")" if cols else "none"


# -- the topic's retention against Delta's ------------------------------------------------------

_DAY_MS = 86_400_000


def _length(ms: int) -> str:
    if ms % _DAY_MS == 0:
        days = ms // _DAY_MS
        return f"{days} day{'' if days == 1 else 's'}"
    hours = ms / 3_600_000
    return f"{hours:g} hour{'' if hours == 1 else 's'}"


def retention_warnings(properties: Mapping[str, str], *, log_store: bool) -> list[str]:
    """Why the table's topic may delete records a hybrid read needs while Delta still keeps the
    snapshots it starts from: ``log.topic.retention.ms`` shorter than ``delta.logRetentionDuration``
    or ``delta.deletedFileRetentionDuration`` (Delta's defaults when unset). The broker's default
    retention is not asked for: only a retention the table sets is checked. ``-1`` is infinite."""
    value = topic_configs(properties).get("retention.ms")
    if not log_store or value is None:
        return []
    try:
        topic_ms = int(value.strip())
    except ValueError:
        return []  # the broker refuses it when the topic is created or changed
    if topic_ms < 0:
        return []
    longer: list[tuple[str, int]] = []
    for key in (LOG_RETENTION, DELETED_FILE_RETENTION):
        try:
            delta_ms = retention_ms(properties, key)
        except ValueError:
            continue  # an invalid interval is an error of its own (validate)
        if topic_ms < delta_ms:
            longer.append((key, delta_ms))
    if not longer:
        return []
    needed = max(ms for _, ms in longer)
    named = " and ".join(f"{key} ({_length(ms)})" for key, ms in longer)
    return [
        f"{TOPIC_CONFIG_PREFIX}retention.ms = {topic_ms} ({_length(topic_ms)}) is shorter than "
        f"{named}: a hybrid read from a snapshot older than the topic's retention "
        "(read --from snapshot:V) fails, as the log no longer holds the offsets after it; set "
        f"{TOPIC_CONFIG_PREFIX}retention.ms to {needed} or more (-1 keeps records forever), or "
        "shorten the Delta retention"
    ]
