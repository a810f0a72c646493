"""An epoch committed by delta-rs (``DeltaCommitter`` with ``--delta-engine auto`` on a small local
table) is the commit Spark's MERGE would have made: the same rows and Change Data Feed, the same
transaction id and epoch metadata, read back by Spark; checkpoints as Spark writes them; and Spark
commits what delta-rs does not write, or when delta-rs fails. The races (a fence, a compaction, an
outside write landing after the snapshot) run for both engines in test_fence.py and
test_optimize.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.ingest import plan
from logstore_cli.jobs.ingest import DeltaCommitter, SparkBatch
from logstore_cli.logformat.wire import EpochId, TxnState
from tests.deltalog import write_table

from .test_optimize import _batch

pytestmark = [pytest.mark.integration]

DDL = "CREATE TABLE shop.t (id BIGINT, name STRING, day STRING, PRIMARY KEY (id)) USING delta"


def _seeded(warehouse: Path, spark: SparkSession, ddl: str = DDL) -> Path:
    path = write_table(warehouse, ddl)
    spark.createDataFrame(
        [(i, f"n{i}", "d0") for i in range(10)], "id bigint, name string, day string"
    ).coalesce(2).write.format("delta").mode("append").save(str(path))
    return path


def _changes(spark: SparkSession) -> SparkBatch:
    """Every kind the MERGE applies: an insert, an update, a delete, a -U (removes), an upsert of
    an existing key and of a new one, a key changed twice (its later change wins), and removals of
    keys the table does not hold (inserted and deleted within the epoch: no-ops, and rows that
    delta-rs 1.6.6 with a Change Data Feed would fail on, ``_merge_with_delta_rs``)."""
    rows: list[tuple[int, str, str | None, int]] = [
        (100, "new", "+I", 0),
        (200, "born", "+I", 8),
        (200, "died", "-D", 9),
        (201, "lone", "-U", 10),
        (1, "updated", "+U", 1),
        (2, "gone", "-D", 2),
        (3, "before", "-U", 3),
        (4, "upserted", None, 4),
        (101, "upserted-new", None, 5),
        (5, "first", "+U", 6),
        (5, "second", "+U", 7),
    ]
    frame = spark.createDataFrame(rows, "id bigint, name string, kind string, line int").select(
        "id",
        "name",
        F.lit("d1").alias("day"),
        F.lit(None).cast("string").alias(plan.ERROR),
        F.col("kind").alias(plan.KIND),
        F.lit(None).cast("bigint").alias(plan.SEQ),
        F.struct(F.lit("f").alias("file"), F.col("line")).alias(plan.ARRIVAL),
    )
    return SparkBatch(frame, ["file", "line"])


def _rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(path))
    return sorted(tuple(r) for r in frame.collect())


def _feed(spark: SparkSession, path: Path, version: int) -> list[tuple[Any, ...]]:
    frame = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(str(path))
    )
    return sorted((r.id, r.name, r._change_type) for r in frame.collect())


def _carries_the_epoch(rs: Path, sp: Path, versions: dict[str, int], *, rows: int) -> None:
    """delta-rs's commit of epoch 0 of writer w-1 in ``rs`` carries the epoch as Spark's in
    ``sp`` does: metadata (positions), transaction id; and its rows (what status and history
    show) and the engine that wrote it."""
    found = epochs.find_epoch_commit(rs, "w-1", 0)
    assert found is not None and found.version == versions["auto"]
    assert found.positions == epochs.find_epoch_commit(sp, "w-1", 0).positions  # type: ignore[union-attr]
    assert epochs.writer_txn(rs, "w-1") == TxnState(0)
    info = epochs.commit_info(rs, versions["auto"]) or {}
    assert str(info.get("engineInfo")).startswith("delta-rs")
    assert epochs.commit_rows(info) == rows


def test_delta_rs_commits_the_epoch_spark_would_commit(spark: SparkSession, tmp_path: Path) -> None:
    paths = {engine: _seeded(tmp_path / engine, spark) for engine in ("auto", "spark")}
    spec = load_table(tmp_path / "auto", "shop.t").spec
    eid = EpochId("w-1", 0, "a-1")
    versions = {}
    for engine, path in paths.items():
        committer = DeltaCommitter(spec, path, spark, engine)
        versions[engine] = committer.commit(_changes(spark), eid, {0: 8, 1: 3})
        assert committer.last_engine == ("delta-rs" if engine == "auto" else "spark")
    rs, sp = paths["auto"], paths["spark"]
    assert _rows(spark, rs) == _rows(spark, sp)
    got = dict((r[0], r[1]) for r in _rows(spark, rs))
    assert got[100] == "new" and got[1] == "updated" and got[5] == "second"
    assert 2 not in got and 3 not in got and got[4] == "upserted" and got[101] == "upserted-new"
    assert 200 not in got and 201 not in got
    # the Change Data Feed of the epoch's version, as Spark reads it: the same for both
    assert _feed(spark, rs, versions["auto"]) == _feed(spark, sp, versions["spark"])
    assert "gone" not in {r[1] for r in _feed(spark, rs, versions["auto"])}  # deleted: old row
    _carries_the_epoch(rs, sp, versions, rows=7)  # one change per key, less two no-op removals
    # the same epoch again: skipped as Spark's idempotent write skips it, never written twice
    again = DeltaCommitter(spec, rs, spark)
    with pytest.raises(Exception, match="Delta skipped epoch 0 of writer w-1"):
        again.commit(_changes(spark), eid, {0: 8, 1: 3})
    assert epochs.commit_versions(rs)[0] == versions["auto"]


def test_delta_rs_checkpoints_as_spark_does_and_spark_reads_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = _seeded(tmp_path / "wh", spark)  # versions 0 (create) and 1 (the rows)
    committer = DeltaCommitter(load_table(tmp_path / "wh", "shop.t").spec, path, spark)
    for epoch in range(9):  # versions 2..10
        committer.commit(_batch(spark, None), EpochId("w-1", epoch, f"a-{epoch}"), {0: epoch})
        assert committer.last_engine == "delta-rs"
    log_dir = path / "_delta_log"
    assert (log_dir / "00000000000000000010.checkpoint.parquet").is_file()
    assert not list(log_dir.glob("0000000000000000000[1-9].checkpoint.parquet"))
    assert RsTable(str(path)).version() == 10
    fresh = spark.newSession()
    assert fresh.read.format("delta").load(str(path)).count() == 11  # 10 seeded + id 100
    assert epochs.writer_txn(path, "w-1") == TxnState(8)


def test_spark_commits_a_table_delta_rs_does_not_write(spark: SparkSession, tmp_path: Path) -> None:
    path = _seeded(tmp_path / "wh", spark)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    committer = DeltaCommitter(load_table(tmp_path / "wh", "shop.t").spec, path, spark)
    version = committer.commit(_changes(spark), EpochId("w-1", 0, "a-1"), {})
    assert committer.last_engine == "spark"
    assert str((epochs.commit_info(path, version) or {}).get("engineInfo")).startswith("Apache")


def test_when_delta_rs_fails_spark_commits_the_epoch_and_the_later_ones(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake.exceptions import DeltaError

    path = _seeded(tmp_path / "wh", spark)
    committer = DeltaCommitter(load_table(tmp_path / "wh", "shop.t").spec, path, spark)

    def broken(*args: object, **kwargs: object) -> None:
        raise DeltaError("Generic error: a type delta-rs cannot cast")

    monkeypatch.setattr(RsTable, "merge", broken)
    version = committer.commit(_changes(spark), EpochId("w-1", 0, "a-1"), {0: 1})
    assert committer.last_engine == "spark" and committer.engine == "spark"
    found = epochs.find_epoch_commit(path, "w-1", 0)
    assert found is not None and found.version == version  # committed once, by Spark
    monkeypatch.undo()
    committer.commit(_batch(spark, None), EpochId("w-1", 1, "a-2"), {0: 2})
    assert committer.last_engine == "spark"  # the job keeps to Spark after a failure


KEYLESS = (
    "CREATE TABLE shop.e (id BIGINT, name STRING, amount DECIMAL(10,2), at TIMESTAMP, day DATE, "
    "ok BOOLEAN, score DOUBLE, n INT) USING delta"
)


def _appended(spark: SparkSession) -> SparkBatch:
    """An epoch of a table without a key, every type the DDL maps: inserts, updates and upserts
    are appended, removals (``-D``, ``-U``) are not."""
    rows = [(1, "a", "+I"), (2, None, "+U"), (3, "c", None), (4, "d", "-D"), (5, "e", "-U")]
    frame = spark.createDataFrame(rows, "id bigint, name string, kind string").select(
        "id",
        "name",
        (F.col("id") * F.lit(1.25)).cast("decimal(10,2)").alias("amount"),
        F.expr("timestamp_seconds(1764100000 + id)").alias("at"),
        F.expr("date_add(date'2026-11-27', cast(id as int))").alias("day"),
        (F.col("id") % 2 == 0).alias("ok"),
        (F.col("id") / F.lit(3)).alias("score"),
        F.col("id").cast("int").alias("n"),
        F.lit(None).cast("string").alias(plan.ERROR),
        F.col("kind").alias(plan.KIND),
        F.lit(None).cast("bigint").alias(plan.SEQ),
        F.struct(F.lit("f").alias("file"), F.col("id").alias("line")).alias(plan.ARRIVAL),
    )
    return SparkBatch(frame, ["file", "line"])


def test_delta_rs_appends_a_keyless_epoch_as_spark_would(
    spark: SparkSession, tmp_path: Path
) -> None:
    paths = {engine: write_table(tmp_path / engine, KEYLESS) for engine in ("auto", "spark")}
    spec = load_table(tmp_path / "auto", "shop.e").spec
    assert not spec.primary_key
    eid = EpochId("w-1", 0, "a-1")
    versions = {}
    for engine, path in paths.items():
        committer = DeltaCommitter(spec, path, spark, engine)
        versions[engine] = committer.commit(_appended(spark), eid, {0: 5})
        assert committer.last_engine == ("delta-rs" if engine == "auto" else "spark")
    rs, sp = paths["auto"], paths["spark"]

    def rows(path: Path) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())

    assert rows(rs) == rows(sp) and [r[0] for r in rows(rs)] == [1, 2, 3]
    feed = _feed(spark, rs, versions["auto"])
    assert feed == _feed(spark, sp, versions["spark"])
    assert {r[2] for r in feed} == {"insert"}
    _carries_the_epoch(rs, sp, versions, rows=3)
    # the same epoch again: skipped, never appended twice
    with pytest.raises(Exception, match="Delta skipped epoch 0 of writer w-1"):
        DeltaCommitter(spec, rs, spark).commit(_appended(spark), eid, {0: 5})
    assert len(rows(rs)) == 3
