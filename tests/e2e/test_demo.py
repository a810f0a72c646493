"""``scripts/demo.sh`` as a new user runs it: the whole story, then again, then ``--clean``, on a
local warehouse; with ``--warehouse s3`` the story once on the project's own S3 server, then
``--clean``; with ``--log pulsar`` the story once on the project's Pulsar standalone, then
``--clean``.

The demo's state and warehouse are this test's (LOGSTORE_STATE_DIR / LOGSTORE_WAREHOUSE); it
starts its own broker there (and its S3 server, whose data is in the state dir). The venv is the
one already installed: the demo's set-up step finds it current and does nothing. Run alone with
``pytest -m demo``.
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

from logstore_cli import processes

pytestmark = pytest.mark.demo

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "demo.sh"
# Steps of the story on each warehouse: on S3 the server's start is one more.
STEPS = {"local": 10, "s3": 11}
# The S3 case tells the story of fewer changes: the same steps and checks, in less time.
CHANGES = {"local": {}, "s3": {"DEMO_CHANGES": "3000"}}


def _demo(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # the user's own
    environ |= {"LOGSTORE_STATE_DIR": str(tmp / "state"),
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


def _check_run(
    result: subprocess.CompletedProcess[str], warehouse: str, tmp: Path, *, log: str = "kafka"
) -> None:
    out, steps = result.stdout, STEPS[warehouse]
    assert result.returncode == 0, out + result.stderr
    # every step announced, numbered, and timed
    numbers = [int(n) for n in re.findall(rf"^\[(\d+)/{steps}\] ", out, re.M)]
    assert numbers == list(range(1, steps + 1))
    assert len(re.findall(r"^      ✓ \d+\.\d s$", out, re.M)) == steps
    assert "the log and the file store agree." in out and "FAIL" not in out
    if log != "kafka":
        clean = f"--log {log} --clean"
    elif warehouse == "local":
        clean = "scripts/demo.sh --clean"
    else:
        clean = f"--warehouse {warehouse} --clean"
    assert clean in out  # it says how to clean up
    assert "Traceback" not in result.stderr
    if warehouse == "s3":
        assert "warehouse: s3://logstore-demo/warehouse" in out
        assert "(s3://logstore-demo/warehouse/demo/orders)" in result.stderr  # the table is there
        # the run's server is stopped at its end, and its keys were never shown
        (pid,) = re.findall(
            r"^      S3 server \(versitygw\) at http://127\.0\.0\.1:\d+, pid (\d+),", out, re.M
        )
        assert not processes.alive(int(pid))  # stopped and gone (a zombie would not count)
        assert "AWS_SECRET_ACCESS_KEY=" not in out + result.stderr
        assert not (tmp / "state" / "s3-server" / "s3.env").exists()  # the keys outlive no run


@pytest.mark.parametrize("warehouse", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_the_demo_runs_runs_again_and_cleans_up(tmp_path: Path, warehouse: str) -> None:
    """The story, then again (on a local warehouse: the second run finds the broker running and
    the tables unchanged, and adds its epochs), then ``--clean``. On S3 the story once, then
    ``--clean``: what a rerun adds is the same code on any warehouse, and each run costs minutes."""

    def demo(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        chosen = () if warehouse == "local" else ("--warehouse", warehouse)
        return _demo(tmp_path, *args, *chosen, **CHANGES[warehouse], **env)

    started = time.monotonic()
    first = demo()
    took_first = time.monotonic() - started
    _check_run(first, warehouse, tmp_path)
    s1 = _summary(tmp_path)
    assert all(s1["checks"].values()) and s1["agree"] is True
    assert s1["log_rows"] == s1["delta_rows"] == s1["log_keys_committed"] == s1["delta_keys"] > 0
    # epochs committed before the kill, and after it by the restarted job
    assert s1["log_epochs"] == s1["delta_epochs"] == s1["run_epochs"] >= 2
    assert s1["retracted"] == s1["dropped"] == s1["killed_records"]
    assert s1["run_records"] > 0 and s1["records"] == s1["committed_changes"] + s1["dropped"]
    broker = json.loads((tmp_path / "state" / "demo-run" / "broker.json").read_text())
    assert "demo.orders: created" in first.stderr and "demo.users: created" in first.stderr

    took_again = 0.0
    if warehouse == "local":  # run again (on S3 the story once: the rerun is the same code)
        started = time.monotonic()
        again = demo()
        took_again = time.monotonic() - started
        _check_run(again, warehouse, tmp_path)
        s2 = _summary(tmp_path)
        assert s2["job"] != s1["job"] and s2["agree"] is True
        assert "exists, unchanged" in again.stderr and "already running" in again.stdout
        # the same seeded changes: the same table; the log holds both runs
        assert s2["delta_rows"] == s2["log_rows"] == s1["delta_rows"]
        assert s2["log_epochs"] == s2["delta_epochs"] == s1["log_epochs"] + s2["run_epochs"]
        assert s2["retracted"] == s2["dropped"] == s1["killed_records"] + s2["killed_records"]
        assert s2["records"] == s2["committed_changes"] + s2["dropped"] > s1["records"]

        bad = demo("--bogus")
        assert bad.returncode == 2 and "unknown argument '--bogus'" in bad.stderr
        bad = _demo(tmp_path, "--warehouse", "gcs")
        assert (
            bad.returncode == 2
            and "--warehouse 'gcs'" in bad.stderr
            and "local, s3 or hdfs" in bad.stderr
        )

    (tmp_path / "mine.txt").write_text("not the demo's")
    clean = demo("--clean")
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


@pytest.mark.pulsar
def test_the_demo_runs_on_pulsar_and_cleans_up(tmp_path: Path) -> None:
    """``--log pulsar``: Amoro's Pulsar DDL on the project's standalone, started for the run and
    stopped at its end; the reads at every level and verify agree with Delta. One run (the
    Kafka case shows a second one) and fewer changes: the same checks in less time."""
    small = {"DEMO_CHANGES": "2000", "DEMO_RATE": "200"}
    started = time.monotonic()
    run = _demo(tmp_path, "--log", "pulsar", **small)
    took = time.monotonic() - started
    _check_run(run, "local", tmp_path, log="pulsar")
    out = run.stdout
    assert "a Delta table and a Pulsar changelog" in out and "log (Pulsar)" in out
    assert "Kafka broker" not in out and not (tmp_path / "state" / "broker").exists()
    s = _summary(tmp_path)
    assert all(s["checks"].values()) and s["agree"] is True
    # the committed and hybrid reads were checked against Delta as well
    assert {k for k in s["checks"] if "committed read" in k or "hybrid" in k} == {
        "the committed read, folded by key, equals the Delta rows",
        "the hybrid (snapshot, then the log) read, folded by key, equals the Delta rows",
    }
    assert s["log_rows"] == s["delta_rows"] == s["log_keys_committed"] == s["delta_keys"] > 0
    assert s["log_epochs"] == s["delta_epochs"] == s["run_epochs"] >= 2
    assert s["retracted"] == s["dropped"] == s["killed_records"]
    assert s["run_records"] > 0 and s["records"] == s["committed_changes"] + s["dropped"]
    assert "demo.orders: created" in run.stderr
    # the table is Amoro's Pulsar DDL with the standalone's address, and the standalone is stopped
    info = json.loads((tmp_path / "state" / "demo-run" / "pulsar.json").read_text())
    ddl = (tmp_path / "state" / "demo-run" / "demo-pulsar.sql").read_text()
    assert '"log-store.type" = "pulsar"' in ddl
    assert f'"log-store.address" = "{info["service_url"]}"' in ddl
    assert not processes.alive(info["pid"])
    assert "read --engine spark and vacuum run on a Pulsar table too" in out

    bad = _demo(tmp_path, "--log", "pulsar", "--warehouse", "s3")
    assert bad.returncode == 2 and "local warehouse only" in bad.stderr
    bad = _demo(tmp_path, "--log=redpanda")
    assert (
        bad.returncode == 2 and "--log 'redpanda'" in bad.stderr and "kafka or pulsar" in bad.stderr
    )

    clean = _demo(tmp_path, "--log", "pulsar", "--clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Pulsar standalone was not running" in clean.stdout  # the run stopped it already
    assert not (tmp_path / "state").exists() and not (tmp_path / "warehouse").exists()
    print(f"demo on Pulsar: {took:.0f} s")
