"""The Delta side of provisioning without a JVM: a table's version 0 and its property changes are
commits written here (``catalog.delta_actions`` builds them: what Spark writes for the same DDL);
reads go through delta-rs. Spark (``SparkDeltaStore``, started only then) for what only Spark lays
out right: ``delta.*`` keys other than the plain settings, tables whose protocol asks more of a
commit, and Spark's default table properties when the config sets them.

A commit is put if absent, as Delta's protocol asks: written to a temporary file in ``_delta_log``
and hard-linked to its version's name, which fails when that version exists (what delta-rs's and
Spark's own log stores for a local file system do).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from logstore_cli import __version__
from logstore_cli.catalog import delta_actions
from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl.delta_properties import Protocol, spark_only, spark_only_change
from logstore_cli.errors import LogstoreError
from logstore_cli.model import ColumnSpec, TableSpec
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.storage import Storage, delta_rs_location

log = logging.getLogger(__name__)

# Spark settings that give every table Spark creates a property: a table made without Spark would
# lack it, so with any of these configured, tables are created by Spark.
SPARK_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
ENGINE = f"logstore/{__version__}"
_COMMIT_ATTEMPTS = 10


class DeltaLogStore:
    """``DeltaStore`` writing its own commits, with ``spark`` for what needs Spark."""

    def __init__(
        self, warehouse: Path, spark: SparkDeltaStore, *, spark_defaults: Sequence[str] = ()
    ) -> None:
        self._warehouse = warehouse
        self._spark = spark
        self._spark_defaults = list(spark_defaults)

    def close(self) -> None:
        self._spark.close()

    # Reads and drop never needed a JVM.
    def read(self, path: Path) -> wh.DeltaState | None:
        return self._spark.read(path)

    def tables(self, warehouse: Path) -> list[tuple[wh.TableRef, wh.DeltaState]]:
        return self._spark.tables(warehouse)

    def drop(self, path: Path) -> None:
        self._spark.drop(path)

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        needs_spark = spark_only(properties) + self._spark_defaults
        if needs_spark:
            log.info("creating %s with Spark: %s", spec.name, ", ".join(needs_spark))
            with _why_spark(needs_spark):
                self._spark.create(path, spec, properties)
            return
        if wh.is_uncommitted_leftover(path):
            self.drop(path)  # an interrupted create's debris: nothing was ever committed
        wh.contained(self._warehouse, path)
        existed = path.exists()
        actions = delta_actions.create_table(
            spec, properties, table_id=str(uuid.uuid4()), txn_id=str(uuid.uuid4()),
            now_ms=_now_ms(), engine=ENGINE,
        )  # fmt: skip
        cause = "a Delta table already exists there"
        try:
            (path / "_delta_log").mkdir(parents=True, exist_ok=True)
            committed = put_if_absent(path, 0, delta_actions.commit_text(actions))
        except (OSError, UnicodeError) as exc:
            committed, cause = False, str(getattr(exc, "strerror", None) or exc)
        if not committed:
            if not existed and not wh.has_committed_version(path):
                shutil.rmtree(path, ignore_errors=True)  # no half-written directory left behind
            raise LogstoreError(
                f"creating the Delta table at {path} failed: {cause}",
                hint="check the warehouse's permissions, or drop the table first",
            )

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        proto, _ = self._protocol(path)
        needs_spark = spark_only_change(set_, unset, proto) + _unsafe(proto)
        self._change(
            path, "changing the properties of", needs_spark,
            lambda: self._spark.alter(path, set_, unset),
            lambda: commit_properties(path, set_, unset),
        )  # fmt: skip

    def add_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        proto, configuration = self._protocol(path)
        needs_spark = _unsafe(proto)
        # A mapped column needs an id and a physical name that only Spark assigns.
        if configuration.get("delta.columnMapping.mode", "none").lower() != "none":
            needs_spark.append("column mapping")
        if delta_actions.needs_ntz(columns) and "timestampNtz" not in proto.writer_features:
            needs_spark.append("a TIMESTAMP_NTZ column (the timestampNtz table feature)")
        self._change(
            path, "adding columns to", needs_spark,
            lambda: self._spark.add_columns(path, columns),
            lambda: commit_columns(path, columns),
        )  # fmt: skip

    def widen_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        # Type widening is a table feature (typeWidening) whose commits only Spark makes.
        wh.contained(self._warehouse, path)
        with _why_spark(["type widening (the typeWidening table feature)"]):
            self._spark.widen_columns(path, columns)

    def _change(
        self,
        path: Path,
        doing: str,
        needs_spark: Sequence[str],
        with_spark: Callable[[], None],
        commit: Callable[[], int],
    ) -> None:
        """A metadata change: by Spark when ``needs_spark`` names why, else our own commit."""
        if needs_spark:
            log.info("%s %s with Spark: %s", doing, path, ", ".join(needs_spark))
            with _why_spark(needs_spark):
                with_spark()
            return
        try:
            commit()
        except LogstoreError:
            raise
        except Exception as exc:  # delta-rs's errors reading the table, OSError writing
            raise LogstoreError(
                f"{doing} the Delta table at {path} failed: {_first_line(exc)}"
            ) from exc

    def _protocol(self, path: Path) -> tuple[Protocol, dict[str, str]]:
        from deltalake import DeltaTable

        wh.contained(self._warehouse, path)
        try:
            dt = DeltaTable(str(path))
            found, configuration = dt.protocol(), dict(dt.metadata().configuration)
        except Exception as exc:  # delta-rs raises its own errors for an unreadable table
            raise LogstoreError(
                f"cannot read the Delta table at {path}: {_first_line(exc)}"
            ) from exc
        return Protocol(found.min_writer_version, tuple(found.writer_features or ())), configuration


Put = Callable[[int, str], bool]  # write commit <version> with <text> if absent; False if it exists


def commit_properties(path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> int:
    """The property change as one commit on the newest version; its version. Another writer's
    commit of that version first: read the table again and go on from there."""
    return _commit_properties(str(path), None, lambda v, t: put_if_absent(path, v, t), set_, unset)


def commit_properties_on(table: Storage, set_: Mapping[str, str], unset: Sequence[str]) -> int:
    """``commit_properties`` for a table on any ``Storage`` (S3: a conditional put)."""
    uri, options = delta_rs_location(table)
    return _commit_properties(uri, options, lambda v, t: put_commit(table, v, t), set_, unset)


def _commit_properties(
    uri: str,
    options: dict[str, str] | None,
    put: Put,
    set_: Mapping[str, str],
    unset: Sequence[str],
) -> int:
    from deltalake import DeltaTable

    for _ in range(_COMMIT_ATTEMPTS):
        dt = DeltaTable(uri, storage_options=options)
        current = _current_metadata(dt)
        actions = delta_actions.change_properties(
            current, set_, unset, txn_id=str(uuid.uuid4()), now_ms=_now_ms(), engine=ENGINE
        )
        if put(dt.version() + 1, delta_actions.commit_text(actions)):
            return dt.version() + 1
    raise LogstoreError(
        f"could not commit the property change to {uri}: other writers took the next "
        f"{_COMMIT_ATTEMPTS} versions first",
        hint="run alter-table again when the table is quieter",
    )


def commit_columns(path: Path, columns: Sequence[ColumnSpec]) -> int:
    """The added ``columns`` as one metaData commit on the newest version; its version. Another
    writer's commit of that version first: read the table again and go on from there (an epoch
    commit does not touch the schema, so the added columns still apply)."""
    return _commit_columns(str(path), None, lambda v, t: put_if_absent(path, v, t), columns)


def commit_columns_on(table: Storage, columns: Sequence[ColumnSpec]) -> int:
    """``commit_columns`` for a table on any ``Storage`` (S3: a conditional put)."""
    uri, options = delta_rs_location(table)
    return _commit_columns(uri, options, lambda v, t: put_commit(table, v, t), columns)


def _commit_columns(
    uri: str, options: dict[str, str] | None, put: Put, columns: Sequence[ColumnSpec]
) -> int:
    from deltalake import DeltaTable

    for _ in range(_COMMIT_ATTEMPTS):
        dt = DeltaTable(uri, storage_options=options)
        actions = delta_actions.add_columns(
            _current_metadata(dt), columns, txn_id=str(uuid.uuid4()), now_ms=_now_ms(),
            engine=ENGINE,
        )  # fmt: skip
        if put(dt.version() + 1, delta_actions.commit_text(actions)):
            return dt.version() + 1
    raise LogstoreError(
        f"could not commit the new columns to {uri}: other writers took the next "
        f"{_COMMIT_ATTEMPTS} versions first",
        hint="run alter-table again when the table is quieter",
    )


def put_commit(table: Storage, version: int, text: str) -> bool:
    """Write commit ``version`` of the table stored at ``table``; False when that version exists.
    One conditional write, as Delta's protocol asks of a commit: ``If-None-Match: *`` on S3 (the
    server refuses a second writer atomically), temp file + hard link on a local disk."""
    key = f"_delta_log/{version:020d}.json"
    return table.put_if_absent(key, text.encode("utf-8")) is not None


def create_on(table: Storage, spec: TableSpec, properties: Mapping[str, str]) -> None:
    """Version 0 of ``spec``'s table at ``table`` (any ``Storage``), as logstore's own commit.

    Stage 1 of issue 19: no Spark path here yet (its S3 settings and jars come in stage 2), so a
    table whose properties need Spark is refused; a version 0 already there is never overwritten.
    """
    needs_spark = spark_only(properties)
    if needs_spark:
        raise LogstoreError(
            f"creating {spec.name} at {table.uri} needs Spark for: {', '.join(needs_spark)}",
            hint="Spark does not write to this storage yet; leave those properties out",
        )
    actions = delta_actions.create_table(
        spec, properties, table_id=str(uuid.uuid4()), txn_id=str(uuid.uuid4()),
        now_ms=_now_ms(), engine=ENGINE,
    )  # fmt: skip
    if not put_commit(table, 0, delta_actions.commit_text(actions)):
        raise LogstoreError(
            f"creating the Delta table at {table.uri} failed: a Delta table already exists there",
            hint="drop the table first, or choose another name",
        )


def _current_metadata(dt: Any) -> dict[str, Any]:
    """The table's newest metaData action as delta-rs reads it back."""
    meta = dt.metadata()
    current: dict[str, Any] = {"id": meta.id}
    if meta.name is not None:
        current["name"] = meta.name
    if meta.description is not None:
        current["description"] = meta.description
    current.update(
        {
            "format": {"provider": "parquet", "options": {}},  # the only format Delta has
            "schemaString": dt.schema().to_json(),
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration),
            "createdTime": meta.created_time,
        }
    )
    return current


def put_if_absent(path: Path, version: int, text: str) -> bool:
    """Write commit ``version`` of the table at ``path``; False when that version exists."""
    log_dir = path / "_delta_log"
    tmp = log_dir / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, log_dir / f"{version:020d}.json")
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _unsafe(proto: Protocol) -> list[str]:
    """Why a commit of logstore's own cannot change this table: its protocol asks more."""
    if proto.metadata_commit_safe():
        return []
    return [f"the table's writer features ({', '.join(proto.writer_features)})"]


def _now_ms() -> int:
    return int(time.time() * 1000)


@contextlib.contextmanager
def _why_spark(reasons: Sequence[str]) -> Iterator[None]:
    """Add to an error of the Spark path (a JVM that does not start, most of all) why Spark was
    needed at all."""
    try:
        yield
    except LogstoreError as exc:
        why = f"Spark was needed for: {', '.join(reasons)}"
        exc.hint = f"{exc.hint}; {why}" if exc.hint else why
        raise


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
