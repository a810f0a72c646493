"""``scripts/demo.sh`` as a new user runs it: the whole story, then again, then ``--clean``.

The demo's state and warehouse are this test's (LOGSTORE_STATE_DIR / LOGSTORE_WAREHOUSE); it
starts its own broker there. The venv is the one already installed: the demo's set-up step finds it
current and does nothing. Run alone with ``pytest -m demo``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.demo

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "demo.sh"
STEPS = 10


def _demo(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "LOGSTORE_STATE_DIR": str(tmp / "state"),
               "LOGSTORE_WAREHOUSE": str(tmp / "warehouse"), **env}  # fmt: skip
    return subprocess.run(
        ["bash", str(DEMO), *args], cwd=tmp, env=environ, capture_output=True, text=True,
        timeout=1200, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _summary(tmp: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp / "state" / "demo-run" / "summary.json").read_text())
    return data


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _check_run(result: subprocess.CompletedProcess[str]) -> None:
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # every step announced, numbered, and timed
    assert [int(n) for n in re.findall(r"^\[(\d+)/10\] ", out, re.M)] == list(range(1, STEPS + 1))
    assert len(re.findall(r"^      ✓ \d+\.\d s$", out, re.M)) == STEPS
    assert "the log and the file store agree." in out and "FAIL" not in out
    assert "scripts/demo.sh --clean" in out  # it says how to clean up
    assert "Traceback" not in result.stderr


def test_the_demo_runs_runs_again_and_cleans_up(tmp_path: Path) -> None:
    started = time.monotonic()
    first = _demo(tmp_path)
    took_first = time.monotonic() - started
    _check_run(first)
    s1 = _summary(tmp_path)
    assert all(s1["checks"].values()) and s1["agree"] is True
    assert s1["log_rows"] == s1["delta_rows"] == s1["log_keys_committed"] == s1["delta_keys"] > 0
    # epochs committed before the kill, and after it by the restarted job
    assert s1["log_epochs"] == s1["delta_epochs"] == s1["run_epochs"] >= 2
    assert s1["retracted"] == s1["dropped"] == s1["killed_records"]
    assert s1["run_records"] > 0 and s1["records"] == s1["committed_changes"] + s1["dropped"]
    broker = json.loads((tmp_path / "state" / "demo-run" / "broker.json").read_text())
    assert "demo.orders: created" in first.stderr and "demo.users: created" in first.stderr

    started = time.monotonic()
    again = _demo(tmp_path)
    took_again = time.monotonic() - started
    _check_run(again)
    s2 = _summary(tmp_path)
    assert s2["job"] != s1["job"] and s2["agree"] is True
    assert "exists, unchanged" in again.stderr and "already running" in again.stdout
    # the same seeded changes: the same table; the log holds both runs
    assert s2["delta_rows"] == s2["log_rows"] == s1["delta_rows"]
    assert s2["log_epochs"] == s2["delta_epochs"] == s1["log_epochs"] + s2["run_epochs"]
    assert s2["retracted"] == s2["dropped"] == s1["killed_records"] + s2["killed_records"]
    assert s2["records"] == s2["committed_changes"] + s2["dropped"] > s1["records"]

    bad = _demo(tmp_path, "--bogus")
    assert bad.returncode == 2 and "unknown argument '--bogus'" in bad.stderr

    (tmp_path / "mine.txt").write_text("not the demo's")
    clean = _demo(tmp_path, "--clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path / "warehouse").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    deadline = time.monotonic() + 30
    while _alive(broker["pid"]):
        assert time.monotonic() < deadline, "the demo's broker still runs after --clean"
        time.sleep(0.1)

    # a directory the demo did not create is never removed, even when named as its warehouse
    (tmp_path / "users-own").mkdir()
    kept = _demo(tmp_path, "--clean", LOGSTORE_WAREHOUSE=str(tmp_path / "users-own"))
    assert kept.returncode == 0 and "kept" in kept.stdout
    assert (tmp_path / "users-own").is_dir() and (tmp_path / "mine.txt").exists()
    print(f"demo: first run {took_first:.0f} s, again {took_again:.0f} s")
