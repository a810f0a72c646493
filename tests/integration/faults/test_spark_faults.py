"""Spark fails under a running ``logstore ingest --master spark://…`` on the local standalone
cluster (``spark_standalone``: a master and two one-core workers) and one Kafka broker. Both faults
hit one job, one after the other (one set-up, one table):

- a worker SIGKILLed inside epoch 1 (the driver held at a crash point while the epoch's cached batch
  sits on the executors): Spark loses the executor and its blocks, recomputes them on the other
  worker, and the job goes on by itself (epoch 1 committed by its first attempt);
- the driver SIGKILLed inside epoch 2 (its whole process group, after the epoch's records went to
  the log and before the Delta commit), then the printed ``spark-submit`` command run as printed:
  the epoch runs again with a new attempt and the job finishes.

Then: the Delta table equals the source folded by key; the protocol holds (markers name the
committed attempt, no epoch committed twice, the committed log folds to Delta); ``logstore read
--mode log --consistent`` (consumer and Spark engines) equals Delta and ``logstore verify`` exits 0.
The cluster is left whole (the killed worker started again). Run alone with ``pytest -m fault``."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.jobs.ingest import KILL_AT_ENV, PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.logformat.wire import ChangeRecord, decode
from tests import jobrun
from tests.integration.jobs.ingest_support import (
    assert_stores_agree,
    changes,
    create_table,
    fold,
    orders_ddl,
    read_log,
    write_files,
)
from tests.plugins.spark_cluster import SparkStandalone

pytestmark = [pytest.mark.fault]

FILES, PER_FILE = 3, 200  # one file per epoch (maxFilesPerTrigger=1); faults hit epochs 1, 2
TABLE = "shop.orders"
INGEST_TIMEOUT_S = 420.0
KILLED = -signal.SIGKILL


@dataclass(frozen=True)
class Setup:
    warehouse: Path
    source: Path
    expected: dict[int, dict[str, Any]]
    topic: str
    tmp: Path
    master: str

    @property
    def path(self) -> Path:
        return self.warehouse / "shop" / "orders"

    @property
    def pause_file(self) -> Path:
        return self.tmp / "epoch-paused"

    def committed(self) -> set[int]:
        return {c.epoch.epoch for c in epochs.epoch_commits(self.path)}

    def ingest_args(self) -> list[str]:
        return ["ingest", TABLE, "--source", str(self.source), "--once",
                "--source-option", "maxFilesPerTrigger=1", "--lease-ttl", "30",
                "--master", self.master]  # fmt: skip

    def pause_env(self, point: str) -> dict[str, str]:
        return {PAUSE_AT_ENV: point, PAUSE_FILE_ENV: str(self.pause_file)}


@pytest.fixture
def setup(
    spark: SparkSession, spark_standalone: SparkStandalone, tmp_path: Path,
    kafka_bootstrap: str, topic_name: str,
) -> Callable[[int], Setup]:  # fmt: skip
    spark_standalone.ensure_whole()  # whatever came before, start from a whole, idle cluster
    spark_standalone.wait_idle()

    def make(seed: int) -> Setup:
        warehouse = tmp_path / "warehouse"
        create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=3))
        log = changes(FILES * PER_FILE, keys=120, seed=seed)
        write_files(tmp_path / "in", [log[i : i + PER_FILE] for i in range(0, len(log), PER_FILE)])
        return Setup(warehouse, tmp_path / "in", fold(log), topic_name, tmp_path,
                     spark_standalone.master_url)  # fmt: skip

    return make


def _start(
    command: list[str], s: Setup, env: dict[str, str] | None = None, *, cwd: Path | None = None,
    warehouse_env: bool = True,
) -> subprocess.Popen[str]:  # fmt: skip
    """A job as a script runs it, in its own process group (a kill takes its JVM too)."""
    # Without it, no warehouse: the isolation plugin keeps LOGSTORE_* out of every test's env.
    base = {"LOGSTORE_WAREHOUSE": str(s.warehouse)} if warehouse_env else {}
    return jobrun.start(command, cwd=cwd or s.tmp, env={**base, **(env or {})})


def _attempts(s: Setup, bootstrap: str, epoch: int) -> set[str]:
    """The attempts whose change records of ``epoch`` are in the log."""
    found = set()
    for r in read_log(bootstrap, s.topic):
        item = decode(r.key, r.value, r.headers)
        if isinstance(item, ChangeRecord) and item.epoch.epoch == epoch:
            found.add(item.epoch.attempt)
    return found


def test_worker_then_driver_killed_mid_epoch_then_resubmitted(
    setup: Callable[[int], Setup], spark_standalone: SparkStandalone, kafka_bootstrap: str
) -> None:
    """Both faults in one job: a worker killed inside epoch 1 (Spark retries its lost work, the
    job goes on by itself), then the driver killed inside epoch 2 (the job's whole process group,
    by the crash hook: the Python driver and its JVM), then the printed ``spark-submit`` command
    run as printed resumes the job."""
    s = setup(21)
    printed = jobrun.cli(s.tmp, s.warehouse, *s.ingest_args(), "--print-spark-submit")
    assert printed.returncode == 0, printed.stderr
    command = shlex.split(printed.stdout)
    assert Path(command[0]).name == "spark-submit"
    assert command[command.index("--master") + 1] == s.master

    started = time.monotonic()
    # Held after epoch 1's batch was read into the executors' cache, before it goes to the log;
    # killed after epoch 2's records went to the log, before its Delta commit.
    env = {**s.pause_env("before-log:1"), KILL_AT_ENV: "after-log:2"}
    proc = _start([sys.executable, "-m", "logstore_cli", *s.ingest_args(), "--json"], s, env)
    try:
        jobrun.wait_paused(proc, s.pause_file, INGEST_TIMEOUT_S)
        assert s.committed() == {0}
        # The job holds both workers' cores: the victim runs one of its executors.
        assert spark_standalone.executors(1), "worker 1 runs no executor of the job"
        spark_standalone.kill_worker(1)
        killed_at = time.monotonic()
        s.pause_file.unlink()
        code, out, err = jobrun.finish(proc, INGEST_TIMEOUT_S)
        killed_driver_at = time.monotonic()
    except BaseException:
        jobrun.kill(proc)
        spark_standalone.ensure_whole()
        raise
    # Spark retried the lost work on the other worker: the job itself never failed; it ran on
    # until the crash hook killed it inside epoch 2.
    assert code == KILLED, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    reported = jobrun.epoch_events(out)
    assert [e["epoch"] for e in reported] == [0, 1], reported
    assert _attempts(s, kafka_bootstrap, 1) == {reported[1]["attempt"]}  # one attempt: no rerun
    assert s.committed() == {0, 1}
    (killed_attempt,) = _attempts(s, kafka_bootstrap, 2)  # its records went to the log
    recovered_s = killed_driver_at - killed_at
    # The master drops the dead driver's application and frees its executors' cores.
    spark_standalone.ensure_whole()
    spark_standalone.wait_idle()
    freed_s = time.monotonic() - killed_driver_at

    # Run as printed from another directory, without the warehouse in the environment: the printed
    # command names everything it needs, and resumes the killed job (the same --job, checkpoint).
    elsewhere = s.tmp / "elsewhere"
    elsewhere.mkdir()
    again = _start(command, s, cwd=elsewhere, warehouse_env=False)
    code, _, err = jobrun.finish(again, INGEST_TIMEOUT_S)
    resumed_s = time.monotonic() - killed_driver_at
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert s.committed() == set(range(FILES))
    # The killed attempt's records stay in the log (readers drop them); the rerun is a new attempt,
    # the one Delta committed.
    attempts = _attempts(s, kafka_bootstrap, 2)
    rerun = next(c.epoch.attempt for c in epochs.epoch_commits(s.path) if c.epoch.epoch == 2)
    assert attempts == {killed_attempt, rerun} and rerun != killed_attempt, attempts
    counts = assert_stores_agree(
        s.warehouse,
        TABLE,
        s.expected,
        cwd=s.tmp,
        engines=[(), ("--engine", "spark", "--master", s.master)],
    )
    assert counts["epochs"] == FILES
    assert counts["eventual_retractions"] > 0  # the eventual read showed, then retracted, it
    print(f"\nworker kill: {recovered_s:.1f}s from it to the driver kill in epoch 2 (epoch 1 took "
          f"{reported[1]['seconds']}s); cluster idle {freed_s:.1f}s after the driver kill; "
          f"resubmitted job done {resumed_s:.1f}s after it; {time.monotonic() - started:.1f}s "
          "in all")  # fmt: skip
