"""``logstore ingest``: run the double-write ingest job (``jobs/ingest.py``) with progress.

Progress: a live line on a terminal, one plain line per epoch on stderr without one, one JSON
object per epoch on stdout with ``--json``. Ctrl-C stops after the epoch in flight (exit 130); a
second Ctrl-C stops at once (the epoch in flight runs again when the job restarts).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live
from rich.text import Text

from logstore_cli.cli.context import Context, make_context, parse_pairs
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, clean, key_value_table
from logstore_cli.config import STORAGE_DOC, Overrides, Uses, local_path
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan
from logstore_cli.ingest.outside import describe_all

if TYPE_CHECKING:
    from logstore_cli.catalog.delta_log import TableLocation
    from logstore_cli.ingest.epoch import CarryReport, EpochReport
    from logstore_cli.jobs.ingest import IngestJob, RunSummary
    from logstore_cli.storage import Storage
    from logstore_cli.storage.s3 import S3Storage
    from logstore_cli.storage.uri import StorageURI

SOURCE_PANEL = "Source"
GENERATE_PANEL = "Generated source (--source generate)"
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a scheme: Spark resolves the path
JOB_PANEL = "Job"


def _ratio(value: float, flag: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{flag} must be between 0 and 1, got {value}")
    return value


def _generate(
    rate: int, keys: int, total: int | None, update: float, delete: float, seed: int
) -> plan.GenerateSource:
    if rate <= 0:
        raise InvalidInputError(f"--rate must be at least 1 change per second, got {rate}")
    if keys <= 0:
        raise InvalidInputError(f"--keys must be at least 1, got {keys}")
    if total is not None and total < 0:
        raise InvalidInputError(f"--total must be 0 or more, got {total}")
    _ratio(update, "--update-ratio")
    _ratio(delete, "--delete-ratio")
    return plan.GenerateSource(rate, keys, total, update, delete, seed)


def build_job(
    ctx: Context,
    table: str,
    *,
    source: str,
    format: str | None,
    source_options: dict[str, str],
    source_bootstrap: str | None,
    coerce: frozenset[str] = frozenset(),
    generate: plan.GenerateSource,
    op_column: str | None,
    sequence_column: str | None,
    emit: str | None,
    trigger_s: float,
    once: bool,
    job: str,
    checkpoint: str | None,
    lease_ttl_s: float,
    max_epochs: int | None,
    skip_outside_through: int | None = None,
    delta_engine: str = "auto",
) -> IngestJob:
    """Everything the job needs, checked before Spark starts (bad input is exit 2 at once)."""
    from logstore_cli.catalog.delta_log import spark_path
    from logstore_cli.cli.context import pulsar_admin_url
    from logstore_cli.jobs.ingest import IngestJob, KafkaTarget, PulsarTarget
    from logstore_cli.jobs.sources import SourceRequest

    on_storage: StorageURI | None = None
    if checkpoint is not None and checkpoint.strip():
        # Before any I/O: bad input is exit 2.
        checkpoint, on_storage = checkpoint_location(
            checkpoint,
            s3_warehouse=ctx.config.s3_warehouse,
            hdfs_warehouse=ctx.config.warehouse.startswith("hdfs://"),
        )
    location: TableLocation
    if ctx.remote:
        stored_on = ctx.load_table_on(table)
        spec, location = stored_on.spec, stored_on.ref.storage
    else:
        stored = ctx.load_table(table)
        spec, location = stored.spec, stored.ref.path
    stores = plan.resolve_stores(spec, emit)
    columns = plan.resolve_columns(spec, op_column, sequence_column)
    src = plan.parse_source(
        source, format=format, source_bootstrap=source_bootstrap, generate=generate
    )
    if isinstance(src, plan.GenerateSource):
        from logstore_cli.ingest.generate import check_generate

        check_generate(src, spec, once=once)
    if not trigger_s > 0:
        raise InvalidInputError(f"--trigger must be a positive number of seconds, got {trigger_s}")
    if not lease_ttl_s >= 1:
        raise InvalidInputError(f"--lease-ttl must be at least 1 second, got {lease_ttl_s}")
    if checkpoint is not None and not checkpoint.strip():
        raise InvalidInputError("--checkpoint is empty")
    from logstore_cli.ingest import merge_engine

    try:
        engine = merge_engine.parse_choice(delta_engine)
    except ValueError as exc:
        raise InvalidInputError(f"--delta-engine: {exc}") from None
    if skip_outside_through is not None and skip_outside_through < 0:
        raise InvalidInputError(
            f"--skip-outside-through must be a Delta version (0 or more), got "
            f"{skip_outside_through}"
        )
    log = spec.log_store
    kafka = None
    pulsar = None
    client: dict[str, str] = dict(ctx.config.kafka.client)
    if log is not None:
        client.update(log.client_properties)  # the table's own keys win, as in provisioning
        if stores.log and log.system == "pulsar":
            pulsar = PulsarTarget(
                log.address, pulsar_admin_url(ctx, log), log.topic, ctx.config.kafka.timeout_s
            )
        elif stores.log:
            kafka = KafkaTarget(log.address, client, log.topic, ctx.config.kafka.timeout_s)
    kafka_log = log if log is not None and log.system != "pulsar" else None
    request = SourceRequest(
        spec=src,
        table=spec,
        columns=columns,
        options=source_options,
        coerce=coerce,
        # A kafka: source defaults to the table's own Kafka (a Pulsar address is no bootstrap).
        kafka_bootstrap=kafka_log.address if kafka_log else ctx.default_bootstrap,
        kafka_client=client if kafka_log else dict(ctx.config.kafka.client),
        once=once,
    )
    paths = plan.JobPaths(spark_path(location), plan.check_job_name(job), checkpoint)
    checkpoint_storage: Storage | None = None
    if on_storage is not None:
        from logstore_cli.storage import open_storage

        checkpoint_storage = open_storage(on_storage)
    elif checkpoint is None and not isinstance(location, Path):
        # docs/cluster.md section 5: beside the table, on its storage (never the driver's disk).
        checkpoint_storage = location.child(f"{plan.STATE_DIR}/checkpoints/{paths.job}")
    return IngestJob(
        table=spec,
        location=location,
        paths=paths,
        stores=stores,
        source=request,
        kafka=kafka,
        trigger_s=trigger_s,
        once=once,
        lease_ttl_s=lease_ttl_s,
        max_epochs=max_epochs,
        skip_outside_through=skip_outside_through,
        checkpoint_storage=checkpoint_storage,
        pulsar=pulsar,
        delta_engine=engine,
    )


def checkpoint_location(
    text: str, *, s3_warehouse: bool, hdfs_warehouse: bool = False
) -> tuple[str, StorageURI | None]:
    """``--checkpoint`` as Spark is given it, and its location when it is on S3 (an ``s3://``
    or ``s3a://`` URI, named ``s3a://`` for Spark) or on HDFS (``hdfs://``); a local path
    otherwise. Pure: exit 2 for a checkpoint on S3 when the warehouse is not on S3 (Spark would
    have no S3 connector), for one on HDFS when the warehouse is not on HDFS, for any other URI,
    and for a bucket's or a file system's root."""
    from logstore_cli.storage.uri import parse_storage_uri

    stripped = text.strip()
    on_s3 = re.match(r"(?i)s3a?://", stripped) is not None
    on_hdfs = re.match(r"(?i)hdfs://", stripped) is not None
    if not on_s3 and not on_hdfs:
        return local_path(text, "--checkpoint"), None
    if on_s3 and not s3_warehouse:
        raise InvalidInputError(
            f"--checkpoint {stripped} is on S3, which is not supported unless the warehouse "
            "is too (the job's Spark gets the S3 connector for an S3 warehouse only)",
            hint=f"give a local directory, or put the warehouse on S3; see {STORAGE_DOC}",
        )
    if on_hdfs and not hdfs_warehouse:
        raise InvalidInputError(
            f"--checkpoint {stripped} is on HDFS, which is supported with a warehouse on HDFS "
            "only (the writer id and the job's state are kept with the checkpoint, through the "
            "warehouse's storage)",
            hint=f"give a local directory, or put the warehouse on HDFS; see {STORAGE_DOC}",
        )
    try:
        uri = parse_storage_uri(text)
    except InvalidInputError as exc:
        raise InvalidInputError(
            exc.message.replace("the warehouse", "--checkpoint", 1), hint=exc.hint
        ) from None
    if not uri.segments:
        root, example = (
            ("a bucket's root", "s3://bucket/checkpoints/orders")
            if on_s3
            else ("the file system's root", f"hdfs://{uri.host}/checkpoints/orders")
        )
        raise InvalidInputError(
            f"--checkpoint {stripped} is {root}", hint=f"give a path of its own, e.g. {example}"
        )
    if on_hdfs:
        return str(uri), uri
    return f"s3a://{uri.bucket}/{uri.prefix}", uri


class Coerced:
    """The coercions ``--coerce`` accepted, per rule: the query's observed metrics
    (``plan.COERCION_METRICS``) of each finished micro-batch, from its progress report (as JSON),
    taken once per batch (the reports are read after every epoch and at the end)."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self._seen: set[int] = set()
        self.last: int | None = None  # the newest batch whose report was taken

    def take(self, progresses: Iterable[Mapping[str, Any]]) -> list[tuple[int, dict[str, int]]]:
        """The new batches' counts (batch id, rule: count, zeros left out), added to the totals."""
        found: list[tuple[int, dict[str, int]]] = []
        for progress in progresses:
            batch = int(progress["batchId"])
            self.last = batch if self.last is None else max(self.last, batch)
            metrics = (progress.get("observedMetrics") or {}).get(plan.COERCION_METRICS)
            if metrics is None or batch in self._seen:
                continue
            self._seen.add(batch)
            counts = {rule: int(n) for rule, n in metrics.items() if n}
            for rule, n in counts.items():
                self.totals[rule] = self.totals.get(rule, 0) + n
            if counts:
                found.append((batch, counts))
        return sorted(found)


def coerced_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{rule} {n:,}" for rule, n in sorted(counts.items()))


class Progress:
    """Per-epoch progress: Rich live view on a terminal, plain lines or JSON lines otherwise."""

    def __init__(self, out: Output, table: str, job: IngestJob) -> None:
        self.out = out
        self.table = table
        self.job = job
        self.started = time.monotonic()
        self.rows = 0
        self.quarantined = 0
        self.epochs = 0
        self.last: EpochReport | None = None
        self.first_started: float | None = None  # when the first epoch began (monotonic)
        self.writer = ""
        self.lock = threading.Lock()
        self.coerced = Coerced()
        self.query: Any = None  # the StreamingQuery, once started: its progress has the coercions
        self.live: Live | None = None
        if not out.json_mode and out.err.is_terminal:
            # The view is built at each refresh, so its clock runs between epochs too (the first
            # one can take a minute while Spark plans the query). Only stderr is redirected into
            # it: stdout stays the command's own.
            self.live = Live(
                get_renderable=self._view, console=out.err, refresh_per_second=4,
                transient=False, redirect_stdout=False,
            )  # fmt: skip

    def __enter__(self) -> Progress:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.refresh()
            self.live.stop()

    def started_as(self, writer: str) -> None:
        self.writer = writer
        self.out.event({"event": "start", "table": self.table, "writer": writer,
                        "job": self.job.paths.job, "stores": self.job.stores.describe()})  # fmt: skip
        if self.live is None:
            self.out.info(
                f"ingesting into {self.table} ({self.job.stores.describe()}) from "
                f"{self.job.source.spec.describe()}; writer {writer}, job {self.job.paths.job}"
            )
        else:
            self.live.refresh()

    def epoch(self, report: EpochReport) -> None:
        with self.lock:
            self.epochs += 1
            self.rows += report.rows
            self.quarantined += report.quarantined
            self.last = report
            if self.first_started is None:
                self.first_started = time.monotonic() - report.seconds
        self.out.event(report.to_json())
        self.take_coerced()
        if self.out.json_mode:
            return
        if self.live is not None:
            self.live.refresh()
        else:
            self.out.info(_epoch_line(report, self.quarantined))

    def carried(self, report: CarryReport) -> None:
        """Outside writes carried into the log (or skipped): always said, never only counted."""
        self.out.event(report.to_json())
        if report.commits:
            self.out.warning(
                f"carried {len(report.commits)} write(s) made outside logstore into the log "
                f"({report.log_records:,} records, Delta v{report.delta_version}): "
                + describe_all(report.commits)
            )
        if report.skipped:
            self.out.warning(
                f"left {len(report.skipped)} write(s) made outside logstore out of the log "
                "(--skip-outside-through): " + describe_all(report.skipped)
            )

    def take_coerced(self) -> None:
        """Report the accepted coercions of the batches finished since the last look (an epoch's
        progress is recorded after its foreachBatch: it shows at the next epoch or the end)."""
        if self.query is None or not self.job.source.coerce:
            return  # no rule accepted: the query observes no coercions
        from logstore_cli.jobs.ingest import progress_after

        with self.lock:
            new = self.coerced.take(progress_after(self.query, self.coerced.last))
        for epoch, counts in new:
            self.out.event({"event": "coerced", "epoch": epoch, "counts": counts})
            self.out.info(f"epoch {epoch}: coerced {coerced_line(counts)}")

    def _view(self) -> Text:
        now = time.monotonic()
        with self.lock:
            epochs, rows, quarantined, last = self.epochs, self.rows, self.quarantined, self.last
            first = self.first_started
        # rows/s from the first epoch's start: Spark's start-up and planning are not ingest time
        rate = "-" if first is None else f"{rows / max(now - first, 1e-9):,.0f}"
        text = Text.assemble(
            ("ingest ", "bold"), (clean(self.table), "cyan"), clean(f" ({self.job.stores.describe()})  "),
            f"epochs {epochs}  rows {rows:,}  {rate} rows/s  ",
            ("quarantined ", "yellow" if quarantined else ""), f"{quarantined}  ",
            (f"{now - self.started:,.0f} s", "dim"),
        )  # fmt: skip
        if last is not None:
            text.append("\n" + _epoch_line(last, quarantined), style="dim")
        else:
            text.append("\nwaiting for the first epoch (Spark plans the query) …", style="dim")
        return text


def _epoch_line(r: EpochReport, quarantined_total: int) -> str:
    positions = sorted(r.offsets.items())
    if any(isinstance(o, str) for _, o in positions):  # Pulsar: message ids, which hold ':'
        ends = "log last message ids " + " ".join(f"{p}={o}" for p, o in positions)
    else:
        ends = "log end offsets " + (" ".join(f"{p}:{o}" for p, o in positions) or "-")
    what = "markers re-published (already committed)" if r.republished else (
        f"{r.rows:,} rows, {r.log_records:,} log records, {r.rows_per_s:,.0f} rows/s"
    )  # fmt: skip
    version = "-" if r.delta_version is None else str(r.delta_version)
    extra = ""
    if r.commit_retries:
        extra += f"; committed again after losing {r.commit_retries} race(s) to a compaction"
    if r.compacted is not None:
        c = r.compacted
        extra += (
            f"; compacted {c.files_removed} small files into {c.files_added} (Delta v{c.version})"
            if c.version is not None
            else "; compaction: nothing to compact"
        )
    if r.compaction_failed:
        extra += f"; compaction skipped: {r.compaction_failed}"
    return (
        f"epoch {r.epoch}: {what}; Delta v{version}; {ends}; "
        f"quarantined {r.quarantined} (total {quarantined_total}){extra}"
    )


def spark_submit_command(job: IngestJob, ctx: Context, argv: list[str]) -> list[str]:
    """The spark-submit command that runs this same job: our jars, the package as --py-files,
    the session's confs, and a launcher that runs ``logstore`` with the same arguments."""
    from logstore_cli.jobs.submit import pin_options, submit_command

    master = ctx.config.spark.master
    # What this run resolved from the environment and directory goes on the command line: the
    # printed command runs the same job from any shell.
    warehouse = ctx.config.warehouse if ctx.remote else str(ctx.warehouse.absolute())
    pins = {"--master": master, "--warehouse": warehouse}
    if ctx.config.source is not None:
        pins["--config"] = str(Path(ctx.config.source).absolute())
    if ctx.default_bootstrap is not None:
        pins["--bootstrap-servers"] = ctx.default_bootstrap
    args = pin_options([a for a in argv if a != "--print-spark-submit"], pins)
    return submit_command(master, dict(ctx.config.spark.conf), args, s3=ctx.spark_s3)


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA, Uses.SPARK)
def ingest(
    table: TableArg,
    source: Annotated[
        str,
        typer.Option(
            "--source",
            help="A directory of files, kafka:TOPIC (JSON values), or 'generate'.",
            rich_help_panel=SOURCE_PANEL,
        ),
    ],
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="File format of a directory source: json, csv or parquet "
            "(default: from the files' extensions).",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    source_option: Annotated[
        list[str] | None,
        typer.Option(
            "--source-option",
            help="A Spark reader option K=V for the source (repeatable), "
            "e.g. maxFilesPerTrigger=1.",
            metavar="K=V",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    source_bootstrap: Annotated[
        str | None,
        typer.Option(
            "--source-bootstrap",
            help="Brokers of a kafka: source (default: the table's).",
            metavar="<host:port,…>",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    op_column: Annotated[
        str | None,
        typer.Option(
            "--op-column",
            help="Input column holding each change's kind: +I -U +U -D, or Debezium's c r u d "
            "(default: 'op' when the input has it; without one every row is an upsert).",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    sequence_column: Annotated[
        str | None,
        typer.Option(
            "--sequence-column",
            help="Column ordering a key's changes within an epoch (default: the table's "
            "'sequence.field'; then arrival order).",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    coerce: Annotated[
        list[str] | None,
        typer.Option(
            "--coerce",
            help="Store values that would change on the way in, changed, and count them, "
            "instead of quarantining their records (repeatable; comma-separated): "
            + ", ".join(plan.COERCIONS)
            + ", or all. See the guide's 'Coercions'.",
            metavar="RULE,…",
            rich_help_panel=SOURCE_PANEL,
        ),
    ] = None,
    rate: Annotated[
        int, typer.Option("--rate", help="Changes per second.", rich_help_panel=GENERATE_PANEL)
    ] = 1000,
    keys: Annotated[
        int, typer.Option("--keys", help="Distinct keys.", rich_help_panel=GENERATE_PANEL)
    ] = 100,
    total: Annotated[
        int | None,
        typer.Option(
            "--total", help="Stop after this many changes.", rich_help_panel=GENERATE_PANEL
        ),
    ] = None,
    update_ratio: Annotated[
        float,
        typer.Option(
            "--update-ratio",
            help="Weight of updates (0-1) among the changes of existing rows: they are updated with odds u:d against a delete.",
            rich_help_panel=GENERATE_PANEL,
        ),
    ] = 0.5,
    delete_ratio: Annotated[
        float,
        typer.Option(
            "--delete-ratio",
            help="Weight of deletes (0-1): an existing row is deleted with odds d:u; a deleted key is inserted again at its next change.",
            rich_help_panel=GENERATE_PANEL,
        ),
    ] = 0.1,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Seed of the generated changes.", rich_help_panel=GENERATE_PANEL
        ),
    ] = 0,
    emit: Annotated[
        str | None,
        typer.Option(
            "--emit",
            help="Stores to write: auto, file, log or file,log "
            "(default: the table's mixed-format.emit.mode; auto = file, plus the log when on).",
            rich_help_panel=JOB_PANEL,
        ),
    ] = None,
    trigger: Annotated[
        float,
        typer.Option(
            "--trigger", help="Seconds between micro-batches (epochs).", rich_help_panel=JOB_PANEL
        ),
    ] = 2.0,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Process what the source holds now, then exit 0.",
            rich_help_panel=JOB_PANEL,
        ),
    ] = False,
    job: Annotated[
        str,
        typer.Option(
            "--job",
            help="Job name: its checkpoint and quarantine live under <table>/_logstore.",
            rich_help_panel=JOB_PANEL,
        ),
    ] = plan.DEFAULT_JOB,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Checkpoint directory (default: <table>/_logstore/checkpoints/<job>).",
            rich_help_panel=JOB_PANEL,
        ),
    ] = None,
    lease_ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            help="Seconds the table's writer lease lasts without renewal (a killed job on "
            "another host blocks the table this long).",
            rich_help_panel=JOB_PANEL,
        ),
    ] = 60.0,
    skip_outside_through: Annotated[
        int | None,
        typer.Option(
            "--skip-outside-through",
            help="Writes made to the Delta table outside logstore are carried into the log "
            "from Delta's Change Data Feed; the job refuses to start when one has no feed. "
            "With this, those up to this Delta version whose feed cannot be read are left out "
            "of the log instead (said in a warning).",
            metavar="VERSION",
            rich_help_panel=JOB_PANEL,
        ),
    ] = None,
    delta_engine: Annotated[
        str,
        typer.Option(
            "--delta-engine",
            help="Who commits a keyed table's epochs to Delta: 'auto' (delta-rs in this process "
            "for a table on this machine's disk of up to 1 GiB and an epoch of up to 1,000,000 "
            "changes, else Spark's MERGE) or 'spark' (always Spark's MERGE).",
            metavar="auto|spark",
            rich_help_panel=JOB_PANEL,
        ),
    ] = "auto",
    max_epochs: Annotated[
        int | None,
        typer.Option("--max-epochs", help="Stop after this many epochs.", hidden=True),
    ] = None,
    print_spark_submit: Annotated[
        bool,
        typer.Option(
            "--print-spark-submit",
            help="Print the spark-submit command that runs this job, and exit.",
            rich_help_panel=JOB_PANEL,
        ),
    ] = False,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Double-write changes into a table: exactly once into Delta, epoch-tagged into Kafka."""
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    gen = _generate(rate, keys, total, update_ratio, delete_ratio, seed)
    options = parse_pairs(source_option, "--source-option")
    ingest_job = build_job(
        ctx, table, source=source, format=format_, source_options=options,
        source_bootstrap=source_bootstrap, coerce=plan.parse_coercions(coerce), generate=gen,
        op_column=op_column,
        sequence_column=sequence_column, emit=emit, trigger_s=trigger, once=once, job=job,
        checkpoint=checkpoint, lease_ttl_s=lease_ttl, max_epochs=max_epochs,
        skip_outside_through=skip_outside_through, delta_engine=delta_engine,
    )  # fmt: skip
    if print_spark_submit:
        command = spark_submit_command(ingest_job, ctx, sys.argv[1:])
        if json_:
            out.emit({"command": command})
        else:
            sys.stdout.write(shlex.join(command) + "\n")
        return
    check_local_source(ingest_job, None if ctx.remote else ctx.warehouse, warn=out.warning)
    coerced = Coerced()
    summary = _run(ctx, out, table, ingest_job, coerced)
    done = summary.to_json()
    if ingest_job.source.coerce:
        done["coerced"] = dict(sorted(coerced.totals.items()))
    out.event(done)
    if not json_ and summary.last is not None:
        out.err.print(
            key_value_table(
                None,
                [
                    ("epochs", summary.epochs),
                    ("rows", f"{summary.rows:,}"),
                    ("quarantined", summary.quarantined),
                    *(
                        [("coerced", coerced_line(coerced.totals) or "0")]
                        if ingest_job.source.coerce
                        else []
                    ),
                    ("delta version", summary.last.delta_version),
                    ("writer", summary.writer),
                ],
            )
        )
    if summary.stopped_by_user:
        interrupt = KeyboardInterrupt()
        interrupt.add_note(
            f"stopped after epoch {summary.last.epoch}; nothing is half-committed: run the same "
            "command to go on"
            if summary.last is not None
            else "stopped before the first epoch: nothing was committed; run the same command "
            "to start the job"
        )
        raise interrupt


def check_local_source(
    job: IngestJob, warehouse: Path | None, warn: Callable[[str], None] | None = None
) -> None:
    """What can be checked of a local source and checkpoint before Spark starts (a minute saved);
    a remote URI (hdfs://, s3a://) is left to Spark, which checks the source again in any case.
    Not for --print-spark-submit: the printed command may run where the paths differ.

    A missing source directory is exit 2. So is a source or checkpoint that resolves into the
    warehouse or into a Delta table (a directory holding a ``_delta_log``), or a source holding
    one below it: Spark would read a table's own files (data files of every version, removed ones
    included) as input and write old values back; a checkpoint inside a table is fair game for
    its VACUUM. Files that are not regular files (a FIFO, a socket, a device) are named in a
    warning: the job skips them, since opening a FIFO waits for a writer for ever.
    ``warehouse`` None: the warehouse is on S3 (local paths are checked against Delta tables
    only, a checkpoint on S3 against the tables below its bucket's prefixes).
    """
    from logstore_cli.catalog.warehouse import table_overlap

    own = plan.JobPaths(job.paths.table, job.paths.job).checkpoint
    override = job.paths.checkpoint_override
    if override is not None and job.checkpoint_storage is not None:
        check_checkpoint_on_storage(job, own)
    elif override is not None:
        path = Path(override)
        if not path.resolve().is_relative_to(Path(own).resolve().parent):
            why = table_overlap(path, warehouse, below=False)
            if why is not None:
                raise InvalidInputError(
                    f"--checkpoint {override} is inside a table's files: {why}",
                    hint="give a directory outside the warehouse and outside any Delta table, "
                    f"or leave --checkpoint out (the job's own: {own})",
                )
    source = job.source.spec
    if not isinstance(source, plan.DirectorySource):
        return
    if _URI.match(source.path):
        try:
            path = Path(local_path(source.path, "--source"))
        except InvalidInputError:  # a remote URI: Spark reads it
            return
    else:
        path = Path(source.path)
    if not path.exists():
        raise InvalidInputError(
            f"the source directory {source.path} does not exist",
            hint="create it, or check the path (it is used as given: no ~ or variables are "
            "expanded)",
        )
    if not path.is_dir():
        raise InvalidInputError(
            f"the source {source.path} is not a directory",
            hint="give the directory that holds the files (new files are picked up as they arrive)",
        )
    why = table_overlap(path, warehouse, below=True)
    if why is not None:
        raise InvalidInputError(
            f"the source directory {source.path} holds a table's own files: {why}",
            hint="ingest from a directory of input files outside the warehouse and outside any "
            "Delta table; to copy a table's rows, export them first (logstore read -o "
            "jsonl:FILE) into such a directory",
        )
    if warn is not None:
        odd = non_regular_files(path)
        if odd:
            shown = ", ".join(str(p) for p in odd[:5]) + (", …" if len(odd) > 5 else "")
            warn(
                f"skipping {len(odd)} entr{'y' if len(odd) == 1 else 'ies'} of the source that "
                f"{'is' if len(odd) == 1 else 'are'} not a regular file (a FIFO, socket or "
                f"device): {shown}"
            )


def check_checkpoint_on_storage(job: IngestJob, own: str) -> None:
    """A ``--checkpoint`` on S3 or HDFS must not lie inside a Delta table (the job's own
    ``<table>/_logstore/checkpoints/`` excepted): not below the warehouse, nor below any prefix of
    its bucket (S3) or directory of its file system (HDFS) holding a ``_delta_log``. Paths are
    compared segment by segment (never normalized)."""
    from logstore_cli.storage.hdfs import HdfsStorage
    from logstore_cli.storage.s3 import S3Storage

    target, table = job.checkpoint_storage, job.location
    root: Storage
    if isinstance(target, S3Storage) and isinstance(table, S3Storage):
        at, mine = _segments(target), _segments(table)
        same_store, shown = target.bucket == table.bucket, f"s3://{target.bucket}"
        root = S3Storage.open(target.bucket, (), target.settings)
    elif isinstance(target, HdfsStorage) and isinstance(table, HdfsStorage):
        at, mine = target.segments, table.segments
        same_store, shown = target.host == table.host, f"hdfs://{target.host}"
        root = target.at_root()
    else:
        return
    if same_store and at[: len(mine) + 2] == (*mine, plan.STATE_DIR, "checkpoints"):
        return  # below the job's own <table>/_logstore/checkpoints/
    warehouse = mine[:-2]  # <warehouse>/<database>/<table>
    why: str | None = None
    if same_store and at[: len(warehouse)] == warehouse:
        why = f"it is below the warehouse {shown}/{'/'.join(warehouse)}"
    else:
        for depth in range(len(at), 0, -1):
            prefix = "/".join(at[:depth])
            listing = root.list(f"{prefix}/_delta_log")
            if listing.files or listing.dirs:
                why = f"{shown}/{prefix} holds a _delta_log (a Delta table)"
                break
    if why is not None:
        raise InvalidInputError(
            f"--checkpoint {job.paths.checkpoint} is inside a table's files: {why}",
            hint="give a path outside the warehouse and outside any Delta table, or leave "
            f"--checkpoint out (the job's own: {own})",
        )


def _segments(storage: S3Storage) -> tuple[str, ...]:
    return tuple(storage.prefix.split("/")[:-1])  # the prefix ends with '/'


def non_regular_files(path: Path, *, limit: int = 2_000) -> list[Path]:
    """Entries of the source directory ``path`` (and below, as Spark's listing descends: names
    starting with ``.`` or ``_`` passed over) that are neither directories nor regular files,
    symlinks followed; at most ``limit`` entries are looked at (Spark lists them all anyway, but
    a warning needs only the first)."""
    found: list[Path] = []
    pending, seen, looked = [path], set[Path](), 0
    while pending and looked < limit:
        directory = pending.pop()
        if directory.resolve() in seen:  # a symlink loop
            continue
        seen.add(directory.resolve())
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    looked += 1
                    if looked > limit:
                        break
                    if entry.name.startswith((".", "_")):
                        continue
                    try:
                        # The entry's type from the listing; a symlink's from its target.
                        if entry.is_dir():
                            pending.append(Path(entry.path))
                        elif not entry.is_file():
                            entry.stat()  # raises for a dangling symlink: nothing to open
                            found.append(Path(entry.path))
                    except OSError:  # gone meanwhile, or a dangling symlink
                        continue
        except OSError:  # unreadable: Spark says so when it lists it
            continue
    return sorted(found)


def _run(
    ctx: Context, out: Output, table: str, job: IngestJob, coerced: Coerced | None = None
) -> RunSummary:
    """Start Spark and the job, and drive it until it ends. A stop (Ctrl-C, SIGTERM) before the
    query starts ends the command at once (nothing written); once it runs, after the epoch in
    flight (the first one never begins when the stop came before it)."""
    from logstore_cli.jobs import ingest as ingest_job
    from logstore_cli.jobs.spark import SparkSettings, build_session

    lease = ingest_job.acquire_lease(job)
    try:
        try:
            ingest_job.start_point("before-spark")
        except KeyboardInterrupt as interrupt:
            interrupt.add_note("interrupted before Spark started: nothing was written")
            raise
        try:
            with out.status("starting Spark …"):
                spark = build_session(
                    SparkSettings(
                        master=ctx.config.spark.master,
                        conf=ctx.config.spark.conf,
                        app_name=f"logstore ingest {table}",
                        s3=ctx.spark_s3,
                    )
                )
        except KeyboardInterrupt as interrupt:
            interrupt.add_note(
                "interrupted while Spark started: no epoch ran, nothing was written; run the same "
                "command to start the job"
            )
            raise
        with Progress(out, table, job) as progress, ingest_job.stop_on_ctrl_c(out.warning) as stop:
            if coerced is not None:
                progress.coerced = coerced
            run = ingest_job.start(
                spark, job, lease, on_epoch=progress.epoch, on_start=progress.started_as,
                stop=stop.requested.is_set, on_carry=progress.carried,
            )  # fmt: skip
            progress.query = run.query
            try:
                return ingest_job.wait(run, stop=stop.requested.is_set)
            finally:
                progress.take_coerced()
    except BaseException:
        lease.release()  # idempotent: a run that ended released it already
        raise
