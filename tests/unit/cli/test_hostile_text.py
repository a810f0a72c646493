"""Texts from files, records and brokers reach the terminal with their control characters escaped,
and a lease file with hostile values is a clear message, not a crash (issue 18, item 7). ``status``
and ``list`` run as a script runs them: no terminal, no Kafka (``--no-topic``, an offline table)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from logstore_cli.cli.output import (
    Output,
    clean,
    first_line,
    key_value_table,
    simple_table,
    text,
)
from logstore_cli.ingest.plan import STATE_DIR
from tests.deltalog import write_table

DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders_log',
      'kafka.bootstrap.servers' = '127.0.0.1:1', 'log.system.partitions' = '1');
"""
# ESC sequences (colour, window title, clear screen), CR, BEL, backspace and a bidi override.
HOSTILE = "j\x1b[31mRED\x1b]0;owned\x07\r\x08\x1b[2J\u202eevil"
RAW = ("\x1b", "\x07", "\r", "\x08", "\u202e")


def test_clean_escapes_control_characters_and_keeps_lines_and_tabs() -> None:
    assert clean(HOSTILE) == "j\\x1b[31mRED\\x1b]0;owned\\x07\\x0d\\x08\\x1b[2J\\u202eevil"
    assert clean("a\tb\nc") == "a\tb\nc"
    assert clean("ünïcödé ✓ 日本") == "ünïcödé ✓ 日本"
    assert clean(5) == "5"
    assert text(HOSTILE).plain == clean(HOSTILE)


def test_first_line_keeps_one_cleaned_line_and_marks_the_rest() -> None:
    backtrace = "\n  Generic delta kernel error: bad \x1b[2J json\nStack backtrace:\n   0: ..."
    assert first_line(backtrace) == "Generic delta kernel error: bad \\x1b[2J json …"
    assert first_line("one line") == "one line"
    assert first_line("") == ""


def test_messages_and_tables_print_no_raw_control_character(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = Output()
    out.info(HOSTILE)
    out.success(HOSTILE)
    out.warning(HOSTILE)
    out.error(HOSTILE, hint=HOSTILE, detail=HOSTILE)
    console = Console(file=io.StringIO(), width=400, no_color=True)
    console.print(simple_table(HOSTILE, [HOSTILE], [[HOSTILE]]))
    console.print(key_value_table(HOSTILE, [(HOSTILE, HOSTILE)]))
    printed = capsys.readouterr().err + console.file.getvalue()  # type: ignore[attr-defined]
    assert printed.count(clean(HOSTILE)) == 12
    for raw in RAW:
        assert raw not in printed


# -- status and list on hostile files --------------------------------------------------------------


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.update(LOGSTORE_WAREHOUSE=str(root / "wh"), LOGSTORE_STATE_DIR=str(root / "state"),
               LOGSTORE_HOME=str(root / "home"))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args], cwd=root, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _lease(**values: Any) -> dict[str, Any]:
    return {"format": 1, "job": "ingest-1", "host": "h", "pid": 1, "token": "t",
            "acquired_at": 1_700_000_000, "expires_at": 1_700_000_060} | values  # fmt: skip


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = write_table(tmp_path / "wh", DDL)
    (path / STATE_DIR).mkdir()
    return path


def _write_lease(table: Path, text: str) -> None:
    (table / STATE_DIR / "lease.json").write_text(text)


@pytest.mark.parametrize(
    "lease",
    [
        json.dumps(_lease(expires_at=1e308)),
        json.dumps(_lease(acquired_at=-5)),
        json.dumps(_lease(pid=10**30)),
        json.dumps(_lease(expires_at=10**400)),
        json.dumps(_lease(acquired_at=1_700_000_100)),  # expires before it was taken
        json.dumps(_lease(job=["a"])),
        json.dumps(_lease()).replace("1700000060", "NaN"),
        json.dumps(_lease()).replace("1700000060", "-Infinity"),
    ],
    ids=["huge", "negative", "huge-pid", "huge-int", "reversed", "wrong-type", "nan", "-inf"],
)
def test_status_reports_a_hostile_lease_file_instead_of_crashing(table: Path, lease: str) -> None:
    _write_lease(table, lease)
    result = _run(table.parents[2], "status", "db.orders", "--no-topic")
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "is not a logstore lease" in result.stderr  # the warning names the file and the problem
    assert "unreadable:" in result.stdout


def test_status_escapes_control_characters_of_a_lease(table: Path) -> None:
    _write_lease(table, json.dumps(_lease(job=HOSTILE, host=HOSTILE, expires_at=4_000_000_000)))
    result = _run(table.parents[2], "status", "db.orders", "--no-topic")
    assert result.returncode == 0, result.stderr
    assert clean(HOSTILE) in result.stdout
    for raw in RAW:
        assert raw not in result.stdout + result.stderr
    shown = _run(table.parents[2], "status", "db.orders", "--no-topic", "--json")
    assert json.loads(shown.stdout)["lease"]["job"] == HOSTILE  # data stays exact for scripts


def test_list_shows_the_first_line_of_a_corrupt_tables_error(table: Path) -> None:
    log = table / "_delta_log"
    (log / "00000000000000000001.json").write_text("{not json\x1b[2J\n")
    result = _run(table.parents[2], "list")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    cell = [line for line in result.stdout.splitlines() if "db.orders" in line]
    assert len(cell) == 1 and "error:" in cell[0], result.stdout
    assert "<unknown>" not in result.stdout + result.stderr  # delta-rs's backtrace frames


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_log_records_print_no_raw_control_character(
    capsys: pytest.CaptureFixture[str], verbose: bool
) -> None:
    from logstore_cli.cli.output import setup_logging

    setup_logging(verbose=verbose)
    try:
        logging.getLogger("logstore_cli.read.consumer").warning("broker said %s", HOSTILE)
    finally:
        setup_logging(verbose=False)
    err = capsys.readouterr().err
    assert "broker said j\\x1b[31mRED" in err
    for raw in RAW:
        assert raw not in err
