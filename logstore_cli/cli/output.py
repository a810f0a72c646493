"""The only way to the terminal: Rich for people, JSON for scripts.

Commands build plain data (dicts, lists) and, for people, a render function; ``Output.emit`` prints
the data as JSON on stdout in JSON mode, or lets the render function draw it. Messages, diagnostics,
errors and log records go to stderr, so stdout stays parseable. Every text that reaches the terminal
is plain text: names, values, paths and messages are never read as Rich markup (a ``[/red]`` in a
table name is printed as it is), and their control characters are shown escaped (``clean``): a lease
file, a Delta log, a record or a broker's error must not be able to move the cursor, retitle the
window or hide text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.table import Table

    from logstore_cli.errors import Diagnostic

Renderer = Callable[[Console], None]

# C0 and C1 controls (ESC starts terminal sequences; CR and BS overwrite what was printed) but
# newline and tab, and the Unicode format controls that reorder or hide text (bidi overrides and
# isolates, zero-width space, word joiner, BOM). ZWNJ/ZWJ are left alone: scripts and emoji use them.
_UNSAFE_CHARS = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


@cache
def _unsafe() -> re.Pattern[str]:
    # compiled on first use (0.3-0.4 ms, at every start-up else): most texts take the fast path
    return re.compile(_UNSAFE_CHARS)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """``value`` as text safe for a terminal: each control character shown escaped (``\\x1b``).

    Every text from a file, a record or the network goes through here on its way to the terminal
    (``Output``'s messages and tables do it themselves; ``text`` for other renderables).
    """
    value = value if isinstance(value, str) else str(value)
    # Every unsafe character is one str.isprintable() rejects (a control, a format character, a
    # line or paragraph separator): a printable text has none (tests/unit/cli/test_output.py).
    return value if value.isprintable() else _unsafe().sub(_escaped, value)


def first_line(value: object) -> str:
    """The first non-empty line of ``value``, cleaned, with ``…`` when more lines followed: for one
    table cell holding an error whose detail (a Rust or Java backtrace) belongs elsewhere."""
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    if not lines:
        return ""
    return clean(lines[0]) + (" …" if len(lines) > 1 else "")


def text(value: object, style: str = "") -> Text:
    """A Rich ``Text`` of ``value``, cleaned: never markup, never a control sequence."""
    return Text(clean(value), style=style)


def _stdout_console() -> Console:
    # Not a terminal (a pipe in a shell script): no colour, no wrapping at 80 columns.
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, no_color=True, width=200, soft_wrap=True)


def _stderr_console() -> Console:
    if sys.stderr.isatty():
        return Console(stderr=True, highlight=False)
    return Console(stderr=True, highlight=False, no_color=True, width=200, soft_wrap=True)


class Output:
    """Renders a command's result; ``json_mode`` switches from Rich to JSON on stdout."""

    def __init__(self, *, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        self.out = _stdout_console()
        self.err = _stderr_console()

    def emit(self, data: Any, render: Renderer | None = None) -> None:
        """The command's result: JSON on stdout in JSON mode; else ``render`` draws it (if given).

        A result without a renderer says nothing to people: its messages (``success``, ``info``)
        already did.
        """
        if self.json_mode:
            import json

            sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
            sys.stdout.flush()
        elif render is not None:
            render(self.out)

    def event(self, obj: dict[str, Any]) -> None:
        """One progress event of a long-running command, in JSON mode only: one compact object per
        line on stdout, flushed at once so that a reader sees it while the command runs. People get
        progress from ``status`` and ``info`` instead."""
        if self.json_mode:
            import json

            sys.stdout.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
            sys.stdout.flush()

    @contextmanager
    def status(self, message: str) -> Iterator[None]:
        """A spinner on stderr while slow work runs (a terminal only; scripts get no noise)."""
        if self.json_mode or not self.err.is_terminal:
            yield
            return
        with self.err.status(text(message)):
            yield

    def info(self, message: str) -> None:
        """A progress or status line for people; silent in JSON mode."""
        if not self.json_mode:
            self.err.print(text(message))

    def success(self, message: str) -> None:
        if not self.json_mode:
            self.err.print(Text.assemble(("✓", "green"), " ", clean(message)))

    def warning(self, message: str) -> None:
        """Printed in JSON mode too: a script's log should show what went wrong."""
        self.err.print(Text.assemble(("warning:", "yellow"), " ", clean(message)))

    def error(self, message: str, *, hint: str | None = None, detail: str | None = None) -> None:
        self.err.print(Text.assemble(("error:", "bold red"), " ", clean(message)))
        if detail:
            self.err.print(text(detail.rstrip(), style="dim"))
        if hint:
            self.err.print(Text.assemble(("hint:", "cyan"), " ", clean(hint)))

    def diagnostics(self, diagnostics: Iterable[Diagnostic]) -> None:
        """``FILE:LINE:COL: error: MESSAGE``, then the source line and a caret under the problem.

        Never wrapped, even at a terminal: editors and CI parse the first line, and the caret must
        stay under its column.
        """
        for d in diagnostics:
            style = "bold red" if d.severity == "error" else "bold yellow"
            where = f"{d.location}: " if d.location else ""
            self.err.print(
                Text.assemble(clean(where), (f"{d.severity}:", style), " ", clean(d.message)),
                soft_wrap=True,
            )
            for line in d.excerpt():
                self.err.print(text(line), soft_wrap=True)


def simple_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A table of plain values: title, headers and cells are text, never Rich markup."""
    from rich.table import Table  # here: fractions and decimal come with it

    table = Table(title=_text(title), title_justify="left", header_style="bold")
    for col in columns:
        table.add_column(text(col))
    for row in rows:
        table.add_row(*(text("" if v is None else v) for v in row))
    return table


def key_value_table(title: str | None, pairs: Sequence[tuple[str, Any]]) -> Table:
    """Two columns, key (bold) and value; plain text like ``simple_table``."""
    from rich.table import Table

    table = Table(title=_text(title), title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in pairs:
        table.add_row(text(key), text("" if value is None else value))
    return table


def _text(title: str | None) -> Text | None:
    return None if title is None else text(title)


def setup_logging(*, verbose: bool) -> None:
    """Route log records to stderr (``logs.setup_logging``; imported here when a command runs, so
    ``--help`` and ``--version`` do not load ``logging``)."""
    from logstore_cli.cli.logs import setup_logging as setup

    setup(verbose=verbose)
