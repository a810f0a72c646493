"""The Delta side of provisioning, through delta-spark (reads go through delta-rs, no JVM).

The Spark session starts lazily, on the first write: a no-op ``create-table --if-not-exists``,
``--dry-run`` and ``drop-table`` never start a JVM. Every write and delete is checked, right before
it happens, to resolve strictly inside the warehouse.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from logstore_cli.catalog import warehouse as wh
from logstore_cli.errors import LogstoreError
from logstore_cli.model import ColumnSpec, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark SQL expands ${var}, ${env:VAR} and ${system:prop} in statement text unless told not to: a
# property value must be stored exactly as the user typed it (and never pull in a secret).
_NO_SUBSTITUTION = "spark.sql.variable.substitute"


class SparkDeltaStore:
    def __init__(self, warehouse: Path, session_factory: Callable[[], SparkSession]) -> None:
        self._warehouse = warehouse
        self._factory = session_factory
        self._spark: SparkSession | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self._factory()
        return self._spark

    def close(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

    def read(self, path: Path) -> wh.DeltaState | None:
        if not path.exists():
            return None
        if not wh.has_committed_version(path):
            if wh.is_uncommitted_leftover(path) or not any(path.iterdir()):
                return None  # nothing committed: create replaces it
            raise LogstoreError(
                f"{path} exists and is not a Delta table",
                hint="move or remove it, or use another table name or warehouse",
            )
        return wh.read_delta(path)

    def tables(self, warehouse: Path) -> list[tuple[wh.TableRef, wh.DeltaState]]:
        out = []
        for ref in wh.list_tables(warehouse):
            if not ref.committed:
                continue
            with contextlib.suppress(LogstoreError):  # unreadable tables are list's to report
                out.append((ref, wh.read_delta(ref.path)))
        return out

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        from delta.tables import DeltaTable

        if wh.is_uncommitted_leftover(path):
            self.drop(path)  # an interrupted create's debris: nothing was ever committed
        wh.contained(self._warehouse, path)
        builder = DeltaTable.create(self.spark).location(str(path))
        for col in spec.columns:
            builder = builder.addColumn(
                col.name, col.type, nullable=col.nullable, comment=col.comment
            )
        if spec.partitioned_by:
            builder = builder.partitionedBy(*spec.partitioned_by)
        if spec.comment:
            builder = builder.comment(spec.comment)
        for key, value in properties.items():
            builder = builder.property(key, value)
        existed = path.exists()
        try:
            builder.execute()
        except Exception as exc:
            if not existed and not wh.has_committed_version(path):
                shutil.rmtree(path, ignore_errors=True)  # no half-written directory left behind
            raise LogstoreError(
                f"creating the Delta table at {path} failed: {_first_line(exc)}",
                hint="check the column types and the warehouse; --verbose shows the Spark error",
            ) from exc

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        from logstore_cli.ddl.render import alter_properties_sql

        self._run_sql(
            path, "changing the properties of", alter_properties_sql(str(path), set_, unset)
        )

    def add_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        from logstore_cli.ddl.render import add_columns_sql

        self._run_sql(path, "adding columns to", [add_columns_sql(str(path), columns)])

    def widen_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        from logstore_cli.ddl.render import widen_columns_sql

        self._run_sql(path, "widening columns of", widen_columns_sql(str(path), columns))

    def _run_sql(self, path: Path, doing: str, statements: Sequence[str]) -> None:
        """A metadata change as Spark SQL statements, run in order, the table checked in the
        warehouse first and nothing in the text expanded."""
        wh.contained(self._warehouse, path)
        spark = self.spark  # a JVM that does not start raises its own SparkStartError here
        spark.conf.set(_NO_SUBSTITUTION, "false")
        try:
            for statement in statements:
                spark.sql(statement)
        except Exception as exc:
            raise LogstoreError(
                f"{doing} the Delta table at {path} failed: {_first_line(exc)}"
            ) from exc

    def drop(self, path: Path) -> None:
        """Remove the table directory; a symlinked one only when its target is in the warehouse,
        and then the target and the link both."""
        wh.contained(self._warehouse, path)
        target = path.resolve()
        try:
            shutil.rmtree(target)
            if path.is_symlink():
                path.unlink()
        except OSError as exc:
            raise LogstoreError(
                f"could not remove the Delta table at {path}: {exc.strerror or exc}",
                hint="check the directory's permissions; nothing else was changed",
            ) from None
        database = path.parent
        with contextlib.suppress(OSError, LogstoreError):
            wh.contained(self._warehouse, database)
            database.rmdir()  # the database directory, when it is now empty


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
