"""A Delta table whose column was widened (``alter-table --widen-column``: Delta's typeWidening
reader feature, which delta-rs 1.x refuses by name) is read with delta-rs: the files written
before hold the narrower type and come back widened."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from logstore_cli.catalog.snapshot import snapshot_batches
from logstore_cli.provision import delta_log

pytestmark = pytest.mark.unit


def test_a_widened_table_is_read_with_its_old_files_widened(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    old = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "qty": pa.array([7], pa.int32()),
            "price": pa.array([Decimal("1.50")], pa.decimal128(10, 2)),
        }
    )
    write_deltalake(str(path), old)
    dt = DeltaTable(str(path))
    meta = delta_log._current_metadata(dt)
    schema = json.loads(meta["schemaString"])
    for field, (old_type, new_type) in zip(
        schema["fields"][1:], [("integer", "long"), ("decimal(10,2)", "decimal(12,2)")], strict=True
    ):
        field["type"] = new_type
        field["metadata"] = {"delta.typeChanges": [{"fromType": old_type, "toType": new_type}]}
    meta["schemaString"] = json.dumps(schema)
    protocol = {
        "minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"],
    }  # fmt: skip
    text = json.dumps({"protocol": protocol}) + "\n" + json.dumps({"metaData": meta}) + "\n"
    assert delta_log.put_if_absent(path, 1, text)
    new = pa.table(
        {
            "id": pa.array([2], pa.int64()),
            "qty": pa.array([5_000_000_000], pa.int64()),
            "price": pa.array([Decimal("1234567890.25")], pa.decimal128(12, 2)),
        }
    )
    import pyarrow.parquet as pq

    pq.write_table(new, path / "new.parquet")
    add = {
        "path": "new.parquet", "partitionValues": {}, "size": (path / "new.parquet").stat().st_size,
        "modificationTime": 0, "dataChange": True,
    }  # fmt: skip
    assert delta_log.put_if_absent(path, 2, json.dumps({"add": add}) + "\n")

    rows = sorted((r for batch in snapshot_batches(path) for r in batch), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "qty": 7, "price": Decimal("1.50")},
        {"id": 2, "qty": 5_000_000_000, "price": Decimal("1234567890.25")},
    ]
