"""A real single-node Apache Kafka broker (KRaft, broker+controller) on loopback.

Used for development, the demo and the test-suite. It runs ``kafka.Kafka`` from the jars resolved by
``logstore_cli.jvm.deps`` after ``kafka.tools.StorageTool format``; no Docker, no downloads at start.
State (pid, bootstrap address, log file) lives in ``<state_dir>/broker/broker.json`` so that
``stop`` and ``status`` find exactly the process ``start`` launched.

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
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from logstore_cli.errors import BrokerError, SetupError

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
_STATE_FILE = "broker.json"
_MAIN_CLASS = "kafka.Kafka"
SASL_LISTENER = "SASL_PLAINTEXT"
_PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


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


def broker_dir(state_dir: Path) -> Path:
    return state_dir / "broker"


def read_state(state_dir: Path) -> BrokerInfo | None:
    path = broker_dir(state_dir) / _STATE_FILE
    try:
        return BrokerInfo(**json.loads(path.read_text("utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise BrokerError(
            f"the broker state file {path} is unreadable: {exc}",
            hint=f"stop any stray broker by hand, then delete {path}",
        ) from exc


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
        s.bind(("127.0.0.1", 0))
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
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
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
        sasl = f"{SASL_LISTENER}://127.0.0.1:{sasl_port}"
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
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
    sasl_plain_users: Mapping[str, str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> BrokerInfo:
    """Format storage, launch the broker, and wait until it answers a metadata request.

    ``sasl_plain_users`` (user -> password) adds a ``SASL_PLAINTEXT`` listener with the PLAIN
    mechanism on a free port (``BrokerInfo.sasl_bootstrap``); ``extra_properties`` are added to the
    broker's ``server.properties`` last (e.g. ``authorizer.class.name``, ``super.users``). Readiness
    is checked on the ``PLAINTEXT`` listener, whose principal is ``User:ANONYMOUS``.
    """
    existing = read_state(state_dir)
    if existing is not None and is_running(existing):
        raise BrokerError(
            f"a local broker is already running (pid {existing.pid}, {existing.bootstrap})",
            hint="use it, or run 'logstore broker stop' first",
        )
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.KAFKA)

    root = broker_dir(state_dir)
    data_dir = root / "data"
    # A fresh broker each start: the local broker is for development and tests, and a stale
    # KRaft log from an earlier cluster id would refuse to start.
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    port = port or free_port()
    controller_port = free_port()
    sasl_port = free_port() if sasl_plain_users is not None else None
    config_file = root / "server.properties"
    config_text = server_properties(
        port, controller_port, data_dir, sasl_port=sasl_port,
        sasl_plain_users=sasl_plain_users, extra_properties=extra_properties,
    )  # fmt: skip
    config_file.touch(mode=0o600)  # it may hold the PLAIN users' passwords
    config_file.chmod(0o600)
    config_file.write_text(config_text, "utf-8")
    log_file = root / "broker.log"
    jvm = _jvm_args(classpath, root)

    fmt = subprocess.run(
        [*jvm, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
         "-c", str(config_file)],
        capture_output=True, text=True, check=False, timeout=timeout_s,
    )  # fmt: skip
    if fmt.returncode != 0:
        raise BrokerError(
            "formatting the broker's storage failed",
            detail=_tail(fmt.stdout + fmt.stderr),
            hint=f"check Java 17 and the broker jars ('logstore setup --only kafka'); config: "
            f"{config_file}",
        )

    with log_file.open("wb") as log:
        proc = subprocess.Popen(
            [*jvm, _MAIN_CLASS, str(config_file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the shell that started it must not kill it
        )  # fmt: skip
    info = BrokerInfo(
        pid=proc.pid,
        bootstrap=f"127.0.0.1:{port}",
        controller=f"127.0.0.1:{controller_port}",
        log_file=str(log_file),
        data_dir=str(data_dir),
        config_file=str(config_file),
        started_at=time.time(),
        sasl_bootstrap=None if sasl_port is None else f"127.0.0.1:{sasl_port}",
    )
    state_file = root / _STATE_FILE
    state_file.write_text(json.dumps(asdict(info), indent=2), "utf-8")
    try:
        _wait_until_up(proc, info, timeout_s)
    except BaseException:  # failed, timed out or interrupted: leave no broker and no stale state
        _terminate(proc.pid)
        state_file.unlink(missing_ok=True)
        raise
    return info


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
                hint=f"full log: {log_file}",
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


def stop(state_dir: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> BrokerInfo | None:
    """Stop the broker recorded in ``state_dir``; None when none was running."""
    info = read_state(state_dir)
    if info is None:
        return None
    if is_running(info):
        _terminate(info.pid, timeout_s=timeout_s)
    with contextlib.suppress(FileNotFoundError):
        (broker_dir(state_dir) / _STATE_FILE).unlink()
    return info


def _terminate(pid: int, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.05)


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
