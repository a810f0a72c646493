"""The root's ``--help``, drawn as Typer draws it but without importing ``typer.rich_utils``.

Typer's help renderer imports Rich's Markdown, Traceback and Syntax (and through them markdown-it,
Pygments and Rich's emoji table) before it draws anything: for ``logstore --help`` that is more than
half of what importing Typer and Rich costs. The root's help needs none of it: a usage line, one
paragraph, an options panel and a commands panel of plain texts. This module draws those with the
same layout, styles and highlighting (tests/unit/cli/test_lazy.py holds the text equal to Typer's
own rendering); a command's own ``--help`` stays Typer's.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from rich.columns import Columns
from rich.console import Console, RenderableType
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

# Typer's styles (typer/rich_utils.py, STYLE_*), by the theme names its highlighters use.
_THEME = Theme(
    {
        "option": "bold cyan",
        "switch": "bold green",
        "negative_option": "bold magenta",
        "negative_switch": "bold red",
        "types": "bold yellow",
        "types_sep": "dim",
        "usage": "yellow",
    }
)


class _Options(RegexHighlighter):
    highlights = [  # noqa: RUF012 (Rich's API: a class attribute)
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class _NegativeOptions(RegexHighlighter):
    highlights = [  # noqa: RUF012
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    ]


class _Types(RegexHighlighter):
    highlights = [  # noqa: RUF012
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


_options, _negative, _types = _Options(), _NegativeOptions(), _Types()


def _console() -> Console:
    # As Typer's: colour forced by the usual variables, width from TERMINAL_WIDTH.
    force = bool(os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS"))
    width = os.getenv("TERMINAL_WIDTH")
    return Console(
        theme=_THEME,
        # No ':name:' emoji codes in our help texts; rendering them would load Rich's emoji table.
        emoji=False,
        highlighter=_options,
        color_system="auto",
        force_terminal=False if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL") else (force or None),
        width=int(width) if width else None,
    )


def _paragraph(help_text: str | None) -> str:
    """The first paragraph of a help text, its single line breaks joined."""
    first = inspect.cleandoc(help_text or "").partition("\f")[0].split("\n\n")[0]
    return first.replace("\n", " ").strip()


def _table() -> Table:
    return Table(
        highlight=False, show_header=False, expand=True, box=None, show_lines=False, leading=0,
        pad_edge=False, padding=(0, 1),
    )  # fmt: skip


def _option_row(param: Any, ctx: Any) -> list[RenderableType]:
    longs = [o for o in param.opts if "--" in o]
    shorts = [o for o in param.opts if "--" not in o]
    secondary_longs = [o for o in param.secondary_opts if "--" in o]
    secondary_shorts = [o for o in param.secondary_opts if "--" not in o]
    display = getattr(param, "display_type_rich", None)
    kind = Text((display(ctx=ctx) if display else None) or "", style="bold yellow", overflow="fold")
    helps: list[RenderableType] = []
    if param.help:
        helps.append(_options(Text(_paragraph(param.help))))
    if param.envvar and getattr(param, "show_envvar", False):
        envvar = param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar)
        helps.append(Text(f"[env var: {envvar}]", style="dim yellow"))
    return [
        _options(",".join(longs)),
        _options(",".join(shorts)),
        _negative(",".join(secondary_longs)),
        _negative(",".join(secondary_shorts)),
        _types(kind),
        Columns(helps),
    ]


def print_group_help(group: Any, ctx: Any, commands: list[tuple[str, str]]) -> None:
    """``group``'s help on stdout: usage, its help, its options, and ``commands`` (name, help)."""
    console = _console()
    console.print(Padding(_options(group.get_usage(ctx)), 1), style="bold")
    if group.help:
        console.print(Padding(_options(Text(_paragraph(group.help))), (0, 1, 1, 1)))
    options = _table()
    options.highlight = True
    for param in group.get_params(ctx):
        if not getattr(param, "hidden", False):
            options.add_row(*_option_row(param, ctx))
    if options.row_count:
        console.print(Panel(options, border_style="dim", title="Options", title_align="left"))
    listing = _table()
    listing.add_column(style="bold cyan", no_wrap=True, width=max(len(n) for n, _ in commands))
    listing.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, help_text in commands:
        listing.add_row(Text(name), _options(Text(_paragraph(help_text))))
    console.print(Panel(listing, border_style="dim", title="Commands", title_align="left"))
