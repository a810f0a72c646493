"""Compaction beside an ingest: ``logstore optimize`` (jobs/optimize.py) changes no data, and an
epoch commit that loses the race to it is committed again (DeltaCommitter raises
CompactionConflict, the protocol commits again: tests/unit/ingest/test_epoch.py). The race is made
to happen, not hoped for: the epoch's MERGE waits inside a gate until the compaction committed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan
from logstore_cli.ingest.epoch import CompactionConflict
from logstore_cli.ingest.failures import explain_commit_failure
from logstore_cli.jobs.ingest import DeltaCommitter, SparkBatch
from logstore_cli.jobs.optimize import optimize
from logstore_cli.logformat.wire import EpochId
from tests.deltalog import write_table

DEADLINE_S = 120.0


def _table(
    warehouse: Path, spark: SparkSession, partitioned: bool = False, keyed: bool = True
) -> Path:
    """``shop.t`` with four small files; ``keyed=False``: without its primary key (epochs append)."""
    part = " PARTITIONED BY (day)" if partitioned else ""
    key = ", PRIMARY KEY (id)" if keyed else ""
    path = write_table(
        warehouse,
        f"CREATE TABLE shop.t (id BIGINT, name STRING, day STRING{key}) USING delta{part}",
    )
    for i in range(4):  # four small appends: files to compact
        spark.createDataFrame(
            [(i * 10 + j, f"n{j}", f"d{j % 2}") for j in range(3)],
            "id bigint, name string, day string",
        ).coalesce(1).write.format("delta").mode("append").save(str(path))
    return path


def _rows(spark: SparkSession, path: Path) -> list[tuple[int, str]]:
    return sorted((r.id, r.name) for r in spark.read.format("delta").load(str(path)).collect())


def test_optimize_compacts_and_changes_no_data(spark: SparkSession, tmp_path: Path) -> None:
    path = _table(tmp_path, spark, partitioned=True)
    before = _rows(spark, path)
    files = len(RsTable(str(path)).file_uris())
    one = optimize(spark, "shop.t", path, "day = 'd0'")
    assert one.files_removed == 4 and one.files_added == 1 and one.attempts == 1
    assert len(RsTable(str(path)).file_uris()) == files - 3  # the other partition untouched
    whole = optimize(spark, "shop.t", path, None)
    assert whole.files_removed == 4 and whole.files_added == 1
    assert whole.version == epochs.commit_versions(path)[0] and whole.bytes_added > 0
    info = epochs.commit_info(path, whole.version)
    assert info is not None and info["operation"] == "OPTIMIZE" and "userMetadata" not in info
    assert optimize(spark, "shop.t", path, None).version is None  # nothing left to compact
    assert _rows(spark, path) == before
    with pytest.raises(InvalidInputError, match="partition columns"):
        optimize(spark, "shop.t", path, "id > 3")


def _gated(frame: DataFrame, gate: Path) -> DataFrame:
    """``frame`` whose rows wait, while the MERGE runs (after it read its snapshot), until
    ``gate/go`` exists; ``gate/waiting`` says they started waiting."""
    waiting, go = str(gate / "waiting"), str(gate / "go")

    def hold(name: str) -> str:
        import os
        import time as t

        open(waiting, "a").close()
        deadline = t.monotonic() + DEADLINE_S
        while not os.path.exists(go) and t.monotonic() < deadline:
            t.sleep(0.05)
        return name

    # One partition: one task waits, the other core runs the racing commit (with a task per
    # core waiting, the race's own tasks could not start until the gate's deadline).
    return frame.coalesce(1).withColumn("name", F.udf(hold, "string")(F.col("name")))


def _batch(spark: SparkSession, gate: Path | None) -> SparkBatch:
    frame = spark.createDataFrame(
        [(1, "changed", "d1"), (100, "new", "d0")], "id bigint, name string, day string"
    )
    if gate is not None:
        frame = _gated(frame, gate)
    frame = (
        frame.withColumn(plan.ERROR, F.lit(None).cast("string"))
        .withColumn(plan.KIND, F.lit(None).cast("string"))
        .withColumn(plan.SEQ, F.lit(None).cast("bigint"))
        .withColumn(plan.ARRIVAL, F.struct(F.lit("f").alias("file"), F.lit(0).alias("line")))
    )
    return SparkBatch(frame, ["file", "line"])


def _race(gate: Path, other: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not (gate / "waiting").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            other()
        finally:
            (gate / "go").touch()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# Both engines that commit an epoch: Spark's MERGE, and delta-rs (``auto`` on a small local table).
ENGINES = pytest.mark.parametrize("engine", ["spark", "auto"])
# The engines again, and delta-rs appending an epoch of a table without a key (Spark's append is
# a blind append, which Delta lets through beside other commits: no race to lose there).
KEYED_OR_NOT = pytest.mark.parametrize(
    ("engine", "keyed"), [("spark", True), ("auto", True), ("auto", False)],
    ids=["spark", "auto", "auto-keyless"],
)  # fmt: skip


@ENGINES
def test_an_epoch_commit_lost_to_a_compaction_is_committed_again(
    spark: SparkSession, tmp_path: Path, engine: str
) -> None:
    path = _table(tmp_path / "wh", spark)
    gate = tmp_path / "gate"
    gate.mkdir()
    committer = DeltaCommitter(load_table(tmp_path / "wh", "shop.t").spec, path, spark, engine)
    eid = EpochId("w-1", 0, "a-1")
    other = spark.newSession()  # another program: its own SQL conf (the epoch's is set on ours)
    race = _race(gate, lambda: optimize(other, "shop.t", path, None))
    with pytest.raises(CompactionConflict, match="lost the race to a compaction"):
        committer.commit(_batch(spark, gate), eid, {0: 5})
    race.join(DEADLINE_S)
    assert epochs.find_epoch_commit(path, "w-1", 0) is None  # nothing committed
    info = epochs.commit_info(path, epochs.commit_versions(path)[0])
    assert info is not None and info["operation"] == "OPTIMIZE"
    version = committer.commit(_batch(spark, None), eid, {0: 5})  # the protocol's second try
    found = epochs.find_epoch_commit(path, "w-1", 0)
    assert found is not None and found.version == version
    rows = dict(_rows(spark, path))
    assert rows[1] == "changed" and rows[100] == "new" and len(rows) == 13
    assert committer.last_engine == ("delta-rs" if engine == "auto" else "spark")


@KEYED_OR_NOT
def test_an_epoch_commit_lost_to_a_data_change_is_not_retried(
    spark: SparkSession, tmp_path: Path, engine: str, keyed: bool
) -> None:
    path = _table(tmp_path / "wh", spark, keyed=keyed)
    gate = tmp_path / "gate"
    gate.mkdir()
    committer = DeltaCommitter(load_table(tmp_path / "wh", "shop.t").spec, path, spark, engine)

    def append() -> None:
        spark.newSession().createDataFrame(
            [(7, "other", "d1")], "id bigint, name string, day string"
        ).write.format("delta").mode("append").save(str(path))

    race = _race(gate, append)
    with pytest.raises(Exception) as info:
        committer.commit(_batch(spark, gate), EpochId("w-1", 0, "a-1"), {})
    race.join(DEADLINE_S)
    assert not isinstance(info.value, CompactionConflict)
    if engine == "spark":
        assert "Concurrent" in str(info.value) or "CONCURRENT" in str(info.value)
    else:  # delta-rs does not retry over another program's commit: explained as Spark's are
        assert "DELTA_RS_COMMIT_CONFLICT" in str(info.value)
        explained = explain_commit_failure(str(info.value), "shop.t")
        assert explained is not None and explained.cause == "another-writer"
