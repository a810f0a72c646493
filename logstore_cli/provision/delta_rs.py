"""The Delta side of provisioning without a JVM: create through delta-rs, property changes as one
Delta commit; Spark (``SparkDeltaStore``, started only then) for what only Spark does right.

A table created here is what delta-spark 4.0.1 creates for the same DDL, field for field (schema,
partitioning, description, properties, Change Data Feed on) except for the protocol action, which is
delta-rs's: the legacy ``(1, 4)`` where Spark writes ``(1, 7)`` listing the same features
(``appendOnly``, ``invariants``, ``changeDataFeed``); both readers and writers treat the two alike.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from logstore_cli import __version__
from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.schema import delta_schema
from logstore_cli.ddl.delta_properties import Protocol, spark_only, spark_only_change
from logstore_cli.errors import LogstoreError
from logstore_cli.model import TableSpec
from logstore_cli.provision.delta_spark import SparkDeltaStore

log = logging.getLogger(__name__)

# Spark settings that give every table Spark creates a property: a table made without Spark would
# lack it, so with any of these configured, tables are created by Spark.
SPARK_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
ENGINE = f"logstore/{__version__} delta-rs"
_COMMIT_ATTEMPTS = 10


class DeltaRsStore:
    """``DeltaStore`` over delta-rs, with ``spark`` for tables and changes that need Spark."""

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
        from deltalake import DeltaTable, Schema

        if wh.is_uncommitted_leftover(path):
            self.drop(path)  # an interrupted create's debris: nothing was ever committed
        wh.contained(self._warehouse, path)
        existed = path.exists()
        try:
            DeltaTable.create(
                str(path),
                Schema.from_json(json.dumps(delta_schema(spec.columns))),
                mode="error",
                partition_by=list(spec.partitioned_by) or None,
                description=spec.comment,
                configuration=dict(properties),
                # logstore's and the vocabularies' keys are not Delta's: stored as given
                raise_if_key_not_exists=False,
            )
        except Exception as exc:
            if not existed and not wh.has_committed_version(path):
                shutil.rmtree(path, ignore_errors=True)  # no half-written directory left behind
            raise LogstoreError(
                f"creating the Delta table at {path} failed: {_first_line(exc)}",
                hint="check the column types and the warehouse; --verbose shows delta-rs's error",
            ) from exc

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        from deltalake import DeltaTable

        wh.contained(self._warehouse, path)
        protocol = DeltaTable(str(path)).protocol()
        proto = Protocol(protocol.min_writer_version, tuple(protocol.writer_features or ()))
        needs_spark = spark_only_change(set_, unset, proto)
        if not proto.metadata_commit_safe():
            needs_spark.append(f"the table's writer features ({', '.join(proto.writer_features)})")
        if needs_spark:
            log.info("altering %s with Spark: %s", path, ", ".join(needs_spark))
            with _why_spark(needs_spark):
                self._spark.alter(path, set_, unset)
            return
        try:
            commit_properties(path, set_, unset)
        except LogstoreError:
            raise
        except Exception as exc:
            raise LogstoreError(
                f"changing the properties of the Delta table at {path} failed: {_first_line(exc)}"
            ) from exc


def commit_properties(path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> int:
    """One Delta commit replacing the table's metadata with its configuration changed; its version.

    delta-rs 1.6 can set properties but not remove them, and two commits (Spark's way: one per
    statement) could leave half a change: so the commit is written here, as Delta's protocol
    says, with put-if-absent (a hard link: fails when the version exists, as delta-rs's and
    Spark's own local log stores do) and a new attempt on the next version when another writer
    took this one."""
    from deltalake import DeltaTable

    log_dir = path / "_delta_log"
    for _ in range(_COMMIT_ATTEMPTS):
        dt = DeltaTable(str(path))
        version = dt.version() + 1
        meta = dt.metadata()
        configuration = {k: v for k, v in meta.configuration.items() if k not in unset}
        configuration.update(set_)
        actions = [
            {"commitInfo": _commit_info(set_, unset)},
            {
                "metaData": {
                    "id": meta.id,
                    "name": meta.name,
                    "description": meta.description,
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": dt.schema().to_json(),
                    "partitionColumns": list(meta.partition_columns),
                    "configuration": configuration,
                    "createdTime": meta.created_time,
                }
            },
        ]
        text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
        tmp = log_dir / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, log_dir / f"{version:020d}.json")
            return version
        except FileExistsError:
            continue  # another writer committed this version: read the table again
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    raise LogstoreError(
        f"could not commit the property change to {path}: other writers took the next "
        f"{_COMMIT_ATTEMPTS} versions first",
        hint="run alter-table again when the table is quieter",
    )


def _commit_info(set_: Mapping[str, str], unset: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if set_:
        params["properties"] = json.dumps(dict(set_), separators=(",", ":"))
    if unset:
        params["unsetProperties"] = json.dumps(list(unset))
    return {
        "timestamp": int(time.time() * 1000),
        "operation": "SET TBLPROPERTIES" if set_ else "UNSET TBLPROPERTIES",
        "operationParameters": params,
        "isBlindAppend": True,
        "engineInfo": ENGINE,
    }


@contextlib.contextmanager
def _why_spark(reasons: Sequence[str]) -> Any:
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
