"""`logstore broker start|status|stop` as a shell script runs them: a subprocess, exit codes, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from logstore_cli.kafka import local_broker


def _logstore(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGSTORE_STATE_DIR": str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip


def test_start_status_stop(tmp_path: Path) -> None:
    started = _logstore("broker", "start", "--json", state_dir=tmp_path)
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    try:
        assert info["bootstrap"].startswith("127.0.0.1:")
        assert local_broker.answers_metadata(info["bootstrap"], timeout_s=10)

        again = _logstore("broker", "start", state_dir=tmp_path)
        assert again.returncode == 1
        assert "already running" in again.stderr

        status = _logstore("broker", "status", "--json", state_dir=tmp_path)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["answering"] is True
    finally:
        stopped = _logstore("broker", "stop", "--json", state_dir=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": True, "pid": info["pid"]}
    # is_running() already treats a vanished pid as not running
    assert not local_broker.is_running(local_broker.BrokerInfo(**info))
    assert not local_broker.answers_metadata(info["bootstrap"], timeout_s=2)

    after = _logstore("broker", "status", "--json", state_dir=tmp_path)
    assert after.returncode == 1
    assert json.loads(after.stdout) == {"running": False}
