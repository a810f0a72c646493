"""Write a Delta table as create-table leaves it (version 0, the stored properties, no data files)
without a JVM: the protocol's JSON actions, read back by delta-rs like any other table. delta-rs
itself refuses to write properties outside ``delta.*``, so tests that need a table fast use this."""

from __future__ import annotations

import json
from pathlib import Path

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.logformat.wire import EpochId, commit_metadata

_DELTA_TYPES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}


def write_table(warehouse: Path, ddl: str) -> Path:
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = warehouse / (spec.database or "default") / spec.table
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
                "configuration": props,
                "createdTime": 0,
            }
        },
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
    ]
    log = path / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def write_epoch_commit(table: Path, version: int, epoch: EpochId | None) -> None:
    """Delta commit ``version`` of ``epoch`` (its commit metadata, no data), or of another
    operation when ``epoch`` is None: what a marker naming ``version`` needs to be confirmed."""
    info: dict[str, object] = {"timestamp": version, "operation": "MERGE"}
    if epoch is not None:
        info["userMetadata"] = commit_metadata(epoch, {})
    (table / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps({"commitInfo": info}) + "\n"
    )
