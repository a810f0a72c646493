"""The CLI's contract with shell scripts, command by command: with ``--json`` stdout holds JSON (one
document, or JSON lines for streams) and nothing else; messages and errors go to stderr, never a
traceback; the exit code says what happened — 0 ok, 1 an operational failure (a missing table,
a broker that does not answer), 2 invalid input (a bad option value, Typer's own usage errors
included). Ctrl-C (130) is tested in test_interrupt.py, test_ingest_cli.py and test_read_cli.py.

No Spark: one table written with delta-rs and two epochs on the shared broker serve every command.
The commands' Spark runs (create-table, alter-table and drop-table for real, ingest's JSON lines,
``read --mode file``) are checked the same way in test_tables_cli.py, test_ingest_cli.py and
test_read_cli.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.errors import EXIT_FAILURE, EXIT_INVALID_INPUT
from logstore_cli.logformat.wire import EpochId
from tests.deltalog import write_table
from tests.e2e.cli_support import keyed_ddl, keyed_table

pytestmark = pytest.mark.integration

TABLE = "db.orders"
MISSING = "db.ordrs"  # one letter off: the error names the nearest table
OFFLINE = "db.offline"  # its DDL names a broker nobody runs
ROWS = [{"id": i, "name": f"n{i}"} for i in range(20)]


@dataclass(frozen=True)
class Setup:
    root: Path
    bootstrap: str
    topic: str

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``logstore ARGS`` as a script runs it: no terminal on any stream, no config file."""
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("LOGSTORE_") or k == "LOGSTORE_HOME" or k.startswith("LOGSTORE_TEST_")}  # fmt: skip
        full.update(LOGSTORE_WAREHOUSE=str(self.root / "wh"),
                    LOGSTORE_STATE_DIR=str(self.root / "state"), **(env or {}))  # fmt: skip
        return subprocess.run(
            [sys.executable, "-m", "logstore_cli", *args], cwd=self.root, env=full,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("contract")
    topic = f"contract-{os.getpid()}"
    writer = keyed_table(root, kafka_bootstrap, topic, TABLE)
    try:
        writer.epoch(EpochId("w-contract", 0, "a-0"), ROWS[:12])
        writer.epoch(EpochId("w-contract", 1, "a-1"), ROWS[12:])
    finally:
        writer.close()
    write_table(root / "wh", keyed_ddl(OFFLINE, "offline", "127.0.0.1:1"))
    (root / "tables.sql").write_text(keyed_ddl("db.fresh", f"{topic}-fresh", kafka_bootstrap))
    yield Setup(root, kafka_bootstrap, topic)


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    """stdout as one JSON document: it fails on anything else printed there."""
    return json.loads(result.stdout)


def _json_lines(result: subprocess.CompletedProcess[str]) -> list[Any]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def _clean_stderr(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr


# -- success: exit 0, JSON on stdout ------------------------------------------------------------


def test_validate(setup: Setup) -> None:
    result = setup.run("validate", "tables.sql", "--json")
    assert result.returncode == 0, result.stderr
    assert [t["name"] for t in _json(result)] == ["db.fresh"]
    assert result.stderr == ""  # --json: no success line either


def test_validate_reads_standard_input(setup: Setup) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "logstore_cli", "validate", "-", "--json"],
        input=(setup.root / "tables.sql").read_text(), capture_output=True, text=True,
        timeout=120, check=False, cwd=setup.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)] == ["db.fresh"]


def test_properties(setup: Setup) -> None:
    result = setup.run("properties", "--json")
    assert result.returncode == 0, result.stderr
    keys = {p["key"] for p in _json(result)}
    assert {"log.system", "log-store.enabled", "kafka.topic"} <= keys


def test_create_table_dry_run(setup: Setup) -> None:
    result = setup.run("create-table", "tables.sql", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    [plan] = _json(result)
    assert (plan["table"], plan["status"], plan["topic"]["action"]) == (
        "db.fresh", "planned", "create",
    )  # fmt: skip
    assert not (setup.root / "wh" / "db" / "fresh").exists()


def test_describe(setup: Setup) -> None:
    result = setup.run("describe", TABLE, "--json")
    assert result.returncode == 0, result.stderr
    d = _json(result)
    assert d["name"] == TABLE and d["delta"]["version"] == 2
    assert sum(p["end_offset"] for p in d["topic"]["partitions"]) == len(ROWS) + 4  # + markers


def test_list(setup: Setup) -> None:
    result = setup.run("list", "--json")
    assert result.returncode == 0, result.stderr
    assert [t["name"] for t in _json(result)] == [OFFLINE, TABLE]


def test_alter_table_dry_run(setup: Setup) -> None:
    result = setup.run("alter-table", TABLE, "--set", "log.system.partitions=3", "--dry-run",
                       "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    d = _json(result)
    assert d["dry_run"] is True and d["set"] == {"log.system.partitions": "3"}
    assert d["topic"]["action"] == "add-partitions"


def test_drop_table(setup: Setup) -> None:
    write_table(setup.root / "wh", "CREATE TABLE scratch.t1 (id BIGINT) USING delta")
    result = setup.run("drop-table", "scratch.t1", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    d = _json(result)
    assert d["table"] == "scratch.t1" and d["topic"] is None
    assert not (setup.root / "wh" / "scratch" / "t1").exists()


def test_ingest_print_spark_submit(setup: Setup) -> None:
    result = setup.run("ingest", TABLE, "--source", "generate", "--total", "10", "--once",
                       "--print-spark-submit", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    command = _json(result)["command"]
    assert command[0].endswith("spark-submit") and TABLE in command


def test_status(setup: Setup) -> None:
    result = setup.run("status", TABLE, "--json")
    assert result.returncode == 0, result.stderr
    d = _json(result)
    assert d["last_commit"]["epoch"] == 1 and d["lease"] is None
    assert [p["after_commit"] for p in d["log"]["partitions"]] == [1, 1]


def test_read_log_is_json_lines(setup: Setup) -> None:
    result = setup.run("read", TABLE, "--mode", "log", "--consistent", "--json")
    assert result.returncode == 0, result.stderr
    lines = _json_lines(result)
    assert sorted(line["row"]["id"] for line in lines) == [r["id"] for r in ROWS]
    assert {line["kind"] for line in lines} == {"+I"}
    assert '"event": "summary"' in result.stderr  # the summary goes beside the data, not into it


def test_read_log_to_a_jsonl_file(setup: Setup) -> None:
    # -o jsonl:PATH used to be a Delta path 'jsonl:…' Spark failed on with a Java stack trace.
    out = setup.root / "read-out.jsonl"
    result = setup.run("read", TABLE, "--mode", "log", "--consistent", "-o", f"jsonl:{out}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "consumer engine" in result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["row"]["id"] for line in lines) == [r["id"] for r in ROWS]
    again = setup.run("read", TABLE, "--mode", "log", "-o", f"jsonl:{out}")
    assert again.returncode == EXIT_INVALID_INPUT and "already exists" in again.stderr
    assert len(out.read_text().splitlines()) == len(ROWS)  # never overwritten


def test_read_file_is_json_lines_without_spark_or_java(setup: Setup) -> None:
    no_java = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": str(setup.root / "no-java")}
    result = setup.run("read", TABLE, "--mode", "file", "--json", *NO_SPARK, env=no_java)
    assert result.returncode == 0, result.stderr
    lines = _json_lines(result)
    assert sorted(line["row"]["id"] for line in lines) == [r["id"] for r in ROWS]
    assert {line["kind"] for line in lines} == {"+I"}
    summary = json.loads(next(x for x in result.stderr.splitlines() if x.startswith("{")))
    assert summary["engine"] == "delta-rs" and summary["rows"] == len(ROWS)
    _clean_stderr(result)
    out = setup.root / "file-out.jsonl"
    to_file = setup.run("read", TABLE, "--mode", "file", "-o", f"jsonl:{out}", env=no_java)
    assert to_file.returncode == 0 and to_file.stdout == "", to_file.stderr
    assert "delta-rs engine" in to_file.stderr
    assert sorted(out.read_text().splitlines()) == sorted(result.stdout.splitlines())


def test_verify(setup: Setup) -> None:
    result = setup.run("verify", TABLE, "--json")
    assert result.returncode == 0, result.stderr
    d = _json(result)
    assert d["equal"] is True and d["delta"]["rows"] == len(ROWS)


def test_setup_reports_the_cached_classpaths(setup: Setup) -> None:
    result = setup.run("setup", "--only", "spark", "--json")
    assert result.returncode == 0, result.stderr
    [entry] = _json(result)
    assert entry["classpath"] == "spark" and entry["jars"] > 0


def test_broker_stop_and_status_without_a_broker(setup: Setup) -> None:
    stopped = setup.run("broker", "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert _json(stopped)["stopped"] is False
    # status is a question a script asks: "no" is exit 1, and still JSON on stdout
    status = setup.run("broker", "status", "--json")
    assert status.returncode == EXIT_FAILURE
    assert _json(status)["running"] is False
    assert "no local broker is running" in status.stderr


def test_spark_stop_and_status_without_a_cluster(setup: Setup) -> None:
    stopped = setup.run("spark", "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert _json(stopped)["stopped"] == []
    status = setup.run("spark", "status", "--json")
    assert status.returncode == EXIT_FAILURE
    assert _json(status)["running"] is False


def test_shell_completion_script_is_printed(setup: Setup) -> None:
    result = setup.run("--show-completion", "bash",
                       env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "complete -o default -F _logstore_completion logstore" in result.stdout


# -- bad input: exit 2, nothing on stdout ---------------------------------------------------------

# A master no Spark can start: a case that starts Spark fails with exit 1, not 2.
NO_SPARK = ["--master", "nonsense://no-spark-here"]
BAD_INPUT = {
    "unknown command": ["nonsense"],
    "unknown option (Typer)": ["list", "--json", "--bogus"],
    "validate: malformed DDL": ["validate", "--json", "broken.sql"],
    "validate: no such file": ["validate", "--json", "nope.sql"],
    "properties: unknown option (Typer)": ["properties", "--json", "--all"],
    "create-table: malformed --sql": ["create-table", "--json", "--sql", "CREATE TABLE x ("],
    "describe: bad --kafka-timeout": ["describe", TABLE, "--json", "--kafka-timeout", "0"],
    "describe: bad table name": ["describe", "db/orders", "--json"],
    "list: bad config file": ["list", "--json", "--config", "nope.toml"],
    "alter-table: unknown property": ["alter-table", TABLE, "--json", "--set", "log.bogus=1"],
    "alter-table: --set without =": ["alter-table", TABLE, "--json", "--set", "log.system"],
    "drop-table: no --yes and no terminal": ["drop-table", TABLE, "--json"],
    "ingest: bad --emit": ["ingest", TABLE, "--json", "--source", "generate", "--emit", "x"],
    "ingest: --once without --total": ["ingest", TABLE, "--json", "--source", "generate", "--once"],
    "ingest: no such --source directory (before Spark)": [
        "ingest",
        TABLE,
        "--json",
        "--source",
        "no-such-dir",
        "--once",
        *NO_SPARK,
    ],
    "ingest: a secret in JVM options (before Spark)": [
        "ingest",
        TABLE,
        "--json",
        "--source",
        "generate",
        "--total",
        "1",
        "--once",
        "--conf",
        "spark.driver.extraJavaOptions=-Djavax.net.ssl.trustStorePassword=pw",
        *NO_SPARK,
    ],
    "read: --as-of neither version nor time (before Spark)": [
        "read",
        TABLE,
        "--json",
        "--mode",
        "file",
        "--as-of",
        "banana",
        *NO_SPARK,
    ],
    "status: bad --kafka-timeout": ["status", TABLE, "--json", "--kafka-timeout", "nan"],
    "read: --as-of after the newest version (delta-rs)": [
        "read",
        TABLE,
        "--json",
        "--mode",
        "file",
        "--as-of",
        "999",
        *NO_SPARK,
    ],
    "read: --engine delta-rs of the log": [
        "read",
        TABLE,
        "--json",
        "--mode",
        "log",
        "--engine",
        "delta-rs",
    ],
    "read: --output inside the warehouse": [
        "read",
        TABLE,
        "--json",
        "--mode",
        "file",
        "-o",
        "parquet:wh/copy",
        *NO_SPARK,
    ],
    "read: bad --mode": ["read", TABLE, "--json", "--mode", "bogus"],
    "read: bad --limit": ["read", TABLE, "--json", "--mode", "log", "--limit", "0"],
    "read: --json with --output table": ["read", TABLE, "--json", "--mode", "log", "-o", "table"],
    "read: unknown output kind (before Spark)": ["read", TABLE, "-o", "csv:x", *NO_SPARK],
    "verify: bad --examples (Typer)": ["verify", TABLE, "--json", "--examples", "-3"],
    "setup: bad --only (Typer)": ["setup", "--json", "--only", "bogus"],
    "broker start: bad --port (Typer)": ["broker", "start", "--json", "--port", "99999999"],
    "broker stop: bad --timeout (Typer)": ["broker", "stop", "--json", "--timeout", "-1"],
    "spark start: bad --workers (Typer)": ["spark", "start", "--json", "--workers", "0"],
    "spark stop: --kill without --worker": ["spark", "stop", "--json", "--kill"],
}


@pytest.mark.parametrize("args", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_2(setup: Setup, args: list[str]) -> None:
    (setup.root / "broken.sql").write_text("CREATE TABLE db.x (id BIGINT,")
    result = setup.run(*args)
    assert result.returncode == EXIT_INVALID_INPUT, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert result.stderr.strip() != ""
    _clean_stderr(result)
    assert (setup.root / "wh" / "db" / "orders" / "_delta_log").is_dir()  # nothing was dropped


# -- operational failure: exit 1, nothing on stdout -----------------------------------------------

MISSING_TABLE = {
    "describe": ["describe", MISSING, "--json"],
    "alter-table": ["alter-table", MISSING, "--json", "--set", "log.system.partitions=3"],
    "drop-table": ["drop-table", MISSING, "--json", "--yes"],
    "ingest": ["ingest", MISSING, "--json", "--source", "generate", "--total", "1", "--once"],
    "status": ["status", MISSING, "--json"],
    "read": ["read", MISSING, "--json", "--mode", "log"],
    "verify": ["verify", MISSING, "--json"],
}


@pytest.mark.parametrize("args", MISSING_TABLE.values(), ids=MISSING_TABLE.keys())
def test_a_missing_table_exits_1(setup: Setup, args: list[str]) -> None:
    result = setup.run(*args)
    assert result.returncode == EXIT_FAILURE, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert f"error: table '{MISSING}' not found" in result.stderr
    assert f"did you mean '{TABLE}'" in result.stderr
    _clean_stderr(result)


UNREACHABLE = {
    "read": ["read", OFFLINE, "--json", "--mode", "log"],
    "verify": ["verify", OFFLINE, "--json"],
    "alter-table": ["alter-table", OFFLINE, "--json", "--set", "log.system.partitions=3"],
}


@pytest.mark.parametrize("args", UNREACHABLE.values(), ids=UNREACHABLE.keys())
def test_an_unreachable_broker_exits_1(setup: Setup, args: list[str]) -> None:
    result = setup.run(*args, "--kafka-timeout", "2")
    assert result.returncode == EXIT_FAILURE, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "error: cannot reach Kafka at 127.0.0.1:1" in result.stderr
    _clean_stderr(result)


@pytest.mark.parametrize("command", ["describe", "status"])
def test_an_unreachable_broker_is_a_warning_where_the_rest_still_shows(
    setup: Setup, command: str
) -> None:
    result = setup.run(command, OFFLINE, "--json", "--kafka-timeout", "2")
    assert result.returncode == 0, result.stderr
    assert _json(result)["name"] == OFFLINE
    assert "warning:" in result.stderr and "cannot reach Kafka at 127.0.0.1:1" in result.stderr


# -- ingest: a table's own files are never its input (issue 18 item 4) --------------------------


def _delta_dir(path: Path) -> Path:
    (path / "_delta_log").mkdir(parents=True, exist_ok=True)
    return path


OWN_FILES = {
    "source: the table's directory": lambda r: ["--source", "wh/db/orders"],
    "source: its _delta_log": lambda r: ["--source", "wh/db/orders/_delta_log"],
    "source: the warehouse": lambda r: ["--source", "wh"],
    "source: a link into the table": lambda r: ["--source", "to-the-table"],
    "source: file: URI of the table": lambda r: ["--source", (r / "wh/db/orders").as_uri()],
    "source: above the warehouse": lambda r: ["--source", "."],
    "source: a Delta table elsewhere": lambda r: ["--source", "other-delta"],
    "source: holding a Delta table": lambda r: ["--source", "holder"],
    "checkpoint: in the table": lambda r: ["--source", "in", "--checkpoint", "wh/db/orders/cp"],
    "checkpoint: in the warehouse": lambda r: ["--source", "in", "--checkpoint", "wh/db/cp"],
    "checkpoint: in a Delta table": lambda r: ["--source", "in", "--checkpoint", "other-delta/x"],
}


@pytest.mark.parametrize("args", OWN_FILES.values(), ids=OWN_FILES.keys())
def test_ingest_refuses_a_table_s_own_files_before_spark(setup: Setup, args: Any) -> None:
    root = setup.root
    _delta_dir(root / "other-delta")
    _delta_dir(root / "holder" / "nested" / "t")
    (root / "in").mkdir(exist_ok=True)
    if not (root / "to-the-table").is_symlink():
        (root / "to-the-table").symlink_to(root / "wh" / "db" / "orders")
    result = setup.run("ingest", TABLE, "--json", "--once", "--format", "json", *args(root),
                       *NO_SPARK)  # fmt: skip
    assert result.returncode == EXIT_INVALID_INPUT, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "table's own files" in result.stderr or "inside a table's files" in result.stderr
    assert "hint:" in result.stderr
    _clean_stderr(result)


def test_ingest_skips_a_fifo_with_a_warning_and_allows_its_own_checkpoint_dir(
    setup: Setup,
) -> None:
    # Both pass the checks before Spark: the nonsense master then fails the start (exit 1).
    src = setup.root / "with-fifo"
    src.mkdir(exist_ok=True)
    (src / "a.json").write_text('{"id": 1}\n')
    if not (src / "pipe.json").exists():
        os.mkfifo(src / "pipe.json")
    own = setup.root / "wh" / "db" / "orders" / "_logstore" / "checkpoints" / "other-job"
    result = setup.run("ingest", TABLE, "--json", "--once", "--source", str(src), "--checkpoint",
                       str(own), *NO_SPARK)  # fmt: skip
    assert result.returncode == EXIT_FAILURE, (result.returncode, result.stderr)
    assert "warning: skipping 1 entry of the source that is not a regular file" in result.stderr
    assert str(src / "pipe.json") in result.stderr
    _clean_stderr(result)
