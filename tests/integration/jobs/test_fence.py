"""The fence of a takeover in Delta (docs/consistency.md §6), on a real Delta table: an epoch
commit of the fenced writer whose snapshot predates the fence fails (Delta's conflict check: a
winning commit set a transaction id it read), a later one is skipped; both stop the job as
``WriterFenced``. The writer, holding the lease again, takes its fence down and commits on. The
race is made to happen, not hoped for: the epoch's MERGE waits inside a gate (as in
test_optimize.py) until the fence committed. The whole story with two jobs is in
test_ingest_protocol.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.catalog.outside import read_commit
from logstore_cli.catalog.tables import load_table
from logstore_cli.jobs.ingest import DeltaCommitter, WriterFenced
from logstore_cli.logformat.wire import FENCED_BASE, EpochId, Fence, TxnState

from .test_optimize import DEADLINE_S, KEYED_OR_NOT, _batch, _race, _table

pytestmark = [pytest.mark.integration]


@KEYED_OR_NOT
def test_a_commit_whose_snapshot_predates_the_fence_fails_and_a_later_one_is_skipped(
    spark: SparkSession, tmp_path: Path, engine: str, keyed: bool
) -> None:
    path = _table(tmp_path / "wh", spark, keyed=keyed)
    spec = load_table(tmp_path / "wh", "shop.t").spec
    a = DeltaCommitter(spec, path, spark, engine)
    a.commit(_batch(spark, None), EpochId("w-a", 0, "a-0"), {0: 1})
    b = DeltaCommitter(spec, path, spark.newSession())  # the taker: its own SQL conf
    fence = Fence(2, "w-b", "w-a", "job-b")
    gate = tmp_path / "gate"
    gate.mkdir()
    fenced_at: list[int | None] = []
    race = _race(gate, lambda: fenced_at.append(b.fence(fence)))
    with pytest.raises(WriterFenced, match=r"fenced: job job-b \(writer w-b\)") as caught:
        a.commit(_batch(spark, gate), EpochId("w-a", 1, "a-1"), {0: 2})
    race.join(DEADLINE_S)
    # Delta's own refusal; delta-rs refuses any commit after its snapshot
    cause = str(caught.value.__cause__)
    assert ("CONCURRENT_TRANSACTION" if engine == "spark" else "DELTA_RS_COMMIT_CONFLICT") in cause
    assert "last committed epoch: 0" in caught.value.message
    (version,) = fenced_at
    assert version is not None and version == epochs.commit_versions(path)[0]
    assert epochs.raw_txn_version(path, "w-a") == FENCED_BASE + 1
    assert epochs.writer_txn(path, "w-a") == TxnState(0, fenced=True)
    assert epochs.committed_version(path, "w-a") == 0
    assert epochs.find_epoch_commit(path, "w-a", 1) is None
    assert read_commit(path, version) is None  # the fence's empty append is no outside write
    assert epochs.epoch_of(path, version) is None  # nor an epoch

    # A commit after the fence (its snapshot has it) is skipped by Delta: fenced as well.
    with pytest.raises(WriterFenced):
        a.commit(_batch(spark, None), EpochId("w-a", 1, "a-2"), {0: 2})
    assert epochs.commit_versions(path)[0] == version
    assert b.fence(fence) is None  # fenced already: no second fence commit

    # The writer holds the lease again: its fence comes down, its epochs commit on, exactly once.
    unfenced = a.unfence("w-a")
    assert unfenced == version + 1
    assert epochs.writer_txn(path, "w-a") == TxnState(0)
    assert a.unfence("w-a") is None
    committed = a.commit(_batch(spark, None), EpochId("w-a", 1, "a-3"), {0: 2})
    found = epochs.find_epoch_commit(path, "w-a", 1)
    assert found is not None and found.version == committed
    assert a.last_engine == ("delta-rs" if engine == "auto" else "spark")
    # once, or (a table without a key appends) once by each committed epoch: 0 and 1
    assert spark.read.format("delta").load(str(path)).where("id = 100").count() == 1 + (not keyed)


def test_a_writer_that_committed_nothing_is_fenced_and_unfenced_apart_from_epoch_0(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = _table(tmp_path / "wh", spark)
    spec = load_table(tmp_path / "wh", "shop.t").spec
    taker = DeltaCommitter(spec, path, spark)
    assert taker.fence(Fence(1, "w-b", "w-none")) is not None
    assert epochs.writer_txn(path, "w-none") == TxnState(None, fenced=True)
    with pytest.raises(WriterFenced, match="last committed epoch: none"):
        taker.commit(_batch(spark, None), EpochId("w-none", 0, "a-0"), {})
    assert taker.unfence("w-none") is not None
    assert epochs.writer_txn(path, "w-none") == TxnState(None)  # Delta holds -1: no epoch yet
    version = taker.commit(_batch(spark, None), EpochId("w-none", 0, "a-1"), {})
    found = epochs.find_epoch_commit(path, "w-none", 0)
    assert found is not None and found.version == version
