"""What ``logstore broker start`` recorded in the state directory, read without starting anything:
the running broker or cluster nodes, the ports a restart reuses, and the bootstrap address they give.

Apart from ``local_broker`` (which starts and stops the broker and re-exports all of this) so that
the commands that only resolve the local broker's address (``validate``, ``list``, ``describe``,
``status``) do not import what starting a JVM takes (subprocess, sockets, thread pools, the
broker's configuration).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from logstore_cli.errors import BrokerError, InvalidInputError, StateDirError
from logstore_cli.paths import check_state_dir

_STATE_FILE = "broker.json"
_CLUSTER_FILE = "cluster.json"
_LAYOUT_FILE = "nodes.json"
_NODE_PREFIX = "node-"
_NODE_STATE = "node.json"
_MAIN_CLASS = "kafka.Kafka"
_HOST = "127.0.0.1"
MIN_CLUSTER_NODES = 3


@dataclass(frozen=True)
class BrokerInfo:
    """A local broker that 'logstore broker start' started, as recorded in the state directory."""

    pid: int
    bootstrap: str
    controller: str
    log_file: str
    data_dir: str
    config_file: str
    started_at: float
    # The SASL_PLAINTEXT (PLAIN) client listener, when started with ``sasl_plain_users``.
    sasl_bootstrap: str | None = None
    cluster_id: str | None = None
    # True when this start kept the data (topics, records) of an earlier one.
    reused_data: bool = False


@dataclass(frozen=True)
class ClusterState:
    """What a restart keeps besides the data: the cluster id and the ports clients were given."""

    cluster_id: str
    port: int
    controller_port: int
    sasl_port: int | None = None


def broker_dir(state_dir: Path) -> Path:
    return state_dir / "broker"


def read_state(state_dir: Path) -> BrokerInfo | None:
    """The broker ``start`` recorded as launched (it may have died since); None when none was."""
    path = broker_dir(state_dir) / _STATE_FILE
    data = _read_json(state_dir, path)
    if data is None:
        return None
    try:
        return BrokerInfo(**data)
    except TypeError as exc:
        raise _unreadable(path, exc, "stop any stray broker by hand, then delete it") from exc


def read_cluster(state_dir: Path) -> ClusterState | None:
    """The cluster id and ports of the last successful start; None before the first one."""
    path = broker_dir(state_dir) / _CLUSTER_FILE
    data = _read_json(state_dir, path)
    if data is None:
        return None
    try:
        return ClusterState(**data)
    except TypeError as exc:
        hint = "delete it (the data is kept; the broker gets new ports), or start with --fresh"
        raise _unreadable(path, exc, hint) from exc


def _read_json(state_dir: Path, path: Path) -> dict[str, Any] | None:
    check_state_dir(state_dir)
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise StateDirError(
            f"cannot read {path}: permission denied",
            hint="run logstore as the user who started the broker, or set LOGSTORE_STATE_DIR",
        ) from exc
    except ValueError as exc:
        raise _unreadable(path, exc, "delete it") from exc
    if not isinstance(data, dict):
        raise _unreadable(path, ValueError("not a JSON object"), "delete it")
    return data


def _unreadable(path: Path, exc: Exception, fix: str) -> BrokerError:
    return BrokerError(f"the broker state file {path} is unreadable: {exc}", hint=f"{fix}: {path}")


def is_running(info: BrokerInfo) -> bool:
    """True when ``info.pid`` is alive and still our broker (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _MAIN_CLASS.encode() in cmdline and info.config_file.encode() in cmdline


@dataclass(frozen=True)
class NodePorts:
    """A cluster node's id and its client and controller ports."""

    node_id: int
    port: int
    controller_port: int


@dataclass(frozen=True)
class ClusterLayout:
    """What a restart keeps besides the data: the cluster id and every node's ports."""

    cluster_id: str
    nodes: tuple[NodePorts, ...]

    @property
    def bootstrap(self) -> str:
        """Every node's client address: clients reach the cluster while any one node is up."""
        return ",".join(f"{_HOST}:{n.port}" for n in self.nodes)

    def node(self, node_id: int) -> NodePorts:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        ids = ", ".join(str(n.node_id) for n in self.nodes)
        raise InvalidInputError(
            f"the local cluster has no node {node_id}", hint=f"its nodes are {ids}"
        )


@dataclass(frozen=True)
class NodeInfo:
    """One running node, as ``start_cluster``/``start_node`` launched it (``node.json``)."""

    node_id: int
    pid: int
    bootstrap: str  # this node's client address
    controller: str
    log_file: str
    data_dir: str
    config_file: str
    started_at: float


def node_dir(state_dir: Path, node_id: int) -> Path:
    return broker_dir(state_dir) / f"{_NODE_PREFIX}{node_id}"


def read_layout(state_dir: Path) -> ClusterLayout | None:
    """The recorded cluster (``nodes.json``); None when ``state_dir`` holds no cluster."""
    path = broker_dir(state_dir) / _LAYOUT_FILE
    data = _read_json(state_dir, path)
    if data is None:
        return None
    try:
        nodes = tuple(NodePorts(**n) for n in data["nodes"])
        layout = ClusterLayout(str(data["cluster_id"]), nodes)
        if len(nodes) < MIN_CLUSTER_NODES or not all(
            isinstance(v, int) for n in nodes for v in asdict(n).values()
        ):
            raise ValueError("nodes: at least three, each with integer node_id and ports")
    except (KeyError, TypeError, ValueError) as exc:
        hint = "stop any stray node by hand, then delete it, or start with --fresh"
        raise _unreadable(path, exc, hint) from exc
    return layout


def read_node_state(state_dir: Path, node_id: int) -> NodeInfo | None:
    """The node ``node_id`` as launched (it may have died since); None when none was."""
    path = node_dir(state_dir, node_id) / _NODE_STATE
    data = _read_json(state_dir, path)
    if data is None:
        return None
    try:
        return NodeInfo(**data)
    except TypeError as exc:
        raise _unreadable(path, exc, "stop any stray node by hand, then delete it") from exc


def node_is_running(info: NodeInfo) -> bool:
    """True when ``info.pid`` is alive and still that node (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _MAIN_CLASS.encode() in cmdline and info.config_file.encode() in cmdline


def _running_nodes(state_dir: Path, layout: ClusterLayout | None) -> dict[int, NodeInfo]:
    """The recorded nodes that run; records of nodes that died are cleared."""
    running: dict[int, NodeInfo] = {}
    ids = [n.node_id for n in layout.nodes] if layout else _node_dir_ids(state_dir)
    for node_id in ids:
        info = read_node_state(state_dir, node_id)
        if info is None:
            continue
        if node_is_running(info):
            running[node_id] = info
        else:
            (node_dir(state_dir, node_id) / _NODE_STATE).unlink(missing_ok=True)
    return running


def _node_dir_ids(state_dir: Path) -> list[int]:
    ids = []
    for path in broker_dir(state_dir).glob(f"{_NODE_PREFIX}*"):
        suffix = path.name.removeprefix(_NODE_PREFIX)
        if suffix.isdigit():
            ids.append(int(suffix))
    return sorted(ids)


def local_bootstrap(state_dir: Path) -> str | None:
    """The address of what ``logstore broker start`` runs in ``state_dir``: every node of a
    cluster of which any node runs, else the single broker when it runs; None otherwise."""
    layout = read_layout(state_dir)
    if layout is not None:
        return layout.bootstrap if _running_nodes(state_dir, layout) else None
    info = read_state(state_dir)
    return info.bootstrap if info and is_running(info) else None


def last_local_bootstrap(state_dir: Path) -> str | None:
    """The address ``logstore broker start`` gave clients last in ``state_dir``, running or not;
    None before the first start.

    The ports are kept after ``stop`` and reused by the next start, so a table created against the
    local broker (its address not stored with it) still resolves while the broker is stopped: its
    Delta-only commands work, and a client that needs Kafka says which address it tried. Of a
    single broker and a cluster both recorded, the one started last.
    """
    root = broker_dir(state_dir)
    found: list[tuple[float, str]] = []
    layout = read_layout(state_dir)
    if layout is not None:
        found.append((_mtime(root / _LAYOUT_FILE), layout.bootstrap))
    cluster = read_cluster(state_dir)
    if cluster is not None:
        found.append((_mtime(root / _CLUSTER_FILE), f"{_HOST}:{cluster.port}"))
    return max(found)[1] if found else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
