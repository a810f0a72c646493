"""The local three-node cluster (``kafka_cluster``) through ``logstore broker`` as a script runs it:
status of every node; one node stopped and restarted (the topic keeps taking acks=all writes);
two nodes down (the log's producer waits and delivers each record once when one returns). The
whole cluster killed and started again with ``logstore broker start`` is in
tests/integration/faults/test_kafka_faults.py.

Each test leaves the cluster whole for the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource  # the typed home of admin's re-export

from logstore_cli.kafka import local_broker
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.producer import LogProducer
from tests.plugins.kafka_cluster import KafkaCluster

PARTITIONS = 3


def _broker(cluster: KafkaCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGSTORE_STATE_DIR": str(cluster.state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", "broker", *args],
        capture_output=True, text=True, env=env, timeout=240, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _create_topic(cluster: KafkaCluster, topic: str) -> int:
    """A topic with the cluster's default replication; returns that replication."""
    with KafkaAdmin(cluster.bootstrap, {}, timeout_s=30) as admin:
        admin.create_topic(topic, PARTITIONS, -1)
        info = admin.describe_topic(topic)
    assert info is not None
    return info.replication


def _produce(bootstrap: str, topic: str, values: list[bytes], timeout_s: float = 30) -> int:
    """Send and flush; returns the sum of the partitions' end offsets the flush reported."""
    with LogProducer(bootstrap, {}, topic, timeout_s=timeout_s) as producer:
        for v in values:
            producer.send(v, v, [])
        return sum(producer.flush().values())


def _read_all(bootstrap: str, topic: str, timeout_s: float = 30) -> list[bytes]:
    """Every record of the topic, up to its end offsets now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=timeout_s)[1]
                for tp in parts}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[bytes] = []
        seen = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout_s
        while any(seen[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"read {seen} of {ends}"
            # returns early only once 500 came: a short time-out is the poll interval
            for msg in consumer.consume(500, timeout=0.05):
                assert msg.error() is None, msg.error()
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                assert partition is not None and offset is not None and value is not None
                if offset < ends[partition]:
                    out.append(value)
                    seen[partition] = offset + 1
        return out
    finally:
        consumer.close()


def _status(cluster: KafkaCluster) -> tuple[int, dict[str, Any], str]:
    proc = _broker(cluster, "status", "--json")
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_status_lists_every_node_and_the_cluster_defaults(kafka_cluster: KafkaCluster) -> None:
    kafka_cluster.wait_healthy()
    code, data, err = _status(kafka_cluster)
    assert code == 0, err
    assert data["bootstrap"] == kafka_cluster.bootstrap
    assert len(kafka_cluster.bootstrap.split(",")) == 3
    assert [(n["node_id"], n["alive"], n["answering"]) for n in data["nodes"]] == [
        (1, True, True), (2, True, True), (3, True, True),
    ]  # fmt: skip
    assert data["registered_brokers"] == [1, 2, 3]
    assert data["under_replicated_partitions"] == 0
    # What 'kafka.bootstrap_servers' defaults to when this state dir's cluster runs.
    assert local_broker.local_bootstrap(kafka_cluster.state_dir) == kafka_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    for node_id in kafka_cluster.node_ids:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        assert configs["default.replication.factor"].value == "3"
        assert configs["min.insync.replicas"].value == "2"


def test_nodes_down_acks_all_writes_go_on_with_two_and_wait_below_min_insync(
    kafka_cluster: KafkaCluster, topic_name: str
) -> None:
    """One node down: the topic (replication 3) takes acks=all writes from the two in-sync
    replicas left. Two down: fewer in-sync replicas than min.insync.replicas (and no controller
    quorum): the log's producer (acks=all, idempotent) retries until a node returns, and then
    delivers each record once."""
    kafka_cluster.wait_healthy()
    assert _create_topic(kafka_cluster, topic_name) == 3

    killed = _broker(kafka_cluster, "stop", "--node", "2", "--kill", "--json")
    assert killed.returncode == 0, killed.stderr
    assert json.loads(killed.stdout)["forced"] is True
    code, data, err = _status(kafka_cluster)
    assert code == 1 and "node 2 of the local cluster is not running" in err
    assert "logstore broker start --node 2" in err
    assert [n["alive"] for n in data["nodes"]] == [True, False, True]

    first = [f"v{i}".encode() for i in range(300)]
    assert _produce(kafka_cluster.bootstrap, topic_name, first) == len(first)

    kafka_cluster.stop_node(3)
    second = [f"w{i}".encode() for i in range(200)]
    result: list[int | BaseException] = []

    def produce() -> None:
        try:
            result.append(_produce(kafka_cluster.bootstrap, topic_name, second, timeout_s=180))
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        thread.join(timeout=8.0)  # bounded: with one node of three, nothing can be acknowledged
        assert thread.is_alive() and result == [], result
    finally:
        kafka_cluster.start_node(3)
    thread.join(timeout=180)
    assert result == [len(first) + len(second)], result  # end offsets: both batches

    started = _broker(kafka_cluster, "start", "--node", "2", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["bootstrap"] == kafka_cluster.node_bootstrap(2)
    kafka_cluster.wait_healthy()  # node 2 caught up: every replica in sync again
    # Each record once: the idempotent producer's retries were deduplicated by the leaders.
    assert sorted(_read_all(kafka_cluster.bootstrap, topic_name)) == sorted(first + second)


@pytest.fixture(autouse=True)
def _whole_afterwards(kafka_cluster: KafkaCluster) -> Iterator[None]:
    yield
    kafka_cluster.wait_healthy()
