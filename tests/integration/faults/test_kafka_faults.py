"""Kafka nodes fail under a running ``logstore ingest``: the local three-node cluster
(``kafka_cluster``), a topic with the cluster's default replication 3 and min.insync.replicas 2.

- one node, a leader of the topic's partitions, SIGKILLed inside epoch 1 (held by the job's pause
  hook before it produces) and restarted after the job: when the nodes left elect new leaders in
  time, the ingest rides it out, exit 0 (the producer retries through the leader change; acks=all
  needs two in-sync replicas, which two live nodes give); when they do not, it fails clearly
  (exit 1) and the same job run again finishes;
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
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.jobs.ingest import PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.kafka.admin import KafkaAdmin
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
from tests.plugins.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.fault]

FILES, PER_FILE = 4, 150  # one file per epoch (maxFilesPerTrigger=1)
TABLE = "shop.orders"
# The job's Kafka time-out (LOGSTORE_KAFKA_TIMEOUT), as short as the CLI tests' (5 s): the job
# sits this long on the dead cluster before it fails, and every delivery to the live cluster (3
# replicas, acks=all) takes milliseconds.
ALL_DOWN_KAFKA_TIMEOUT_S = 5.0
# An epoch's produce waits at most the Kafka time-out for deliveries; then the job stops its query
# and its Spark session. How long the test waits for that exit (a deadline for the wait: what is
# asserted is that the error says the Kafka time-out ended it, not how fast the JVM stopped):
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
    return jobrun.start(
        [sys.executable, "-m", "logstore_cli", "ingest", TABLE, "--source", str(s.source),
         "--once", "--source-option", "maxFilesPerTrigger=1", "--job", "orders-load",
         "--lease-ttl", "30", "--json"],
        cwd=s.tmp, env={"LOGSTORE_WAREHOUSE": str(s.warehouse), **(env or {})},
    )  # fmt: skip


def _wait_for_epochs(s: Setup, proc: subprocess.Popen[str], count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while s.committed_epochs() < count:
        if proc.poll() is not None:
            pytest.fail(f"ingest ended (exit {proc.returncode}) before epoch {count} committed")
        assert time.monotonic() < deadline, f"no {count} epochs committed within {timeout}s"
        time.sleep(0.2)  # poll interval of a condition with a deadline


def _check(s: Setup) -> dict[str, int]:
    """Delta = the source folded; the protocol holds; the log reads (API and CLI) equal Delta;
    ``logstore verify`` exits 0."""
    return assert_stores_agree(s.warehouse, TABLE, s.expected, cwd=s.tmp)


def _topic_replication(bootstrap: str, topic: str) -> int:
    """The topic's replication factor, once the node asked knows the topic (a topic just created
    reaches every node's metadata a moment later)."""
    deadline = time.monotonic() + 15
    with KafkaAdmin(bootstrap, {}, timeout_s=15) as admin:
        while (info := admin.describe_topic(topic)) is None:
            assert time.monotonic() < deadline, f"no node knows topic {topic} after 15 s"
            time.sleep(0.1)
    return info.replication


def _leaders(bootstrap: str, topic: str, timeout: float = 15) -> dict[int, int]:
    """Partition -> the node leading it (-1: none), from the cluster's metadata."""
    from confluent_kafka.admin import AdminClient

    # log_level 0: the dead node's connection errors are expected, not news for the test's output
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    metadata = client.list_topics(topic, timeout=timeout)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


ONE_DOWN_KAFKA_TIMEOUT_S = 60.0
# The job needs this much of its Kafka time-out left once the cluster has new leaders: its
# producer's metadata retries back off up to a few seconds, then the epoch's records and markers.
ONE_DOWN_MARGIN_S = 10.0


def _live_leaders_after(
    proc: subprocess.Popen[str], survivors: str, topic: str, victim: int, killed_at: float
) -> float | None:
    """While the job runs: seconds from the kill until the nodes left lead every partition of
    ``topic`` (as they tell it), or None when they did not before the job ended."""
    deadline = killed_at + INGEST_TIMEOUT_S
    elected: float | None = None
    while proc.poll() is None and time.monotonic() < deadline:
        if elected is None:
            try:
                leaders = _leaders(survivors, topic, timeout=5)
            except KafkaException:
                leaders = {}
            if leaders and all(node not in (victim, -1) for node in leaders.values()):
                elected = time.monotonic() - killed_at
        time.sleep(0.5)  # poll interval of a condition with a deadline
    return elected


def test_one_node_killed_mid_epoch_then_restarted(
    setup: Callable[[int], Setup], kafka_cluster: KafkaCluster
) -> None:
    """Where the kill lands: inside epoch 1, held by the pause hook after epoch 0 committed and
    before epoch 1 produced a record; the node killed leads a partition of the topic. Which outcome
    is expected depends on what the cluster did, watched from the nodes left:

    - new leaders for every partition with at least ONE_DOWN_MARGIN_S of the job's Kafka time-out
      left: the job rides it out (acks=all is met by the two in-sync replicas left): exit 0, every
      epoch committed by this one run, epoch 1 by its first attempt;
    - no new leaders in that time: the job fails with a clear error naming the dead node (exit 1,
      no traceback), and the same job run again, once the node is back, finishes.
    """
    s = setup(11)
    assert _topic_replication(kafka_cluster.bootstrap, s.topic) == 3  # the cluster's default
    leaders = _leaders(kafka_cluster.bootstrap, s.topic)
    victim = Counter(leaders.values()).most_common(1)[0][0]
    survivors = ",".join(
        kafka_cluster.node_bootstrap(n) for n in kafka_cluster.node_ids if n != victim
    )
    pause = s.tmp / "pause"
    env = {"LOGSTORE_KAFKA_TIMEOUT": f"{ONE_DOWN_KAFKA_TIMEOUT_S:g}",
           PAUSE_AT_ENV: "before-log:1", PAUSE_FILE_ENV: str(pause)}  # fmt: skip
    proc = _ingest(s, env)
    try:
        jobrun.wait_paused(proc, pause, 180)
        held_in = {c.epoch.epoch for c in epochs.epoch_commits(s.path)}
        kafka_cluster.stop_node(victim, kill=True)
        killed_at = time.monotonic()
        pause.unlink()  # epoch 1 goes on: its records go to a topic whose node is dead
        elected_s = _live_leaders_after(proc, survivors, s.topic, victim, killed_at)
        code, out, err = jobrun.finish(proc)
        kafka_cluster.start_node(victim)
    except BaseException:
        jobrun.kill(proc)
        raise
    assert held_in == {0}, f"the kill landed with epochs {sorted(held_in)} committed, not in 1"
    assert "Traceback" not in err, err[-3000:]
    led = sorted(p for p, node in leaders.items() if node == victim)
    where = f"node {victim} (leader of partitions {led}) killed inside epoch 1"
    if elected_s is not None and elected_s <= ONE_DOWN_KAFKA_TIMEOUT_S - ONE_DOWN_MARGIN_S:
        outcome = f"new leaders {elected_s:.1f}s after the kill: ridden out"
        assert code == 0, f"{where}; {outcome} expected, exit {code}:\n{err[-3000:]}"
        reports = jobrun.epoch_events(out)
        assert [(e["epoch"], e["republished"]) for e in reports] == [
            (n, False) for n in range(FILES)
        ]
        commits = {c.epoch.epoch: c.epoch.attempt for c in epochs.epoch_commits(s.path)}
        assert commits == {e["epoch"]: e["attempt"] for e in reports}
        epoch1 = {
            item.epoch.attempt
            for r in read_log(kafka_cluster.bootstrap, s.topic)
            for item in [decode(r.key, r.value, r.headers)]
            if isinstance(item, ChangeRecord) and item.epoch.epoch == 1
        }
        assert epoch1 == {commits[1]}  # one attempt, no retry
    else:
        when = "never while the job ran" if elected_s is None else f"only after {elected_s:.1f}s"
        outcome = f"new leaders {when}: failed, then the re-run finished"
        assert code == 1, f"{where}; {outcome} expected, exit {code}:\n{err[-3000:]}"
        failure = _messages(err)
        assert "error:" in failure and kafka_cluster.node_bootstrap(victim) in failure, failure
        kafka_cluster.wait_healthy()
        code, _, err = jobrun.finish(_ingest(s, {"LOGSTORE_KAFKA_TIMEOUT": "60"}))  # the same job
        assert code == 0, err[-3000:]
    kafka_cluster.wait_healthy()
    counts = _check(s)
    assert counts["epochs"] == FILES, counts
    print(f"\n{where}; {outcome}; {counts}")


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
        code, _, err = jobrun.finish(proc, timeout=ALL_DOWN_DEADLINE_S + 60)
        failed_after_s = time.monotonic() - down_at
    except BaseException:
        jobrun.kill(proc)
        kafka_cluster.wait_healthy()
        raise
    try:
        assert code == 1, f"exit {code}:\n{err[-3000:]}"
        assert "Traceback" not in err, err[-3000:]
        for address in kafka_cluster.bootstrap.split(","):
            assert address in err, f"the error does not name the broker {address}:\n{err[-3000:]}"
        # the Kafka time-out ended it (how long the JVM then took to stop is the machine's load)
        assert f"within {ALL_DOWN_KAFKA_TIMEOUT_S:g}s" in err, err[-3000:]
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

    code, _, err = jobrun.finish(_ingest(s, env))  # the same job, the same source
    assert code == 0, err[-3000:]
    counts = _check(s)
    assert counts["epochs"] == FILES, counts
    print(f"\nfailed {failed_after_s:.1f}s after all nodes died; cluster back in {back_s:.1f}s; "
          f"{done_before} epochs before, {counts}\n{failure[-2000:]}")  # fmt: skip
