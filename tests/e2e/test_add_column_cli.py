"""``alter-table --add-column`` as a script calls it: no JVM and no broker for a nullable column
(one Delta commit written by logstore), exit 2 with the reason for what both stores cannot take."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logstore_cli.errors import EXIT_INVALID_INPUT
from tests.deltalog import write_table

TABLE = "db.orders"
DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders_log', 'kafka.bootstrap.servers' = 'x:1',
      'log.system.partitions' = '1');
"""


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.update(LOGSTORE_WAREHOUSE=str(root / "wh"), LOGSTORE_STATE_DIR=str(root / "state"),
               LOGSTORE_HOME=str(root / "home"), JAVA_HOME=str(root / "no-java"))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args], cwd=root, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_table(tmp_path / "wh", DDL)
    return tmp_path


def _columns(root: Path) -> list[dict[str, object]]:
    result = _run(root, "describe", TABLE, "--no-topic", "--json")
    assert result.returncode == 0, result.stderr
    columns: list[dict[str, object]] = json.loads(result.stdout)["columns"]
    return columns


def test_add_columns_without_a_jvm_or_a_broker(root: Path) -> None:
    result = _run(root, "alter-table", TABLE, "--add-column", "region STRING COMMENT 'where'",
                  "--add-column", "n INT", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [c["name"] for c in json.loads(result.stdout)["added_columns"]] == ["region", "n"]
    columns = _columns(root)
    assert [c["name"] for c in columns] == ["id", "name", "region", "n"]
    assert columns[2] == {"name": "region", "type": "string", "nullable": True,
                          "comment": "where"}  # fmt: skip


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("region STRING NOT NULL", "cannot add column 'region' as NOT NULL"),
        ("Name STRING", "cannot add column 'Name': the table has a column 'name'"),
        ("region STRNG", "unknown type 'STRNG'"),
    ],
)
def test_what_both_stores_cannot_take_is_refused_with_the_reason(
    root: Path, column: str, message: str
) -> None:
    result = _run(root, "alter-table", TABLE, "--add-column", column)
    assert result.returncode == EXIT_INVALID_INPUT, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert [c["name"] for c in _columns(root)] == ["id", "name"]


def test_the_statement_form_through_sql(root: Path) -> None:
    result = _run(root, "alter-table", "--sql",
                  "ALTER TABLE db.orders ADD COLUMNS (region STRING, n INT)", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [c["name"] for c in _columns(root)] == ["id", "name", "region", "n"]
    other = _run(root, "alter-table", "db.other", "--sql", "ALTER TABLE db.orders ADD COLUMN m INT")
    assert other.returncode != 0 and "Traceback" not in other.stderr
    drop = _run(root, "alter-table", "--sql", "ALTER TABLE db.orders DROP COLUMN n")
    assert drop.returncode == EXIT_INVALID_INPUT and "DROP is refused" in drop.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--widen-column", "id INT"),
        ("--widen-column", "name BINARY"),
        ("--sql", "ALTER TABLE db.orders ALTER COLUMN id TYPE DOUBLE"),
    ],
)
def test_a_type_change_that_is_not_a_widening_is_refused_naming_the_allowed_ones(
    root: Path, args: tuple[str, str]
) -> None:
    result = _run(root, "alter-table", *(() if args[0] == "--sql" else (TABLE,)), *args)
    assert result.returncode == EXIT_INVALID_INPUT, result.stderr
    assert "not a type widening logstore takes" in result.stderr
    assert "TINYINT → SMALLINT → INT → BIGINT" in result.stderr and "Traceback" not in result.stderr
    assert [c["type"] for c in _columns(root)] == ["bigint", "string"]
