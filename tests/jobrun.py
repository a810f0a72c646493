"""Jobs that tests kill, pause and restart (the crash, fault and protocol tests): each runs as a
script runs it, in its own process group, so that a kill takes its Spark JVM too; a finished or
failed test leaves no process of it behind (a JVM that outlived its job could write on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

JOB_TIMEOUT_S = 300.0
REAP_TIMEOUT_S = 30.0

CLIResult = subprocess.CompletedProcess[str]


def start(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """``command`` with ``os.environ`` and ``env``, in its own process group, no stdin."""
    return subprocess.Popen(
        list(command), cwd=cwd, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def reap_group(pgid: int, timeout: float = REAP_TIMEOUT_S) -> None:
    """SIGKILL what is left of the job's process group until none of it is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)  # polling the group's end, with a deadline
    pytest.fail(f"process group {pgid} still alive {timeout} s after SIGKILL")


def finish(proc: subprocess.Popen[str], timeout: float = JOB_TIMEOUT_S) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the job once it ended, its process group reaped; a job still
    running after ``timeout`` is killed and the test fails with its stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        reap_group(proc.pid)
        pytest.fail(f"the job did not end within {timeout:g} s:\n{err[-3000:]}")
    reap_group(proc.pid)
    return proc.returncode, out, err


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the job's whole process group (a machine failure) and reap it."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=REAP_TIMEOUT_S)
    reap_group(proc.pid)


@contextmanager
def killed_on_error(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """The block drives ``proc``; when it fails, the job's process group is killed and reaped
    before the error goes on (the next test must not share the machine with it)."""
    try:
        yield proc
    except BaseException:
        kill(proc)
        raise


def wait_paused(proc: subprocess.Popen[str], pause: Path, timeout: float = JOB_TIMEOUT_S) -> None:
    """Until the job holds its epoch at the test-only pause hook (it creates ``pause`` there)."""
    deadline = time.monotonic() + timeout
    while not pause.exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the job ended (exit {proc.returncode}) before the pause:\n{err[-3000:]}")
        assert time.monotonic() < deadline, f"the job did not reach the pause within {timeout:g}s"
        time.sleep(0.05)  # poll interval of a condition with a deadline


def epoch_events(out: str) -> list[dict[str, Any]]:
    """The epochs a ``--json`` run reported done, in order (one line each, flushed once the epoch
    returned)."""
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == "epoch"]


def cli(cwd: Path, warehouse: Path | str, *args: str, timeout: float = JOB_TIMEOUT_S) -> CLIResult:
    """``logstore ARGS`` on ``warehouse``, run to its end (a command that should not hang)."""
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=cwd, env={**os.environ, "LOGSTORE_WAREHOUSE": str(warehouse)},
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
