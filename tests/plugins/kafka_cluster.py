"""A real local Kafka cluster of three nodes for the tests that ask for it (``kafka_cluster``).

Started once per session, lazily (only a session with such a test pays its ~30 s), in a private
state dir, and stopped at the end. Fault tests stop and restart its nodes through the handle; each
must leave it whole (``wait_healthy``) for the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.scheduling import stop_after_last_user

CLUSTER_NODES = 3
CLUSTER_START_TIMEOUT_S = 180.0  # three JVMs formatting and electing on two busy cores
HEALTHY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class KafkaCluster:
    state_dir: Path
    bootstrap: str  # every node's address
    node_ids: tuple[int, ...]

    def node_bootstrap(self, node_id: int) -> str:
        from logstore_cli.kafka import local_broker

        layout = local_broker.read_layout(self.state_dir)
        assert layout is not None
        return f"127.0.0.1:{layout.node(node_id).port}"

    def stop_node(self, node_id: int, *, kill: bool = True) -> None:
        """SIGKILL (a crash) or SIGTERM one node; it must have been running."""
        from logstore_cli.kafka import local_broker

        stopped = local_broker.stop_node(self.state_dir, node_id, kill=kill)
        assert stopped is not None, f"node {node_id} was not running"

    def start_node(self, node_id: int) -> None:
        from logstore_cli.kafka import local_broker

        local_broker.start_node(self.state_dir, node_id, timeout_s=CLUSTER_START_TIMEOUT_S)

    def stop_all(self, *, kill: bool = True) -> None:
        """Every node down at once (SIGKILL by default: the machines fail, nobody shuts down)."""
        from logstore_cli.kafka import local_broker

        if kill:
            for node_id in self.node_ids:
                local_broker.stop_node(self.state_dir, node_id, kill=True)
        else:
            local_broker.stop_cluster(self.state_dir)

    def start_all(self) -> None:
        from logstore_cli.kafka import local_broker

        local_broker.start_cluster(
            self.state_dir, nodes=len(self.node_ids), timeout_s=CLUSTER_START_TIMEOUT_S
        )

    def running(self) -> set[int]:
        from logstore_cli.kafka import local_broker

        nodes = local_broker.cluster_status(self.state_dir) or ()
        return {n.node_id for n in nodes if n.alive}

    def wait_healthy(self, timeout_s: float = HEALTHY_TIMEOUT_S) -> None:
        """Every node runs (restarting any that do not), is registered, and every partition has
        all its replicas in sync: the next fault starts from a whole cluster."""
        from logstore_cli.kafka import local_broker

        down = set(self.node_ids) - self.running()
        if down == set(self.node_ids):
            self.start_all()
        else:
            for node_id in sorted(down):
                self.start_node(node_id)
        deadline = time.monotonic() + timeout_s
        health = None
        while time.monotonic() < deadline:
            health = local_broker.cluster_health(self.bootstrap, timeout_s=5.0)
            whole = health is not None and health.brokers == self.node_ids
            if whole and health is not None and health.under_replicated == health.offline == 0:
                return
            time.sleep(0.5)  # poll interval of a condition with a deadline
        pytest.fail(f"the Kafka cluster did not heal within {timeout_s:.0f}s: {health}")


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A local three-node KRaft cluster (replication 3, min.insync.replicas 2 by default)."""
    from logstore_cli.errors import LogstoreError
    from logstore_cli.kafka import local_broker

    state_dir = tmp_path_factory.mktemp("kafka-cluster-state")
    try:
        info = local_broker.start_cluster(
            state_dir, nodes=CLUSTER_NODES, timeout_s=CLUSTER_START_TIMEOUT_S
        )
    except LogstoreError as exc:
        pytest.fail(f"could not start the Kafka cluster: {exc}\n{exc.detail or ''}", pytrace=False)
    cluster = KafkaCluster(state_dir, info.bootstrap, tuple(range(1, CLUSTER_NODES + 1)))
    stop = stop_after_last_user("kafka_cluster", lambda: local_broker.stop_cluster(state_dir))
    try:
        yield cluster
    finally:
        stop()
