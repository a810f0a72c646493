"""The write protocol's two cross-job rules with real Spark, Kafka and Delta (their unit tests are
``tests/unit/ingest/test_epoch.py``):

- the start-up rule: a job killed after its Delta commit and before its markers, never run again,
  gets its markers from the next job that starts on the table, whichever it is;
- the lease check before the commit: a job whose table was taken over while it produced stops
  without committing;
- the fence: a job paused past its lease after that check gets no epoch into Delta once another
  job took the table over (docs/consistency.md §6, "The fence").

Run alone with ``pytest -m crash`` (the first test kills a job with SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.catalog.lease import Lease, read_lease
from logstore_cli.catalog.tables import load_table
from logstore_cli.jobs.ingest import KILL_AT_ENV, PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import CommitMarker, Fence, TxnState, decode, parse_fence_metadata
from logstore_cli.read.service import read_with_consumer
from tests import jobrun
from tests.backends import Backend
from tests.deltalog import write_table

from .ingest_support import (
    Change,
    ListSink,
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
    delta_state,
    fold,
    fold_changes,
    log_read_request,
    normalized,
    orders_ddl,
    read_log,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.crash]


def _table(warehouse: Path, bootstrap: str, topic: str) -> Path:
    """The table and its topic without Spark (delta-rs writes what create-table writes)."""
    path = write_table(warehouse, orders_ddl("shop.orders", topic, bootstrap, partitions=3))
    with KafkaAdmin(bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic, 3, 1, {})
    return path


def _ingest(
    warehouse: Path | str,
    source: Path,
    tmp: Path,
    job: str,
    env: dict[str, str] | None = None,
    extra: Sequence[tuple[str, str]] = (),
) -> subprocess.Popen[str]:
    options = dict([("--lease-ttl", "30"), *extra])
    return jobrun.start(
        [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source", str(source),
         "--format", "json", "--once", "--job", job, "--json",
         *[x for item in options.items() for x in item]],
        cwd=tmp, env={"LOGSTORE_WAREHOUSE": str(warehouse),
                      "LOGSTORE_STATE_DIR": str(tmp / "state"), **(env or {})},
    )  # fmt: skip


def _markers(bootstrap: str, topic: str) -> dict[tuple[str, int], set[tuple[int, str, int | None]]]:
    """(writer, epoch) -> {(partition, attempt, version)} of every marker in the topic."""
    found: dict[tuple[str, int], set[tuple[int, str, int | None]]] = {}
    for r in read_log(bootstrap, topic):
        item = decode(r.key, r.value, r.headers)
        if isinstance(item, CommitMarker):
            key = (item.epoch.writer, item.epoch.epoch)
            found.setdefault(key, set()).add((r.partition, item.epoch.attempt, item.delta_version))
    return found


def test_a_job_killed_after_its_commit_gets_its_markers_from_a_different_job(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    path = _table(warehouse, kafka_bootstrap, topic_name)
    write_files(tmp_path / "in", [changes(200, keys=50, seed=7)])
    code, _, err = jobrun.finish(
        _ingest(warehouse, tmp_path / "in", tmp_path, "first", {KILL_AT_ENV: "after-commit:0"})
    )
    assert code == -signal.SIGKILL, f"the fault hook did not kill the job:\n{err[-3000:]}"
    (dead,) = list(epochs.epoch_commits(path))  # committed, and no marker names it
    assert _markers(kafka_bootstrap, topic_name) == {}

    # Another job (its own checkpoint, so another writer) starts on the table and has nothing to
    # ingest: its start-up rule alone must publish the dead job's markers.
    (tmp_path / "empty").mkdir()
    code, _, err = jobrun.finish(_ingest(warehouse, tmp_path / "empty", tmp_path, "second"))
    assert code == 0, err[-3000:]
    key = (dead.epoch.writer, dead.epoch.epoch)
    assert _markers(kafka_bootstrap, topic_name) == {
        key: {(p, dead.epoch.attempt, dead.version) for p in range(3)}
    }
    table = load_table(warehouse, "shop.orders").spec
    counts = check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert counts["epochs"] == 1 and counts["changes"] > 0
    assert_log_reads_equal_delta(warehouse, "shop.orders")


def test_a_job_whose_lease_is_taken_over_mid_epoch_stops_without_committing(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    path = _table(warehouse, kafka_bootstrap, topic_name)
    write_files(tmp_path / "in", [changes(200, keys=50, seed=8)])
    pause = tmp_path / "paused"
    proc = _ingest(warehouse, tmp_path / "in", tmp_path, "victim",
                   {PAUSE_AT_ENV: "after-log:0", PAUSE_FILE_ENV: str(pause)})  # fmt: skip
    thief: Lease | None = None
    try:
        jobrun.wait_paused(proc, pause)  # epoch 0's records are in the log, its commit not yet made
        victim = read_lease(path)
        assert victim is not None and victim.job == "victim"
        # Another job takes the table over: as if the victim's lease had run out (a paused JVM, a
        # partitioned host), seen through a clock past its expiry.
        thief = Lease.acquire(path, "thief", 600, clock=lambda: victim.expires_at + 1)
        pause.unlink()
        code, _, err = jobrun.finish(proc)
    except BaseException:
        jobrun.kill(proc)
        raise
    finally:
        pause.unlink(missing_ok=True)
    try:
        assert code == 1, err[-3000:]
        assert "lease" in err and "thief" in err, err[-3000:]
        assert "Traceback" not in err
        assert list(epochs.epoch_commits(path)) == []  # nothing committed after the takeover
        assert _markers(kafka_bootstrap, topic_name) == {}
        log = read_log(kafka_bootstrap, topic_name)
        assert log, "the epoch's records were produced before the pause"
        table = load_table(warehouse, "shop.orders").spec
        check_protocol(table, path, log)  # records without a commit: never released
        current = read_lease(path)
        assert current is not None and current.job == "thief"  # the victim did not remove it
    finally:
        if thief is not None:
            thief.release()


def test_a_table_whose_delta_files_vanish_mid_epoch_is_named_gone_not_restartable(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    """Another tool removed the table's Delta log while the job produced epoch 0 (the lease, under
    ``_logstore``, survives): the commit fails, and the error says the table is gone and not to
    restart the job on it, instead of Py4J's first line and "the job can be restarted"."""
    import shutil

    warehouse = tmp_path / "wh"
    path = _table(warehouse, kafka_bootstrap, topic_name)
    write_files(tmp_path / "in", [changes(50, keys=20, seed=9)])
    pause = tmp_path / "paused"
    proc = _ingest(warehouse, tmp_path / "in", tmp_path, "orphan",
                   {PAUSE_AT_ENV: "after-log:0", PAUSE_FILE_ENV: str(pause)})  # fmt: skip
    try:
        jobrun.wait_paused(proc, pause)
        shutil.rmtree(path / "_delta_log")
        pause.unlink()
        code, _, err = jobrun.finish(proc)
    except BaseException:
        jobrun.kill(proc)
        raise
    finally:
        pause.unlink(missing_ok=True)
    assert code == 1, err[-3000:]
    assert "the Delta table of shop.orders is gone" in err, err[-3000:]
    assert "do not restart this job on it" in err and "can be restarted" not in err
    assert "Traceback" not in err
    assert _markers(kafka_bootstrap, topic_name) == {}  # nothing released


def _shifted(batch: list[Change], by: int) -> list[Change]:
    """``batch`` on other keys (``id + by``): two jobs' changes that never touch the same row."""
    return [Change(c.op, {**c.row, "id": c.row["id"] + by}) for c in batch]


def _fence_commits(path: TableLocation) -> list[tuple[int, Fence]]:
    found = []
    for version in epochs.commit_versions(path):
        info = epochs.commit_info(path, version) or {}
        meta = info.get("userMetadata")
        fence = parse_fence_metadata(meta if isinstance(meta, str) else None)
        if fence is not None:
            found.append((version, fence))
    return found


def test_a_writer_paused_past_its_ttl_before_its_commit_is_fenced_by_the_job_that_took_over(
    backend: Backend, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    """The gap a lease check leaves: job A checks its lease, is stopped (SIGSTOP) right before its
    Delta commit until its lease ran out; job B (another checkpoint: another writer) takes the table
    over, fences A's writer in Delta, commits and ends; A continued with SIGCONT gets no epoch into
    Delta: it stops as fenced (exit 1, no markers), and the stores agree. A's checkpoint run again
    takes its fence down and ingests the rest of its source exactly once.

    On every backend (``backend``): the lease is a ``flock``ed file locally and conditional writes
    on S3 and HDFS, and Delta's log store differs (S3's is single-driver: B has ended before A goes
    on, so A's commit meets B's versions already written, never a write racing its own)."""
    warehouse = backend.uri
    path = backend.create(
        orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=3),
        kafka_bootstrap, topic_name, 3,
    )  # fmt: skip
    a_batches = [changes(60, keys=20, seed=s) for s in (21, 22)]
    b_batches = [_shifted(changes(60, keys=20, seed=23), 1000)]
    write_files(tmp_path / "in-a", a_batches)
    write_files(tmp_path / "in-b", b_batches)
    one_file = {"--source-option": "maxFilesPerTrigger=1"}
    pause = tmp_path / "paused"
    ttl = "20"  # long enough that a loaded machine still renews it in time
    proc = _ingest(warehouse, tmp_path / "in-a", tmp_path, "job-a",
                   {PAUSE_AT_ENV: "before-commit:1", PAUSE_FILE_ENV: str(pause)},
                   extra=[*one_file.items(), ("--lease-ttl", ttl)])  # fmt: skip
    try:
        jobrun.wait_paused(proc, pause)  # epoch 0 committed; epoch 1 checked its lease
        os.killpg(proc.pid, signal.SIGSTOP)  # no renewal any more: the lease runs out
        held = backend.lease()
        assert held is not None and held.job == "job-a" and held.writer is not None
        writer_a = held.writer
        deadline = time.monotonic() + 60
        while not held.expired(time.time()):
            assert time.monotonic() < deadline, "the stopped job's lease did not expire"
            time.sleep(0.2)  # polling the expiry, with a deadline
            held = backend.lease() or held
        pause.unlink()  # A goes on to its commit as soon as it runs again
        code_b, _, err_b = jobrun.finish(
            _ingest(warehouse, tmp_path / "in-b", tmp_path, "job-b", extra=[("--lease-ttl", ttl)])
        )
        assert code_b == 0, err_b[-3000:]
        assert f"fenced writer {writer_a} of job job-a" in err_b, err_b[-3000:]
        os.killpg(proc.pid, signal.SIGCONT)
        code_a, _, err_a = jobrun.finish(proc)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)
        jobrun.kill(proc)
        raise
    finally:
        pause.unlink(missing_ok=True)
    assert code_a == 1, err_a[-3000:]
    assert "fenced: job job-b" in err_a and writer_a in err_a, err_a[-3000:]
    assert "Traceback" not in err_a

    ((fence_version, fence),) = _fence_commits(path)
    assert (fence.fenced, fence.job) == (writer_a, "job-b") and fence.token >= 2
    a_commits = [c for c in epochs.epoch_commits(path) if c.epoch.writer == writer_a]
    assert [c.epoch.epoch for c in a_commits] == [0]  # epoch 1 never reached Delta
    assert all(c.version < fence_version for c in a_commits)
    assert epochs.writer_txn(path, writer_a) == TxnState(0, fenced=True)
    b_commits = [c for c in epochs.epoch_commits(path) if c.epoch.writer != writer_a]
    assert b_commits and all(c.version > fence_version for c in b_commits)
    assert {w for (w, _) in _markers(kafka_bootstrap, topic_name)} == {
        writer_a,
        b_commits[0].epoch.writer,
    }
    assert (writer_a, 1) not in _markers(kafka_bootstrap, topic_name)
    table = backend.load().spec
    check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    # A committed read folds to Delta and names A's epoch 1 fenced, not open. (An eventual read
    # shows its records until A runs again: its new attempt of the epoch then retracts them.)
    stored = backend.load()
    sink = ListSink()
    summary = read_with_consumer(log_read_request(stored, "committed"), sink)
    assert fold_changes(sink.changes) == delta_state(path)
    assert (summary.fenced_epochs, summary.pending_epochs) == (1, 0), summary
    verified = jobrun.cli(tmp_path, warehouse, "verify", "shop.orders")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "fenced epochs" in verified.stdout and writer_a in verified.stdout, verified.stdout
    assert delta_state(path) == {
        k: normalized(r) for k, r in {**fold(a_batches[0]), **fold(b_batches[0])}.items()
    }

    # A again, from its checkpoint: its fence comes down, epoch 1 runs again, exactly once.
    code, _, err = jobrun.finish(
        _ingest(warehouse, tmp_path / "in-a", tmp_path, "job-a",
                extra=[*one_file.items(), ("--lease-ttl", ttl)])
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert epochs.writer_txn(path, writer_a) == TxnState(1)
    a_epochs = [c.epoch.epoch for c in epochs.epoch_commits(path) if c.epoch.writer == writer_a]
    assert sorted(a_epochs) == [0, 1]
    check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert_log_reads_equal_delta(backend.warehouse, "shop.orders")
    assert delta_state(path) == {
        k: normalized(r)
        for k, r in {**fold([c for b in a_batches for c in b]), **fold(b_batches[0])}.items()
    }
