"""A Pulsar table through the CLI with no Pulsar there (issue 23): ``read --mode log``, ``verify``
and ``vacuum`` run (tests/integration/pulsar/: test_pulsar_read.py, test_pulsar_vacuum.py) and,
with nothing at the address, fail with exit 1 saying where it did not answer; ``status`` shows the
Delta part and says why the log's is missing. The Delta-only forms still run. The CLI as a
subprocess; no Pulsar, no Spark: the table's Delta metadata is written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logstore_cli.errors import EXIT_FAILURE
from tests.deltalog import write_table
from tests.e2e.cli_support import run_cli

TABLE = "shop.orders"
# Amoro's Pulsar log store; nothing listens at this address (nothing here may reach it).
DDL = """CREATE TABLE shop.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
      'log-store.address' = 'pulsar://127.0.0.1:9', 'log-store.topic' = 'orders',
      'mixed-format.read.mode' = 'log');"""


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    write_table(tmp_path / "wh", DDL)
    return tmp_path


def test_the_delta_only_forms_still_run(cwd: Path) -> None:
    status = run_cli("status", TABLE, "--no-topic", "--json", cwd=cwd)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["name"] == TABLE
    read = run_cli("read", TABLE, "--mode", "file", "-o", "jsonl", cwd=cwd)
    assert read.returncode == 0, read.stderr
    assert read.stdout == ""  # an empty table
    described = run_cli("describe", TABLE, "--no-topic", "--json", cwd=cwd)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["log_store"]["system"] == "pulsar"


@pytest.mark.parametrize(
    "args",
    [
        ["read", TABLE, "--mode", "log", "-o", "jsonl"],
        ["read", TABLE],
        ["verify", TABLE],
        ["vacuum", TABLE, "--dry-run"],
    ],
    ids=["read-log", "read-default", "verify", "vacuum"],
)
def test_reads_verify_and_vacuum_run_and_say_where_pulsar_did_not_answer(
    cwd: Path, args: list[str]
) -> None:
    proc = run_cli(*args, "--pulsar-admin-url", "http://127.0.0.1:9", cwd=cwd)
    assert proc.returncode == EXIT_FAILURE, proc.stderr
    assert "the Pulsar admin API at http://127.0.0.1:9 is unreachable" in proc.stderr
    assert "logstore pulsar status" in proc.stderr  # how to check
    assert "does not run on table" not in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_status_with_pulsar_out_of_reach_reports_the_table_and_says_why(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status`` reads a Pulsar table's tail from the admin API; with none there (port 9
    refuses) the Delta part is still shown, exit 0, the failure in ``log.error`` and a warning."""
    monkeypatch.setenv("LOGSTORE_PULSAR_ADMIN_URL", "http://127.0.0.1:9")
    proc = run_cli("status", TABLE, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    log = json.loads(proc.stdout)["log"]
    assert (log["system"], log["end_offsets_read"]) == ("pulsar", False)
    assert "127.0.0.1:9" in log["error"] and "warning: log:" in proc.stderr
    assert "Traceback" not in proc.stderr
