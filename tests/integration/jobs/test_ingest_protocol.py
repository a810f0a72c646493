"""The write protocol's two cross-job rules with real Spark, Kafka and Delta (their unit tests are
``tests/unit/ingest/test_epoch.py``):

- the start-up rule: a job killed after its Delta commit and before its markers, never run again,
  gets its markers from the next job that starts on the table, whichever it is;
- the lease check before the commit: a job whose table was taken over while it produced stops
  without committing.

Run alone with ``pytest -m crash`` (the first test kills a job with SIGKILL).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.lease import Lease, read_lease
from logstore_cli.catalog.tables import load_table
from logstore_cli.jobs.ingest import KILL_AT_ENV, PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import CommitMarker, decode
from tests import jobrun
from tests.deltalog import write_table

from .ingest_support import (
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
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
    warehouse: Path, source: Path, tmp: Path, job: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return jobrun.start(
        [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source", str(source),
         "--format", "json", "--once", "--job", job, "--json", "--lease-ttl", "30"],
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
