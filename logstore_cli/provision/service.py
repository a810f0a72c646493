"""Create, describe, list, alter and drop LogStore tables over a DeltaStore and a TopicStore.

Everything that can be checked is checked before anything is created; a failure part-way through a
table removes what this call created for it (a topic it made), so no table is left half-made.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.schema import columns_from_delta_schema
from logstore_cli.ddl.properties import resolve_log_store
from logstore_cli.errors import InvalidInputError, LogstoreError, TableConflictError
from logstore_cli.model import (
    DEFAULT_PARTITIONS,
    DEFAULT_REPLICATION,
    LogStoreSpec,
    TableSpec,
    is_secret,
    redact,
)
from logstore_cli.provision.backends import DeltaStore, TopicStore
from logstore_cli.provision.plan import Step, TablePlan, check_plan, plan_table, topic_configs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stores:
    delta: DeltaStore
    topics: TopicStore


# ---------------------------------------------------------------------------------------- create


def plan_tables(specs: Sequence[TableSpec], warehouse: Path, stores: Stores) -> list[TablePlan]:
    """Plan every table (reads only); raise before anything is created if any plan is refused."""
    seen: dict[str, str] = {}
    plans = []
    for spec in specs:
        _check_supported(spec)
        path = wh.table_path(warehouse, spec.database, spec.table)
        key = f"{spec.database or wh.DEFAULT_DATABASE}.{spec.table}".lower()
        if key in seen:
            raise InvalidInputError(
                f"table '{spec.name}' is defined twice in the input (also as '{seen[key]}')",
                hint="remove one of the CREATE TABLE statements",
            )
        seen[key] = spec.name
        existing = stores.delta.read(path)
        topic = stores.topics.describe(spec.log_store) if spec.log_store else None
        plans.append(plan_table(spec, path, existing, topic))
    return plans


def create_tables(
    specs: Sequence[TableSpec],
    warehouse: Path,
    stores: Stores,
    *,
    if_not_exists: bool = False,
    dry_run: bool = False,
) -> list[TablePlan]:
    plans = plan_tables(specs, warehouse, stores)
    for plan in plans:
        check_plan(plan, if_not_exists=if_not_exists)
    if dry_run:
        return plans
    if any(p.delta is Step.CREATE for p in plans):
        wh.ensure_writable(warehouse)
    for plan in plans:
        _apply(plan, stores)
    return plans


def _apply(plan: TablePlan, stores: Stores) -> None:
    spec, log_spec = plan.spec, plan.spec.log_store
    created_topic = False
    if log_spec is not None and plan.topic is Step.CREATE:
        assert plan.partitions is not None and plan.replication is not None
        stores.topics.create(log_spec, plan.partitions, plan.replication, plan.topic_configs)
        created_topic = True
    if plan.delta is Step.CREATE:
        properties, _ = wh.stored_properties(spec)
        try:
            stores.delta.create(plan.path, spec, properties)
        except BaseException as exc:
            if created_topic and log_spec is not None:
                _rollback_topic(stores, log_spec, exc)
            raise


def _rollback_topic(stores: Stores, log_spec: LogStoreSpec, cause: BaseException) -> None:
    try:
        stores.topics.delete(log_spec)
    except Exception as exc:  # report both: the cause, and what is left behind
        if isinstance(cause, LogstoreError):
            extra = f"the topic '{log_spec.topic}' created by this call could not be removed: {exc}"
            cause.detail = "\n".join(filter(None, [cause.detail, extra]))
        log.warning("rollback of topic %s failed: %s", log_spec.topic, exc)


def _check_supported(spec: TableSpec) -> None:
    if spec.location:
        raise InvalidInputError(
            f"table '{spec.name}': LOCATION is not supported; tables live at "
            "<warehouse>/<database>/<table>",
            hint="remove the LOCATION clause and choose the warehouse with --warehouse",
        )
    if spec.or_replace:
        raise InvalidInputError(
            f"table '{spec.name}': CREATE OR REPLACE is not supported (it would drop data)",
            hint="drop the table with 'logstore drop-table' first, then create it",
        )


# ------------------------------------------------------------------------------ read the catalog


@dataclass(frozen=True)
class StoredTable:
    ref: wh.TableRef
    state: wh.DeltaState
    spec: TableSpec


def load_table(
    warehouse: Path,
    name: str,
    *,
    default_bootstrap: str | None = None,
) -> StoredTable:
    ref = wh.find_table(warehouse, name)
    state = wh.read_delta(ref.path)
    return StoredTable(ref, state, spec_from_delta(ref, state, default_bootstrap))


def spec_from_delta(
    ref: wh.TableRef, state: wh.DeltaState, default_bootstrap: str | None
) -> TableSpec:
    """Rebuild the table's model from its Delta metadata."""
    props = wh.user_properties(state.properties)
    return TableSpec(
        database=ref.database,
        table=ref.table,
        columns=columns_from_delta_schema(state.schema),
        primary_key=state.primary_key,
        using=state.properties.get(wh.P_USING),
        properties=props,
        log_store=_resolve(props, ref.name, default_bootstrap, state.primary_key),
        partitioned_by=state.partition_columns,
        comment=state.description,
    )


def _resolve(
    props: Mapping[str, str],
    name: str,
    default_bootstrap: str | None,
    primary_key: Sequence[str],
) -> LogStoreSpec | None:
    from logstore_cli.ddl import ParseOptions

    options = ParseOptions(default_bootstrap_servers=default_bootstrap)
    return resolve_log_store(dict(props), name, options, primary_key=primary_key)


def describe_table(stored: StoredTable, topics: TopicStore | None) -> dict[str, Any]:
    spec, state = stored.spec, stored.state
    out: dict[str, Any] = {
        "name": stored.ref.name,
        "path": str(stored.ref.path),
        "delta": {"version": state.version, "num_files": state.num_files},
        "columns": [c.to_json() for c in spec.columns],
        "primary_key": list(spec.primary_key),
        "partitioned_by": list(spec.partitioned_by),
        "using": spec.using,
        "properties": dict(sorted(redact(spec.properties).items())),  # Delta keeps no order
        "secret_keys_not_stored": [
            k for k in state.properties.get(wh.P_SECRET_KEYS, "").split(",") if k
        ],
        "log_store": spec.log_store.to_json() if spec.log_store else None,
        "topic": None,
    }
    if spec.log_store is not None and topics is not None:
        out["topic"] = _topic_json(spec.log_store, topics)
    return out


def _topic_json(log_spec: LogStoreSpec, topics: TopicStore) -> dict[str, Any]:
    try:
        info = topics.describe(log_spec)
        if info is None:
            return {"name": log_spec.topic, "exists": False, "error": "topic does not exist"}
        offsets = topics.end_offsets(log_spec)
    except LogstoreError as exc:
        return {"name": log_spec.topic, "exists": None, "error": exc.message}
    return {
        "name": info.name,
        "exists": True,
        "partitions": [{"partition": p, "end_offset": o} for p, o in sorted(offsets.items())],
        "replication": info.replication,
        "configs": redact(info.configs),
    }


def list_tables(warehouse: Path, *, default_bootstrap: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for ref in wh.list_tables(warehouse):
        state = wh.read_delta(ref.path)
        props = wh.user_properties(state.properties)
        try:
            log_spec = _resolve(props, ref.name, default_bootstrap, state.primary_key)
            log_json: dict[str, Any] | None = (
                {"topic": log_spec.topic, "consistency": log_spec.consistency.value}
                if log_spec
                else None
            )
            problem = None
        except LogstoreError as exc:  # one bad table must not hide the others
            log_json, problem = None, exc.message
        rows.append(
            {
                "name": ref.name,
                "path": str(ref.path),
                "version": state.version,
                "columns": len(state.schema["fields"]),
                "primary_key": list(state.primary_key),
                "log_store": log_json,
                "error": problem,
            }
        )
    return rows


# ----------------------------------------------------------------------------------------- alter


@dataclass(frozen=True)
class TopicChange:
    """What a property change does to the table's topic."""

    name: str
    action: str  # create | exists | add-partitions | keep | delete
    partitions: int | None = None
    replication: int | None = None
    configs_set: Mapping[str, str] = field(default_factory=dict)
    configs_unset: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "action": self.action}
        if self.partitions is not None:
            out |= {"partitions": self.partitions, "replication": self.replication}
        if self.configs_set or self.configs_unset:
            out |= {
                "configs_set": dict(self.configs_set),
                "configs_unset": list(self.configs_unset),
            }
        return out


@dataclass(frozen=True)
class AlterResult:
    table: str
    set: dict[str, str]
    unset: list[str]
    topic: TopicChange | None


def alter_table(
    stored: StoredTable,
    stores: Stores,
    set_: Mapping[str, str],
    unset: Sequence[str],
    *,
    delete_topic: bool = False,
    default_bootstrap: str | None = None,
    dry_run: bool = False,
) -> AlterResult:
    """Validate the new property set like DDL, then change the topic and the Delta table.

    A topic this call creates is removed again if the Delta change fails; topic changes that cannot
    be undone (more partitions, configs, deletion) happen only after the Delta change succeeded.
    """
    old = stored.spec
    _check_alterable(stored, set_, unset)
    new_props = {k: v for k, v in old.properties.items() if k not in unset} | dict(set_)
    new_log = _resolve(new_props, stored.ref.name, default_bootstrap, old.primary_key)
    change = _topic_change(old, new_log, new_props, stores.topics, delete_topic)
    result = AlterResult(stored.ref.name, dict(set_), list(unset), change)
    if dry_run:
        return result
    if change is None:  # no log store before or after: a Delta property change only
        stores.delta.alter(stored.ref.path, dict(set_), list(unset))
        return result

    topic_log = new_log or old.log_store
    assert topic_log is not None  # a change exists only when a log store did or does
    if change.action == "create":
        assert change.partitions is not None and change.replication is not None
        stores.topics.create(topic_log, change.partitions, change.replication, change.configs_set)
    try:
        stores.delta.alter(stored.ref.path, dict(set_), list(unset))
    except BaseException as exc:
        if change.action == "create":
            _rollback_topic(stores, topic_log, exc)
        raise
    if change.action == "add-partitions" and change.partitions is not None:
        stores.topics.add_partitions(topic_log, change.partitions)
    if change.action in ("exists", "add-partitions") and (
        change.configs_set or change.configs_unset
    ):
        stores.topics.alter_configs(topic_log, change.configs_set, change.configs_unset)
    if change.action == "delete":
        stores.topics.delete(topic_log)
    return result


def _check_alterable(stored: StoredTable, set_: Mapping[str, str], unset: Sequence[str]) -> None:
    for key, value in set_.items():
        if key.startswith("logstore."):
            raise InvalidInputError(
                f"'{key}' is managed by logstore and cannot be set", hint="remove it from --set"
            )
        if is_secret(key, value):
            raise InvalidInputError(
                f"'{key}' holds a secret; secrets are never stored in table metadata",
                hint="put it in the config file's [kafka.client] section or the environment",
            )
    props = stored.state.properties
    missing = [k for k in unset if k not in stored.spec.properties and k not in props]
    if missing:
        raise InvalidInputError(
            f"cannot unset {', '.join(map(repr, missing))}: not a property of '{stored.ref.name}'",
            hint="see the table's properties with 'logstore describe'",
        )


def _topic_change(
    old: TableSpec,
    new: LogStoreSpec | None,
    new_props: Mapping[str, str],
    topics: TopicStore,
    delete_topic: bool,
) -> TopicChange | None:
    """What the property change means for the topic; raises for what cannot be done."""
    if new is None:
        if old.log_store is None:
            return None
        return TopicChange(old.log_store.topic, "delete" if delete_topic else "keep")
    partitions = new.partitions or DEFAULT_PARTITIONS
    replication = new.replication or DEFAULT_REPLICATION
    wanted = topic_configs(new_props)
    info = topics.describe(new)
    if info is None:
        return TopicChange(new.topic, "create", partitions, replication, wanted)
    if partitions < info.partitions:
        raise TableConflictError(
            f"topic '{new.topic}' has {info.partitions} partitions; Kafka cannot reduce them "
            f"to {partitions}",
            hint="set log.system.partitions to at least the current count",
        )
    before = topic_configs(old.properties)
    return TopicChange(
        new.topic,
        "add-partitions" if partitions > info.partitions else "exists",
        partitions,
        replication,
        configs_set={k: v for k, v in wanted.items() if info.configs.get(k) != v},
        configs_unset=tuple(sorted(k for k in before if k not in wanted)),
    )


# ------------------------------------------------------------------------------------------ drop


def drop_table(stored: StoredTable, stores: Stores, *, delete_topic: bool) -> dict[str, Any]:
    log_spec = stored.spec.log_store
    topic: dict[str, Any] | None = None
    if delete_topic and log_spec is not None:
        # Reach the broker before deleting anything, so a down broker leaves the table whole.
        exists = stores.topics.describe(log_spec) is not None
        topic = {"name": log_spec.topic, "deleted": exists}
    stores.delta.drop(stored.ref.path)
    if topic and topic["deleted"] and log_spec is not None:
        stores.topics.delete(log_spec)
    with contextlib.suppress(OSError):
        stored.ref.path.parent.rmdir()  # the database directory, when it is now empty
    return {"table": stored.ref.name, "path": str(stored.ref.path), "topic": topic}
