"""Write a Delta table as create-table leaves it (version 0, the stored properties, no data files)
without a JVM: the protocol's JSON actions, read back by delta-rs like any other table. delta-rs
itself refuses to write properties outside ``delta.*``, so tests that need a table fast use this."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.logformat.wire import EpochId, commit_metadata
from logstore_cli.model import TableSpec
from logstore_cli.provision.delta_spark import SparkDeltaStore

_DELTA_TYPES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}


def write_table(warehouse: Path, ddl: str) -> Path:
    """The first table of ``ddl`` in ``warehouse`` (its Delta table only: no topic); its path."""
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = warehouse / (spec.database or "default") / spec.table
    write_spec(path, spec, props)
    return path


def write_spec(path: Path, spec: TableSpec, props: Mapping[str, str]) -> None:
    """Version 0 of the Delta table of ``spec`` at ``path``, with ``props`` as its configuration."""
    schema = {
        "type": "struct",
        "fields": [
            {"name": c.name, "type": _DELTA_TYPES.get(c.type, c.type),
             "nullable": c.nullable, "metadata": {}}
            for c in spec.columns
        ],
    }  # fmt: skip
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": dict(props),
                "createdTime": 0,
            }
        },
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
    ]
    log = path / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


class JsonDeltaStore(SparkDeltaStore):
    """Provisioning's Delta store with its one Spark step, create, done by ``write_spec``: the
    service (planning, checks, the real topic store) runs as create-table runs it, without a JVM.
    Reads go through delta-rs as in the real store; alter needs Spark and is not for tests here."""

    def __init__(self, warehouse: Path) -> None:
        super().__init__(warehouse, _no_spark)

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        wh.contained(self._warehouse, path)
        write_spec(path, spec, properties)


def _no_spark() -> Any:
    raise AssertionError("JsonDeltaStore starts no Spark")


def write_epoch_commit(table: Path, version: int, epoch: EpochId | None) -> None:
    """Delta commit ``version`` of ``epoch`` (its commit metadata, no data), or of another
    operation when ``epoch`` is None: what a marker naming ``version`` needs to be confirmed."""
    info: dict[str, object] = {"timestamp": version, "operation": "MERGE"}
    if epoch is not None:
        info["userMetadata"] = commit_metadata(epoch, {})
    (table / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps({"commitInfo": info}) + "\n"
    )
