"""A running ingest notices a column added to its table from the commit files new since its last
look, and stops with the reason; other commits (its own epochs, property changes) pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog.schema_watch import SchemaChangedError, SchemaWatch
from logstore_cli.model import ColumnSpec
from logstore_cli.provision import delta_log
from tests.deltalog import write_table

DDL = "CREATE TABLE db.t (id BIGINT, name STRING, PRIMARY KEY (id))"


def test_an_added_column_is_noticed_at_the_next_check(tmp_path: Path) -> None:
    path = write_table(tmp_path, DDL)
    watch = SchemaWatch(path, "db.t", ["id", "name"])
    watch.check()
    delta_log.commit_properties(path, {"a.b": "1"}, [])  # metadata, same columns
    watch.check()
    assert watch.seen == 1
    delta_log.commit_columns(path, [ColumnSpec("region", "string")])
    delta_log.commit_properties(path, {"a.b": "2"}, [])
    with pytest.raises(SchemaChangedError) as caught:
        watch.check()
    assert "table db.t gained column(s) region (alter-table --add-column)" in caught.value.message
    assert "restart the job to pick up the new column" in caught.value.message
    assert caught.value.exit_code == 1 and caught.value.hint


def test_a_column_added_before_the_watch_starts_is_refused_at_once(tmp_path: Path) -> None:
    path = write_table(tmp_path, DDL)
    delta_log.commit_columns(path, [ColumnSpec("region", "string")])
    with pytest.raises(SchemaChangedError, match="gained column"):
        SchemaWatch(path, "db.t", ["id", "name"])
    SchemaWatch(path, "db.t", ["id", "name", "region"]).check()  # the restarted job's


def test_a_widened_column_is_noticed_at_the_next_check(tmp_path: Path) -> None:
    path = write_table(tmp_path, "CREATE TABLE db.t (id BIGINT, qty INT, PRIMARY KEY (id))")
    watch = SchemaWatch(path, "db.t", ["id", "qty"], {"id": "bigint", "qty": "int"})
    delta_log.commit_properties(path, {"a.b": "1"}, [])
    watch.check()  # same columns, same types
    _retype(path, "qty", "long")
    with pytest.raises(SchemaChangedError) as caught:
        watch.check()
    assert "had column(s) widened (qty INT → BIGINT; alter-table --widen-column)" in (
        caught.value.message
    )
    assert "restart the job to pick up the new type(s)" in caught.value.message
    # The restarted job, reading the table's new types, goes on.
    SchemaWatch(path, "db.t", ["id", "qty"], {"id": "bigint", "qty": "bigint"}).check()


def _retype(path: Path, column: str, delta_type: str) -> None:
    """A metaData commit with ``column``'s type changed, as Spark's CHANGE COLUMN … TYPE makes."""
    import json

    from deltalake import DeltaTable

    dt = DeltaTable(str(path))
    current = delta_log._current_metadata(dt)
    schema = json.loads(current["schemaString"])
    for field in schema["fields"]:
        if field["name"] == column:
            field["type"] = delta_type
    current["schemaString"] = json.dumps(schema)
    assert delta_log.put_if_absent(path, dt.version() + 1, json.dumps({"metaData": current}) + "\n")
