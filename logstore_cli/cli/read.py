"""``logstore read``: a table's Delta snapshot or changes (``--mode file``), or its log at a read
level (``--mode log``), to a terminal table, JSON lines, or a Delta / Parquet path.

Data goes to stdout (or the path); messages to stderr only. Engines: ``consumer`` reads the log
with confluent-kafka in this process (no JVM: starts in well under a second, shows a record
within milliseconds of its commit); ``delta-rs`` reads the Delta table (``--mode file``) with
delta-rs and Arrow in this process (no JVM either); ``spark`` runs the read as a PySpark job.
``auto`` picks delta-rs for ``--mode file``, and for a log read the consumer to stdout, Spark for a
path.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from logstore_cli.cli.context import Context, make_context, pulsar_admin_url
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, clean, key_value_table, text
from logstore_cli.config import Overrides, Uses, local_path
from logstore_cli.errors import InvalidInputError
from logstore_cli.interrupt import StopOnCtrlC
from logstore_cli.logformat.wire import RowKind, RowSchema
from logstore_cli.read import plan
from logstore_cli.read.service import ReadRequest, ReadSummary, build_request, check_new_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG_PANEL = "Log reads (--mode log)"
FILE_PANEL = "Delta reads (--mode file)"
OUT_PANEL = "Output"

# A terminal table holds at most this many rows unless --limit says otherwise.
TABLE_ROWS = 1000
_KIND_STYLE = {"+I": "green", "+U": "cyan", "-U": "yellow", "-D": "red"}


class JsonLines:
    """One JSON object per change on a text stream (stdout): ``{"kind", "row", ...metadata}``."""

    def __init__(self, schema: RowSchema, stream: IO[str]) -> None:
        self.schema = schema
        self.stream = stream
        self.lines = plan.ChangeLines(schema)

    def change(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        self.stream.write(self.lines.line(kind, row, meta) + "\n")

    def flush(self) -> None:
        self.stream.flush()

    def schema_changed(self, schema: RowSchema) -> None:
        self.schema, self.lines = schema, plan.ChangeLines(schema)


class TerminalTable:
    """A Rich table of the changes, printed when the read ends (bounded reads); a following read
    prints one styled line per change as it comes instead."""

    def __init__(self, schema: RowSchema, console: Console, *, follow: bool, cap: int) -> None:
        self.schema = schema
        self.console = console
        self.follow = follow
        self.cap = cap
        self.rows: list[tuple[str, list[str], str]] = []
        self.dropped = 0

    def change(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        cells = [_cell(row, name) for name in self.schema.names]
        where = _where(meta)
        if self.follow:
            line = Text.assemble((f"{kind.value:<3}", _KIND_STYLE.get(kind.value, "")), " ")
            line.append(
                clean("  ".join(f"{n}={c}" for n, c in zip(self.schema.names, cells, strict=True)))
            )
            if where:
                line.append(clean(f"  {where}"), style="dim")
            self.console.print(line, soft_wrap=True)
        elif len(self.rows) < self.cap:
            self.rows.append((kind.value, cells, where))
        else:
            self.dropped += 1

    def flush(self) -> None:
        """Nothing is held: a following read prints each change as it comes."""

    def schema_changed(self, schema: RowSchema) -> None:
        self.schema = schema  # rows held so far have no cell for an added column: ""

    def render(self, title: str) -> None:
        if self.follow:
            return
        table = Table(title=text(title), title_justify="left")
        table.add_column("kind", no_wrap=True)
        for name in self.schema.names:
            table.add_column(text(name), overflow="fold")
        table.add_column("at", style="dim", no_wrap=True)
        width = len(self.schema.names)
        for kind, cells, where in self.rows:
            cells = cells + [""] * (width - len(cells))  # held before a column was added
            table.add_row(Text(kind, _KIND_STYLE.get(kind, "")), *map(text, cells), text(where))
        self.console.print(table)


def _cell(row: Mapping[str, Any], name: str) -> str:
    if name not in row:
        return ""  # a -D's row image may hold only the key
    value = row[name]
    return "null" if value is None else str(value)


def _where(meta: Mapping[str, Any]) -> str:
    if "partition" in meta:
        text = f"p{meta['partition']}@{meta['offset']}"
        return text + (" retraction" if meta.get("retraction") else "")
    if "version" in meta:
        return f"v{meta['version']}"
    return ""


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA, Uses.SPARK)
def read(
    table: TableArg,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="file: the Delta table; log: the Kafka log (default: the table's "
            "mixed-format.read.mode, file when it has none).",
        ),
    ] = None,
    consistent: Annotated[
        bool,
        typer.Option(
            "--consistent",
            help="Read the log at the table's consistency, committed when that is none.",
            rich_help_panel=LOG_PANEL,
        ),
    ] = False,
    consistency: Annotated[
        str | None,
        typer.Option(
            "--consistency",
            help="committed (only what Delta committed), eventual (at once; a failed attempt "
            "retracted), none (at once, as written). Default: the table's.",
            rich_help_panel=LOG_PANEL,
        ),
    ] = None,
    changelog_mode: Annotated[
        str,
        typer.Option(
            "--changelog-mode",
            help="all-kinds (+I -U +U -D) or append-only (inserts only).",
            rich_help_panel=LOG_PANEL,
        ),
    ] = "all-kinds",
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="earliest, latest, timestamp:MS, or snapshot[:VERSION] (the Delta snapshot, "
            "then the log after it). Default: earliest; with --follow the table's startup mode.",
            rich_help_panel=LOG_PANEL,
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep reading new records until Ctrl-C.",
            rich_help_panel=LOG_PANEL,
        ),
    ] = False,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Resume from (and save progress to) this file (consumer engine) or directory "
            "(spark engine).",
            rich_help_panel=LOG_PANEL,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="auto, delta-rs, consumer or spark. --mode file: delta-rs (auto; no JVM) or "
            "spark. --mode log: consumer (confluent-kafka, no JVM) or spark; auto picks the "
            "consumer for stdout, Spark for a Delta or Parquet path.",
        ),
    ] = "auto",
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="A Delta version or timestamp: the snapshot then; with --changes the first "
            "version whose changes are shown.",
            rich_help_panel=FILE_PANEL,
        ),
    ] = None,
    changes: Annotated[
        bool,
        typer.Option(
            "--changes",
            help="The table's changes (Change Data Feed) instead of its snapshot.",
            rich_help_panel=FILE_PANEL,
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Stop after this many rows.", rich_help_panel=OUT_PANEL),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="table, jsonl, jsonl:PATH (JSON lines to a new file), delta:PATH, parquet:PATH "
            "or PATH (.parquet: Parquet, else Delta). Default: a table on a terminal, JSON lines "
            "otherwise.",
            rich_help_panel=OUT_PANEL,
        ),
    ] = None,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Read a table: its Delta snapshot or changes, or its log at a consistency level."""
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    target = plan.parse_output(
        output if output is not None or not json_ else "jsonl",
        stdout_is_terminal=out.out.is_terminal,
    )
    if json_ and target.kind == "table":  # a script asked for JSON: a Rich table would break it
        raise InvalidInputError(
            "--json and --output table do not go together",
            hint="--json prints JSON lines (--output jsonl) or writes to a path; drop one of them",
        )
    if checkpoint is not None and checkpoint.strip():
        checkpoint = local_path(checkpoint, "--checkpoint")
    stored = ctx.load_any(table)  # local, or on the warehouse's storage (s3://, hdfs://)
    client: dict[str, str] = dict(ctx.config.kafka.client)
    if stored.spec.log_store is not None:
        client.update(stored.spec.log_store.client_properties)
    req = build_request(
        stored, mode=mode, engine=engine, output=target, consistent=consistent,
        consistency=consistency, changelog=changelog_mode, start=from_, follow=follow,
        limit=limit, checkpoint=checkpoint, as_of=as_of, changes=changes,
        bootstrap=None, client_properties=client, timeout_s=ctx.config.kafka.timeout_s,
    )  # fmt: skip
    log_store = stored.spec.log_store
    if req.mode == "log" and log_store is not None and log_store.system == "pulsar":
        req = dataclasses.replace(req, admin_url=pulsar_admin_url(ctx, log_store))
    cap = limit if limit is not None else TABLE_ROWS
    _describe_start(out, req)
    # Spark installs its own SIGINT handler when it starts: ours goes in after it.
    spark = _session(ctx, out, req) if req.engine == "spark" else None
    with (
        _jsonl_file(target.path) if target.kind == "jsonl" and target.path else nullcontext(None)
    ) as file:
        sink: JsonLines | TerminalTable | None = None
        if target.kind == "jsonl":
            sink = JsonLines(req.schema, sys.stdout if file is None else file)
        elif target.kind == "table":
            sink = TerminalTable(req.schema, out.out, follow=req.follow, cap=cap)
        with StopOnCtrlC(
            out.warning, "stopping the read (Ctrl-C again to stop at once)"
        ) as stopper:
            try:
                summary = _run(spark, req, sink, stopper.requested.is_set)
            except BrokenPipeError:
                # The reader of stdout went away (e.g. `| head`): not an error of the read.
                _silence_stdout()
                return
    if isinstance(sink, TerminalTable):
        sink.render(f"{req.name} ({_what(req)})")
        if sink.dropped:
            out.warning(
                f"showing the first {len(sink.rows):,} of {summary.rows:,} rows: use --limit, "
                "or --output jsonl for all of them"
            )
    _finish(out, req, summary, json_)
    if stopper.requested.is_set():
        interrupt = KeyboardInterrupt()
        interrupt.add_note(
            "stopped"
            + (f"; progress saved in {req.checkpoint}" if req.checkpoint is not None else "")
        )
        raise interrupt


def _jsonl_file(path: str) -> IO[str]:
    """``--output jsonl:PATH``: a new file (never one that exists, nor through a symlink there)."""
    try:
        return open(path, "x", encoding="utf-8")  # closed by the caller's with
    except FileExistsError:
        check_new_path(path)  # its message and hint
        raise
    except OSError as exc:
        raise InvalidInputError(
            f"cannot create --output {path}: {exc.strerror or exc}",
            hint="give a path in a directory that exists and is writable",
        ) from None


def _session(ctx: Context, out: Output, req: ReadRequest) -> SparkSession:
    from logstore_cli.jobs.spark import SparkSettings, build_session

    with out.status("starting Spark …"):
        return build_session(
            SparkSettings(
                master=ctx.config.spark.master,
                conf=ctx.config.spark.conf,
                app_name=f"logstore read {req.name}",
                s3=ctx.spark_s3,
            )
        )


def _run(
    spark: SparkSession | None, req: ReadRequest, sink: Any, stop: Callable[[], bool]
) -> ReadSummary:
    if req.engine == "delta-rs":
        from logstore_cli.read.delta_rs import read_with_delta_rs

        return read_with_delta_rs(req, sink, stop=stop)
    if spark is None:
        from logstore_cli.read.service import read_with_consumer

        return read_with_consumer(req, sink, stop=stop)
    from logstore_cli.jobs import read as read_job

    return read_job.run(spark, req, sink, stop=stop)


def _what(req: ReadRequest) -> str:
    if req.mode == "file":
        at = f" as of {req.as_of}" if req.as_of is not None else ""
        return ("Delta changes" if req.changes else "Delta snapshot") + at
    assert req.start is not None
    return f"log, {req.level}, from {req.start.describe()}" + (", following" if req.follow else "")


def _describe_start(out: Output, req: ReadRequest) -> None:
    where = f" to {req.output.kind} {req.output.path}" if req.output.path else ""
    out.info(f"reading {req.name}: {_what(req)} ({req.engine} engine){where}")


def _finish(out: Output, req: ReadRequest, summary: ReadSummary, json_: bool) -> None:
    if summary.unconfirmed_markers:
        # Not data a reader can use, and not an error of the read: someone wrote to the topic.
        out.warning(
            f"{summary.unconfirmed_markers} commit markers name epochs the Delta log of "
            f"{req.name} does not hold (forged, or not written by this table's ingest jobs): "
            f"ignored, they released nothing and closed no epoch; {summary.unconfirmed_records} "
            "records of the attempts they named stay uncommitted. Check who may write to the "
            "topic (Kafka ACLs); `logstore verify` names them"
        )
    if json_:
        if req.output.to_stdout:
            # stdout carries the data; one compact line, so a script can pick it out of stderr
            out.err.print(
                json.dumps(summary.to_json()), markup=False, highlight=False, soft_wrap=True
            )
        else:
            out.emit(summary.to_json())
        return
    pairs: list[tuple[str, Any]] = [("rows", f"{summary.rows:,}")]
    if req.mode == "file" and summary.snapshot_version is not None and not req.changes:
        pairs.append(("version", str(summary.snapshot_version)))
    if req.mode == "log":
        if summary.snapshot_version is not None:
            pairs.append(
                ("snapshot", f"v{summary.snapshot_version}: {summary.snapshot_rows:,} rows")
            )
        if req.engine == "consumer":  # Spark's tasks read the records: it counts rows only
            pairs.append(("log records", f"{summary.records:,} (+{summary.markers:,} markers)"))
        if summary.retractions:
            pairs.append(("retractions", f"{summary.retractions:,}"))
        if summary.skipped:
            pairs.append(("skipped", f"{summary.skipped:,} records not in logstore's format"))
        if summary.pending_epochs:
            pairs.append(("open epochs", f"{summary.pending_epochs} (not committed yet)"))
        if summary.fenced_epochs:
            pairs.append(
                (
                    "fenced epochs",
                    f"{summary.fenced_epochs} (their writer lost the table: never committed)",
                )
            )
        if summary.unconfirmed_markers:
            unconfirmed = summary.unconfirmed_markers, summary.unconfirmed_records
            pairs.append(
                ("unconfirmed", "{:,} markers, {:,} records (ignored)".format(*unconfirmed))
            )
    if req.output.path:
        pairs.append(("written to", f"{req.output.kind}:{req.output.path}"))
    pairs.append(("seconds", f"{summary.seconds:.2f}"))
    out.err.print(key_value_table(None, pairs))
    if summary.limited:
        out.info(f"stopped at --limit {req.limit}")


def _silence_stdout() -> None:
    """After a broken pipe, make Python's exit-time flush of stdout quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
