"""Safety of the table commands as a user (or an attacker) meets them: subprocesses, exit codes.

Every case here once lost data or escaped the warehouse: the tool must refuse with exit 2 and touch
nothing outside its warehouse; commands that need no Spark must not start a JVM; a table without a
reachable broker can still be described, altered (Delta only) and dropped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from logstore_cli.kafka.local_broker import free_port
from tests.deltalog import write_table


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LOGSTORE_WAREHOUSE": str(tmp / "wh"),
        "LOGSTORE_STATE_DIR": str(tmp / "state"),
    }


def _run(tmp: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=tmp, env=_env(tmp), input=stdin, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def _outside_table(tmp: Path) -> Path:
    """A Delta table outside the warehouse that no command may touch."""
    return write_table(tmp / "outside", "CREATE TABLE dir.tbl (id BIGINT) USING delta;")


@pytest.mark.parametrize(
    "name", ["{tmp}/outside/dir.tbl", "a.b.c.d", "`..`.`..`", "db.`a/b`", "`.`.`.`"]
)
@pytest.mark.parametrize("command", [["drop-table", "--yes"], ["describe", "--no-topic"]])
def test_hostile_table_names_are_refused_and_touch_nothing(
    tmp_path: Path, name: str, command: list[str]
) -> None:
    outside = _outside_table(tmp_path)
    (tmp_path / "wh").mkdir()
    result = _run(tmp_path, command[0], name.format(tmp=tmp_path), *command[1:])
    assert result.returncode == 2, result.stderr
    assert "table name" in result.stderr and "Traceback" not in result.stderr
    assert (outside / "_delta_log").is_dir()
    assert (tmp_path / "wh").is_dir()


@pytest.mark.parametrize("table", ["`/abs/dir`.t", "`.`.`.`", "db.`a/b`", "`..`.t", "cat.db.t.x"])
def test_create_table_with_a_hostile_name_writes_nothing(tmp_path: Path, table: str) -> None:
    result = _run(tmp_path, "create-table", "--sql", f"CREATE TABLE {table} (id INT) USING delta")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "wh").exists() and not Path("/abs").exists()


def _modules_after(tmp: Path, *args: str) -> tuple[int, set[str]]:
    """Run the CLI in a fresh interpreter; the exit code and which JVM-side modules it loaded."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from logstore_cli.cli.app import main
        code = 0
        try:
            main({list(args)!r})
        except SystemExit as exc:
            code = exc.code or 0
        print(json.dumps([code, [m for m in ("pyspark", "py4j", "delta") if m in sys.modules]]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp, env=_env(tmp), capture_output=True, text=True,
        timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    code, modules = json.loads(out.stdout.strip().splitlines()[-1])
    return code, set(modules)


def test_no_op_create_dry_run_and_drop_start_no_jvm(tmp_path: Path) -> None:
    ddl = "CREATE TABLE db.t (id BIGINT) USING delta;"
    write_table(tmp_path / "wh", ddl)
    (tmp_path / "t.sql").write_text(ddl)
    (tmp_path / "new.sql").write_text("CREATE TABLE db.n (id BIGINT) USING delta;")
    assert _modules_after(tmp_path, "create-table", "t.sql", "--if-not-exists") == (0, set())
    assert _modules_after(tmp_path, "create-table", "new.sql", "--dry-run") == (0, set())
    assert not (tmp_path / "wh" / "db" / "n").exists()
    assert _modules_after(tmp_path, "drop-table", "db.t", "--yes") == (0, set())
    assert not (tmp_path / "wh" / "db" / "t").exists()


def test_list_shows_an_error_row_for_a_table_it_cannot_read(tmp_path: Path) -> None:
    write_table(tmp_path / "wh", "CREATE TABLE db.good (id BIGINT) USING delta;")
    broken = tmp_path / "wh" / "db" / "broken" / "_delta_log"
    broken.mkdir(parents=True)
    (broken / "00000000000000000000.json").write_text("{not json\n")
    result = _run(tmp_path, "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["db.good"]["error"] is None and rows["db.broken"]["error"]
    assert "warning:" in result.stderr and "db.broken" in result.stderr


def test_an_uncommitted_leftover_is_listed_and_dropped(tmp_path: Path) -> None:
    half = tmp_path / "wh" / "db" / "half"
    (half / "_delta_log" / "_staged_commits").mkdir(parents=True)
    listed = _run(tmp_path, "list", "--json")
    assert "drop-table db.half" in json.loads(listed.stdout)[0]["error"]
    described = _run(tmp_path, "describe", "db.half", "--no-topic")
    assert described.returncode == 1 and "no committed Delta version" in described.stderr
    dropped = _run(tmp_path, "drop-table", "db.half", "--yes")
    assert dropped.returncode == 0, dropped.stderr
    assert not half.exists()


def test_without_a_reachable_broker_a_table_is_described_altered_and_dropped(
    tmp_path: Path,
) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens here
    path = write_table(
        tmp_path / "wh",
        "CREATE TABLE db.t (id BIGINT) WITH ('log-store.enabled' = 'true', "
        f"'log-store.topic' = 't_log', 'log-store.address' = '{dead}');",
    )
    described = _run(tmp_path, "describe", "db.t", "--no-topic", "--json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["topic"] is None
    altered = _run(tmp_path, "alter-table", "db.t", "--set", "team=${env:HOME}", "--json")
    assert altered.returncode == 0, altered.stderr
    assert json.loads(altered.stdout)["topic"] is None
    assert DeltaTable(str(path)).metadata().configuration["team"] == "${env:HOME}"
    topic_change = _run(tmp_path, "alter-table", "db.t", "--set", "log.system.partitions=2")
    assert topic_change.returncode == 1 and "cannot reach Kafka" in topic_change.stderr
    assert DeltaTable(str(path)).version() == 1  # the refused change left the table as it was
    dropped = _run(tmp_path, "drop-table", "db.t", "--yes")
    assert dropped.returncode == 0, dropped.stderr
    assert not path.exists()
