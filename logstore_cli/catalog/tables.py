"""Stored tables: load one, describe it, list them all, and find which tables use a topic.

A table's model is rebuilt from its Delta metadata (read with delta-rs, no JVM); the results are
frozen types with ``to_json()`` that the CLI renders. Kafka is reached only through a ``TopicReader``
handed in by the caller, so this package imports no Kafka client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.schema import columns_from_delta_schema
from logstore_cli.errors import LogstoreError
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import ColumnSpec, LogStoreSpec, TableSpec, redact

if TYPE_CHECKING:  # annotations only: a local warehouse's commands never load the seam
    from logstore_cli.ddl.options import DefaultBootstrap
    from logstore_cli.storage import Storage


class TopicReader(Protocol):
    """The read side of a topic store: all ``describe`` needs from Kafka."""

    def describe(self, log: LogStoreSpec) -> TopicInfo | None: ...

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]: ...


class StoredTable(NamedTuple):
    """A table of the warehouse: where it is, its Delta state, and the model rebuilt from it."""

    ref: wh.TableRef
    state: wh.DeltaState
    spec: TableSpec


def load_table(
    warehouse: Path, name: str, *, default_bootstrap: DefaultBootstrap = None
) -> StoredTable:
    """The table ``name`` of the warehouse, its model rebuilt from its Delta metadata."""
    return load_ref(wh.find_table(warehouse, name), default_bootstrap=default_bootstrap)


def load_ref(ref: wh.TableRef, *, default_bootstrap: DefaultBootstrap = None) -> StoredTable:
    """The committed table ``ref`` points at, read once."""
    state = wh.read_delta(ref.path)
    return StoredTable(ref, state, spec_from_delta(ref, state, default_bootstrap))


class StoredTableOn(NamedTuple):
    """``StoredTable`` for a warehouse on any ``Storage`` (``ref.storage`` is rooted at the table)."""

    ref: wh.StoredTable
    state: wh.DeltaState
    spec: TableSpec


def load_table_on(
    warehouse: Storage, name: str, *, default_bootstrap: DefaultBootstrap = None
) -> StoredTableOn:
    """``load_table`` on a warehouse on any ``Storage``."""
    ref = wh.find_table_on(warehouse, name)
    state = wh.read_delta_on(ref.storage)
    return StoredTableOn(ref, state, spec_from_delta(ref, state, default_bootstrap))


def spec_from_delta(
    ref: wh.TableRef | wh.StoredTable, state: wh.DeltaState, default_bootstrap: DefaultBootstrap
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
        log_store=resolve_log_store(props, ref.name, default_bootstrap, state.primary_key),
        catalog=state.properties.get(wh.P_CATALOG),
        partitioned_by=state.partition_columns,
        comment=state.description,
    )


def resolve_log_store(
    props: Mapping[str, str],
    name: str,
    default_bootstrap: DefaultBootstrap,
    primary_key: Sequence[str],
) -> LogStoreSpec | None:
    """The log store a stored table's properties declare (None when off)."""
    from logstore_cli.ddl import ParseOptions
    from logstore_cli.ddl.properties import resolve_log_store as resolve

    options = ParseOptions(default_bootstrap_servers=default_bootstrap)
    return resolve(_honoured_formats(props, name), name, options, primary_key=primary_key)


# The record-format keys: before they were honoured (2026-11) any value was stored, and every
# record was json whatever the value said.
_FORMAT_KEYS = ("log.format", "log-store.data-format", "log.key.format")


def _honoured_formats(props: Mapping[str, str], name: str) -> dict[str, str]:
    """The stored properties with a record format logstore does not know read as ``json``, what an
    older logstore wrote for it, with a warning: refusing it would leave the table unreadable and
    unalterable (every command loads the table first)."""
    from logstore_cli.ddl import registry

    fixed = dict(props)
    for key in _FORMAT_KEYS:
        value = fixed.get(key)
        if value is not None and value.lower() not in registry.get(key).allowed:
            fixed[key] = "json"
            import logging  # only here: most commands never log (cli/logs.py)

            logging.getLogger(__name__).warning(
                "table %s stores %r = %r, which an older logstore accepted but did not honour: "
                "its log holds json records, so it is read as 'json'; to say so, run: "
                "logstore alter-table %s --set '%s=json'",
                name, key, value, name, key,
            )  # fmt: skip
    return fixed


# ------------------------------------------------------------------------------------- describe


class PartitionOffset(NamedTuple):
    """A topic partition and its end offset."""

    partition: int
    end_offset: int


class TopicStatus(NamedTuple):
    """What Kafka says about a table's topic; ``error`` when it could not be asked or is missing."""

    name: str
    exists: bool | None  # None: unknown (the broker could not be asked)
    partitions: tuple[PartitionOffset, ...] = ()
    replication: int | None = None
    configs: Mapping[str, str] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.exists:
            return {"name": self.name, "exists": self.exists, "error": self.error}
        return {
            "name": self.name,
            "exists": True,
            "partitions": [
                {"partition": p.partition, "end_offset": p.end_offset} for p in self.partitions
            ],
            "replication": self.replication,
            "configs": redact(self.configs or {}),
        }


class TableDescription(NamedTuple):
    """What 'describe' shows of a table."""

    name: str
    path: Path | str  # a local directory, or the table's URI on object storage
    version: int
    num_files: int
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    partitioned_by: tuple[str, ...]
    using: str | None
    properties: Mapping[str, str]  # raw values: redacted by to_json and the renderers
    secret_keys_not_stored: tuple[str, ...]
    log_store: LogStoreSpec | None
    topic: TopicStatus | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "delta": {"version": self.version, "num_files": self.num_files},
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
            "partitioned_by": list(self.partitioned_by),
            "using": self.using,
            "properties": dict(sorted(redact(self.properties).items())),  # Delta keeps no order
            "secret_keys_not_stored": list(self.secret_keys_not_stored),
            "log_store": self.log_store.to_json() if self.log_store else None,
            "topic": self.topic.to_json() if self.topic else None,
        }


def describe_table(
    stored: StoredTable | StoredTableOn, topics: TopicReader | None
) -> TableDescription:
    """The table as stored; with ``topics``, its topic's partitions and end offsets too."""
    spec, state = stored.spec, stored.state
    path = stored.ref.storage.uri if isinstance(stored, StoredTableOn) else stored.ref.path
    topic = None
    if spec.log_store is not None and topics is not None:
        topic = topic_status(spec.log_store, topics)
    return TableDescription(
        name=stored.ref.name,
        path=path,
        version=state.version,
        num_files=state.num_files,
        columns=spec.columns,
        primary_key=spec.primary_key,
        partitioned_by=spec.partitioned_by,
        using=spec.using,
        properties=spec.properties,
        secret_keys_not_stored=tuple(
            k for k in state.properties.get(wh.P_SECRET_KEYS, "").split(",") if k
        ),
        log_store=spec.log_store,
        topic=topic,
    )


def topic_status(log: LogStoreSpec, topics: TopicReader) -> TopicStatus:
    try:
        info = topics.describe(log)
        if info is None:
            return TopicStatus(log.topic, exists=False, error="topic does not exist")
        offsets = topics.end_offsets(log)
    except LogstoreError as exc:
        return TopicStatus(log.topic, exists=None, error=exc.message)
    return TopicStatus(
        name=info.name,
        exists=True,
        partitions=tuple(PartitionOffset(p, o) for p, o in sorted(offsets.items())),
        replication=info.replication,
        configs=dict(info.configs),
    )


# ----------------------------------------------------------------------------------------- list


class TableListing(NamedTuple):
    """One row of ``list``: a readable table, or the error that keeps it from being read."""

    name: str
    path: Path | str  # a local directory, or the table's URI on object storage
    version: int | None = None
    columns: int | None = None
    primary_key: tuple[str, ...] = ()
    log_store: LogStoreSpec | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        log = self.log_store
        return {
            "name": self.name,
            "path": str(self.path),
            "version": self.version,
            "columns": self.columns,
            "primary_key": list(self.primary_key),
            "log_store": None
            if log is None
            else {"topic": log.topic, "consistency": log.consistency.value},
            "error": self.error,
        }


def list_tables(
    warehouse: Path, *, default_bootstrap: DefaultBootstrap = None
) -> list[TableListing]:
    """Every table of the warehouse; one that cannot be read is a row with its error."""
    return [
        _listing(ref.name, ref.path, ref.committed, partial(wh.read_delta, ref.path),
                 default_bootstrap)
        for ref in wh.list_tables(warehouse)
    ]  # fmt: skip


def list_tables_on(
    warehouse: Storage, *, default_bootstrap: DefaultBootstrap = None
) -> list[TableListing]:
    """``list_tables`` of a warehouse on any ``Storage``."""
    return [
        _listing(ref.name, ref.storage.uri, ref.committed,
                 partial(wh.read_delta_on, ref.storage), default_bootstrap)
        for ref in wh.list_tables_on(warehouse)
    ]  # fmt: skip


def _listing(
    name: str,
    path: Path | str,
    committed: bool,
    read: Callable[[], wh.DeltaState],
    default_bootstrap: DefaultBootstrap,
) -> TableListing:
    if not committed:
        return TableListing(
            name,
            path,
            error="no committed Delta version (an interrupted create-table left it); "
            f"remove it with 'logstore drop-table {name} --yes'",
        )
    try:
        state = read()
    except LogstoreError as exc:  # one bad table must not hide the others
        return TableListing(name, path, error=exc.message)
    props = wh.user_properties(state.properties)
    try:
        log_spec = resolve_log_store(props, name, default_bootstrap, state.primary_key)
        problem = None
    except LogstoreError as exc:
        log_spec, problem = None, exc.message
    return TableListing(
        name=name,
        path=path,
        version=state.version,
        columns=len(state.schema["fields"]),
        primary_key=state.primary_key,
        log_store=log_spec,
        error=problem,
    )
