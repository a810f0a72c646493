"""``logstore validate`` and ``logstore properties``: check DDL, list the properties it may use."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from logstore_cli.cli.options import JsonOpt, config_options
from logstore_cli.cli.output import Output, simple_table
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import EXIT_INVALID_INPUT, InvalidInputError

if TYPE_CHECKING:
    from logstore_cli.model import TableSpec

SUMMARY_ROWS = 100  # tables listed in the human summary of 'validate'


@config_options(Uses.BROKERS)
def validate(
    file: Annotated[
        str,
        typer.Argument(
            help="DDL file with CREATE TABLE statements; '-' reads standard input.",
            metavar="FILE|-",
        ),
    ] = "-",
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Parse and check every CREATE TABLE in FILE; errors as FILE:LINE:COL (exit code 2)."""
    from logstore_cli.cli.context import make_context
    from logstore_cli.ddl import ParseOptions, parse_document

    out = Output(json_mode=json_)
    text, name = read_ddl(file)
    ctx = make_context(overrides)
    options = ParseOptions(default_bootstrap_servers=ctx.bootstrap_lookup)
    result = parse_document(text, name, options)
    out.diagnostics(result.diagnostics)
    if result.errors:
        raise typer.Exit(EXIT_INVALID_INPUT)
    out.emit([t.to_json() for t in result.tables], _render_tables(result.tables))
    out.success(f"{len(result.tables)} table{'s' if len(result.tables) != 1 else ''} valid")


def properties(json_: JsonOpt = False) -> None:
    """List the table properties logstore understands (Amoro and Paimon vocabularies)."""
    from logstore_cli.ddl import registry

    rows = [
        (
            d.key + "".join(f"\n(alias {a})" for a in d.aliases),
            d.vocabulary.value,
            d.type.value,
            d.default or "",
            ", ".join(d.allowed),
            d.description,
        )
        for d in registry.REGISTRY
    ]
    columns = ["property", "vocabulary", "type", "default", "values", "description"]
    out = Output(json_mode=json_)
    out.emit(
        registry.to_json(),
        lambda c: c.print(simple_table("Table properties", columns, rows)),
    )


def read_ddl(file: str) -> tuple[str, str]:
    """The text of FILE (or stdin for '-') and the name diagnostics use for it."""
    if file == "-":
        if sys.stdin.isatty():
            raise InvalidInputError(
                "no DDL given", hint="name a FILE, or pipe DDL in: logstore validate - < tables.sql"
            )
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            data, name = Path(file).read_bytes(), file
        except OSError as exc:
            raise InvalidInputError(f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig"), name
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{name} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})",
            hint="save the file as UTF-8",
        ) from exc


def _render_tables(tables: Sequence[TableSpec]) -> Callable[[Console], None]:
    # Rich spends ~0.6 ms per row; past a screenful a list helps nobody and --json has them all.
    rows = []
    for t in tables[:SUMMARY_ROWS]:
        ls = t.log_store
        rows.append(
            (
                t.name,
                len(t.columns),
                ", ".join(t.primary_key) or "—",
                t.using or "—",
                f"{ls.system}: {ls.topic} @ {ls.address}" if ls else "off",
                ls.consistency.value if ls else "—",
                ls.changelog_mode.value if ls else "—",
                len(t.properties),
            )
        )
    headers = ["table", "columns", "primary key", "using", "log store", "consistency", "changelog"]

    def render(console: Console) -> None:
        console.print(simple_table("Tables", [*headers, "properties"], rows))
        if len(tables) > SUMMARY_ROWS:
            more = len(tables) - SUMMARY_ROWS
            console.print(
                Text(f"… and {more} more table{'s' if more != 1 else ''} (--json lists all)")
            )

    return render
