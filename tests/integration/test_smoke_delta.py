"""delta-spark on a local Spark writes a real Delta table that an independent reader agrees with."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession


def test_delta_write_read_and_independent_reader(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "events")
    rows = [(i, f"name-{i}", i * 1.5) for i in range(50)]
    df = spark.createDataFrame(rows, "id int, name string, score double")
    df.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)

    back = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert back == rows

    # A MERGE (what ingest will use) makes a second version.
    from delta.tables import DeltaTable as SparkDeltaTable

    updates = spark.createDataFrame([(1, "one", 9.0), (100, "new", 0.0)], df.schema)
    (
        SparkDeltaTable.forPath(spark, path).alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    )  # fmt: skip

    independent = DeltaTable(path)
    assert independent.version() == 1
    assert [f.name for f in independent.schema().fields] == ["id", "name", "score"]
    table = {r["id"]: (r["name"], r["score"]) for r in independent.to_pyarrow_table().to_pylist()}
    assert len(table) == 51
    assert table[1] == ("one", 9.0)
    assert table[100] == ("new", 0.0)
    assert independent.metadata().configuration.get("delta.enableChangeDataFeed") == "true"
