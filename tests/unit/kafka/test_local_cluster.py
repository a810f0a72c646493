"""The local multi-node cluster's pure parts and its refusals: node properties, the recorded
layout, switching between one and three nodes, ``--node`` checks. No JVM is started here."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from logstore_cli.cli.app import run
from logstore_cli.errors import BrokerError, InvalidInputError
from logstore_cli.kafka import local_broker as lb


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def _nodes(*ports: tuple[int, int]) -> tuple[lb.NodePorts, ...]:
    return tuple(lb.NodePorts(i + 1, p, c) for i, (p, c) in enumerate(ports))


NODES = _nodes((9101, 9201), (9102, 9202), (9103, 9203))


def test_every_node_is_a_voter_and_a_broker_with_its_own_ports_and_data(tmp_path: Path) -> None:
    texts = [lb.node_properties(n, NODES, tmp_path / f"n{n.node_id}") for n in NODES]
    props = [_props(t) for t in texts]
    voters = "1@127.0.0.1:9201,2@127.0.0.1:9202,3@127.0.0.1:9203"
    for n, p in zip(NODES, props, strict=True):
        assert p["process.roles"] == "broker,controller"
        assert p["node.id"] == str(n.node_id)
        assert p["controller.quorum.voters"] == voters  # the same static quorum on every node
        assert p["listeners"] == (
            f"PLAINTEXT://127.0.0.1:{n.port},CONTROLLER://127.0.0.1:{n.controller_port}"
        )
        assert p["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{n.port}"
        assert p["log.dirs"] == str(tmp_path / f"n{n.node_id}")
    assert len({p["log.dirs"] for p in props}) == 3


def test_cluster_topics_default_to_replication_3_and_two_in_sync(tmp_path: Path) -> None:
    p = _props(lb.node_properties(NODES[0], NODES, tmp_path))
    assert p["default.replication.factor"] == "3"
    assert p["min.insync.replicas"] == "2"
    assert p["offsets.topic.replication.factor"] == "3"
    assert p["transaction.state.log.replication.factor"] == "3"
    assert p["transaction.state.log.min.isr"] == "2"
    assert p["unclean.leader.election.enable"] == "false"
    assert p["auto.create.topics.enable"] == "false"
    # The single broker keeps its own settings.
    single = _props(lb.server_properties(9092, 9093, tmp_path))
    assert "default.replication.factor" not in single and "min.insync.replicas" not in single
    assert single["offsets.topic.replication.factor"] == "1"


def test_node_jvms_are_small() -> None:
    args = lb._jvm_args([], Path("/logs"), lb._NODE_HEAP)
    assert "-Xmx512m" in args and "-XX:ParallelGCThreads=1" in args
    assert "-Xmx768m" in lb._jvm_args([], Path("/logs"))  # the single broker: as before


def _record_layout(state_dir: Path, nodes: tuple[lb.NodePorts, ...], cid: str = "") -> None:
    root = lb.broker_dir(state_dir)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    layout = lb.ClusterLayout(cid or lb.new_cluster_id(), nodes)
    (root / "nodes.json").write_text(lb._layout_json(layout))


def test_layout_round_trip_and_bootstrap_lists_every_node(tmp_path: Path) -> None:
    assert lb.read_layout(tmp_path) is None and lb.recorded_nodes(tmp_path) is None
    _record_layout(tmp_path, NODES, "cid")
    layout = lb.read_layout(tmp_path)
    assert layout == lb.ClusterLayout("cid", NODES)
    assert layout.bootstrap == "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"
    assert lb.recorded_nodes(tmp_path) == 3
    assert lb.local_bootstrap(tmp_path) is None  # recorded, but no node runs
    statuses = lb.cluster_status(tmp_path)
    assert statuses is not None and [s.alive for s in statuses] == [False] * 3
    assert statuses[1].data_dir == str(tmp_path / "broker" / "node-2" / "data")


def test_an_unreadable_layout_is_a_clear_error(tmp_path: Path) -> None:
    lb.broker_dir(tmp_path).mkdir()
    (lb.broker_dir(tmp_path) / "nodes.json").write_text(json.dumps({"cluster_id": "x"}))
    with pytest.raises(BrokerError, match=r"nodes\.json is unreadable") as info:
        lb.read_layout(tmp_path)
    assert info.value.hint and "--fresh" in info.value.hint


def test_a_single_broker_state_is_not_reused_as_a_cluster(tmp_path: Path) -> None:
    lb.broker_dir(tmp_path).mkdir()
    cluster = lb.ClusterState(lb.new_cluster_id(), lb.free_port(), lb.free_port())
    (lb.broker_dir(tmp_path) / "cluster.json").write_text(json.dumps(cluster.__dict__))
    assert lb.recorded_nodes(tmp_path) == 1
    with pytest.raises(BrokerError, match="holds the data of a single local broker") as info:
        lb.start_cluster(tmp_path, nodes=3, classpath=[])
    assert info.value.hint and "--brokers 1" in info.value.hint and "--fresh" in info.value.hint
    assert lb.read_cluster(tmp_path) == cluster  # untouched
    assert not list(lb.broker_dir(tmp_path).glob("node-*"))


def test_a_cluster_state_is_not_reused_as_a_single_broker_or_another_size(tmp_path: Path) -> None:
    _record_layout(tmp_path, NODES)
    with pytest.raises(BrokerError, match="holds a local 3-node cluster, not a single") as info:
        lb.start(tmp_path, classpath=[])
    assert info.value.hint and "--brokers 3" in info.value.hint
    assert "--brokers 1 --fresh" in info.value.hint
    with pytest.raises(BrokerError, match="3-node cluster, not a 5-node one"):
        lb.start_cluster(tmp_path, nodes=5, classpath=[])
    assert lb.read_layout(tmp_path) is not None  # untouched


def test_node_count_bounds() -> None:
    for nodes in (1, 2, 10):
        with pytest.raises(InvalidInputError, match=f"3 to 9 nodes, not {nodes}"):
            lb.start_cluster(Path("/nonexistent"), nodes=nodes, classpath=[])


def test_node_commands_need_a_cluster_and_a_known_node(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="holds no local cluster: --node needs one"):
        lb.start_node(tmp_path, 1, classpath=[])
    with pytest.raises(InvalidInputError, match="holds no local cluster"):
        lb.stop_node(tmp_path, 1)
    _record_layout(tmp_path, NODES)
    with pytest.raises(InvalidInputError, match="no node 4") as info:
        lb.start_node(tmp_path, 4, classpath=[])
    assert info.value.hint == "its nodes are 1, 2, 3"
    assert lb.stop_node(tmp_path, 2) is None  # not running: nothing to do
    assert lb.stop_cluster(tmp_path) == {}


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_restart_keeps_client_ports_and_moves_only_taken_controller_ports(
    tmp_path: Path, listening: int
) -> None:
    p = lb._free_ports(5)
    nodes = _nodes((p[0], p[1]), (p[2], listening), (p[3], p[4]))
    chosen = lb._cluster_ports(lb.ClusterLayout("c", nodes), 3)
    assert [n.port for n in chosen] == [p[0], p[2], p[3]]
    assert chosen[0].controller_port == p[1] and chosen[2].controller_port == p[4]
    assert chosen[1].controller_port not in (listening, *p)
    fresh = lb._cluster_ports(None, 3)
    assert len({n.port for n in fresh} | {n.controller_port for n in fresh}) == 6


def test_a_taken_client_port_is_a_clear_error(tmp_path: Path, listening: int) -> None:
    nodes = _nodes((listening, lb.free_port()), *[(lb.free_port(), lb.free_port())] * 2)
    with pytest.raises(BrokerError, match=f"client port {listening} of node 1") as info:
        lb._cluster_ports(lb.ClusterLayout("c", nodes), 3)
    assert info.value.hint and "--fresh" in info.value.hint
    node = lb.NodePorts(2, lb.free_port(), listening)
    with pytest.raises(BrokerError, match=f"controller port {listening} of node 2"):
        lb._check_node_ports_free(node)  # a single node's restart cannot move its ports


def _cli(capsys: pytest.CaptureFixture[str], *args: str, state_dir: Path) -> tuple[int, str, str]:
    code = run(["broker", *args, "--state-dir", str(state_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_flag_misuse_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "stop", "--kill", state_dir=tmp_path)
    assert code == 2 and "--kill stops one node abruptly and needs --node N" in err
    code, _, err = _cli(capsys, "start", "--node", "1", "--fresh", state_dir=tmp_path)
    assert code == 2 and "--node restarts one node as it was" in err
    code, _, err = _cli(capsys, "start", "--brokers", "3", "--port", "9999", state_dir=tmp_path)
    assert code == 2 and "--port sets the port of a single broker" in err
    code, _, err = _cli(capsys, "stop", "--node", "2", state_dir=tmp_path)
    assert code == 2 and "--node needs one" in err
    assert not (tmp_path / "broker" / "nodes.json").exists()


def test_cli_status_of_a_stopped_cluster_lists_every_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record_layout(tmp_path, NODES, "cid-1")
    code, out, err = _cli(capsys, "status", "--json", state_dir=tmp_path)
    assert code == 1
    data = json.loads(out)
    assert data["running"] is False and data["cluster_id"] == "cid-1"
    assert [(n["node_id"], n["port"], n["alive"]) for n in data["nodes"]] == [
        (1, 9101, False), (2, 9102, False), (3, 9103, False),
    ]  # fmt: skip
    assert "no node of the local cluster is running" in err
    assert "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103" in err.replace("\n", "")
