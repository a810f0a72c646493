"""A real HDFS on loopback for development and the test-suite: Hadoop's MiniDFSCluster, one
NameNode and one DataNode in one JVM (issue 19).

Why this and not a fake: HDFS's guarantees (an exclusive create, an atomic rename with or without
overwrite) are what a lease and Delta's ``HDFSLogStore`` rely on, and only the real NameNode has
them. ``org.apache.hadoop:hadoop-client-minicluster`` 3.4.1 (the release of pyspark 4.0.1's own
client jars; ``jvm/hdfs-minicluster.xml``) comes from Maven Central into the jar cache, and a small
Java main (``storage/java/MiniHdfs.java``, run by Java's single-file source launcher: nothing to
build) starts it in its own JVM, so its classpath never meets Spark's.

- ``start(state_dir)``: the NameNode's RPC on ``127.0.0.1:<free port>`` (every other listener on a
  free loopback port, WebHDFS off), its data in ``<state_dir>/data`` (formatted on the first start
  and by ``fresh``, kept otherwise), ready when the cluster says so (NameNode out of safe mode, the
  DataNode registered; the line ``READY`` in its log) and the RPC port answers. ``server.json``
  records the pid and URI.
- ``stop(state_dir)``: SIGTERM (the JVM's shutdown hook stops the cluster), SIGKILL after a grace
  period, to exactly the recorded process.

Run it as ``scripts/hdfs-server.sh start|stop|status`` or ``python -m
logstore_cli.storage.hdfs_server``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import sys
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from logstore_cli import processes
from logstore_cli.errors import LogstoreError, StateDirError
from logstore_cli.jvm.java import java_executable
from logstore_cli.paths import private_dir, state_home

MAIN_SOURCE = "MiniHdfs.java"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
_STATE_FILE = "server.json"
_LOG_FILE = "server.log"
_DATA_DIR = "data"
_READY = "READY hdfs://"


class HdfsServerError(LogstoreError):
    """The local HDFS could not be started or stopped."""


@dataclass(frozen=True)
class HdfsServerInfo:
    pid: int
    uri: str  # hdfs://127.0.0.1:<port>: the NameNode, what Spark, delta-rs and clients take
    data_dir: str
    log_file: str
    reused_data: bool


def default_state_dir() -> Path:
    return state_home() / "hdfs-server"


def status(state_dir: Path | None = None) -> HdfsServerInfo | None:
    """The running server recorded in ``state_dir`` (None when none runs)."""
    info = _read_state(state_dir or default_state_dir())
    return info if info is not None and _is_ours(info) else None


def start(
    state_dir: Path | None = None,
    *,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    classpath: list[Path] | None = None,
) -> HdfsServerInfo:
    """Start the cluster over the data of the last start (formatted the first time, or when
    ``fresh`` deletes it first) and wait until it is ready."""
    state_dir = private_dir((state_dir or default_state_dir()).absolute())
    running = status(state_dir)
    if running is not None:
        raise HdfsServerError(
            f"a local HDFS is already running (pid {running.pid}, {running.uri})",
            hint="use it, or stop it first: scripts/hdfs-server.sh stop",
        )
    data_dir = state_dir / _DATA_DIR
    if fresh:
        _wipe(data_dir)
    reused = data_dir.is_dir() and any(data_dir.iterdir())
    private_dir(data_dir)
    if classpath is None:
        from logstore_cli.jvm.deps import Classpath, ensure_classpath

        classpath = ensure_classpath(Classpath.HDFS)
    (port,) = processes.free_ports(1)
    source = resources.files("logstore_cli.storage").joinpath("java", MAIN_SOURCE)
    with resources.as_file(source) as main:
        command = [
            java_executable(), "-Xmx512m", "-XX:+UseSerialGC",
            "-cp", os.pathsep.join(str(j) for j in classpath),
            str(main), str(port), str(data_dir), "false" if reused else "true",
        ]  # fmt: skip
        log = state_dir / _LOG_FILE
        proc = processes.launch(command, log)
    info = HdfsServerInfo(proc.pid, f"hdfs://{processes.HOST}:{port}", str(data_dir), str(log),
                          reused)  # fmt: skip
    try:
        processes.write_private(state_dir / _STATE_FILE, json.dumps(asdict(info)))
        deadline = time.monotonic() + timeout_s
        while not (_said_ready(log) and _answers(port)):
            if proc.poll() is not None:
                raise HdfsServerError(
                    f"the local HDFS exited at start (exit {proc.returncode})",
                    hint=f"see {log}",
                    detail=processes.tail_file(log),
                )
            if time.monotonic() >= deadline:
                raise HdfsServerError(
                    f"the local HDFS was not ready within {timeout_s:.0f} s",
                    hint=f"see {log}; a slow machine may need a longer timeout",
                    detail=processes.tail_file(log),
                )
            time.sleep(0.1)  # poll interval of a condition with a deadline
    except BaseException:  # failed, timed out or interrupted: leave no JVM and no stale state
        processes.terminate(proc.pid, timeout_s=STOP_TIMEOUT_S, stuck=HdfsServerError)
        with contextlib.suppress(FileNotFoundError):
            (state_dir / _STATE_FILE).unlink()
        raise
    return info


def stop(state_dir: Path | None = None, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the server recorded in ``state_dir``; False when none ran. The data stays."""
    state_dir = state_dir or default_state_dir()
    info = _read_state(state_dir)
    if info is None:
        return False
    ran = _is_ours(info)
    if ran:
        processes.terminate(info.pid, timeout_s=timeout_s, stuck=HdfsServerError)
    with contextlib.suppress(FileNotFoundError):
        (state_dir / _STATE_FILE).unlink()
    return ran


def _is_ours(info: HdfsServerInfo) -> bool:
    """The recorded pid still runs our cluster (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(arg.endswith(MAIN_SOURCE.encode()) for arg in cmdline) and (
        info.data_dir.encode() in cmdline
    )


def _said_ready(log: Path) -> bool:
    try:
        with log.open("rb") as f:
            return any(line.startswith(_READY.encode()) for line in f)
    except OSError:
        return False


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((processes.HOST, port), 1.0):
        return True
    return False


def _read_state(state_dir: Path) -> HdfsServerInfo | None:
    path = state_dir / _STATE_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        return HdfsServerInfo(**data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise HdfsServerError(
            f"the HDFS state file {path} is unreadable: {exc}",
            hint=f"delete it (the data stays): {path}",
        ) from None


def _wipe(data_dir: Path) -> None:
    try:
        st = data_dir.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode) or not shutil.rmtree.avoids_symlink_attacks:
        raise StateDirError(f"cannot delete {data_dir} safely: not a plain directory")
    shutil.rmtree(data_dir)


def main(argv: list[str]) -> int:
    """``start [--fresh]`` | ``stop`` | ``status``."""
    command = argv[0] if argv else ""
    state_dir = default_state_dir()
    try:
        if command == "start":
            info = start(state_dir, fresh="--fresh" in argv[1:])
            kept = " (kept the data of the last start)" if info.reused_data else ""
            print(f"HDFS (MiniDFSCluster, Hadoop 3.4.1) at {info.uri}, pid {info.pid}{kept}")
        elif command == "stop":
            print("stopped" if stop(state_dir) else "no local HDFS was running")
        elif command == "status":
            found = status(state_dir)
            print(f"running at {found.uri}, pid {found.pid}" if found else "not running")
            return 0 if found else 1
        else:
            print("usage: hdfs-server.sh start [--fresh]|stop|status", file=sys.stderr)
            return 2
    except LogstoreError as exc:
        print(exc.plain(), file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
