"""``drop-table`` and ``alter-table`` while an ingest job holds the table's writer lease (issue 18,
item 8): refused (exit 1) naming the holder and its expiry; ``--force`` goes ahead and says what it
breaks. No Spark, no broker: tables without a log store written with delta-rs, the lease taken as a
job on another host takes it (its liveness cannot be judged from here, so it counts as live)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logstore_cli.catalog.lease import Lease
from logstore_cli.errors import EXIT_FAILURE
from tests.deltalog import write_table

DDL = "CREATE TABLE db.{name} (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED);"


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.update(LOGSTORE_WAREHOUSE=str(root / "wh"), LOGSTORE_STATE_DIR=str(root / "state"),
               LOGSTORE_HOME=str(root / "home"))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args], cwd=root, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _held(root: Path, name: str) -> Path:
    path = write_table(root / "wh", DDL.format(name=name))
    Lease.acquire(path, "ingest-nightly", 600, host="etl-host-1", pid=31337)  # never released
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["drop-table", "db.{name}", "--yes"],
        ["alter-table", "db.{name}", "--set", "delta.logRetentionDuration=interval 9 days",
         "--dry-run"],
    ],
    ids=["drop-table", "alter-table"],
)  # fmt: skip
def test_refused_while_a_live_writer_holds_the_table(tmp_path: Path, args: list[str]) -> None:
    path = _held(tmp_path, "orders")
    result = _run(tmp_path, *(a.format(name="orders") for a in args))
    assert result.returncode == EXIT_FAILURE, result.stderr
    assert (
        "table db.orders is being written by job 'ingest-nightly' (host etl-host-1, pid 31337); "
        "its lease expires at"
    ) in result.stderr
    assert "--force" in result.stderr and "Traceback" not in result.stderr
    assert (path / "_delta_log").is_dir()


def test_force_drops_anyway_and_says_what_it_breaks(tmp_path: Path) -> None:
    path = _held(tmp_path, "orders")
    result = _run(tmp_path, "drop-table", "db.orders", "--yes", "--force", "--json")
    assert result.returncode == 0, result.stderr
    assert not path.exists()
    assert "warning: dropped while job 'ingest-nightly'" in result.stderr
    assert "fails at its next commit" in result.stderr
    assert json.loads(result.stdout)["forced_past_writer"]["job"] == "ingest-nightly"
