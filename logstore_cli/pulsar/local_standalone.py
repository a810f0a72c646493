"""A local Apache Pulsar standalone for development and tests (issue 23): ``logstore pulsar start``.

Pulsar's own ``PulsarStandaloneStarter`` (one broker, one bookie, the RocksDB metadata store) from
Maven Central jars (``jvm/pulsar-standalone.xml``), in its own JVM like the Kafka broker, on
loopback only, its data, configuration and log in ``<state dir>/pulsar/``. Ready means the
``public/default`` namespace exists (the admin API answers it), not merely that a port answers:
the standalone opens its ports before it has created the namespace topics live in.

A restart keeps the data and the ports of the last start (clients find the same topics at the
same address); ``fresh`` deletes both first. Stdlib only (the admin API is plain HTTP): the
commands that use this module start fast and need no Pulsar client.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from logstore_cli import processes
from logstore_cli.errors import BrokerError, LogstoreError, StateDirError
from logstore_cli.jvm.java import java_executable
from logstore_cli.paths import state_subdir

MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
HOST = processes.HOST
NAMESPACE = "public/default"
_DIR = "pulsar"
_DATA_DIR = "data"
_STATE_FILE = "pulsar.json"
_PORTS_FILE = "ports.json"
_CONFIG_FILE = "standalone.conf"
_LOG_FILE = "pulsar.log"


@dataclass(frozen=True)
class Ports:
    """What a restart keeps besides the data: the client, admin (HTTP) and bookie ports."""

    broker: int
    web: int
    bookie: int


@dataclass(frozen=True)
class PulsarInfo:
    """A running standalone, as ``start`` launched it (``pulsar.json``)."""

    pid: int
    service_url: str  # pulsar://127.0.0.1:<port>, what clients and 'log-store.address' take
    web_url: str  # http://127.0.0.1:<port>, the admin REST API
    log_file: str
    data_dir: str
    config_file: str
    started_at: float
    reused_data: bool = False


@dataclass(frozen=True)
class Stopped:
    pid: int
    service_url: str
    forced: bool  # SIGKILL was needed


def pulsar_dir(state_dir: Path) -> Path:
    return state_dir / _DIR


def standalone_conf(ports: Ports) -> str:
    """The broker's configuration: loopback, a single bookie's quorum, and what logstore relies on
    stated rather than left to defaults (topics are created by logstore, never on first use)."""
    props = {
        "clusterName": "standalone",
        "bindAddress": HOST,
        "advertisedAddress": HOST,
        "brokerServicePort": str(ports.broker),
        "webServicePort": str(ports.web),
        "managedLedgerDefaultEnsembleSize": "1",
        "managedLedgerDefaultWriteQuorum": "1",
        "managedLedgerDefaultAckQuorum": "1",
        "allowAutoTopicCreation": "false",
        # The Pulsar Functions worker and stream storage are off (--no-functions-worker,
        # --no-stream-storage); the transaction coordinator is not used either.
        "transactionCoordinatorEnabled": "false",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def read_state(state_dir: Path) -> PulsarInfo | None:
    data = _read_json(pulsar_dir(state_dir) / _STATE_FILE)
    if data is None:
        return None
    try:
        return PulsarInfo(**data)
    except TypeError as exc:
        raise _unreadable(pulsar_dir(state_dir) / _STATE_FILE, exc) from None


def last_urls(state_dir: Path) -> tuple[str, str] | None:
    """(service URL, admin URL) of the local standalone's last start (``admin.admin_url_for``'s
    ``local``): a restart keeps its ports, so a stopped one still names where it will be; None when
    it never started here or its state cannot be read."""
    try:
        info = read_state(state_dir)
    except LogstoreError:
        return None
    return (info.service_url, info.web_url) if info is not None else None


def read_ports(state_dir: Path) -> Ports | None:
    data = _read_json(pulsar_dir(state_dir) / _PORTS_FILE)
    if data is None:
        return None
    try:
        return Ports(**data)
    except TypeError as exc:
        raise _unreadable(pulsar_dir(state_dir) / _PORTS_FILE, exc) from None


def is_running(info: PulsarInfo) -> bool:
    """True when ``info.pid`` is alive and still our standalone (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MAIN_CLASS.encode() in cmdline and info.config_file.encode() in cmdline


def running(state_dir: Path) -> PulsarInfo | None:
    """The standalone recorded in ``state_dir`` if it still runs."""
    info = read_state(state_dir)
    return info if info is not None and is_running(info) else None


def start(
    state_dir: Path,
    *,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
) -> PulsarInfo:
    """Launch the standalone over the data of the last start and wait until ``public/default``
    exists; the first start (and every ``fresh`` one) takes free ports."""
    state_dir = state_dir.absolute()  # the files are named in pulsar.json and the JVM's argv
    root = state_subdir(state_dir, _DIR)
    existing = read_state(state_dir)
    if existing is not None:
        if is_running(existing):
            raise BrokerError(
                f"a local Pulsar is already running (pid {existing.pid}, {existing.service_url})",
                hint="use it, or run 'logstore pulsar stop' first",
            )
        (root / _STATE_FILE).unlink(missing_ok=True)  # left by a standalone that died
    if fresh:
        _wipe(root)
    ports = _choose_ports(read_ports(state_dir))
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.PULSAR)
    data_dir = state_subdir(state_dir, _DIR, _DATA_DIR)
    reused = any(data_dir.iterdir())
    config_file = root / _CONFIG_FILE
    processes.write_private(config_file, standalone_conf(ports))
    log_file = root / _LOG_FILE
    command = [
        java_executable(),
        "-Xms256m", "-Xmx768m", "-XX:+UseSerialGC",
        "-Dpulsar.log.dir=" + str(root),
        "-cp", os.pathsep.join(str(j) for j in classpath),
        MAIN_CLASS,
        "--config", str(config_file),
        "--no-functions-worker", "--no-stream-storage",
        "--bookkeeper-dir", str(data_dir / "bookkeeper"),
        "--metadata-dir", str(data_dir / "metadata"),
        "--bookkeeper-port", str(ports.bookie),
    ]  # fmt: skip
    proc = processes.launch(command, log_file)
    info = PulsarInfo(
        pid=proc.pid,
        service_url=f"pulsar://{HOST}:{ports.broker}",
        web_url=f"http://{HOST}:{ports.web}",
        log_file=str(log_file),
        data_dir=str(data_dir),
        config_file=str(config_file),
        started_at=time.time(),
        reused_data=reused,
    )
    state_file = root / _STATE_FILE
    try:
        processes.write_private(state_file, json.dumps(asdict(info), indent=2))
        _wait_until_up(proc, info, timeout_s)
    except BaseException:  # failed, timed out or interrupted: leave no JVM and no stale state
        processes.terminate(proc.pid, timeout_s=STOP_TIMEOUT_S, stuck=BrokerError)
        state_file.unlink(missing_ok=True)
        raise
    processes.write_private(root / _PORTS_FILE, json.dumps(asdict(ports), indent=2))
    return info


def stop(state_dir: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> Stopped | None:
    """SIGTERM, then SIGKILL after ``timeout_s``; None when none was running (a record left by one
    that died is cleared). The data and the ports stay for the next start."""
    info = read_state(state_dir)
    if info is None:
        return None
    stopped = None
    if is_running(info):
        forced = processes.terminate(info.pid, timeout_s=timeout_s, stuck=BrokerError)
        stopped = Stopped(info.pid, info.service_url, forced)
    with contextlib.suppress(FileNotFoundError):
        (pulsar_dir(state_dir) / _STATE_FILE).unlink()
    return stopped


def namespace_exists(web_url: str, namespace: str = NAMESPACE, *, timeout_s: float = 2.0) -> bool:
    """True when the admin API at ``web_url`` answers that ``namespace`` exists."""
    url = f"{web_url}/admin/v2/namespaces/{namespace}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait_until_up(proc: subprocess.Popen[bytes], info: PulsarInfo, timeout_s: float) -> None:
    log_file = Path(info.log_file)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise BrokerError(
                f"the Pulsar standalone exited during start-up (exit code {proc.returncode})",
                detail=processes.tail_file(log_file),
                hint=f"full log: {log_file}",
            )
        if namespace_exists(info.web_url):
            return
        if time.monotonic() > deadline:
            raise BrokerError(
                f"the Pulsar standalone did not create {NAMESPACE} within {timeout_s:.0f}s "
                f"(admin API {info.web_url})",
                detail=processes.tail_file(log_file),
                hint=f"full log: {log_file}; a slow machine may need a longer --timeout",
            )
        time.sleep(0.25)  # poll interval of a condition with a deadline


def _choose_ports(recorded: Ports | None) -> Ports:
    """The recorded ports (clients know the address), free ones the first time. A client-facing
    port that is taken is an error; the bookie's is internal and moves silently."""
    if recorded is None:
        broker, web, bookie = processes.free_ports(3)
        return Ports(broker, web, bookie)
    for port, what in ((recorded.broker, "broker"), (recorded.web, "admin (HTTP)")):
        if not processes.port_is_free(port):
            raise BrokerError(
                f"the local Pulsar's {what} port {port} is taken by another process",
                hint="stop what holds it, or start with --fresh (new ports, and the topics and "
                "messages deleted)",
            )
    if processes.port_is_free(recorded.bookie):
        return recorded
    return Ports(recorded.broker, recorded.web, processes.free_ports(1)[0])


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _unreadable(path, exc) from None
    if not isinstance(data, dict):
        raise _unreadable(path, ValueError("not a JSON object"))
    return data


def _unreadable(path: Path, exc: Exception) -> BrokerError:
    return BrokerError(
        f"the Pulsar state file {path} is unreadable: {exc}",
        hint=f"delete it (the data stays), then start again: {path}",
    )


def _wipe(root: Path) -> None:
    """Delete the data and recorded ports of the last start (never through a symlink)."""
    for name in (_DATA_DIR, _PORTS_FILE):
        path = root / name
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if not shutil.rmtree.avoids_symlink_attacks:
                raise StateDirError(f"cannot delete {path} safely on this platform")
            shutil.rmtree(path)
        else:
            path.unlink()
