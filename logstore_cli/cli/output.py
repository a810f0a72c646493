"""Output in two forms: Rich for people at a terminal, JSON for scripts.

Commands build plain data (dicts, lists) and a render function; ``Output.emit`` either prints the data
as JSON on stdout or lets the render function draw it. Messages and errors go to stderr so that stdout
stays parseable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


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

    def emit(self, data: Any, render: Callable[[Console], None] | None = None) -> None:
        if self.json_mode or render is None:
            sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
            sys.stdout.flush()
        else:
            render(self.out)

    @contextmanager
    def status(self, message: str) -> Iterator[None]:
        """A spinner on stderr while slow work runs (a terminal only; scripts get no noise)."""
        if self.json_mode or not self.err.is_terminal:
            yield
            return
        with self.err.status(message):
            yield

    def info(self, message: str) -> None:
        """A progress or status line for people; silent in JSON mode."""
        if not self.json_mode:
            self.err.print(message)

    def success(self, message: str) -> None:
        if not self.json_mode:
            self.err.print(f"[green]✓[/green] {message}")

    def warning(self, message: str) -> None:
        self.err.print(f"[yellow]warning:[/yellow] {message}", markup=True)

    def error(self, message: str, *, hint: str | None = None, detail: str | None = None) -> None:
        self.err.print(f"[bold red]error:[/bold red] {_escape(message)}")
        if detail:
            self.err.print(_escape(detail.rstrip()), style="dim")
        if hint:
            self.err.print(f"[cyan]hint:[/cyan] {_escape(hint)}")


def simple_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A table of plain values: cells are text, never Rich markup (user data may hold '[')."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    return table


def key_value_table(title: str | None, pairs: Sequence[tuple[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in pairs:
        table.add_row(Text(key), Text("" if value is None else str(value)))
    return table


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
