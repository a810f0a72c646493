"""The local daemons' process and port helpers, shared by the Kafka broker/cluster
(``kafka/local_broker.py``) and the Spark standalone cluster (``jobs/standalone.py``).

Stdlib only: both callers run in commands that must start fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"  # the daemons listen on loopback only
KILL_TIMEOUT_S = 10.0  # after SIGKILL, for the kernel to reap it


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie does not count)."""
    # Reap it if it is our child, so a dead one does not linger as a zombie that looks alive.
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


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait until ``pid`` has exited, at most ``timeout_s``; False when it still runs."""
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # poll interval of a condition with a deadline
    return True


def kill(pid: int, stuck: Callable[..., Exception]) -> None:
    """SIGKILL, and wait until the kernel has reaped it; ``stuck(message, hint=...)`` is raised
    (the caller's domain error) when it is still there ``KILL_TIMEOUT_S`` later."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, KILL_TIMEOUT_S):
        raise stuck(
            f"process {pid} is still there {KILL_TIMEOUT_S:.0f}s after SIGKILL",
            hint=f"the kernel has not reaped it (stuck in I/O?): check 'ps -o stat {pid}'",
        )


def terminate(pid: int, *, timeout_s: float, stuck: Callable[..., Exception]) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``; True when it had to be killed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, timeout_s):
        return False
    kill(pid, stuck)
    return True


def launch(
    command: Sequence[str], log_file: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a daemon in its own session (Ctrl-C in the shell that started it must not reach it),
    its output into a new ``log_file``."""
    with new_log(log_file) as log:
        return subprocess.Popen(
            list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=None if env is None else dict(env), start_new_session=True,
        )  # fmt: skip


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct free ports: all bound at once, so the kernel cannot hand one out twice."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when nothing listens on ``host:port``.

    SO_REUSEADDR, as the JVMs' own listeners use: connections of a stopped daemon that linger in
    TIME_WAIT do not make its port look taken.
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


@contextlib.contextmanager
def new_log(path: Path) -> Iterator[Any]:
    """A new, empty log file (0600, never through a symlink); the previous one is kept as
    ``<name>.1``."""
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as log:
        yield log


def write_private(path: Path, text: str) -> None:
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


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def tail_file(path: Path, lines: int = 30) -> str:
    """The last lines of a daemon's log, for an error's detail."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return tail(text, lines) or "(the log is empty)"
