"""``optimize`` on S3 holds the table's writer lease (jobs/optimize.py): refused while a live
holder (an ingest) has it, nothing written; an expired holder's writer is fenced before the
compaction and the lease then owes no fence. Run here on a local table's storage (the same
lease record); against the real S3 server in tests/e2e/test_s3_ingest_cli.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.storage_lease import acquire_lease, read_lease_on
from logstore_cli.errors import EXIT_FAILURE, LogstoreError
from logstore_cli.jobs import optimize as job
from logstore_cli.logformat.wire import Fence
from logstore_cli.storage.local import LocalStorage


@pytest.fixture
def table(tmp_path: Path) -> LocalStorage:
    (tmp_path / "wh" / "db" / "t").mkdir(parents=True)  # as create-table left it
    found = LocalStorage(tmp_path / "wh").child("db/t")
    assert isinstance(found, LocalStorage)
    return found


def test_a_live_holder_refuses_it_naming_the_holder_and_changes_nothing(
    table: LocalStorage,
) -> None:
    held = acquire_lease(table, "ingest", 60, table="db.t")
    try:
        before = read_lease_on(table)
        with pytest.raises(LogstoreError) as info:
            job.take_writer_lease(table, "db.t")
        err = info.value
        assert err.exit_code == EXIT_FAILURE
        assert "db.t was not compacted: job 'ingest'" in err.message
        assert "nothing was changed" in err.message
        assert err.hint is not None and "run 'logstore optimize db.t' again" in err.hint
        assert read_lease_on(table) == before  # still the ingest's, untouched
        held.check()
    finally:
        held.release()


def test_an_expired_holders_writer_is_fenced_then_none_is_owed(
    table: LocalStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = acquire_lease(table, "ingest", 1, table="db.t", clock=lambda: time.time() - 100)
    stale.set_writer("w-old")  # an ingest paused past its TTL, not released
    fences: list[Fence] = []

    class Committer:
        def __init__(self, spec: object, path: object, spark: object) -> None:
            assert (spec, path, spark) == ("spec", table, "spark")

        def fence(self, fence: Fence) -> int:
            fences.append(fence)
            return 7

    monkeypatch.setattr("logstore_cli.jobs.ingest.DeltaCommitter", Committer)
    lease = job.take_writer_lease(table, "db.t")
    try:
        assert lease.renewing and lease.info.job == "optimize"
        assert lease.info.unfenced == ("w-old",) and lease.info.fence == stale.info.fence + 1
        spark: Any = "spark"
        assert job.fence_previous_writers(spark, lambda: "spec", table, lease) == [7]  # type: ignore[arg-type, return-value]
        assert fences == [Fence(lease.info.fence, "optimize", "w-old", "optimize")]
        stored = read_lease_on(table)
        assert stored is not None and stored.token == lease.info.token and stored.unfenced == ()
        # nothing owed: no second fence
        assert job.fence_previous_writers(spark, lambda: "spec", table, lease) == []  # type: ignore[arg-type, return-value]
    finally:
        lease.release()
    assert read_lease_on(table) is None  # released: the next ingest takes it at once
