"""Spark fails under a running ``logstore ingest --master spark://…`` on the local standalone
cluster (``spark_standalone``: a master and two one-core workers) and one Kafka broker:

- a worker SIGKILLed mid-epoch (the driver held at a crash point while the epoch's cached batch
  sits on the executors): Spark loses the executor and its blocks, recomputes them on the other
  worker, and the job finishes by itself, exit 0;
- the driver SIGKILLed mid-epoch (its whole process group, after the epoch's records went to the
  log and before the Delta commit), then the printed ``spark-submit`` command run again as printed:
  the epoch runs again with a new attempt and the job finishes.

After each: the Delta table equals the source folded by key; the protocol holds (markers name the
committed attempt, no epoch committed twice, the committed log folds to Delta); ``logstore read
--mode log --consistent`` equals Delta and ``logstore verify`` exits 0. The cluster is left whole
(the killed worker started again). Run alone with ``pytest -m fault``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.jobs.ingest import PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.logformat.wire import ChangeRecord, decode
from tests.integration.jobs.ingest_support import (
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
    create_table,
    delta_state,
    fold,
    normalized,
    orders_ddl,
    read_log,
    write_files,
)
from tests.plugins.spark_cluster import SparkStandalone

pytestmark = [pytest.mark.fault]

FILES, PER_FILE = 2, 200  # one file per epoch (maxFilesPerTrigger=1); the fault hits epoch 1
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
    base = dict(os.environ)
    if warehouse_env:
        base["LOGSTORE_WAREHOUSE"] = str(s.warehouse)
    return subprocess.Popen(
        command, cwd=cwd or s.tmp, env={**base, **(env or {})}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _cli(s: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=s.tmp, env={**os.environ, "LOGSTORE_WAREHOUSE": str(s.warehouse)},
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = INGEST_TIMEOUT_S) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the job did not finish in {timeout} s:\n{err[-3000:]}")
    _reap_group(proc.pid)
    return proc.returncode, out, err


def _reap_group(pgid: int, timeout: float = 30.0) -> None:
    """No process of the job's group may outlive it (its JVM must not write on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)  # polling the group's end, with a deadline
    pytest.fail(f"process group {pgid} still alive {timeout} s after SIGKILL")


def _wait_paused(s: Setup, proc: subprocess.Popen[str], timeout: float = INGEST_TIMEOUT_S) -> None:
    """Until the driver holds the epoch at the pause point."""
    deadline = time.monotonic() + timeout
    while not s.pause_file.exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the job ended (exit {proc.returncode}) before the pause:\n{err[-3000:]}")
        assert time.monotonic() < deadline, f"the job did not reach the pause within {timeout}s"
        time.sleep(0.1)  # poll interval of a condition with a deadline


def _epoch_events(out: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == "epoch"]


def _attempts(s: Setup, bootstrap: str, epoch: int) -> set[str]:
    """The attempts whose change records of ``epoch`` are in the log."""
    found = set()
    for r in read_log(bootstrap, s.topic):
        item = decode(r.key, r.value, r.headers)
        if isinstance(item, ChangeRecord) and item.epoch.epoch == epoch:
            found.add(item.epoch.attempt)
    return found


def _check(s: Setup, bootstrap: str, *read_args: str) -> dict[str, int]:
    """Delta = the source folded; the protocol holds; the log reads (API and CLI, with
    ``read_args``) equal Delta; ``logstore verify`` exits 0."""
    expected = {k: normalized(v) for k, v in s.expected.items()}
    assert delta_state(s.path) == expected
    counts = check_protocol(
        load_table(s.warehouse, TABLE).spec, s.path, read_log(bootstrap, s.topic)
    )
    counts |= assert_log_reads_equal_delta(s.warehouse, TABLE)

    read = _cli(s, "read", TABLE, "--mode", "log", "--consistent", "--from", "earliest",
                "--output", "jsonl", *read_args)  # fmt: skip
    assert read.returncode == 0 and "Traceback" not in read.stderr, read.stderr
    state: dict[int, dict[str, Any]] = {}
    for line in read.stdout.splitlines():
        change = json.loads(line, parse_float=Decimal)
        key = int(change["row"]["id"])
        if change["kind"] in ("-U", "-D"):
            state.pop(key, None)
        else:
            state[key] = normalized(change["row"])
    assert state == expected, "logstore read --mode log --consistent differs from Delta"

    verify = _cli(s, "verify", TABLE)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    return counts


def test_worker_killed_mid_epoch_spark_retries_it(
    setup: Callable[[int], Setup], spark_standalone: SparkStandalone, kafka_bootstrap: str
) -> None:
    s = setup(21)
    started = time.monotonic()
    # Held after epoch 1's batch was read into the executors' cache, before it goes to the log.
    proc = _start([sys.executable, "-m", "logstore_cli", *s.ingest_args(), "--json"], s,
                  s.pause_env("before-log:1"))  # fmt: skip
    try:
        _wait_paused(s, proc)
        assert s.committed() == {0}
        # The job holds both workers' cores: the victim runs one of its executors.
        assert spark_standalone.executors(1), "worker 1 runs no executor of the job"
        spark_standalone.kill_worker(1)
        killed_at = time.monotonic()
        s.pause_file.unlink()
        code, out, err = _finish(proc)
        recovered_s = time.monotonic() - killed_at
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        _finish(proc)
        raise
    finally:
        spark_standalone.ensure_whole()
    # Spark retried the lost work on the other worker: the job itself never failed.
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    reported = _epoch_events(out)
    assert [e["epoch"] for e in reported] == list(range(FILES)), reported
    assert _attempts(s, kafka_bootstrap, 1) == {reported[1]["attempt"]}  # one attempt: no rerun
    # The consistent read runs on the cluster too: the logstore data source on the executors.
    counts = _check(s, kafka_bootstrap, "--engine", "spark", "--master", s.master)
    assert counts["epochs"] == FILES
    print(f"\nworker kill: job exit {code}, {recovered_s:.1f}s from the kill to the job's end, "
          f"{time.monotonic() - started:.1f}s in all; epoch 1 took {reported[1]['seconds']}s")  # fmt: skip


def test_driver_killed_mid_epoch_then_resubmitted(
    setup: Callable[[int], Setup], spark_standalone: SparkStandalone, kafka_bootstrap: str
) -> None:
    s = setup(22)
    printed = _cli(s, *s.ingest_args(), "--print-spark-submit")
    assert printed.returncode == 0, printed.stderr
    command = shlex.split(printed.stdout)
    assert Path(command[0]).name == "spark-submit"
    assert command[command.index("--master") + 1] == s.master
    # Run as printed from another directory, without the warehouse in the environment: the printed
    # command names everything it needs.
    elsewhere = s.tmp / "elsewhere"
    elsewhere.mkdir()
    # Held after epoch 1's records went to the log, before its Delta commit.
    proc = _start(command, s, s.pause_env("after-log:1"), cwd=elsewhere, warehouse_env=False)
    try:
        _wait_paused(s, proc)
        assert s.committed() == {0}
        os.killpg(proc.pid, signal.SIGKILL)  # spark-submit's JVM and the Python driver
        killed_at = time.monotonic()
        code, _, err = _finish(proc)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        _finish(proc)
        raise
    assert code == KILLED, err[-3000:]
    assert s.committed() == {0}
    # The master drops the dead driver's application and frees its executors' cores.
    spark_standalone.wait_idle()
    freed_s = time.monotonic() - killed_at

    s.pause_file.unlink(missing_ok=True)
    again = _start(command, s, cwd=elsewhere, warehouse_env=False)
    code, _, err = _finish(again)
    recovered_s = time.monotonic() - killed_at
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert s.committed() == set(range(FILES))
    # The killed attempt's records stay in the log (readers drop them); the rerun is a new attempt,
    # the one Delta committed.
    attempts = _attempts(s, kafka_bootstrap, 1)
    rerun = next(c.epoch.attempt for c in epochs.epoch_commits(s.path) if c.epoch.epoch == 1)
    assert len(attempts) == 2 and rerun in attempts, attempts
    counts = _check(s, kafka_bootstrap)
    assert counts["epochs"] == FILES
    assert counts["eventual_retractions"] > 0  # the eventual read showed, then retracted, it
    print(f"\ndriver kill: killed job exit {KILLED}; cluster idle {freed_s:.1f}s after the kill; "
          f"resubmitted job done {recovered_s:.1f}s after the kill")  # fmt: skip
