"""A real single-node Apache Kafka broker (KRaft, broker+controller) on loopback.

Used for development, the demo and the test-suite. It runs ``kafka.Kafka`` from the jars resolved by
``logstore_cli.jvm.deps``; its storage is formatted (``kafka.tools.StorageTool format``) only on the
first start. Everything lives in ``<state_dir>/broker`` (mode 0700):

- ``data/``: the KRaft metadata and topic logs, with the cluster id (``meta.properties``);
- ``cluster.json``: the cluster id and the ports of the last successful start, kept after ``stop`` so
  that a restart serves the same topics and records on the same bootstrap address;
- ``broker.json``: the running broker (pid, addresses, log file), so that ``stop`` and ``status``
  find exactly the process ``start`` launched; removed by ``stop``;
- ``server.properties`` (written at each start), ``broker.log`` and the previous ``broker.log.1``.

``start(fresh=True)`` deletes the data and the recorded ports first: a new, empty cluster.

``start`` can also add a ``SASL_PLAINTEXT`` client listener with PLAIN users and extra server
properties (e.g. an authorizer), so that tests meet real authentication and authorization errors; the
``PLAINTEXT`` and controller listeners stay as they are (principal ``User:ANONYMOUS``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from logstore_cli import processes
from logstore_cli.errors import BrokerError, InvalidInputError, StateDirError
from logstore_cli.jvm.java import java_executable as java_executable

# What a start records, and reading it back: local_state.py, re-exported (this module's API).
from logstore_cli.kafka.local_state import (
    _CLUSTER_FILE,
    _HOST,
    _LAYOUT_FILE,
    _MAIN_CLASS,
    _NODE_PREFIX,
    _NODE_STATE,
    _STATE_FILE,
    _running_nodes,
)
from logstore_cli.kafka.local_state import MIN_CLUSTER_NODES as MIN_CLUSTER_NODES
from logstore_cli.kafka.local_state import BrokerInfo as BrokerInfo
from logstore_cli.kafka.local_state import ClusterLayout as ClusterLayout
from logstore_cli.kafka.local_state import ClusterState as ClusterState
from logstore_cli.kafka.local_state import NodeInfo as NodeInfo
from logstore_cli.kafka.local_state import NodePorts as NodePorts
from logstore_cli.kafka.local_state import broker_dir as broker_dir
from logstore_cli.kafka.local_state import is_running as is_running
from logstore_cli.kafka.local_state import last_local_bootstrap as last_local_bootstrap
from logstore_cli.kafka.local_state import local_bootstrap as local_bootstrap
from logstore_cli.kafka.local_state import node_dir as node_dir
from logstore_cli.kafka.local_state import node_is_running as node_is_running
from logstore_cli.kafka.local_state import read_cluster as read_cluster
from logstore_cli.kafka.local_state import read_layout as read_layout
from logstore_cli.kafka.local_state import read_node_state as read_node_state
from logstore_cli.kafka.local_state import read_state as read_state
from logstore_cli.paths import state_subdir
from logstore_cli.processes import free_ports as _free_ports
from logstore_cli.processes import port_is_free
from logstore_cli.processes import tail as _tail
from logstore_cli.processes import tail_file as _tail_file
from logstore_cli.processes import wait_gone as _wait_gone
from logstore_cli.processes import write_private as _write_private

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
_DATA_DIR = "data"
_LOG_FILE = "broker.log"
_META = "meta.properties"
SASL_LISTENER = "SASL_PLAINTEXT"
_PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True)
class Stopped:
    """A broker ``stop`` ended; ``forced`` when it ignored SIGTERM and was killed."""

    pid: int
    bootstrap: str
    forced: bool


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def server_properties(
    port: int,
    controller_port: int,
    data_dir: Path,
    *,
    sasl_port: int | None = None,
    sasl_plain_users: Mapping[str, str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> str:
    """The broker's ``server.properties``.

    With ``sasl_port`` and ``sasl_plain_users`` (user -> password) a ``SASL_PLAINTEXT`` listener with
    the PLAIN mechanism is added for clients; ``extra_properties`` are applied last and win.
    """
    props = _base_props(
        node_id=1,
        port=port,
        controller_port=controller_port,
        voters=f"1@{_HOST}:{controller_port}",
        data_dir=data_dir,
    )
    if (sasl_port is None) != (sasl_plain_users is None):
        raise ValueError("sasl_port and sasl_plain_users go together")
    if sasl_port is not None and sasl_plain_users is not None:
        sasl = f"{SASL_LISTENER}://{_HOST}:{sasl_port}"
        prefix = f"listener.name.{SASL_LISTENER.lower()}"
        props["listeners"] += f",{sasl}"
        props["advertised.listeners"] += f",{sasl}"
        props["listener.security.protocol.map"] += f",{SASL_LISTENER}:SASL_PLAINTEXT"
        props["sasl.enabled.mechanisms"] = "PLAIN"
        props[f"{prefix}.sasl.enabled.mechanisms"] = "PLAIN"
        props[f"{prefix}.plain.sasl.jaas.config"] = _plain_server_jaas(sasl_plain_users)
    props.update(extra_properties or {})
    return _properties_text(props)


def _base_props(
    *, node_id: int, port: int, controller_port: int, voters: str, data_dir: Path
) -> dict[str, str]:
    """What every local node runs with: both roles, loopback listeners, one log dir."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        # A static quorum (no voter set in the metadata log): the controllers may change their
        # ports between starts of the whole cluster when the old ones are taken.
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{_HOST}:{port},CONTROLLER://{_HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{_HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        # A missing topic must be an error users see, not a topic quietly created with defaults.
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.segment.bytes": str(64 * 1024 * 1024),
    }


def _properties_text(props: Mapping[str, str]) -> str:
    for key, value in props.items():
        if "\n" in key or "\n" in value or "\r" in key or "\r" in value:
            raise ValueError(f"broker property {key!r} must be one line")
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _plain_server_jaas(users: Mapping[str, str]) -> str:
    if not users:
        raise ValueError("a SASL listener needs at least one PLAIN user")
    entries = []
    for user, password in users.items():
        # No escaping games: JAAS and .properties both treat these characters specially.
        if not user.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"PLAIN user name {user!r} must be letters, digits, '-' or '_'")
        if any(ch in password for ch in '"\\;\n\r') or not password:
            raise ValueError(f'the password of PLAIN user {user!r} is empty or has ", \\ or ;')
        entries.append(f'user_{user}="{password}"')
    return f"{_PLAIN_LOGIN_MODULE} required {' '.join(entries)};"


_SINGLE_HEAP = ("-Xms256m", "-Xmx768m")
# Three JVMs share CI's 2 cores: a smaller heap and one GC thread each.
_NODE_HEAP = ("-Xms128m", "-Xmx512m", "-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1")


def _jvm_args(
    classpath: list[Path], log_dir: Path, heap: tuple[str, ...] = _SINGLE_HEAP
) -> list[str]:
    log4j = resources.files("logstore_cli.kafka").joinpath("log4j2.properties")
    return [
        java_executable(),
        *heap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={log_dir}",
        "-cp", os.pathsep.join(str(j) for j in classpath),
    ]  # fmt: skip


def start(
    state_dir: Path,
    *,
    port: int | None = None,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
    sasl_plain_users: Mapping[str, str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> BrokerInfo:
    """Launch the broker over the data of the last start, and wait until it answers metadata.

    The first start (and every ``fresh`` one, which deletes the data and the recorded ports first)
    formats new storage and takes free ports; a later start reuses the data and the recorded ports,
    so clients find the same topics at the same address. ``port`` overrides the client port.

    ``sasl_plain_users`` (user -> password) adds a ``SASL_PLAINTEXT`` listener with the PLAIN
    mechanism (``BrokerInfo.sasl_bootstrap``); ``extra_properties`` are added to the broker's
    ``server.properties`` last (e.g. ``authorizer.class.name``, ``super.users``). Readiness is
    checked on the ``PLAINTEXT`` listener, whose principal is ``User:ANONYMOUS``.
    """
    state_dir = state_dir.absolute()  # the broker's files are named in broker.json and its argv
    root = state_subdir(state_dir, "broker")
    existing = read_state(state_dir)
    if existing is not None:
        if is_running(existing):
            raise BrokerError(
                f"a local broker is already running (pid {existing.pid}, {existing.bootstrap})",
                hint="use it, or run 'logstore broker stop' first",
            )
        (root / _STATE_FILE).unlink(missing_ok=True)  # left by a broker that died
    _refuse_running_nodes(state_dir)
    if fresh:
        _wipe(root)
    elif (layout := read_layout(state_dir)) is not None:
        raise BrokerError(
            f"{root} holds a local {len(layout.nodes)}-node cluster, not a single broker",
            hint=f"restart that cluster with 'logstore broker start --brokers "
            f"{len(layout.nodes)}'; or 'logstore broker start --brokers 1 --fresh' to delete its "
            "topics and records and start one empty broker",
        )
    recorded = read_cluster(state_dir)
    port, controller_port, sasl_port = _choose_ports(
        recorded, port, sasl=sasl_plain_users is not None
    )
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.KAFKA)

    data_dir = state_subdir(state_dir, "broker", _DATA_DIR)
    config_file = root / "server.properties"
    config_text = server_properties(
        port, controller_port, data_dir, sasl_port=sasl_port,
        sasl_plain_users=sasl_plain_users, extra_properties=extra_properties,
    )  # fmt: skip
    _write_private(config_file, config_text)  # it may hold the PLAIN users' passwords
    jvm = _jvm_args(classpath, root)
    cluster_id = _cluster_id(data_dir)
    reused = cluster_id is not None
    if cluster_id is None:
        cluster_id = _format(jvm, config_file, data_dir, timeout_s)

    log_file = root / _LOG_FILE
    proc = processes.launch([*jvm, _MAIN_CLASS, str(config_file)], log_file)
    info = BrokerInfo(
        pid=proc.pid,
        bootstrap=f"{_HOST}:{port}",
        controller=f"{_HOST}:{controller_port}",
        log_file=str(log_file),
        data_dir=str(data_dir),
        config_file=str(config_file),
        started_at=time.time(),
        sasl_bootstrap=None if sasl_port is None else f"{_HOST}:{sasl_port}",
        cluster_id=cluster_id,
        reused_data=reused,
    )
    state_file = root / _STATE_FILE
    try:
        _write_private(state_file, json.dumps(asdict(info), indent=2))
        _wait_until_up(proc, info, timeout_s)
    except BaseException:  # failed, timed out or interrupted: leave no broker and no stale state
        _terminate(proc.pid)
        state_file.unlink(missing_ok=True)
        raise
    cluster = ClusterState(cluster_id, port, controller_port, sasl_port)
    _write_private(root / _CLUSTER_FILE, json.dumps(asdict(cluster), indent=2))
    return info


def _choose_ports(
    recorded: ClusterState | None, port: int | None, *, sasl: bool
) -> tuple[int, int, int | None]:
    """Client, controller and SASL ports: the recorded ones where possible, else free ones.

    A client-facing port that is taken is an error (clients know it); the controller port is
    internal and moves silently.
    """
    if port is not None:
        if not port_is_free(port):
            raise BrokerError(
                f"port {port} on {_HOST} is already in use",
                hint="choose another --port, or leave --port out (the recorded or a free port)",
            )
        client = port
    elif recorded is not None:
        client = _recorded_port(recorded.port, "client")
    else:
        client = 0
    sasl_port: int | None = None
    if sasl and recorded is not None and recorded.sasl_port is not None:
        sasl_port = _recorded_port(recorded.sasl_port, "SASL client")
    controller = 0
    if recorded is not None and recorded.controller_port not in (client, sasl_port):
        controller = recorded.controller_port if port_is_free(recorded.controller_port) else 0
    free = iter(p for p in _free_ports(3) if p not in (client, controller, sasl_port))
    client = client or next(free)
    controller = controller or next(free)
    if sasl and sasl_port is None:
        sasl_port = next(free)
    return client, controller, sasl_port


def _recorded_port(port: int, what: str) -> int:
    if port_is_free(port):
        return port
    raise BrokerError(
        f"the local broker's {what} port {port} (kept from its last start) is now used by "
        "another process",
        hint=f"free port {port}; or 'logstore broker start --port N' to serve the same data on "
        "another port; or 'logstore broker start --fresh' for a new, empty broker on a free port",
    )


def _cluster_id(data_dir: Path) -> str | None:
    """The cluster id of formatted storage; None when ``data_dir`` is not formatted."""
    try:
        text = (data_dir / _META).read_text("utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id" and value.strip():
            return value.strip()
    raise BrokerError(
        f"{data_dir / _META} has no cluster.id: the broker's storage is damaged",
        hint="start a new, empty broker with 'logstore broker start --fresh'",
    )


def _format(
    jvm: list[str], config_file: Path, data_dir: Path, timeout_s: float, cluster_id: str = ""
) -> str:
    """Format empty storage with ``cluster_id`` (a new one when empty); on failure leave
    ``data_dir`` unformatted."""
    cluster_id = cluster_id or new_cluster_id()
    command = [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config_file)]
    try:
        fmt = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:  # run() has killed it
        _clear_dir(data_dir)
        raise BrokerError(
            f"formatting the broker's storage did not finish within {timeout_s:.0f}s",
            detail=_tail(_text(exc.stdout) + _text(exc.stderr)),
            hint="check Java 17 and the broker jars ('logstore setup --only kafka'), or give "
            "more time with --timeout",
        ) from exc
    except BaseException:
        _clear_dir(data_dir)
        raise
    if fmt.returncode != 0:
        _clear_dir(data_dir)
        raise BrokerError(
            f"formatting the broker's storage failed (exit code {fmt.returncode})",
            detail=_tail(fmt.stdout + fmt.stderr),
            hint=f"check Java 17 and the broker jars ('logstore setup --only kafka'); config: "
            f"{config_file}",
        )
    return cluster_id


def _text(out: str | bytes | None) -> str:
    if isinstance(out, bytes):
        return out.decode("utf-8", errors="replace")
    return out or ""


def _wipe(root: Path) -> None:
    """``--fresh``: delete the data and the recorded ports of either layout, inside ``root`` only."""
    _remove(root / _DATA_DIR)
    (root / _CLUSTER_FILE).unlink(missing_ok=True)
    for path in sorted(root.glob(f"{_NODE_PREFIX}*")):
        _remove(path)
    (root / _LAYOUT_FILE).unlink(missing_ok=True)


def _clear_dir(path: Path) -> None:
    _remove(path)
    path.mkdir(mode=0o700)


def _remove(path: Path) -> None:
    """Delete ``path``; a symlink is unlinked, never followed (its target stays untouched)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        # On Linux rmtree works on file descriptors and unlinks symlinks it meets without following
        # them; elsewhere a symlink swapped in mid-way could redirect it, so refuse.
        if not shutil.rmtree.avoids_symlink_attacks:
            raise StateDirError(f"cannot delete {path} safely on this platform; delete it by hand")
        shutil.rmtree(path)
    else:
        path.unlink()


def _wait_until_up(proc: subprocess.Popen[bytes], info: BrokerInfo, timeout_s: float) -> None:
    log_file = Path(info.log_file)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise BrokerError(
                f"the Kafka broker exited during start-up (exit code {proc.returncode})",
                detail=_tail_file(log_file),
                hint=f"full log: {log_file}",
            )
        if answers_metadata(info.bootstrap, timeout_s=2.0):
            return
        if time.monotonic() > deadline:
            raise BrokerError(
                f"the Kafka broker did not answer on {info.bootstrap} within {timeout_s:.0f}s",
                detail=_tail_file(log_file),
                hint=f"full log: {log_file}; a slow machine may need a longer --timeout",
            )
        time.sleep(0.2)  # poll interval of a condition with a deadline


def answers_metadata(bootstrap: str, *, timeout_s: float) -> bool:
    """True when a broker at ``bootstrap`` answers a metadata request within the timeout."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.connection.setup.timeout.ms": 1000,
        "logger": _null_logger(),  # librdkafka's connection-refused chatter is expected here
    }
    admin = AdminClient(conf)
    try:
        md = admin.list_topics(timeout=timeout_s)
    except Exception:  # KafkaException on timeout / transport failure: not up yet
        return False
    return bool(md.brokers)


def stop(state_dir: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> Stopped | None:
    """Stop the broker recorded in ``state_dir``: SIGTERM, then SIGKILL after ``timeout_s``.

    None when none was running (a record left by a broker that died is cleared). The data and the
    recorded ports stay for the next start.
    """
    info = read_state(state_dir)
    if info is None:
        return None
    stopped = None
    if is_running(info):
        forced = _terminate(info.pid, timeout_s=timeout_s)
        stopped = Stopped(info.pid, info.bootstrap, forced)
    with contextlib.suppress(FileNotFoundError):
        (broker_dir(state_dir) / _STATE_FILE).unlink()
    return stopped


def _terminate(pid: int, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, SIGKILL after ``timeout_s``; True when it had to be killed."""
    return processes.terminate(pid, timeout_s=timeout_s, stuck=BrokerError)


def _null_logger() -> logging.Logger:
    logger = logging.getLogger("logstore.kafka.probe")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


# A local cluster of several nodes (``start_cluster``). Its layout in ``<state_dir>/broker``:
#   nodes.json   the cluster id and every node's ports, kept after ``stop`` (like cluster.json)
#   node-<id>/   one node: data/, server.properties, node.log (+ node.log.1), node.json (running)
_NODE_LOG = "node.log"
MAX_CLUSTER_NODES = 9
CLUSTER_REPLICATION = 3
CLUSTER_MIN_ISR = 2


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    bootstrap: str  # every node's client address
    started: tuple[NodeInfo, ...]  # the nodes this call launched
    already_running: tuple[int, ...]  # node ids that were running before the call
    # True when this start kept the data (topics, records) of an earlier one.
    reused_data: bool


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    port: int
    controller_port: int
    pid: int | None  # None: not running
    alive: bool
    log_file: str
    data_dir: str

    @property
    def bootstrap(self) -> str:
        return f"{_HOST}:{self.port}"


@dataclass(frozen=True)
class Health:
    """What a node's metadata says about the cluster."""

    brokers: tuple[int, ...]  # registered, unfenced broker ids
    under_replicated: int  # partitions whose in-sync replicas are fewer than their replicas
    offline: int  # partitions without a leader


def recorded_nodes(state_dir: Path) -> int | None:
    """How many nodes the kept data of ``state_dir`` belongs to; None when it holds none."""
    layout = read_layout(state_dir)
    if layout is not None:
        return len(layout.nodes)
    single = read_cluster(state_dir) is not None or read_state(state_dir) is not None
    if single or (broker_dir(state_dir) / _DATA_DIR / _META).exists():
        return 1
    return None


def node_properties(node: NodePorts, nodes: Sequence[NodePorts], data_dir: Path) -> str:
    """``server.properties`` of one node of a local cluster: every node is a voter of the
    controller quorum and a broker; topics default to replication 3 and 2 in-sync replicas."""
    voters = ",".join(f"{n.node_id}@{_HOST}:{n.controller_port}" for n in nodes)
    props = _base_props(
        node_id=node.node_id,
        port=node.port,
        controller_port=node.controller_port,
        voters=voters,
        data_dir=data_dir,
    )
    replication, min_isr = str(CLUSTER_REPLICATION), str(CLUSTER_MIN_ISR)
    props.update(
        {
            "default.replication.factor": replication,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min_isr,
            # A replica that lost data must never become leader.
            "unclean.leader.election.enable": "false",
            # Few threads: several nodes share a small machine.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "background.threads": "2",
            "log.cleaner.threads": "1",
            "num.recovery.threads.per.data.dir": "1",
        }
    )
    return _properties_text(props)


def _refuse_running_nodes(state_dir: Path) -> None:
    running = _running_nodes(state_dir, read_layout(state_dir))
    if running:
        raise BrokerError(
            f"a local cluster is running (nodes {_ids(running)}, pids "
            f"{', '.join(str(i.pid) for i in running.values())})",
            hint="use it, or run 'logstore broker stop' first",
        )


def _ids(ids: Iterator[int] | Mapping[int, Any] | Sequence[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids))


def start_cluster(
    state_dir: Path,
    *,
    nodes: int = 3,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
) -> ClusterInfo:
    """Launch a KRaft cluster of ``nodes`` nodes (each a controller and a broker) over the data of
    the last start, and wait until every node answers and sees all of them.

    The first start (and every ``fresh`` one, which deletes the data of either layout first)
    formats each node's storage with one new cluster id and takes free ports; a later start keeps
    the data, the node count and the ports. When some nodes still run, only the others start.
    The data of a single broker or of a cluster of another size is never reused silently: that is
    an error unless ``fresh``.
    """
    if not MIN_CLUSTER_NODES <= nodes <= MAX_CLUSTER_NODES:
        raise InvalidInputError(
            f"a local cluster has {MIN_CLUSTER_NODES} to {MAX_CLUSTER_NODES} nodes, not {nodes}",
            hint="use --brokers 1 for a single broker, or --brokers 3",
        )
    state_dir = state_dir.absolute()  # the nodes' files are named in node.json and their argv
    root = state_subdir(state_dir, "broker")
    single = read_state(state_dir)
    if single is not None and is_running(single):
        raise BrokerError(
            f"a local single broker is already running (pid {single.pid}, {single.bootstrap})",
            hint="stop it first with 'logstore broker stop'",
        )
    layout = read_layout(state_dir)
    running = _running_nodes(state_dir, layout)
    if fresh:
        if running:
            raise BrokerError(
                f"--fresh would delete the data of running nodes ({_ids(running)})",
                hint="run 'logstore broker stop' first",
            )
        (root / _STATE_FILE).unlink(missing_ok=True)
        _wipe(root)
        layout = None
    elif layout is None and recorded_nodes(state_dir) == 1:
        raise BrokerError(
            f"{root} holds the data of a single local broker, not of a {nodes}-node cluster",
            hint="restart that broker with 'logstore broker start --brokers 1'; or add --fresh to "
            f"delete its topics and records and start an empty {nodes}-node cluster",
        )
    elif layout is not None and len(layout.nodes) != nodes:
        raise BrokerError(
            f"{root} holds a local {len(layout.nodes)}-node cluster, not a {nodes}-node one",
            hint=f"restart it with '--brokers {len(layout.nodes)}'; or add --fresh to delete its "
            f"topics and records and start an empty {nodes}-node cluster",
        )
    if layout is not None and len(running) == len(layout.nodes):
        raise BrokerError(
            f"a local {nodes}-node cluster is already running ({layout.bootstrap})",
            hint="use it, or run 'logstore broker stop' first",
        )
    if running and layout is None:  # launched by a start that never finished: unknown ports
        raise BrokerError(
            f"nodes {_ids(running)} run, but {root / _LAYOUT_FILE} does not record the cluster",
            hint="stop them with 'logstore broker stop', then start again",
        )
    if running:  # some nodes run: the others rejoin on the recorded ports, which cannot move
        assert layout is not None
        ports = layout.nodes
        for node in ports:
            if node.node_id not in running:
                _check_node_ports_free(node)
    else:
        ports = _cluster_ports(layout, nodes)
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.KAFKA)

    to_start = [n for n in ports if n.node_id not in running]
    cluster_id, reused = _cluster_identity(state_dir, layout, to_start)
    launch = [(node, _write_node_config(state_dir, node, ports, classpath)) for node in to_start]
    unformatted = [
        (node, jvm, config) for node, (jvm, config) in launch
        if _cluster_id(node_dir(state_dir, node.node_id) / _DATA_DIR) is None
    ]  # fmt: skip
    if unformatted:  # in parallel: each is a JVM start
        with ThreadPoolExecutor(len(unformatted)) as pool:
            list(
                pool.map(
                    lambda item: _format(
                        item[1], item[2], node_dir(state_dir, item[0].node_id) / _DATA_DIR,
                        timeout_s, cluster_id,
                    ),
                    unformatted,
                )
            )  # fmt: skip
    started: list[tuple[subprocess.Popen[bytes], NodeInfo]] = []
    try:
        for node, (jvm, config) in launch:
            started.append(_launch_node(state_dir, node, jvm, config))
        _wait_nodes_up(started, len(ports), timeout_s)
    except BaseException:  # failed, timed out or interrupted: leave no node and no stale state
        for proc, info in started:
            _terminate(proc.pid)
            (node_dir(state_dir, info.node_id) / _NODE_STATE).unlink(missing_ok=True)
        raise
    new_layout = ClusterLayout(cluster_id, tuple(ports))
    _write_private(root / _LAYOUT_FILE, _layout_json(new_layout))
    return ClusterInfo(
        cluster_id=cluster_id,
        bootstrap=new_layout.bootstrap,
        started=tuple(info for _, info in started),
        already_running=tuple(sorted(running)),
        reused_data=reused or bool(running),
    )


def start_node(
    state_dir: Path,
    node_id: int,
    *,
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
) -> NodeInfo:
    """Restart one stopped node of the recorded cluster on its own ports and data, and wait until
    it answers and sees every running node."""
    state_dir = state_dir.absolute()
    layout = _require_layout(state_dir)
    node = layout.node(node_id)
    running = _running_nodes(state_dir, layout)
    if node_id in running:
        info = running[node_id]
        raise BrokerError(
            f"node {node_id} of the local cluster is already running (pid {info.pid}, "
            f"{info.bootstrap})",
            hint=f"stop it first with 'logstore broker stop --node {node_id}'",
        )
    _check_node_ports_free(node)
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.KAFKA)
    jvm, config = _write_node_config(state_dir, node, layout.nodes, classpath)
    data_dir = node_dir(state_dir, node_id) / _DATA_DIR
    found = _cluster_id(data_dir)
    if found is None:  # its data was deleted: it rejoins empty and copies the replicas back
        _format(jvm, config, data_dir, timeout_s, layout.cluster_id)
    elif found != layout.cluster_id:
        raise _foreign_data(data_dir, found, layout.cluster_id)
    proc, info = _launch_node(state_dir, node, jvm, config)
    try:
        _wait_nodes_up([(proc, info)], len(running) + 1, timeout_s)
    except BaseException:
        _terminate(proc.pid)
        (node_dir(state_dir, node_id) / _NODE_STATE).unlink(missing_ok=True)
        raise
    return info


def stop_node(
    state_dir: Path, node_id: int, *, kill: bool = False, timeout_s: float = STOP_TIMEOUT_S
) -> Stopped | None:
    """Stop one node of the recorded cluster: SIGTERM (SIGKILL after ``timeout_s``), or SIGKILL
    at once with ``kill`` (a crash, for fault tests). None when it was not running."""
    layout = _require_layout(state_dir)
    node = layout.node(node_id)
    info = read_node_state(state_dir, node_id)
    stopped = None
    if info is not None and node_is_running(info):
        if kill:
            processes.kill(info.pid, BrokerError)
            forced = True
        else:
            forced = _terminate(info.pid, timeout_s=timeout_s)
        stopped = Stopped(info.pid, f"{_HOST}:{node.port}", forced)
    (node_dir(state_dir, node_id) / _NODE_STATE).unlink(missing_ok=True)
    return stopped


def stop_cluster(state_dir: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> dict[int, Stopped]:
    """Stop every running node of the recorded cluster (node id -> how it stopped); keep the data
    and ports for the next start.

    All get SIGTERM at once: a node stopped after the quorum lost its majority would wait for a
    controller that never answers its controlled shutdown.
    """
    layout = read_layout(state_dir)
    running = _running_nodes(state_dir, layout)
    for info in running.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    stopped: dict[int, Stopped] = {}
    for node_id, info in sorted(running.items()):
        forced = not _wait_gone(info.pid, max(deadline - time.monotonic(), 0.0))
        if forced:
            _terminate(info.pid, timeout_s=0)
        stopped[node_id] = Stopped(info.pid, info.bootstrap, forced)
        (node_dir(state_dir, node_id) / _NODE_STATE).unlink(missing_ok=True)
    return stopped


def cluster_status(state_dir: Path) -> tuple[NodeStatus, ...] | None:
    """Every node of the recorded cluster, running or not; None when ``state_dir`` holds none."""
    layout = read_layout(state_dir)
    if layout is None:
        return None
    running = _running_nodes(state_dir, layout)
    out = []
    for node in layout.nodes:
        info = running.get(node.node_id)
        path = node_dir(state_dir, node.node_id)
        out.append(
            NodeStatus(
                node_id=node.node_id,
                port=node.port,
                controller_port=node.controller_port,
                pid=info.pid if info else None,
                alive=info is not None,
                log_file=str(path / _NODE_LOG),
                data_dir=str(path / _DATA_DIR),
            )
        )
    return tuple(out)


def cluster_health(bootstrap: str, *, timeout_s: float) -> Health | None:
    """The cluster as the metadata of ``bootstrap`` shows it; None when no node answers."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.connection.setup.timeout.ms": 1000,
        "logger": _null_logger(),
    }
    try:
        md = AdminClient(conf).list_topics(timeout=timeout_s)
    except Exception:  # KafkaException on timeout / transport failure: nobody answers
        return None
    under = offline = 0
    for topic in md.topics.values():
        for part in topic.partitions.values():
            under += len(part.isrs) < len(part.replicas)
            offline += part.leader < 0
    return Health(tuple(sorted(md.brokers)), under, offline)


def _require_layout(state_dir: Path) -> ClusterLayout:
    layout = read_layout(state_dir)
    if layout is None:
        raise InvalidInputError(
            f"{broker_dir(state_dir)} holds no local cluster: --node needs one",
            hint="start one with 'logstore broker start --brokers 3'",
        )
    return layout


def _check_node_ports_free(node: NodePorts) -> None:
    for port, what in ((node.port, "client"), (node.controller_port, "controller")):
        if not port_is_free(port):
            raise BrokerError(
                f"the {what} port {port} of node {node.node_id} (kept from its last start) is "
                "now used by another process",
                hint=f"free port {port} (the other nodes know the node by it); or 'logstore "
                "broker stop' and 'logstore broker start --fresh' for a new, empty cluster",
            )


def _cluster_ports(layout: ClusterLayout | None, count: int) -> tuple[NodePorts, ...]:
    """Every node's ports when no node runs: the recorded ones where possible, else free ones.

    A client port that is taken is an error (clients know it); controller ports are internal and
    move silently (every node gets the new voter list).
    """
    clients: list[int] = []
    controllers: list[int] = []
    for node in layout.nodes if layout else ():
        if not port_is_free(node.port):
            raise BrokerError(
                f"the client port {node.port} of node {node.node_id} (kept from its last start) "
                "is now used by another process",
                hint=f"free port {node.port}; or 'logstore broker start --fresh' for a new, empty "
                "cluster on free ports",
            )
        clients.append(node.port)
        taken = node.controller_port in clients or not port_is_free(node.controller_port)
        controllers.append(0 if taken else node.controller_port)
    clients += [0] * (count - len(clients))
    controllers += [0] * (count - len(controllers))
    used = set(clients) | set(controllers)
    free = iter(p for p in _free_ports(2 * count) if p not in used)
    return tuple(
        NodePorts(i + 1, clients[i] or next(free), controllers[i] or next(free))
        for i in range(count)
    )


def _cluster_identity(
    state_dir: Path, layout: ClusterLayout | None, to_start: Sequence[NodePorts]
) -> tuple[str, bool]:
    """The cluster id the nodes share, and whether any of them already holds data."""
    found = {
        node.node_id: cid
        for node in to_start
        if (cid := _cluster_id(node_dir(state_dir, node.node_id) / _DATA_DIR)) is not None
    }
    cluster_id = layout.cluster_id if layout else next(iter(found.values()), new_cluster_id())
    for node_id, cid in found.items():
        if cid != cluster_id:
            raise _foreign_data(node_dir(state_dir, node_id) / _DATA_DIR, cid, cluster_id)
    return cluster_id, bool(found)


def _foreign_data(data_dir: Path, found: str, expected: str) -> BrokerError:
    return BrokerError(
        f"{data_dir} belongs to Kafka cluster {found}, not to the local cluster {expected}",
        hint="start a new, empty cluster with 'logstore broker start --brokers 3 --fresh'",
    )


def _write_node_config(
    state_dir: Path, node: NodePorts, nodes: Sequence[NodePorts], classpath: list[Path]
) -> tuple[list[str], Path]:
    path = state_subdir(state_dir, "broker", f"{_NODE_PREFIX}{node.node_id}")
    data_dir = state_subdir(state_dir, "broker", path.name, _DATA_DIR)
    config = path / "server.properties"
    _write_private(config, node_properties(node, nodes, data_dir))
    return _jvm_args(classpath, path, _NODE_HEAP), config


def _launch_node(
    state_dir: Path, node: NodePorts, jvm: list[str], config: Path
) -> tuple[subprocess.Popen[bytes], NodeInfo]:
    path = node_dir(state_dir, node.node_id)
    log_file = path / _NODE_LOG
    proc = processes.launch([*jvm, _MAIN_CLASS, str(config)], log_file)
    info = NodeInfo(
        node_id=node.node_id,
        pid=proc.pid,
        bootstrap=f"{_HOST}:{node.port}",
        controller=f"{_HOST}:{node.controller_port}",
        log_file=str(log_file),
        data_dir=str(path / _DATA_DIR),
        config_file=str(config),
        started_at=time.time(),
    )
    try:
        _write_private(path / _NODE_STATE, json.dumps(asdict(info), indent=2))
    except BaseException:
        _terminate(proc.pid)
        raise
    return proc, info


def _wait_nodes_up(
    started: Sequence[tuple[subprocess.Popen[bytes], NodeInfo]], brokers: int, timeout_s: float
) -> None:
    """Until every started node answers metadata and sees ``brokers`` brokers registered."""
    deadline = time.monotonic() + timeout_s
    waiting = list(started)
    while waiting:
        proc, info = waiting[0]
        if proc.poll() is not None:
            raise BrokerError(
                f"node {info.node_id} of the local cluster exited during start-up (exit code "
                f"{proc.returncode})",
                detail=_tail_file(Path(info.log_file)),
                hint=f"full log: {info.log_file}",
            )
        health = cluster_health(info.bootstrap, timeout_s=2.0)
        if health is not None and len(health.brokers) >= brokers:
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            seen = f"; it sees brokers {_ids(health.brokers)}" if health else ""
            raise BrokerError(
                f"node {info.node_id} of the local cluster did not answer on {info.bootstrap} "
                f"with all {brokers} brokers within {timeout_s:.0f}s{seen}",
                detail=_tail_file(Path(info.log_file)),
                hint=f"full log: {info.log_file}; a slow machine may need a longer --timeout",
            )
        time.sleep(0.2)  # poll interval of a condition with a deadline


def _layout_json(layout: ClusterLayout) -> str:
    return json.dumps(
        {"cluster_id": layout.cluster_id, "nodes": [asdict(n) for n in layout.nodes]}, indent=2
    )
