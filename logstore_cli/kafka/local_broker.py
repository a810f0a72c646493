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
import errno
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
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from logstore_cli.errors import BrokerError, SetupError, StateDirError
from logstore_cli.paths import check_state_dir, state_subdir

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
KILL_TIMEOUT_S = 10.0  # after SIGKILL, for the kernel to reap it
_STATE_FILE = "broker.json"
_CLUSTER_FILE = "cluster.json"
_DATA_DIR = "data"
_LOG_FILE = "broker.log"
_META = "meta.properties"
_MAIN_CLASS = "kafka.Kafka"
SASL_LISTENER = "SASL_PLAINTEXT"
_PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_HOST = "127.0.0.1"


@dataclass(frozen=True)
class BrokerInfo:
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


@dataclass(frozen=True)
class Stopped:
    """A broker ``stop`` ended; ``forced`` when it ignored SIGTERM and was killed."""

    pid: int
    bootstrap: str
    forced: bool


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


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise SetupError(
            "no Java runtime found (JAVA_HOME is unset and 'java' is not on PATH)",
            hint="install a Java 17 runtime (e.g. 'apt-get install openjdk-17-jre-headless')",
        )
    return java


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: all bound at once, so the kernel cannot hand one out twice."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind((_HOST, 0))
        return [int(s.getsockname()[1]) for s in socks]


def port_is_free(port: int) -> bool:
    """True when nothing listens on ``127.0.0.1:port``.

    SO_REUSEADDR, as the JVM's own listener uses: connections of a stopped broker that linger in
    TIME_WAIT do not make its port look taken.
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((_HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


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
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        # A static quorum (no voter set in the metadata log): the controller may change its port
        # between starts when the old one is taken.
        "controller.quorum.voters": f"1@{_HOST}:{controller_port}",
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


def _jvm_args(classpath: list[Path], log_dir: Path) -> list[str]:
    log4j = resources.files("logstore_cli.kafka").joinpath("log4j2.properties")
    return [
        java_executable(),
        "-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
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
    if fresh:
        _wipe(root)
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
    with _new_log(log_file) as log:
        proc = subprocess.Popen(
            [*jvm, _MAIN_CLASS, str(config_file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the shell that started it must not kill it
        )  # fmt: skip
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


def _format(jvm: list[str], config_file: Path, data_dir: Path, timeout_s: float) -> str:
    """Format empty storage with a new cluster id; on failure leave ``data_dir`` unformatted."""
    cluster_id = new_cluster_id()
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
    """``--fresh``: delete the data and the recorded ports, inside ``root`` only."""
    _remove(root / _DATA_DIR)
    (root / _CLUSTER_FILE).unlink(missing_ok=True)


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


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a 0600 file (readers never see half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _new_log(path: Path) -> Iterator[Any]:
    """A new, empty broker log; the previous one is kept as ``<name>.1``."""
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as log:
        yield log


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
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout_s):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not _wait_gone(pid, KILL_TIMEOUT_S):
        raise BrokerError(
            f"the broker process {pid} is still there {KILL_TIMEOUT_S:.0f}s after SIGKILL",
            hint=f"the kernel has not reaped it (stuck in I/O?): check 'ps -o stat {pid}'",
        )
    return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # poll interval of a condition with a deadline
    return True


def _alive(pid: int) -> bool:
    # Reap it if it is our child, so it does not linger as a zombie that looks alive.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _null_logger() -> logging.Logger:
    logger = logging.getLogger("logstore.kafka.probe")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _tail_file(path: Path, lines: int = 30) -> str:
    try:
        return _tail(path.read_text("utf-8", errors="replace"), lines)
    except OSError:
        return f"(no log at {path})"
