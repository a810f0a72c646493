"""Kafka nodes fail under a running ``logstore ingest``: the local three-node cluster
(``kafka_cluster``), a topic with the cluster's default replication 3 and min.insync.replicas 2.

- one node SIGKILLed mid-ingest and restarted later: the ingest rides it out (the producer retries
  through the leader change; acks=all needs two in-sync replicas, which two live nodes give);
- every node SIGKILLed mid-ingest: the job fails within its Kafka time-out with an error naming the
  brokers (exit 1, no traceback); once the cluster is back, the same job run again finishes.

After each: the Delta table equals the source folded by key; the protocol holds (markers name the
committed attempt, no epoch committed twice, the committed log folds to Delta); ``logstore read
--mode log --consistent`` equals Delta and ``logstore verify`` exits 0. Each test leaves the
cluster whole for the next. Run alone with ``pytest -m fault``.
"""

from __future__ import annotations

import json
import os
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
from logstore_cli.kafka.admin import KafkaAdmin
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
from tests.plugins.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.fault]

FILES, PER_FILE = 4, 150  # one file per epoch (maxFilesPerTrigger=1)
TABLE = "shop.orders"
ALL_DOWN_KAFKA_TIMEOUT_S = 10.0
# An epoch's produce waits at most the Kafka time-out for deliveries; then the job stops its query
# and its Spark session. What a user waits for, from the failure to exit 1, at most:
ALL_DOWN_DEADLINE_S = ALL_DOWN_KAFKA_TIMEOUT_S + 50.0
INGEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Setup:
    warehouse: Path
    source: Path
    expected: dict[int, dict[str, Any]]
    topic: str
    tmp: Path

    @property
    def path(self) -> Path:
        return self.warehouse / "shop" / "orders"

    def committed_epochs(self) -> int:
        if not (self.path / "_delta_log").is_dir():
            return 0
        return sum(1 for _ in epochs.epoch_commits(self.path))


@pytest.fixture
def setup(
    spark: SparkSession, tmp_path: Path, kafka_cluster: KafkaCluster, topic_name: str
) -> Callable[[int], Setup]:
    kafka_cluster.wait_healthy()  # whatever came before, start from a whole cluster

    def make(seed: int) -> Setup:
        warehouse = tmp_path / "warehouse"
        # No log.system.replication: the topic gets the cluster's default (3).
        ddl = orders_ddl(TABLE, topic_name, kafka_cluster.bootstrap, partitions=3)
        create_table(spark, warehouse, ddl)
        log = changes(FILES * PER_FILE, keys=150, seed=seed)
        write_files(tmp_path / "in", [log[i : i + PER_FILE] for i in range(0, len(log), PER_FILE)])
        return Setup(warehouse, tmp_path / "in", fold(log), topic_name, tmp_path)

    return make


def _ingest(s: Setup, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The CLI as a script runs it, in its own process group (so its JVM can be reaped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "logstore_cli", "ingest", TABLE, "--source", str(s.source),
         "--once", "--source-option", "maxFilesPerTrigger=1", "--job", "orders-load",
         "--lease-ttl", "30", "--json"],
        cwd=s.tmp, env={**os.environ, "LOGSTORE_WAREHOUSE": str(s.warehouse), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = INGEST_TIMEOUT_S) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"ingest did not finish in {timeout} s:\n{err[-3000:]}")
    _reap_group(proc.pid)
    return proc.returncode, err


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


def _wait_for_epochs(s: Setup, proc: subprocess.Popen[str], count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while s.committed_epochs() < count:
        if proc.poll() is not None:
            pytest.fail(f"ingest ended (exit {proc.returncode}) before epoch {count} committed")
        assert time.monotonic() < deadline, f"no {count} epochs committed within {timeout}s"
        time.sleep(0.2)  # poll interval of a condition with a deadline


def _cli(s: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=s.tmp, env={**os.environ, "LOGSTORE_WAREHOUSE": str(s.warehouse)},
        capture_output=True, text=True, timeout=180, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _check(s: Setup, bootstrap: str) -> dict[str, int]:
    """Delta = the source folded; the protocol holds; the log reads (API and CLI) equal Delta;
    ``logstore verify`` exits 0."""
    expected = {k: normalized(v) for k, v in s.expected.items()}
    assert delta_state(s.path) == expected
    counts = check_protocol(
        load_table(s.warehouse, TABLE).spec, s.path, read_log(bootstrap, s.topic)
    )
    counts |= assert_log_reads_equal_delta(s.warehouse, TABLE)

    read = _cli(s, "read", TABLE, "--mode", "log", "--consistent", "--from", "earliest",
                "--output", "jsonl")  # fmt: skip
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


def _topic_replication(bootstrap: str, topic: str) -> int:
    with KafkaAdmin(bootstrap, {}, timeout_s=15) as admin:
        info = admin.describe_topic(topic)
    assert info is not None
    return info.replication


def test_one_node_killed_mid_ingest_then_restarted(
    setup: Callable[[int], Setup], kafka_cluster: KafkaCluster
) -> None:
    """Mostly the job rides it out; if the failover costs it an epoch, it must fail with a clear
    error (exit 1, no traceback) and the same job run again must finish."""
    s = setup(11)
    assert _topic_replication(kafka_cluster.bootstrap, s.topic) == 3  # the cluster's default
    # Long enough to ride out the failover (the controller fences a dead node after ~9 s).
    env = {"LOGSTORE_KAFKA_TIMEOUT": "60"}
    proc = _ingest(s, env)
    try:
        _wait_for_epochs(s, proc, 1, timeout=180)
        kafka_cluster.stop_node(2, kill=True)
        killed_at = time.monotonic()
        # The job goes on with two nodes: acks=all is met by two in-sync replicas.
        deadline = killed_at + 120
        while s.committed_epochs() < 3 and proc.poll() is None:
            assert time.monotonic() < deadline, "no progress within 120s of the kill"
            time.sleep(0.2)  # poll interval of a condition with a deadline
        progressed_s = time.monotonic() - killed_at
        kafka_cluster.start_node(2)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        _finish(proc)
        raise
    code, err = _finish(proc)
    assert "Traceback" not in err, err[-3000:]
    outcome = f"went on: 2 more epochs {progressed_s:.1f}s after the kill"
    if code != 0:
        assert code == 1, f"exit {code}:\n{err[-3000:]}"
        failure = _messages(err)
        assert "error:" in failure, err[-3000:]
        kafka_cluster.wait_healthy()
        code, err = _finish(_ingest(s, env))  # the same job, the same source
        assert code == 0, err[-3000:]
        outcome = f"failed {progressed_s:.1f}s after the kill, then the re-run finished:\n{failure}"
    kafka_cluster.wait_healthy()
    counts = _check(s, kafka_cluster.bootstrap)
    assert counts["epochs"] == FILES, counts
    print(f"\none node killed: {outcome}; {counts}")


def _messages(err: str) -> str:
    """What the CLI told the user on stderr, without its --json events."""
    return "\n".join(line for line in err.splitlines() if not line.startswith(("{", " ", "}")))


def test_all_nodes_down_mid_ingest_fails_clearly_then_rerun_finishes(
    setup: Callable[[int], Setup], kafka_cluster: KafkaCluster
) -> None:
    s = setup(12)
    env = {"LOGSTORE_KAFKA_TIMEOUT": str(ALL_DOWN_KAFKA_TIMEOUT_S)}
    proc = _ingest(s, env)
    try:
        _wait_for_epochs(s, proc, 1, timeout=180)
        kafka_cluster.stop_all(kill=True)
        down_at = time.monotonic()
        code, err = _finish(proc, timeout=ALL_DOWN_DEADLINE_S + 60)
        failed_after_s = time.monotonic() - down_at
    except BaseException:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            _finish(proc)
        kafka_cluster.wait_healthy()
        raise
    try:
        assert code == 1, f"exit {code}:\n{err[-3000:]}"
        assert "Traceback" not in err, err[-3000:]
        for address in kafka_cluster.bootstrap.split(","):
            assert address in err, f"the error does not name the broker {address}:\n{err[-3000:]}"
        assert failed_after_s < ALL_DOWN_DEADLINE_S, f"failed only after {failed_after_s:.0f}s"
        done_before = s.committed_epochs()
        assert 1 <= done_before < FILES
        failure = _messages(err)
    finally:
        # As a user would: 'logstore broker start' (no --brokers: the kept node count).
        restart_at = time.monotonic()
        started = subprocess.run(
            [sys.executable, "-m", "logstore_cli", "broker", "start", "--json", "--timeout", "180"],
            env={**os.environ, "LOGSTORE_STATE_DIR": str(kafka_cluster.state_dir)},
            capture_output=True, text=True, timeout=240, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        kafka_cluster.wait_healthy()  # every replica in sync again
        back_s = time.monotonic() - restart_at
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    # The same cluster: its address, its data, its three nodes.
    assert info["bootstrap"] == kafka_cluster.bootstrap and info["reused_data"] is True
    assert [n["node_id"] for n in info["nodes"]] == [1, 2, 3]

    code, err = _finish(_ingest(s, env))  # the same job, the same source
    assert code == 0, err[-3000:]
    counts = _check(s, kafka_cluster.bootstrap)
    assert counts["epochs"] == FILES, counts
    print(f"\nfailed {failed_after_s:.1f}s after all nodes died; cluster back in {back_s:.1f}s; "
          f"{done_before} epochs before, {counts}\n{failure[-2000:]}")  # fmt: skip
