"""The ``logstore`` Typer application and its single error edge.

``main`` runs the app and owns every way it can end: domain errors (``LogstoreError``) become one
clear message and the documented exit code, usage errors are Typer's, Ctrl-C is ``interrupted`` and
130, anything else an internal error; a traceback is shown only with ``--verbose``.

Commands are registered by name (``COMMANDS``) and their modules imported only when they run
(``lazy.LazyGroup``): ``logstore --help`` imports no command module, ``logstore validate`` only
``cli/ddl.py``; inside a command module, heavy imports (pyspark, confluent_kafka, deltalake) wait
inside the functions that need them.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from typing import Annotated

import typer

from logstore_cli import __version__, interrupt
from logstore_cli.cli.lazy import LazyCommand, LazyGroup
from logstore_cli.cli.output import Output, setup_logging
from logstore_cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, DDLError, LogstoreError


def _cli(name: str, module: str, attribute: str, help: str) -> LazyCommand:
    return LazyCommand(name, f"logstore_cli.cli.{module}", attribute, help)


# The commands in the order --help lists them; ``help`` is that listing's line (the command's own
# first docstring line, or its sub-app's help: tests/unit/cli/test_lazy.py holds them equal).
COMMANDS = (
    _cli(
        "setup",
        "setup",
        "setup",
        "Fetch the Spark (Delta, Kafka connector) and Kafka-broker jars from Maven Central into the "
        "local cache.",
    ),
    _cli(
        "validate",
        "ddl",
        "validate",
        "Parse and check every CREATE TABLE in FILE; errors as FILE:LINE:COL (exit code 2).",
    ),
    _cli(
        "properties",
        "ddl",
        "properties",
        "List the table properties logstore understands (Amoro and Paimon vocabularies).",
    ),
    _cli(
        "create-table",
        "tables",
        "create_table",
        "Create the Delta table and, when the log store is on, its Kafka topic, for each CREATE "
        "TABLE.",
    ),
    _cli(
        "describe",
        "tables",
        "describe",
        "Show a table: schema, key, properties (secrets redacted), Delta version, topic offsets.",
    ),
    _cli(
        "list", "tables", "list_tables", "List the warehouse's tables with their log store status."
    ),
    _cli(
        "alter-table",
        "tables",
        "alter_table",
        "Change table properties, validated like DDL; turning the log store on creates its topic; "
        "add nullable columns; widen a column's type.",
    ),
    _cli(
        "drop-table",
        "tables",
        "drop_table",
        "Delete a table's Delta directory (and with --delete-topic its topic). Asks first.",
    ),
    _cli(
        "ingest",
        "ingest",
        "ingest",
        "Double-write changes into a table: exactly once into Delta, epoch-tagged into Kafka.",
    ),
    _cli(
        "read",
        "read",
        "read",
        "Read a table: its Delta snapshot or changes, or its log at a consistency level.",
    ),
    _cli(
        "status",
        "status",
        "status",
        "Show who writes a table and how far: lease, writers' last epochs, log tail, quarantine.",
    ),
    _cli(
        "history",
        "history",
        "history",
        "Show a table's Delta commits, newest first: epochs, outside writes, maintenance.",
    ),
    _cli(
        "optimize",
        "optimize",
        "optimize",
        "Compact a table's small files (Delta OPTIMIZE); safe while an ingest runs.",
    ),
    _cli(
        "vacuum",
        "vacuum",
        "vacuum",
        "Delete data files old Delta versions referenced, keeping what hybrid reads still need.",
    ),
    _cli(
        "verify",
        "verify",
        "verify",
        "Check that the table's committed log, folded by key, equals its Delta table.",
    ),
    _cli(
        "broker",
        "broker",
        "app",
        "Start, stop and inspect a local Kafka broker, or a local cluster of three (KRaft, loopback "
        "only).",
    ),
    _cli(
        "pulsar",
        "pulsar",
        "app",
        "Start, stop and inspect a local Apache Pulsar standalone (loopback only).",
    ),
    _cli(
        "spark",
        "spark",
        "app",
        "Start, stop and inspect a local Spark standalone cluster (a master and workers on "
        "loopback), to run the jobs with --master spark://….",
    ),
)


class _Root(LazyGroup):
    COMMANDS = COMMANDS


app = typer.Typer(
    name="logstore",
    cls=_Root,
    help="One table that is both a Delta Lake table and a consistent Kafka changelog.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_verbose = False
COMPLETE_VAR = "_LOGSTORE_COMPLETE"  # Typer's protocol: complete_bash, complete_zsh, …


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
    resume_gc()
    setup_logging(verbose=verbose)


def resume_gc() -> None:
    """Garbage collection back on for the command, if the entry point paused it for start-up
    (``__main__.main``; a caller's process that kept it on is left alone). What start-up made
    is frozen first: it lives as long as the process, so no collection needs to scan it, and the
    first one does not pay for the whole start-up at once."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn its outcome into an exit code."""
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    """Run the app; every outcome, including Ctrl-C or SIGTERM at any point, is a message and an
    exit code."""
    signals = interrupt.install()  # already in place when started through __main__
    try:
        try:
            _invoke(sys.argv[1:] if argv is None else list(argv))
        except BaseException as exc:  # the edge: every outcome is reported here
            return _report(
                exc, interrupted=signals.seen() or _from_interrupt(exc), by=signals.first
            )
        # A stop that something swallowed still counts: the user asked to stop.
        return _report(None, interrupted=True, by=signals.first) if signals.seen() else 0
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was being reported
        return EXIT_INTERRUPTED
    finally:
        interrupt.uninstall()


def _invoke(args: list[str]) -> None:
    """Parse and run the command, letting every exception through.

    Not ``app()``: Typer's own edge would turn Ctrl-C into a silent 130 (dropping the notes on the
    KeyboardInterrupt that say what an interrupted change left behind), or at a prompt into
    "Aborted!" and 1.
    """
    command = typer.main.get_command(app)
    if os.environ.get(COMPLETE_VAR):
        # The shell's completion function calls us with this variable set: answer and exit, as
        # Click's main() would (bypassed here). SystemExit carries the code.
        command._main_shell_completion({}, "logstore", COMPLETE_VAR)
    with command.make_context("logstore", args) as ctx:
        command.invoke(ctx)


def _report(exc: BaseException | None, *, interrupted: bool, by: int | None = None) -> int:
    """Print what ended the run (on stderr) and return its exit code."""
    if interrupted:
        # Whatever surfaced after a Ctrl-C (KeyboardInterrupt, a py4j error from the broken JVM
        # call, a domain error wrapping it) is the interrupt's consequence, not a failure to report;
        # what the interrupted work left behind is.
        if exc is not None and _verbose:
            _print_traceback(exc)
        by_term = by == signal.SIGTERM
        Output().error(
            "interrupted (SIGTERM)" if by_term else "interrupted", detail=_left_behind(exc)
        )
        return EXIT_INTERRUPTED
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_FAILURE)
    if isinstance(exc, typer.Exit):  # a command's own exit code, or --help and --version
        return exc.exit_code
    if isinstance(exc, typer.Abort | EOFError):  # end of input at a prompt
        Output().error("aborted: no answer (end of input)")
        return EXIT_FAILURE
    if isinstance(exc, BrokenPipeError):  # stdout closed early (| head): nothing left to say
        _silence_stdout()
        return EXIT_FAILURE
    if isinstance(exc, LogstoreError):
        if _verbose:
            _print_traceback(exc)
        if isinstance(exc, DDLError):  # FILE:LINE:COL: error: … with the source line
            Output().diagnostics(exc.diagnostics)
        else:
            Output().error(exc.message, hint=exc.hint, detail=_left_behind(exc))
        return exc.exit_code
    if isinstance(exc, typer.TyperException):  # usage errors: Typer's own rendering, exit 2
        _show_usage_error(exc)
        return exc.exit_code
    # A bug, ours or a library's (delta-rs panics are BaseExceptions): no raw traceback unless asked.
    if _verbose:
        _print_traceback(exc)
    Output().error(
        f"internal error: {type(exc).__name__}: {exc}",
        hint=None if _verbose else "re-run with --verbose for the traceback, and please report it",
        detail=_left_behind(exc),
    )
    return EXIT_FAILURE


def _left_behind(exc: BaseException | None) -> str | None:
    """An error's detail and notes: what the failed or interrupted work did and left (the services
    attach it on the way out)."""
    if exc is None:
        return None
    parts = [exc.detail] if isinstance(exc, LogstoreError) and exc.detail else []
    parts += getattr(exc, "__notes__", [])
    return "\n".join(parts) or None


def _silence_stdout() -> None:
    # Python flushes stdout again at exit and would report the broken pipe a second time.
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file: nothing will be flushed
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def _show_usage_error(exc: typer.TyperException) -> None:
    """As Typer shows it on its own: usage line, help hint, the error in a panel."""
    try:
        from typer.rich_utils import rich_format_error
    except ImportError:  # a Typer without its Rich formatter: Click's plain form
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            Output().error(exc.format_message())
        return
    rich_format_error(exc)  # type: ignore[arg-type]


def _print_traceback(exc: BaseException) -> None:
    import traceback

    traceback.print_exception(exc, file=sys.stderr)


def _from_interrupt(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is ``exc`` or anywhere in its chain of causes and contexts."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        todo += [e.__cause__, e.__context__]
    return False
