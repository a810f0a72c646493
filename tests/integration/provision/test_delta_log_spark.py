"""Tables created and altered without a JVM are tables delta-spark 4.0.1 reads and writes: the same
metadata as Spark's own create of the same DDL, and Spark's writes, Change Data Feed and property
changes on top of them."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.ddl.render import delta_path_table
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore

DDL = """CREATE TABLE db.t (
  id BIGINT, name VARCHAR(20) COMMENT 'who', amount DECIMAL(10,2), tags ARRAY<STRING>,
  attrs MAP<STRING, INT>, address STRUCT<city: STRING, zip: STRING>, seen TIMESTAMP_NTZ,
  day DATE, PRIMARY KEY (id)
) USING delta PARTITIONED BY (day) COMMENT 'made without a JVM'
TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 7 days', 'my.prop' = 'v')"""


def _create(store: Any, warehouse: Path, ddl: str = DDL) -> Path:
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    path = wh.table_path(warehouse, wh.spec_table_name(spec))
    store.create(path, spec, wh.stored_properties(spec)[0])
    return path


def _metadata(path: Path) -> dict[str, Any]:
    dt = DeltaTable(str(path))
    meta = dt.metadata()
    return {
        "schema": json.loads(dt.schema().to_json()),
        "partitions": meta.partition_columns,
        "description": meta.description,
        "configuration": dict(meta.configuration),
        "protocol": dt.protocol(),
    }


def test_a_table_made_without_a_jvm_is_spark_s_table(spark: SparkSession, tmp_path: Path) -> None:
    spark_wh, rs_wh = tmp_path / "spark", tmp_path / "rs"
    by_spark = _create(SparkDeltaStore(spark_wh, lambda: spark), spark_wh)
    store = DeltaLogStore(rs_wh, SparkDeltaStore(rs_wh, _no_spark))
    by_rs = _create(store, rs_wh)
    assert _metadata(by_rs) == _metadata(by_spark)

    # Spark writes it (append, UPDATE, DELETE), reads it and its Change Data Feed
    table = delta_path_table(str(by_rs))
    rows = [
        (i, f"n{i}", Decimal("1.50"), ["a"], {"k": i}, ("c", "z"), None, date(2026, 11, 25))
        for i in range(1, 4)
    ]
    spark.createDataFrame(rows, spark.table(table).schema).write.format("delta").mode(
        "append"
    ).save(str(by_rs))
    spark.sql(f"UPDATE {table} SET name = 'changed' WHERE id = 2")
    spark.sql(f"DELETE FROM {table} WHERE id = 3")
    got = {r.id: r.name for r in spark.table(table).collect()}
    assert got == {1: "n1", 2: "changed"}
    changes = sorted(
        (r._change_type, r.id)
        for r in spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", 1).load(str(by_rs)).collect()
    )  # fmt: skip
    assert changes == [
        ("delete", 3), ("insert", 1), ("insert", 2), ("insert", 3),
        ("update_postimage", 2), ("update_preimage", 2),
    ]  # fmt: skip

    # logstore's property change (one commit, no JVM), then Spark's own on top
    store.alter(by_rs, {"x.y": "z"}, ["my.prop"])
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert props["x.y"] == "z" and "my.prop" not in props
    assert props["delta.checkpointInterval"] == "3" and props["logstore.primary-key"] == "id"
    assert {r.id for r in spark.table(table).collect()} == {1, 2}


def test_what_needs_spark_is_created_by_spark(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaLogStore(tmp_path, SparkDeltaStore(tmp_path, lambda: spark))
    ddl = DDL.replace("'my.prop' = 'v'", "'delta.enableDeletionVectors' = 'true'")
    path = _create(store, tmp_path, ddl)
    assert "deletionVectors" in (DeltaTable(str(path)).protocol().writer_features or [])
    store.alter(path, {"delta.enableDeletionVectors": "false"}, [])
    assert wh.read_delta(path).properties["delta.enableDeletionVectors"] == "false"


def _no_spark() -> Any:
    raise AssertionError("a table without Spark-only properties is made without Spark")


def test_columns_added_without_a_jvm_are_what_spark_adds(
    spark: SparkSession, tmp_path: Path
) -> None:
    from logstore_cli.model import ColumnSpec

    new = [ColumnSpec("region", "string", comment="where"), ColumnSpec("n", "array<int>")]
    spark_wh, rs_wh = tmp_path / "spark", tmp_path / "rs"
    spark_store = SparkDeltaStore(spark_wh, lambda: spark)
    by_spark = _create(spark_store, spark_wh)
    spark_store.add_columns(by_spark, new)  # ALTER TABLE … ADD COLUMNS
    by_rs = _create(DeltaLogStore(rs_wh, SparkDeltaStore(rs_wh, _no_spark)), rs_wh)
    DeltaLogStore(rs_wh, SparkDeltaStore(rs_wh, _no_spark)).add_columns(by_rs, new)
    assert _metadata(by_rs) == _metadata(by_spark)
    table = delta_path_table(str(by_rs))
    spark.sql(f"INSERT INTO {table} (id, day, region) VALUES (1, DATE'2026-11-25', 'north')")
    assert [(r.id, r.region, r.n) for r in spark.table(table).collect()] == [(1, "north", None)]

    # A table with column mapping: its new columns need ids and physical names, given by Spark.
    mapped_wh = tmp_path / "mapped"
    ddl = DDL.replace("'my.prop' = 'v'", "'delta.columnMapping.mode' = 'name'")
    mapped = _create(SparkDeltaStore(mapped_wh, lambda: spark), mapped_wh, ddl)
    DeltaLogStore(mapped_wh, SparkDeltaStore(mapped_wh, lambda: spark)).add_columns(mapped, new)
    fields = _metadata(mapped)["schema"]["fields"]
    assert fields[-2]["name"] == "region"
    assert "delta.columnMapping.physicalName" in fields[-2]["metadata"]
