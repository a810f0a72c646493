"""Delta tables for tests, without a JVM: a table as create-table leaves it (its store writes version
0 itself), and epoch commits without data for markers to be confirmed by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.logformat.wire import EpochId, commit_metadata
from logstore_cli.provision.delta_log import DeltaLogStore, create_on
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.storage import Storage


def delta_store(warehouse: Path) -> DeltaLogStore:
    """create-table's Delta store, with a Spark that must not be needed."""
    return DeltaLogStore(warehouse, SparkDeltaStore(warehouse, _no_spark))


def write_table(warehouse: Path, ddl: str) -> Path:
    """The first table of ``ddl`` in ``warehouse`` (its Delta table only: no topic); its path."""
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    path = wh.table_path(warehouse, wh.spec_table_name(spec))
    delta_store(warehouse).create(path, spec, wh.stored_properties(spec)[0])
    return path


def _no_spark() -> Any:
    raise AssertionError("a table without Spark-only properties is created without Spark")


def write_epoch_commit(table: Path, version: int, epoch: EpochId | None) -> None:
    """Delta commit ``version`` of ``epoch`` (its commit metadata, no data), or of another
    operation when ``epoch`` is None: what a marker naming ``version`` needs to be confirmed."""
    info: dict[str, object] = {"timestamp": version, "operation": "MERGE"}
    if epoch is not None:
        info["userMetadata"] = commit_metadata(epoch, {})
    (table / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps({"commitInfo": info}) + "\n"
    )


def write_table_on(warehouse: Storage, ddl: str) -> Storage:
    """``write_table`` on any ``Storage`` (the seam's ``create_on``); the table's storage."""
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    table = wh.table_storage(warehouse, wh.spec_table_name(spec))
    create_on(table, spec, wh.stored_properties(spec)[0])
    return table
