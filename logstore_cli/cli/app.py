"""The ``logstore`` Typer application and its single error edge.

Domain errors (``LogstoreError``) are caught here, once, and printed as one clear message with the
documented exit code; a traceback is shown only with ``--verbose``. Command modules are imported here
but keep their heavy imports (pyspark, confluent_kafka) inside the functions that need them, so
``logstore --help`` starts no JVM and stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from logstore_cli import __version__
from logstore_cli.cli import broker, ddl, setup, tables
from logstore_cli.cli.output import Output
from logstore_cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, DDLError, LogstoreError

app = typer.Typer(
    name="logstore",
    help="One table that is both a Delta Lake table and a consistent Kafka changelog.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_verbose = False


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"logstore {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show tracebacks and debug details.", envvar="LOGSTORE_VERBOSE"
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    global _verbose
    _verbose = verbose


app.add_typer(broker.app, name="broker")
app.command("setup")(setup.setup)
app.command("validate")(ddl.validate)
app.command("properties")(ddl.properties)
app.command("create-table")(tables.create_table)
app.command("describe")(tables.describe)
app.command("list")(tables.list_tables)
app.command("alter-table")(tables.alter_table)
app.command("drop-table")(tables.drop_table)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn errors into exit codes."""
    try:
        # Standalone mode: Typer/Click report usage errors themselves (exit 2) and exit.
        app(args=argv, prog_name="logstore")
    except LogstoreError as exc:
        if _verbose:
            import traceback

            traceback.print_exc()
        if isinstance(exc, DDLError):  # FILE:LINE:COL: error: … with the source line
            ddl.print_diagnostics(Output(), exc.diagnostics)
        else:
            Output().error(exc.message, hint=exc.hint, detail=exc.detail)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        Output().error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: still no raw traceback unless asked for
        if _verbose or os.environ.get("LOGSTORE_DEBUG"):
            raise
        Output().error(
            f"internal error: {type(exc).__name__}: {exc}",
            hint="re-run with --verbose for the traceback, and please report it",
        )
        sys.exit(EXIT_FAILURE)
