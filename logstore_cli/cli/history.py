"""``logstore history TABLE``: the table's Delta commits, newest first, each named for what it was
(an epoch, a carry of outside writes, a write made outside logstore, maintenance, a table change);
see ``catalog/history.py``. No JVM, no broker; on an s3:// warehouse the log is read through the
storage seam."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from logstore_cli.cli.context import make_context
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, simple_table, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import InvalidInputError

DEFAULT_LIMIT = 20


@config_options(Uses.WAREHOUSE)
def history(
    table: TableArg,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", help="Show the newest N commits.", metavar="N"),
    ] = DEFAULT_LIMIT,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Show a table's Delta commits, newest first: epochs, outside writes, maintenance."""
    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.catalog.history import read_history

    if limit < 1:
        raise InvalidInputError(f"--limit must be 1 or more, got {limit}")
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    if ctx.remote:
        stored = wh.find_table_on(ctx.storage, table)
        data = read_history(stored.storage, stored.name, limit).to_json()
    else:
        ref = wh.find_table(ctx.warehouse, table)
        data = read_history(ref.path, ref.name, limit).to_json()
    out.emit(data, lambda console: _render(console, data))


def _what(c: dict[str, Any]) -> str:
    if c["kind"] in ("epoch", "carry"):
        # a Pulsar message id holds ':' itself: partition=id
        offsets = (
            " ".join(
                f"{p}={o}" if isinstance(o, str) else f"{p}:{o}" for p, o in c["offsets"].items()
            )
            or "-"
        )
        return f"{c['writer']} epoch {c['epoch']} attempt {c['attempt']}; log ends {offsets}"
    if c["kind"] == "outside":
        return "carried into the log" if c["carried"] else "not in the log yet (next ingest)"
    fence = c.get("fence")
    if c["kind"] == "fence" and fence is not None:
        if "unfenced" in fence:
            after = "none" if fence["after"] is None else fence["after"]
            return f"{fence['unfenced']} took its fence down (last epoch {after})"
        return (
            f"{fence['fenced']} fenced by {fence['by']} (job {fence['job'] or '?'}, "
            f"token {fence['token']})"
        )
    return c.get("problem") or ""


def _render(console: Console, d: dict[str, Any]) -> None:
    commits = d["commits"]
    if not commits:
        console.print(text(f"{d['table']}: no commit in the Delta log"))
        return
    rows = [
        (c["version"], c["at"] or "", c["kind"], c["operation"] or "",
         "" if c["rows"] is None else f"{c['rows']:,}", _what(c))
        for c in commits
    ]  # fmt: skip
    console.print(
        simple_table(
            f"{d['table']}: Delta commits, newest first",
            ["version", "at", "kind", "operation", "rows", "what"],
            rows,
        )
    )
    shown, total = len(commits), d["total"]
    if shown < total:
        console.print(text(f"{shown} of {total:,} commits (--limit N for more)", style="dim"))
    if d["history_from"]:
        console.print(
            text(
                f"the Delta log keeps commits from version {d['history_from']} (older ones "
                "were removed by its log retention)",
                style="dim",
            )
        )
