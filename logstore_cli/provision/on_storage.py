"""create-table, alter-table and drop-table on a warehouse on object storage (issue 19, stage 2a).

The same checks, order and undo as on a local warehouse (``service``'s cores); only the Delta step
differs: logstore's own commits through the storage seam (``create_on``, ``commit_properties_on``,
``commit_columns_on``: ``If-None-Match: *`` puts), never Spark, which is not set up for ``s3a://``
until stage 2b. A change that only Spark makes correctly is refused (exit 2) before anything is
changed; a drop deletes the objects below the table's own prefix and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import StoredTableOn
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.model import ColumnSpec, TableSpec
from logstore_cli.provision.backends import TopicStore
from logstore_cli.provision.plan import Step, TablePlan
from logstore_cli.provision.service import (
    AlterResult,
    DropResult,
    TopicOwners,
    alter_stored,
    create_planned,
    drop_stored,
    plan_specs,
)

if TYPE_CHECKING:
    from logstore_cli.names import TableName
    from logstore_cli.storage import Storage

STAGE_2B = "Spark does not run on a remote (s3://, hdfs://) warehouse yet (issue 19 stage 2b)"


def _needs_spark(doing: str, reasons: Sequence[str]) -> InvalidInputError:
    return InvalidInputError(
        f"{doing} needs Spark for: {', '.join(reasons)}; {STAGE_2B}",
        hint="leave that out on a remote warehouse for now, or use a local warehouse",
    )


def storage_tables(warehouse: Storage) -> list[tuple[str, wh.DeltaState]]:
    """Every readable committed table of the warehouse, by name (for ``TopicOwners``)."""
    found = []
    for ref in wh.list_tables_on(warehouse):
        if ref.committed:
            try:
                found.append((ref.name, wh.read_delta_on(ref.storage)))
            except LogstoreError:  # unreadable: the local DeltaStore passes it over too
                continue
    return found


def create_tables_on(
    specs: Sequence[TableSpec],
    warehouse: Storage,
    topics: TopicStore,
    *,
    if_not_exists: bool = False,
    dry_run: bool = False,
    adopt_topic: bool = False,
    default_bootstrap: str | None = None,
    spark_defaults: Sequence[str] = (),
) -> list[TablePlan]:
    """``create_tables`` on ``warehouse``; ``spark_defaults``: the configured Spark keys that set
    Delta table defaults (only Spark applies them, so a create with any is refused)."""

    def locate(name: TableName) -> tuple[str, wh.DeltaState | None]:
        table = wh.table_storage(warehouse, name)
        return table.uri, wh.read_delta_on(table) if wh.has_committed_version_on(table) else None

    owners = TopicOwners(partial(storage_tables, warehouse), default_bootstrap)
    plans = plan_specs(specs, locate, topics, owners, adopt_topic=adopt_topic)
    for plan in plans:
        if plan.delta is Step.CREATE:
            from logstore_cli.ddl.delta_properties import spark_only

            properties, _ = wh.stored_properties(plan.spec)
            needs = spark_only(properties) + list(spark_defaults)
            if needs:
                raise _needs_spark(f"creating {plan.spec.name} at {plan.path}", needs)

    def create(plan: TablePlan, properties: Mapping[str, str]) -> None:
        from logstore_cli.provision.delta_log import create_on

        create_on(wh.table_storage(warehouse, wh.spec_table_name(plan.spec)), plan.spec, properties)

    return create_planned(
        plans, topics, create, lambda: None, if_not_exists=if_not_exists, dry_run=dry_run
    )


@dataclass(frozen=True)
class StorageTableDelta:
    """``TableDelta`` of a table on any ``Storage``: logstore's own commits, put if absent."""

    table: Storage

    def alter(self, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        from logstore_cli.provision.delta_log import commit_properties_on

        commit_properties_on(self.table, set_, unset)

    def add_columns(self, columns: Sequence[ColumnSpec]) -> None:
        from logstore_cli.provision.delta_log import commit_columns_on

        commit_columns_on(self.table, columns)

    def widen_columns(self, columns: Sequence[ColumnSpec]) -> None:
        raise _needs_spark(
            f"widening columns of {self.table.uri}", ["type widening (typeWidening)"]
        )


def spark_needs(
    table: Storage,
    set_: Mapping[str, str],
    unset: Sequence[str],
    add_columns: Sequence[ColumnSpec],
    widen_columns: Sequence[ColumnSpec],
) -> list[str]:
    """Why the change needs Spark (``DeltaLogStore``'s rules for the same change); [] when
    logstore's own commits make it."""
    if widen_columns:
        return ["type widening (the typeWidening table feature)"]
    if not (set_ or unset or add_columns):
        return []
    from deltalake import DeltaTable

    from logstore_cli.catalog import delta_actions
    from logstore_cli.ddl.delta_properties import Protocol, spark_only_change
    from logstore_cli.provision.delta_log import _unsafe
    from logstore_cli.storage import delta_rs_location

    uri, options = delta_rs_location(table)
    try:
        dt = DeltaTable(uri, storage_options=options)
        found, configuration = dt.protocol(), dict(dt.metadata().configuration)
    except Exception as exc:  # delta-rs raises its own errors for an unreadable table
        raise LogstoreError(f"cannot read the Delta table at {uri}: {exc}") from exc
    proto = Protocol(found.min_writer_version, tuple(found.writer_features or ()))
    needs = _unsafe(proto)
    if set_ or unset:
        needs += spark_only_change(set_, unset, proto)
    if add_columns:
        if configuration.get("delta.columnMapping.mode", "none").lower() != "none":
            needs.append("column mapping")
        if delta_actions.needs_ntz(add_columns) and "timestampNtz" not in proto.writer_features:
            needs.append("a TIMESTAMP_NTZ column (the timestampNtz table feature)")
    return list(dict.fromkeys(needs))


def alter_table_on(
    stored: StoredTableOn,
    topics: TopicStore,
    set_: Mapping[str, str],
    unset: Sequence[str],
    *,
    warehouse: Storage,
    delete_topic: bool = False,
    adopt_topic: bool = False,
    default_bootstrap: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    add_columns: Sequence[ColumnSpec] = (),
    widen_columns: Sequence[ColumnSpec] = (),
) -> AlterResult:
    """``alter_table`` on ``warehouse``; what needs Spark is refused before anything changes."""
    needs = spark_needs(stored.ref.storage, set_, unset, add_columns, widen_columns)
    if needs:
        raise _needs_spark(f"altering {stored.ref.name} at {stored.ref.storage.uri}", needs)
    return alter_stored(
        stored, topics, StorageTableDelta(stored.ref.storage),
        TopicOwners(partial(storage_tables, warehouse), default_bootstrap), set_, unset,
        delete_topic=delete_topic, adopt_topic=adopt_topic, default_bootstrap=default_bootstrap,
        dry_run=dry_run, force=force, add_columns=add_columns, widen_columns=widen_columns,
    )  # fmt: skip


def drop_table_on(
    ref: wh.StoredTable,
    spec: TableSpec | None,
    topics: TopicStore,
    *,
    warehouse: Storage,
    delete_topic: bool,
    default_bootstrap: str | None = None,
    force: bool = False,
) -> DropResult:
    """``drop_table`` on ``warehouse``: the objects below the table's prefix are deleted."""
    from logstore_cli.storage.hdfs import HdfsStorage
    from logstore_cli.storage.s3 import S3Storage

    def drop() -> None:
        if not isinstance(ref.storage, S3Storage | HdfsStorage):
            raise TypeError(f"no drop for {ref.storage!r}")  # only remote warehouses come here
        ref.storage.delete_all()

    return drop_stored(
        ref, ref.storage.uri, spec, topics, drop,
        TopicOwners(partial(storage_tables, warehouse), default_bootstrap),
        delete_topic=delete_topic, force=force,
    )  # fmt: skip
