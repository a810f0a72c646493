"""``Output``: the only way to the terminal. Data never read as markup, stdout only for results."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from logstore_cli.cli.output import Output, key_value_table, setup_logging, simple_table
from logstore_cli.errors import Diagnostic

# Rich markup that breaks a naive f"[green]{text}" (a closing tag with no opening one) or styles it.
NASTY = "db.[/red]t [bold]x[/bold] [link=file:///etc]y[/link] :smile: [not a tag"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    setup_logging(verbose=False)


def test_every_message_method_prints_markup_literally(capsys: pytest.CaptureFixture[str]) -> None:
    out = Output()
    out.info(f"info {NASTY}")
    out.success(f"success {NASTY}")
    out.warning(f"warning {NASTY}")
    out.error(f"error {NASTY}", hint=f"hint {NASTY}", detail=f"detail {NASTY}")
    with out.status(f"status {NASTY}"):
        pass
    captured = capsys.readouterr()
    assert captured.out == ""  # messages never touch stdout
    lines = captured.err.splitlines()
    assert lines == [
        f"info {NASTY}",
        f"✓ success {NASTY}",
        f"warning: warning {NASTY}",
        f"error: error {NASTY}",
        f"detail {NASTY}",
        f"hint: hint {NASTY}",
    ]


def test_spinner_text_is_plain_at_a_terminal() -> None:
    out = Output()
    buffer = io.StringIO()
    out.err = Console(file=buffer, force_terminal=True, width=200)
    with out.status(f"working on {NASTY}"):
        out.err.print("inside")  # the live display redraws the spinner line on every print
    assert f"working on {NASTY}" in buffer.getvalue()


def test_diagnostics_print_markup_literally(capsys: pytest.CaptureFixture[str]) -> None:
    bad = Diagnostic(
        f"unknown property '{NASTY}'",
        file="dir/[bold]t.sql",
        line=2,
        col=5,
        end_col=9,
        source_line=f"  'x[/red]' = '{NASTY}'\n",
    )
    warn = Diagnostic("skipped [/red]", file="dir/[bold]t.sql", line=1, col=1, severity="warning")
    Output().diagnostics([bad, warn])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"dir/[bold]t.sql:2:5: error: unknown property '{NASTY}'",
        f"  'x[/red]' = '{NASTY}'",
        "    ^~~~",
        "dir/[bold]t.sql:1:1: warning: skipped [/red]",
    ]


def test_table_renderers_print_markup_literally() -> None:
    console = Console(file=io.StringIO(), width=400, no_color=True)
    console.print(simple_table(f"title {NASTY}", [f"col {NASTY}"], [[NASTY], [None]]))
    console.print(key_value_table(f"kv {NASTY}", [(f"key {NASTY}", NASTY), ("empty", None)]))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for literal in (f"title {NASTY}", f"col {NASTY}", f"kv {NASTY}", f"key {NASTY}"):
        assert literal in text
    assert text.count(NASTY) == 6


def test_emit_without_renderer_says_nothing_to_people(capsys: pytest.CaptureFixture[str]) -> None:
    Output().emit({"table": "db.t"})
    assert capsys.readouterr() == ("", "")


def test_emit_with_renderer_draws_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    Output().emit({"n": 1}, lambda c: c.print(simple_table(None, ["n"], [[1]])))
    captured = capsys.readouterr()
    assert "│ 1 │" in captured.out and "{" not in captured.out
    assert captured.err == ""


def test_emit_in_json_mode_prints_json_only(capsys: pytest.CaptureFixture[str]) -> None:
    out = Output(json_mode=True)
    out.info("progress")  # people's messages are silent in JSON mode ...
    out.success("done")
    out.warning("look [/red]")  # ... warnings and errors are not
    out.emit({"name": NASTY, "n": [1, 2]}, lambda c: c.print("a table"))
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"name": NASTY, "n": [1, 2]}
    assert captured.err == "warning: look [/red]\n"


class _FlushLog(io.StringIO):
    """Records, at every flush, what had been written so far."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def flush(self) -> None:
        self.flushed.append(self.getvalue())


def test_event_is_one_compact_flushed_line_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    stdout = _FlushLog()
    monkeypatch.setattr("sys.stdout", stdout)
    out = Output(json_mode=True)
    events: list[dict[str, Any]] = [
        {"event": "batch", "rows": 3, "name": NASTY},
        {"event": "done", "nested": {"a": [1]}},
    ]
    for event in events:
        out.event(event)
    lines = stdout.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == events
    assert all(" " not in line.replace(NASTY, "") for line in lines)  # compact: no padding
    # each line was on its way before the next one was written
    assert stdout.flushed[:2] == [lines[0] + "\n", lines[0] + "\n" + lines[1] + "\n"]


def test_event_says_nothing_to_people(capsys: pytest.CaptureFixture[str]) -> None:
    Output().event({"event": "batch"})
    assert capsys.readouterr() == ("", "")


def test_logging_without_verbose_shows_only_our_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(verbose=False)
    ours = logging.getLogger("logstore_cli.provision.service")
    ours.debug("a debug detail")
    ours.info("an info line")
    ours.warning("rollback of topic %s failed", "[/red]t")
    try:
        raise ConnectionResetError("the JVM went away")
    except ConnectionResetError:
        logging.exception("Exception while sending command.")  # py4j logs on the root logger
    logging.getLogger("py4j.clientserver").error("py4j's own error")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "warning: rollback of topic [/red]t failed\n"


def test_logging_with_verbose_shows_debug_and_library_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(verbose=True)
    setup_logging(verbose=True)  # replaces its handler: each record is printed once
    logging.getLogger("logstore_cli.kafka.admin").debug("asked the broker [/red]")
    logging.getLogger("py4j.clientserver").info("py4j chatter")
    logging.getLogger("py4j.clientserver").warning("py4j warns")
    err = capsys.readouterr().err
    assert err.count("asked the broker [/red]") == 1
    assert "DEBUG" in err and "py4j warns" in err
    assert "py4j chatter" not in err


def test_the_log_handler_is_installed_when_logging_is_first_imported() -> None:
    """Commands that never log do not import ``logging`` (cli/logs.py); a module that imports it
    later still gets the handler before its first record: ours as ``warning:``, others silent."""
    code = (
        "import sys\n"
        "from logstore_cli.cli.logs import setup_logging\n"
        "assert 'logging' not in sys.modules, 'loaded before setup'\n"
        "setup_logging(verbose=False)\n"
        "assert 'logging' not in sys.modules, 'loaded by setup'\n"
        "import logging\n"
        "logging.getLogger('logstore_cli.catalog').warning('ours %s', 1)\n"
        "logging.getLogger('py4j').error('theirs')\n"
        "print(len(logging.getLogger().handlers))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert "warning: ours 1" in done.stderr
    assert "theirs" not in done.stderr


def test_clean_escapes_exactly_what_the_unsafe_pattern_matches() -> None:
    """``clean`` returns a printable text as it is, without the pattern (start-up, issue 20): no
    character it must escape is printable, so every code point comes out as the pattern says."""
    import re

    from logstore_cli.cli.output import _UNSAFE_CHARS, _escaped, clean

    unsafe = re.compile(_UNSAFE_CHARS)
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    assert [c for c in chars if unsafe.match(c) and c.isprintable()] == []
    text = "".join(chars)
    assert clean(text) == unsafe.sub(_escaped, text)
    assert clean("plain text, ünïcode") == "plain text, ünïcode"
    assert clean("a\x1b[31mb\u202ec\nd") == "a\\x1b[31mb\\u202ec\nd"
