"""``logstore spark start|status|stop`` as a script runs them: a real master and worker on loopback,
one worker stopped and started again, and nothing left running after ``stop``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from logstore_cli.jobs import standalone


def _spark(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", "spark", *args, "--state-dir", str(state)],
        capture_output=True, text=True, timeout=240, check=False, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "LOGSTORE_STATE_DIR"},
    )  # fmt: skip


def _gone(pid: int) -> bool:
    return not standalone._alive(pid)


def test_start_status_restart_a_worker_stop(tmp_path: Path) -> None:
    state = tmp_path / "state"
    started = _spark(state, "start", "--workers", "1", "--worker-memory", "1g", "--json")
    assert started.returncode == 0, started.stderr
    data = json.loads(started.stdout)
    try:
        assert data["master_url"].startswith("spark://127.0.0.1:")
        assert data["master_answering"] is True
        [worker] = data["workers"]
        assert (worker["alive"], worker["registered"], worker["cores"]) == (True, True, 1)
        assert (state / "spark-cluster").stat().st_mode & 0o777 == 0o700
        assert Path(worker["log_file"]).is_file()

        again = _spark(state, "start")
        assert again.returncode == 1
        assert "already running" in again.stderr and data["master_url"] in again.stderr

        killed = _spark(state, "stop", "--worker", "1", "--kill", "--json")
        assert killed.returncode == 0, killed.stderr
        assert json.loads(killed.stdout)["stopped"][0]["forced"] is True
        assert _gone(worker["pid"])
        down = _spark(state, "status", "--json")
        assert down.returncode == 1 and "worker(s) 1" in down.stderr
        assert json.loads(down.stdout)["workers"][0]["alive"] is False

        restarted = _spark(state, "start", "--worker", "1", "--json")
        assert restarted.returncode == 0, restarted.stderr
        [back] = json.loads(restarted.stdout)["workers"]
        assert back["registered"] is True and back["pid"] != worker["pid"]
        status = _spark(state, "status")
        assert status.returncode == 0, status.stderr
        assert data["master_url"] in status.stdout
    finally:
        stopped = _spark(state, "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    what = {s["what"] for s in json.loads(stopped.stdout)["stopped"]}
    assert what == {"master", "worker 1"}
    assert _gone(data["master_pid"]) and _gone(back["pid"])
    assert not (state / "spark-cluster" / "cluster.json").exists()
    final = _spark(state, "status")
    assert final.returncode == 1 and "no local Spark cluster is running" in final.stderr
