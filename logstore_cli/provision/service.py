"""Create, alter and drop LogStore tables over a DeltaStore and a TopicStore.

One write order everywhere: check everything that can be checked (names, paths, conflicts, who owns
the topic, and — through the broker's ``validate_only`` — every topic change), then change. A change
that fails part-way undoes what this call did where it can, and otherwise says exactly what was
changed and stays changed.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.lease import LeaseInfo, local_holder_dead, local_time, read_lease
from logstore_cli.catalog.tables import StoredTable, StoredTableOn, resolve_log_store
from logstore_cli.errors import (
    InvalidInputError,
    LogstoreError,
    TableConflictError,
    TopicInUseError,
)
from logstore_cli.model import ColumnSpec, LogStoreSpec, TableSpec, is_secret
from logstore_cli.names import TableName
from logstore_cli.provision.backends import DeltaStore, TopicStore
from logstore_cli.provision.plan import (
    Step,
    TablePlan,
    check_plan,
    plan_table,
    topic_configs,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stores:
    delta: DeltaStore
    topics: TopicStore


# ---------------------------------------------------------------------------------- the writer


class TableBeingWrittenError(TableConflictError):
    """A live ingest job holds the table's writer lease: dropping or altering it now breaks it."""


@dataclass(frozen=True)
class LiveWriter:
    """The live holder of a table's writer lease that ``--force`` went past."""

    info: LeaseInfo

    def to_json(self) -> dict[str, Any]:
        i = self.info
        return {"job": i.job, "host": i.host, "pid": i.pid, "expires_at": local_time(i.expires_at)}


def check_no_live_writer(
    ref: wh.TableRef | wh.StoredTable,
    doing: str,
    breaks: str,
    *,
    force: bool,
    clock: Callable[[], float] = time.time,
    holder_dead: Callable[[LeaseInfo], bool] = local_holder_dead,
) -> LiveWriter | None:
    """Refuse (TableBeingWrittenError, exit 1) while a live ingest holds ``ref``'s writer lease:
    unexpired, and not a holder on this host whose process has exited (``catalog.lease``'s rule for
    taking a lease over). With ``force``: the live holder, for the caller to warn about. The lease is
    read, never taken: an ingest that starts after this check is not stopped by it."""
    try:
        if isinstance(ref, wh.StoredTable):
            from logstore_cli.catalog.storage_lease import read_lease_on

            info = read_lease_on(ref.storage)
        else:
            info = read_lease(ref.path)
    except LogstoreError as exc:  # an unreadable lease: nobody can be shown to hold the table
        if force:
            log.warning("the lease of table %s is unreadable (%s); going on (--force)", ref.name,
                        exc.message)  # fmt: skip
            return None
        raise TableBeingWrittenError(
            f"cannot tell whether an ingest writes table {ref.name}: {exc.message}",
            hint=f"if no ingest runs on it, {exc.hint or 'delete the lease file'}; or pass "
            f"--force to {doing} anyway",
        ) from None
    now = clock()
    if info is None or info.expired(now):
        return None
    if info.host == socket.gethostname() and holder_dead(info):
        return None
    if force:
        return LiveWriter(info)
    remaining = max(0, round(info.expires_at - now))
    raise TableBeingWrittenError(
        f"table {ref.name} is being written by {info.holder}; its lease expires at "
        f"{local_time(info.expires_at)} (in {remaining} s, renewed while the job runs)",
        hint=f"stop that job first (Ctrl-C, or on {info.host}: kill {info.pid}), then {doing}; "
        f"--force does it anyway: {breaks}",
    )


_DROP_BREAKS = (
    "the job fails at its next commit and cannot be restarted on this table; records it wrote "
    "to the topic since its last commit stay there uncommitted"
)


def check_droppable(ref: wh.TableRef | wh.StoredTable, *, force: bool) -> LiveWriter | None:
    """``check_no_live_writer`` for a drop (the CLI asks it before its confirmation prompt too)."""
    return check_no_live_writer(ref, "drop the table", _DROP_BREAKS, force=force)


_ALTER_BREAKS = (
    "the job's next Delta commit conflicts with the metadata change and the job stops; restart "
    "it to go on with the new properties"
)


# ---------------------------------------------------------------------------------- topic owners


def same_cluster(a: str, b: str) -> bool:
    """Whether two bootstrap lists (or Pulsar service URLs) name the same cluster: they share a
    broker address."""

    def brokers(address: str) -> set[str]:
        # 'pulsar://a:6650,b:6650': the scheme is written once, before the first host.
        parts = address.strip().lower().removeprefix("pulsar://").split(",")
        return {part.strip() for part in parts if part.strip()}

    return bool(brokers(a) & brokers(b))


class TopicOwners:
    """Which table of the warehouse uses which topic: read once per command, on first use.

    A table whose log settings cannot be resolved counts as a user when any of its properties names
    the topic: a topic is never handed to a second table, nor deleted, on a guess.
    """

    def __init__(
        self, tables: Callable[[], list[tuple[str, wh.DeltaState]]], default_bootstrap: str | None
    ) -> None:
        """``tables()``: every readable committed table of the warehouse, by name."""
        self._tables, self._bootstrap = tables, default_bootstrap
        self._entries: list[tuple[str, LogStoreSpec | None, frozenset[str]]] | None = None

    @classmethod
    def of(cls, warehouse: Path, delta: DeltaStore, default_bootstrap: str | None) -> TopicOwners:
        """The owners among the tables ``delta`` finds in the local ``warehouse``."""
        return cls(lambda: [(r.name, state) for r, state in delta.tables(warehouse)],
                   default_bootstrap)  # fmt: skip

    def _read(self) -> list[tuple[str, LogStoreSpec | None, frozenset[str]]]:
        entries: list[tuple[str, LogStoreSpec | None, frozenset[str]]] = []
        for name, state in self._tables():
            props = wh.user_properties(state.properties)
            try:
                log_spec = resolve_log_store(props, name, self._bootstrap, state.primary_key)
                entries.append((name, log_spec, frozenset()))
            except LogstoreError:
                entries.append((name, None, frozenset(props.values())))
        return entries

    def users(self, log_spec: LogStoreSpec, *, exclude: str | None = None) -> list[str]:
        """The tables (other than ``exclude``) whose log store is ``log_spec``'s topic."""
        if self._entries is None:
            self._entries = self._read()
        return [
            table
            for table, other, unresolved_values in self._entries
            if table != exclude
            and (
                log_spec.topic in unresolved_values
                or (
                    other is not None
                    and other.topic == log_spec.topic
                    and same_cluster(other.address, log_spec.address)
                )
            )
        ]


def _in_use_error(
    topic: str, users: Sequence[str], doing: str, system: str = "Kafka"
) -> TopicInUseError:
    return TopicInUseError(
        f"cannot {doing}: {system} topic '{topic}' is the log of table "
        + ", ".join(f"'{u}'" for u in users),
        hint="a topic belongs to one table: choose another topic name (log-store.topic / "
        "kafka.topic), or drop or alter the other table first",
    )


def _records(start: Mapping[int, int], end: Mapping[int, int]) -> int:
    return sum(max(0, end[p] - start.get(p, 0)) for p in end)


# ---------------------------------------------------------------------------------------- create


def plan_tables(
    specs: Sequence[TableSpec],
    warehouse: Path,
    stores: Stores,
    *,
    default_bootstrap: str | None = None,
    adopt_topic: bool = False,
) -> list[TablePlan]:
    """Plan every table (reads only); raise before anything is created if any plan is refused."""

    def locate(name: TableName) -> tuple[Path, wh.DeltaState | None]:
        path = wh.table_path(warehouse, name)
        return path, stores.delta.read(path)

    owners = TopicOwners.of(warehouse, stores.delta, default_bootstrap)
    return plan_specs(specs, locate, stores.topics, owners, adopt_topic=adopt_topic)


Locate = Callable[[TableName], tuple[Path | str, wh.DeltaState | None]]


def plan_specs(
    specs: Sequence[TableSpec],
    locate: Locate,
    topics: TopicStore,
    owners: TopicOwners,
    *,
    adopt_topic: bool,
) -> list[TablePlan]:
    """``plan_tables`` with the warehouse's layout given by ``locate``: a name's location and its
    committed Delta state (None when there is none)."""
    seen: dict[str, str] = {}
    topics_seen: dict[str, str] = {}
    plans = []
    for spec in specs:
        _check_supported(spec)
        name = wh.spec_table_name(spec)
        key = name.qualified.lower()
        if key in seen:
            raise InvalidInputError(
                f"table '{spec.name}' is defined twice in the input (also as '{seen[key]}')",
                hint="remove one of the CREATE TABLE statements",
            )
        seen[key] = spec.name
        path, existing = locate(name)
        log_spec = spec.log_store
        topic = users = None
        records, end = 0, {}
        if log_spec is not None:
            if log_spec.topic in topics_seen:
                raise _in_use_error(
                    log_spec.topic, [topics_seen[log_spec.topic]], "create it",
                    log_spec.system_title,
                )  # fmt: skip
            topics_seen[log_spec.topic] = spec.name
            topic = topics.describe(log_spec)
            users = owners.users(log_spec, exclude=name.qualified)
            if topic is not None:
                end = topics.end_offsets(log_spec)
                records = _records(topics.start_offsets(log_spec), end)
                if adopt_topic and records:
                    # Kafka's end offsets; on Pulsar, where its counts are, the read positions
                    # just after each partition's last message (what the property records).
                    end = topics.adoption_positions(log_spec)
        plans.append(
            plan_table(
                spec, path, existing, topic,
                topic_users=tuple(users or ()), topic_records=records,
                topic_end_offsets=end, adopt_topic=adopt_topic,
            )
        )  # fmt: skip
    return plans


def create_tables(
    specs: Sequence[TableSpec],
    warehouse: Path,
    stores: Stores,
    *,
    if_not_exists: bool = False,
    dry_run: bool = False,
    adopt_topic: bool = False,
    default_bootstrap: str | None = None,
) -> list[TablePlan]:
    plans = plan_tables(
        specs, warehouse, stores, default_bootstrap=default_bootstrap, adopt_topic=adopt_topic
    )

    def create(plan: TablePlan, properties: Mapping[str, str]) -> None:
        assert isinstance(plan.path, Path)  # plan_tables' locations
        stores.delta.create(plan.path, plan.spec, properties)

    return create_planned(
        plans, stores.topics, create, lambda: wh.ensure_writable(warehouse),
        if_not_exists=if_not_exists, dry_run=dry_run,
    )  # fmt: skip


CreateDelta = Callable[[TablePlan, Mapping[str, str]], None]


def create_planned(
    plans: Sequence[TablePlan],
    topics: TopicStore,
    create: CreateDelta,
    prepare: Callable[[], None],
    *,
    if_not_exists: bool,
    dry_run: bool,
) -> list[TablePlan]:
    """Check ``plans``, validate their new topics with the broker, then (``prepare`` first, when a
    table is created) create each topic and Delta table (``create``) in order."""
    for plan in plans:
        check_plan(plan, if_not_exists=if_not_exists)
    for plan in plans:
        _validate_topic(plan, topics)  # the broker checks every new topic before anything is made
    if dry_run:
        return list(plans)
    if any(p.delta is Step.CREATE for p in plans):
        prepare()
    done: list[str] = []
    for i, plan in enumerate(plans):
        try:
            _apply(plan, topics, create)
        except BaseException as exc:
            if len(plans) > 1:
                _add_detail(
                    exc,
                    "created: " + (", ".join(done) or "none")
                    + "; not created: " + ", ".join(p.spec.name for p in plans[i:]),
                )  # fmt: skip
            raise
        if not plan.is_noop:
            done.append(plan.spec.name)
    return list(plans)


def _validate_topic(plan: TablePlan, topics: TopicStore) -> None:
    log_spec = plan.spec.log_store
    if log_spec is not None and plan.topic is Step.CREATE:
        assert plan.partitions is not None
        topics.create(
            log_spec, plan.partitions, plan.replication, plan.topic_configs, validate_only=True
        )


def _apply(plan: TablePlan, topics: TopicStore, create: CreateDelta) -> None:
    spec, log_spec = plan.spec, plan.spec.log_store
    created_topic = False
    if log_spec is not None and plan.topic is Step.CREATE:
        assert plan.partitions is not None
        topics.create(log_spec, plan.partitions, plan.replication, plan.topic_configs)
        created_topic = True
    if plan.delta is Step.CREATE:
        properties, _ = wh.stored_properties(spec)
        if plan.adopts_topic:
            # Records before these positions are not logstore's: readers of this table skip them.
            properties[wh.P_ADOPTED_TOPIC] = wh.adopted_positions_text(plan.topic_end_offsets)
        try:
            create(plan, properties)
        except BaseException as exc:
            if created_topic and log_spec is not None:
                _rollback_topic(topics, log_spec, exc)
            raise


def _rollback_topic(topics: TopicStore, log_spec: LogStoreSpec, cause: BaseException) -> None:
    try:
        topics.delete(log_spec)
    except Exception as exc:  # report both: the cause, and what is left behind
        _add_detail(
            cause,
            f"the topic '{log_spec.topic}' created by this call could not be removed: {exc}; "
            "it is left behind, empty (run the same command again to use it)",
        )
        log.warning("rollback of topic %s failed: %s", log_spec.topic, exc)


def _add_detail(exc: BaseException, text: str) -> None:
    """Attach what the user must know to an error on its way out (shown under the message)."""
    if isinstance(exc, LogstoreError):
        exc.detail = "\n".join(filter(None, [exc.detail, text]))
    else:
        exc.add_note(text)


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


# ----------------------------------------------------------------------------------------- alter


@dataclass(frozen=True)
class TopicChange:
    """What a property change does to the table's topic (and to its old one, when renamed)."""

    name: str
    action: str  # create | exists | add-partitions | keep | delete
    partitions: int | None = None
    replication: int | None = None  # None with "create": the cluster's default
    configs_set: Mapping[str, str] = field(default_factory=dict)
    configs_unset: tuple[str, ...] = ()
    old_topic: str | None = None  # the topic the table used before a rename
    old_topic_action: str | None = None  # keep | delete

    @property
    def changes_configs(self) -> bool:
        return self.action in ("exists", "add-partitions") and bool(
            self.configs_set or self.configs_unset
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "action": self.action}
        if self.partitions is not None:
            out |= {"partitions": self.partitions, "replication": self.replication}
        if self.configs_set or self.configs_unset:
            out |= {
                "configs_set": dict(self.configs_set),
                "configs_unset": list(self.configs_unset),
            }
        if self.old_topic is not None:
            out |= {"old_topic": self.old_topic, "old_topic_action": self.old_topic_action}
        return out

    def describe(self) -> list[str]:
        """One line per effect, for people."""
        lines = [f"topic {self.name}: {self.action}"]
        if self.old_topic is not None:
            verb = "deleted" if self.old_topic_action == "delete" else "kept (no table uses it)"
            hint = "" if self.old_topic_action == "delete" else "; --delete-topic deletes it"
            lines.append(f"previous topic {self.old_topic}: {verb}{hint}")
        return lines


@dataclass(frozen=True)
class AlterResult:
    table: str
    set: dict[str, str]
    unset: list[str]
    topic: TopicChange | None
    dry_run: bool = False
    forced_past: LiveWriter | None = None  # the live writer --force (or columns only) went past
    added_columns: tuple[ColumnSpec, ...] = ()
    widened_columns: tuple[ColumnSpec, ...] = ()

    @property
    def writer_stops(self) -> bool:
        """The live writer gone past stops at its next epoch for the added/widened columns only."""
        return (
            self.forced_past is not None
            and bool(self.added_columns or self.widened_columns)
            and not (self.set or self.unset)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "set": self.set,
            "unset": self.unset,
            "added_columns": [c.to_json() for c in self.added_columns],
            "widened_columns": [c.to_json() for c in self.widened_columns],
            "topic": self.topic.to_json() if self.topic else None,
            "dry_run": self.dry_run,
            "forced_past_writer": self.forced_past.to_json() if self.forced_past else None,
        }


def alter_table(
    stored: StoredTable,
    stores: Stores,
    set_: Mapping[str, str],
    unset: Sequence[str],
    *,
    warehouse: Path,
    delete_topic: bool = False,
    adopt_topic: bool = False,
    default_bootstrap: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    add_columns: Sequence[ColumnSpec] = (),
    widen_columns: Sequence[ColumnSpec] = (),
) -> AlterResult:
    """Validate the new property set like DDL and every topic change with the broker, then apply.

    Order: a new topic first (undone if a later step fails), then the Delta properties (set back if
    a later step fails), then more partitions (Kafka cannot undo them), topic configs (set back),
    and last the deletion of a topic that is no longer used. The broker is contacted only when the
    change concerns the topic, so a Delta-only change works while Kafka is down. Refused while a
    live ingest writes the table, unless ``force`` (``check_no_live_writer``). ``add_columns``
    (nullable, new names: ``check_new_columns``) are one Delta commit of their own, made first:
    the log needs no change, as the job's records carry the columns of the table it started on.
    """
    return alter_stored(
        stored, stores.topics, _LocalTableDelta(stores.delta, stored.ref.path),
        TopicOwners.of(warehouse, stores.delta, default_bootstrap), set_, unset,
        delete_topic=delete_topic, adopt_topic=adopt_topic, default_bootstrap=default_bootstrap,
        dry_run=dry_run, force=force, add_columns=add_columns, widen_columns=widen_columns,
    )  # fmt: skip


class TableDelta(Protocol):
    """The Delta changes of one table that ``alter_stored`` makes, wherever the table is."""

    def alter(self, set_: Mapping[str, str], unset: Sequence[str]) -> None: ...

    def add_columns(self, columns: Sequence[ColumnSpec]) -> None: ...

    def widen_columns(self, columns: Sequence[ColumnSpec]) -> None: ...


@dataclass(frozen=True)
class _LocalTableDelta:
    """``TableDelta`` of the table at ``path`` of a local warehouse, through its ``DeltaStore``."""

    delta: DeltaStore
    path: Path

    def alter(self, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        self.delta.alter(self.path, set_, unset)

    def add_columns(self, columns: Sequence[ColumnSpec]) -> None:
        self.delta.add_columns(self.path, columns)

    def widen_columns(self, columns: Sequence[ColumnSpec]) -> None:
        self.delta.widen_columns(self.path, columns)


def alter_stored(
    stored: StoredTable | StoredTableOn,
    topics: TopicStore,
    delta: TableDelta,
    owners: TopicOwners,
    set_: Mapping[str, str],
    unset: Sequence[str],
    *,
    delete_topic: bool,
    adopt_topic: bool,
    default_bootstrap: str | None,
    dry_run: bool,
    force: bool,
    add_columns: Sequence[ColumnSpec],
    widen_columns: Sequence[ColumnSpec],
) -> AlterResult:
    """``alter_table`` of a table on any backend: its Delta changes made by ``delta``."""
    old = stored.spec
    _check_alterable(stored, set_, unset)
    check_new_columns(old, add_columns)
    widen_columns = check_widened_columns(old, widen_columns, add_columns)
    # Only columns added or widened: a running ingest stops cleanly at its next epoch
    # (SchemaWatch), so its lease does not stand in the way; it is named for the caller to warn
    # about.
    columns_only = bool(add_columns or widen_columns) and not set_ and not unset
    writer = check_no_live_writer(
        stored.ref, "alter the table", _ALTER_BREAKS, force=force or columns_only
    )
    new_props = {k: v for k, v in old.properties.items() if k not in unset} | dict(set_)
    new_log = resolve_log_store(new_props, stored.ref.name, default_bootstrap, old.primary_key)
    change = _topic_change(
        stored, new_log, new_props, topics, owners, delete_topic=delete_topic,
        adopt_topic=adopt_topic,
    )  # fmt: skip
    _validate_change(change, new_log, topics)
    _check_format_switch(stored, new_log, topics)
    result = AlterResult(
        stored.ref.name, dict(set_), list(unset), change, dry_run, writer, tuple(add_columns),
        tuple(widen_columns),
    )  # fmt: skip
    if not dry_run:
        if add_columns:
            # Columns cannot be taken back (Delta drops one only with column mapping): added
            # first, before anything that may fail and roll back.
            delta.add_columns(add_columns)
        if widen_columns:
            # Like added columns, a wider type is never taken back.
            delta.widen_columns(widen_columns)
        if set_ or unset:
            _apply_alter(stored, topics, delta, set_, unset, change, new_log)
    return result


def check_new_columns(spec: TableSpec, columns: Sequence[ColumnSpec]) -> None:
    """Refuse (exit 2) a column Delta and the log cannot both take as an addition: NOT NULL (rows
    already written have no value for it) and a name the table or another new column has (Delta
    compares names case-insensitively)."""
    seen = {c.name.lower(): f"the table has a column '{c.name}'" for c in spec.columns}
    types = {c.name.lower(): c for c in spec.columns}
    for c in columns:
        if not c.nullable:
            raise InvalidInputError(
                f"cannot add column '{c.name}' as NOT NULL: the rows already written have no "
                "value for it",
                hint="add it nullable (drop NOT NULL); Delta then reads it as null in older rows",
            )
        have = types.get(c.name.lower())
        if have is not None and have.type != c.type:
            raise InvalidInputError(
                f"cannot change column '{have.name}' from {have.type} to {c.type}: logstore "
                "adds a column with --add-column; a type changes with --widen-column",
                hint=f'alter-table --widen-column "{have.name} {c.type.upper()}" (a widening '
                "only), or add a new column with another name",
            )
        if c.name.lower() in seen:
            raise InvalidInputError(
                f"cannot add column '{c.name}': {seen[c.name.lower()]} (names are compared "
                "ignoring case)",
                hint="pick another name; logstore never drops, renames or retypes a column",
            )
        seen[c.name.lower()] = "it is given twice"


def check_widened_columns(
    spec: TableSpec, columns: Sequence[ColumnSpec], added: Sequence[ColumnSpec] = ()
) -> list[ColumnSpec]:
    """The ``columns`` to widen, each under the table's own name and nullability; refuses (exit 2)
    a column the table lacks, one given twice or also added, and a change ``widening_allowed``
    does not take. A column already of the new type is left out (nothing to do)."""
    from logstore_cli.ddl.types import ALLOWED_WIDENINGS, widening_allowed

    have = {c.name.lower(): c for c in spec.columns}
    added_names = {c.name.lower() for c in added}
    seen: set[str] = set()
    widened = []
    for c in columns:
        key = c.name.lower()
        old = have.get(key)
        if old is None or key in added_names:
            raise InvalidInputError(
                f"cannot widen column '{c.name}': the table has no such column",
                hint=f"its columns: {', '.join(x.name for x in spec.columns)}",
            )
        if key in seen:
            raise InvalidInputError(
                f"cannot widen column '{c.name}': it is given twice",
                hint="give each column once, with its new type",
            )
        seen.add(key)
        if not c.nullable or c.comment is not None:
            raise InvalidInputError(
                f"cannot widen column '{c.name}' with NOT NULL or a COMMENT: a widening changes "
                "the type only",
                hint=f'give the column and its new type only, e.g. "{old.name} BIGINT"',
            )
        if old.type == c.type:
            continue
        if not widening_allowed(old.type, c.type):
            raise InvalidInputError(
                f"cannot change column '{old.name}' from {old.type.upper()} to "
                f"{c.type.upper()}: not a type widening logstore takes",
                hint=f"allowed: {ALLOWED_WIDENINGS}; for any other change add a new column "
                "(--add-column) and fill it in your writes",
            )
        widened.append(ColumnSpec(old.name, c.type, old.nullable, old.comment))
    return widened


def _check_format_switch(
    stored: StoredTable | StoredTableOn, new: LogStoreSpec | None, topics: TopicStore
) -> None:
    """A table's log format may change only while its topic holds no records: a downstream
    consumer (Flink's ``debezium-json`` source, say) reads one format per topic, so a topic
    holding both would fail it. logstore's own readers would cope (each record names its format)."""
    old = stored.spec.log_store
    if old is None or new is None or old.data_format == new.data_format:
        return
    if old.topic != new.topic or not same_cluster(old.address, new.address):
        return  # another topic: its records are checked when it is adopted or created
    if topics.describe(new) is None:
        return  # no topic yet: it is created in the new format
    ends = topics.end_offsets(new)
    starts = topics.start_offsets(new)
    held = sum(max(0, end - starts.get(p, 0)) for p, end in ends.items())
    if held:
        raise TableConflictError(
            f"cannot switch the log format of '{stored.ref.name}' from {old.data_format} to "
            f"{new.data_format}: its topic '{new.topic}' holds {held} record(s) in "
            f"{old.data_format}, and a consumer of the topic reads one format",
            hint="keep the format, or give the table a new empty topic with the new format "
            "(--set log-store.topic=... / kafka.topic=...), or drop and recreate the table",
        )


# Topic-relevant settings of a log store: a change to anything else never needs the broker.
def _topic_settings(log_spec: LogStoreSpec, props: Mapping[str, str]) -> tuple[Any, ...]:
    return (
        log_spec.topic,
        log_spec.address,
        log_spec.partitions,
        log_spec.replication,
        sorted(topic_configs(props).items()),
    )


def _topic_change(
    stored: StoredTable | StoredTableOn,
    new: LogStoreSpec | None,
    new_props: Mapping[str, str],
    topics: TopicStore,
    owners: TopicOwners,
    *,
    delete_topic: bool,
    adopt_topic: bool,
) -> TopicChange | None:
    """What the property change means for the topic; raises for what cannot be done."""
    old = stored.spec
    old_log = old.log_store
    if new is None:
        if old_log is None:
            return None
        action = "keep"
        if delete_topic:
            _check_deletable(stored.ref.name, old_log, owners)
            action = "delete"
        return TopicChange(old_log.topic, action)
    if old_log is not None and _topic_settings(old_log, old.properties) == _topic_settings(
        new, new_props
    ):
        return None  # the topic is untouched: a Delta-only change
    renamed = old_log is not None and (
        old_log.topic != new.topic or not same_cluster(old_log.address, new.address)
    )
    if old_log is None or renamed:
        users = owners.users(new, exclude=stored.ref.name)
        if users:
            raise _in_use_error(
                new.topic, users, f"make it the log of '{stored.ref.name}'", new.system_title
            )
    old_action = None
    if renamed and old_log is not None:
        old_action = "keep"
        if delete_topic:
            _check_deletable(stored.ref.name, old_log, owners)
            old_action = "delete"
    old_topic = old_log.topic if renamed and old_log is not None else None
    partitions, replication = new.partitions, new.replication
    wanted = topic_configs(new_props)
    info = topics.describe(new)
    if info is None:
        return TopicChange(
            new.topic, "create", partitions, replication, wanted,
            old_topic=old_topic, old_topic_action=old_action,
        )  # fmt: skip
    if old_log is None or renamed:
        records = _records(topics.start_offsets(new), topics.end_offsets(new))
        if records and not adopt_topic:
            raise _holds_records(new.topic, records, stored.ref.name, new.system_title)
    if partitions < info.partitions:
        raise TableConflictError(
            f"topic '{new.topic}' has {info.partitions} partitions; {new.system_title} cannot "
            f"reduce them to {partitions}",
            hint="set log.system.partitions to at least the current count",
        )
    if replication is not None and replication != info.replication:
        raise TableConflictError(
            f"topic '{new.topic}' has replication {info.replication}; logstore does not change "
            f"the replication of an existing topic (to {replication})",
            hint=f"set log.system.replication to {info.replication}, or reassign the topic's "
            "replicas with Kafka's own tools first",
        )
    before = topic_configs(old.properties)
    return TopicChange(
        new.topic,
        "add-partitions" if partitions > info.partitions else "exists",
        partitions,
        info.replication,
        configs_set={k: v for k, v in wanted.items() if info.configs.get(k) != v},
        configs_unset=tuple(sorted(k for k in before if k not in wanted and k in info.configs)),
        old_topic=old_topic,
        old_topic_action=old_action,
    )


def _holds_records(
    topic: str, records: int, table: str, system: str = "Kafka"
) -> TableConflictError:
    return TableConflictError(
        f"{system} topic '{topic}' already exists and holds {records} record"
        f"{'s' if records != 1 else ''}; it would become the log of '{table}'",
        hint="choose a new topic name, or pass --adopt-topic to use it anyway (verify then starts "
        "after the records it holds now; readers skip what is not logstore's)",
    )


def _check_deletable(
    table: str,
    log_spec: LogStoreSpec,
    owners: TopicOwners,
    hint: str = "leave out --delete-topic; nothing was changed",
) -> None:
    """Refuse to delete a topic that another table of the warehouse uses."""
    users = owners.users(log_spec, exclude=table)
    if users:
        raise TopicInUseError(
            f"refusing to delete {log_spec.system_title} topic '{log_spec.topic}': it is also the "
            "log of table " + ", ".join(f"'{u}'" for u in users),
            hint=hint,
        )


def _validate_change(
    change: TopicChange | None, new: LogStoreSpec | None, topics: TopicStore
) -> None:
    """Have the broker check every topic change (validate_only) before anything is touched."""
    if change is None or new is None:
        return
    if change.action == "create":
        assert change.partitions is not None
        topics.create(
            new, change.partitions, change.replication, change.configs_set, validate_only=True
        )
        return
    if change.action == "add-partitions" and change.partitions is not None:
        topics.add_partitions(new, change.partitions, validate_only=True)
    if change.changes_configs:
        topics.alter_configs(new, change.configs_set, change.configs_unset, validate_only=True)


@dataclass
class _Journal:
    """What an alter has done so far, with how to undo each step (None: it cannot be undone)."""

    steps: list[tuple[str, Callable[[], None] | None]] = field(default_factory=list)

    def did(self, what: str, undo: Callable[[], None] | None) -> None:
        self.steps.append((what, undo))

    def roll_back(self) -> list[str]:
        """Undo in reverse order; returns what stays changed."""
        left = []
        for what, undo in reversed(self.steps):
            if undo is None:
                left.append(f"{what} (cannot be undone)")
                continue
            try:
                undo()
            except Exception as exc:
                left.append(f"{what} (undoing it failed: {exc})")
        return left


def _apply_alter(
    stored: StoredTable | StoredTableOn,
    topics: TopicStore,
    delta: TableDelta,
    set_: Mapping[str, str],
    unset: Sequence[str],
    change: TopicChange | None,
    new: LogStoreSpec | None,
) -> None:
    before = stored.state.properties
    journal = _Journal()
    try:
        if change is not None and change.action == "create" and new is not None:
            assert change.partitions is not None
            topics.create(new, change.partitions, change.replication, change.configs_set)
            journal.did(f"created topic '{new.topic}'", lambda: topics.delete(new))
        delta.alter(dict(set_), list(unset))
        restore = {k: before[k] for k in [*set_, *unset] if k in before}
        added = [k for k in set_ if k not in before]
        journal.did(
            f"changed the properties of '{stored.ref.name}'",
            lambda: delta.alter(restore, added),
        )
        if change is not None:
            _apply_topic_steps(change, new, stored, topics, journal)
    except BaseException as exc:
        left = journal.roll_back()
        if left:
            _add_detail(exc, "changed and left so: " + "; ".join(left))
        elif journal.steps:
            _add_detail(exc, "nothing was changed (every step was undone)")
        raise


def _apply_topic_steps(
    change: TopicChange,
    new: LogStoreSpec | None,
    stored: StoredTable | StoredTableOn,
    topics: TopicStore,
    journal: _Journal,
) -> None:
    if new is not None and change.action == "add-partitions" and change.partitions is not None:
        topics.add_partitions(new, change.partitions)
        journal.did(f"topic '{new.topic}' now has {change.partitions} partitions", None)
    if new is not None and change.changes_configs:
        current = topics.describe(new)
        old_configs = dict(current.configs) if current else {}
        topics.alter_configs(new, change.configs_set, change.configs_unset)
        touched = [*change.configs_set, *change.configs_unset]
        reset = {k: old_configs[k] for k in touched if k in old_configs}
        journal.did(
            f"changed configs of topic '{new.topic}'",
            lambda: topics.alter_configs(new, reset, [k for k in touched if k not in old_configs]),
        )
    # Deleting is last: nothing after it can fail and leave the table pointing at no topic.
    old_log = stored.spec.log_store
    if change.action == "delete" and old_log is not None:
        topics.delete(old_log)
    if change.old_topic_action == "delete" and old_log is not None:
        topics.delete(old_log)


def _check_alterable(
    stored: StoredTable | StoredTableOn, set_: Mapping[str, str], unset: Sequence[str]
) -> None:
    for key in [*set_, *unset]:
        if key.startswith(wh.MANAGED_PREFIX) or key in wh.MANAGED_KEYS:
            raise InvalidInputError(
                f"'{key}' is managed by logstore and cannot be changed or removed",
                hint="logstore keeps the primary key, the name and Change Data Feed itself; "
                "remove it from --set/--unset",
            )
    for key, value in set_.items():
        if is_secret(key, value):
            raise InvalidInputError(
                f"'{key}' holds a secret; secrets are never stored in table metadata",
                hint="put it in the config file's [kafka.client] section, or in the environment "
                "as LOGSTORE_KAFKA_CLIENT_<PROPERTY> (e.g. LOGSTORE_KAFKA_CLIENT_SASL_PASSWORD)",
            )
    props = stored.state.properties
    missing = [k for k in unset if k not in stored.spec.properties and k not in props]
    if missing:
        raise InvalidInputError(
            f"cannot unset {', '.join(map(repr, missing))}: not a property of '{stored.ref.name}'",
            hint="see the table's properties with 'logstore describe'",
        )


# ------------------------------------------------------------------------------------------ drop


@dataclass(frozen=True)
class DropResult:
    table: str
    path: Path | str  # a local directory, or the table's URI on object storage
    topic: str | None  # the topic that was asked to be deleted
    topic_deleted: bool = False
    forced_past: LiveWriter | None = None  # the live writer --force went past

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "path": str(self.path),
            "topic": None
            if self.topic is None
            else {"name": self.topic, "deleted": self.topic_deleted},
            "forced_past_writer": self.forced_past.to_json() if self.forced_past else None,
        }


def drop_table(
    ref: wh.TableRef,
    spec: TableSpec | None,
    stores: Stores,
    *,
    warehouse: Path,
    delete_topic: bool,
    default_bootstrap: str | None = None,
    force: bool = False,
) -> DropResult:
    """Remove the table's directory (and with ``delete_topic`` its topic, unless another table
    uses it). ``spec`` is None for a directory left by an interrupted create-table. Refused while a
    live ingest writes the table, unless ``force`` (``check_no_live_writer``)."""
    return drop_stored(
        ref, ref.path, spec, stores.topics, lambda: stores.delta.drop(ref.path),
        TopicOwners.of(warehouse, stores.delta, default_bootstrap),
        delete_topic=delete_topic, force=force,
    )  # fmt: skip


def drop_stored(
    ref: wh.TableRef | wh.StoredTable,
    where: Path | str,
    spec: TableSpec | None,
    topics: TopicStore,
    drop: Callable[[], None],
    owners: TopicOwners,
    *,
    delete_topic: bool,
    force: bool,
) -> DropResult:
    """``drop_table`` of a table on any backend: ``drop`` removes what is stored at ``where``."""
    log_spec = spec.log_store if spec is not None else None
    if delete_topic and spec is None:
        raise InvalidInputError(
            f"'{ref.name}' has no committed Delta version, so its topic is unknown",
            hint="drop it without --delete-topic",
        )
    writer = check_droppable(ref, force=force)
    exists = False
    if delete_topic and log_spec is not None:
        # Reach the broker before deleting anything, so a down broker leaves the table whole.
        exists = topics.describe(log_spec) is not None
        if exists:
            _check_deletable(
                ref.name, log_spec, owners,
                hint="drop the table without --delete-topic; nothing was deleted",
            )  # fmt: skip
    drop()
    if exists and log_spec is not None:
        topics.delete(log_spec)
    asked = log_spec.topic if delete_topic and log_spec is not None else None
    return DropResult(ref.name, where, asked, topic_deleted=exists, forced_past=writer)
