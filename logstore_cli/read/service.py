"""``logstore read``: the request checked before anything starts, and the consumer engine's run.

``build_request`` turns the flags into a ``ReadRequest`` (bad combinations are exit 2 before a
broker or a JVM is touched). ``read_with_consumer`` runs a log read with the confluent-kafka
engine (``consumer.py``): an optional Delta snapshot first (hybrid read, with delta-rs), then the
log through one ``TopicDecider``; what it emits goes to a ``Sink``. The Spark engine
(``jobs/read.py``) and the delta-rs engine of ``--mode file`` (``delta_rs.py``) take the same
request and the same sink. On a remote warehouse (``StoredTableOn``) every engine runs: the
consumer's Delta reads go through the storage seam and delta-rs's storage options, Spark opens the
table's Hadoop URI (``spark_path``: ``s3a://``, ``hdfs://``); a Delta or Parquet output is a local
path there (``check_local_output``).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from logstore_cli.catalog.tables import StoredTable, StoredTableOn
from logstore_cli.errors import InvalidInputError
from logstore_cli.logformat.consistency import Level
from logstore_cli.logformat.wire import RowKind, RowSchema
from logstore_cli.model import TableSpec
from logstore_cli.read import plan

if TYPE_CHECKING:
    from logstore_cli.catalog.delta_log import TableLocation

# A version, or a timestamp Spark casts: they start with a year (or a sign), or T and a time.
_AS_OF = re.compile(r"\s*([+-]?\d|T\d)")


class Sink(Protocol):
    """Where a read's changes go (JSON lines, a Rich table, ...)."""

    def change(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def schema_changed(self, schema: RowSchema) -> None:
        """The table gained columns while the read ran: changes from now on may have them."""
        ...


@dataclass(frozen=True)
class ReadRequest:
    """One ``logstore read``, checked."""

    table: StoredTable | StoredTableOn
    mode: plan.Mode
    engine: plan.Engine
    output: plan.OutputSpec
    level: Level | None = None  # log mode
    changelog: plan.Changelog = "all-kinds"
    start: plan.Start | None = None  # log mode
    follow: bool = False
    limit: int | None = None
    checkpoint: Path | None = None
    as_of: str | None = None  # file mode: a version or a timestamp
    changes: bool = False  # file mode: the Change Data Feed
    bootstrap: str | None = None
    client_properties: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    admin_url: str | None = None  # a Pulsar table's: its admin REST API (cli.context)

    @property
    def spec(self) -> TableSpec:
        return self.table.spec

    @property
    def name(self) -> str:
        return self.table.ref.name

    @property
    def spark_path(self) -> str:
        """The table as Spark opens it: its local directory, or its Hadoop URI on a remote
        warehouse (``s3a://…``, ``hdfs://…``)."""
        from logstore_cli.catalog.delta_log import spark_path

        return spark_path(self.location)

    @property
    def warehouse(self) -> str:
        """The table's warehouse as the ``logstore`` data source's ``warehouse`` option takes it:
        the local directory, or the remote warehouse's URI (``s3://…``, ``hdfs://…``)."""
        if isinstance(self.table, StoredTableOn):
            return warehouse_uri(self.table.ref.storage.uri)
        return str(self.table.ref.path.parents[1])

    @property
    def location(self) -> TableLocation:
        """Where the consumer engine reads the Delta log: the directory, or the table's storage."""
        if isinstance(self.table, StoredTableOn):
            return self.table.ref.storage
        return self.table.ref.path

    @property
    def schema(self) -> RowSchema:
        return RowSchema.of(self.spec)


@dataclass
class ReadSummary:
    """What a read did, for the closing line and ``--json``."""

    table: str
    mode: str
    engine: str
    level: str | None
    rows: int = 0
    retractions: int = 0
    snapshot_rows: int = 0
    snapshot_version: int | None = None
    records: int = 0
    markers: int = 0
    skipped: int = 0  # foreign and malformed records
    pending_epochs: int = 0
    fenced_epochs: int = (
        0  # pending epochs of writers a takeover fenced: never released as they are
    )
    # Markers the Delta log does not confirm (ignored), and the records of the attempts they named
    unconfirmed_markers: int = 0
    unconfirmed_records: int = 0
    end_offsets: dict[int, int | str] = field(default_factory=dict)  # Pulsar: "L:E:B" text
    limited: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "summary",
            "table": self.table,
            "mode": self.mode,
            "engine": self.engine,
            "consistency": self.level,
            "rows": self.rows,
            "retractions": self.retractions,
            "snapshot": None
            if self.snapshot_version is None
            else {"version": self.snapshot_version, "rows": self.snapshot_rows},
            "log": {
                "records": self.records,
                "markers": self.markers,
                "skipped": self.skipped,
                "pending_epochs": self.pending_epochs,
                "fenced_epochs": self.fenced_epochs,
                "unconfirmed": {
                    "markers": self.unconfirmed_markers,
                    "records": self.unconfirmed_records,
                },
                "end_offsets": {str(p): o for p, o in sorted(self.end_offsets.items())},
            },
            "limited": self.limited,
            "seconds": round(self.seconds, 3),
        }


def check_new_path(path: str) -> None:
    """``--output`` names a path nothing is at yet (not even a dangling symlink)."""
    if Path(path).exists() or Path(path).is_symlink():
        raise InvalidInputError(
            f"--output {path} already exists",
            hint="logstore never overwrites a path: choose a new one, or remove it yourself",
        )


def check_outside_tables(path: str, table: StoredTable | StoredTableOn) -> None:
    """A Delta or Parquet ``--output`` lies outside the warehouse and outside any Delta table: a
    directory written there would show up as a table, or as files of one that VACUUM removes.
    (A remote table's warehouse is not on this file system: only local Delta tables are looked
    for then.)"""
    from logstore_cli.catalog.warehouse import table_overlap

    warehouse = None if isinstance(table, StoredTableOn) else table.ref.path.parents[1]
    why = table_overlap(Path(path), warehouse, below=False)
    if why is not None:
        raise InvalidInputError(
            f"--output {path} would be written among logstore's tables: {why}",
            hint="write the read to a path outside the warehouse and outside any Delta table",
        )


def warehouse_uri(table_uri: str) -> str:
    """The warehouse of a remote table's URI (``<warehouse>/<db>/<table>``). Pure."""
    return table_uri.rstrip("/").rsplit("/", 2)[0]


# "s3a://b/p", "hdfs:/p", "file:/p": a scheme, a colon and a slash (config.local_path's test).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:/")


def check_local_output(path: str) -> None:
    """A Delta or Parquet ``--output`` is a local path: the read's engines write it on the driver's
    file system (a URI would reach Spark as another store, outside every containment check)."""
    if _SCHEME.match(path.strip()):
        raise InvalidInputError(
            f"--output {path} is a URI: a read writes its Delta or Parquet output to a local "
            "path only",
            hint="give a local path (outside the warehouse), and copy it to object storage "
            "yourself if you need it there; see docs/cluster.md, section 5",
        )


_FILE_ONLY = "--as-of and --changes read the Delta table: use them with --mode file"
_LOG_ONLY = "{flag} applies to the log: use it with --mode log"


def build_request(
    table: StoredTable | StoredTableOn,
    *,
    mode: str | None,
    engine: str,
    output: plan.OutputSpec,
    consistent: bool,
    consistency: str | None,
    changelog: str,
    start: str | None,
    follow: bool,
    limit: int | None,
    checkpoint: str | None,
    as_of: str | None,
    changes: bool,
    bootstrap: str | None,
    client_properties: Mapping[str, str],
    timeout_s: float,
) -> ReadRequest:
    """The flags of ``logstore read`` as one checked request (``InvalidInputError``: exit 2)."""
    spec = table.spec
    log = spec.log_store
    chosen: plan.Mode
    if mode is None:
        chosen = "file" if log is None else log.read_mode.value
    else:
        chosen = plan.choice(mode, plan.MODES, "--mode")  # type: ignore[assignment]
    plan.choice(engine, plan.ENGINES, "--engine")
    if limit is not None and limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, got {limit}")
    if output.path is not None:
        if output.kind in ("delta", "parquet"):
            check_local_output(output.path)
        check_new_path(output.path)  # before a JVM starts; the engines check again to write
        if output.kind in ("delta", "parquet"):
            check_outside_tables(output.path, table)
    if checkpoint is not None and not checkpoint.strip():
        raise InvalidInputError("--checkpoint is empty")
    given_log = [
        flag
        for flag, used in (
            ("--consistent", consistent),
            ("--consistency", consistency is not None),
            ("--from", start is not None),
            ("--follow", follow),
            ("--checkpoint", checkpoint is not None),
            ("--changelog-mode", changelog != "all-kinds"),
        )
        if used
    ]
    if chosen == "file":
        if given_log:
            raise InvalidInputError(
                _LOG_ONLY.format(flag=given_log[0]),
                hint="--mode file reads the Delta table: its snapshot (--as-of) or its changes "
                "(--changes)",
            )
        if engine == "consumer":
            raise InvalidInputError(
                "--engine consumer reads the log; --mode file reads the Delta table with "
                "delta-rs (auto) or spark",
                hint="drop --engine, or read with --mode log",
            )
        if as_of is not None and not as_of.strip():
            raise InvalidInputError("--as-of is empty", hint="give a Delta version or a timestamp")
        file_engine: plan.Engine = "spark" if engine == "spark" else "delta-rs"
        if file_engine == "delta-rs" and as_of is not None:
            plan.parse_as_of(as_of)  # its own error; the delta-rs engine parses it again
        elif as_of is not None and not _AS_OF.match(as_of):
            # before Spark starts (a minute); what passes, Spark's cast to timestamp checks
            raise InvalidInputError(
                f"--as-of {as_of!r} is neither a Delta version nor a timestamp",
                hint="give a version (3) or a timestamp Spark can cast: '2026-11-21', "
                "'2026-11-21 10:30:00', '2026-11-21T10:30:00Z'",
            )
        return ReadRequest(
            table, "file", file_engine, output, limit=limit, as_of=as_of, changes=changes
        )
    if as_of is not None or changes:
        raise InvalidInputError(
            _FILE_ONLY, hint="or read the log from a snapshot: --from snapshot:V"
        )
    if follow and not output.streamed:
        raise InvalidInputError(
            f"--follow writes changes as they come: a {output.kind.capitalize()} output is for "
            "bounded reads",
            hint="drop --follow to write what the log holds now, or use --output jsonl[:PATH]",
        )
    if engine == "delta-rs":
        raise InvalidInputError(
            "--engine delta-rs reads the Delta table (--mode file), not the log",
            hint="drop --engine (auto: the consumer for stdout, Spark for a path), or read with "
            "--mode file",
        )
    if log is None:
        raise InvalidInputError(
            f"table {table.ref.name} has no log store to read",
            hint="read its Delta table with --mode file, or enable the log store with "
            "alter-table (log-store.enabled = true)",
        )
    level = plan.resolve_level(log, consistent=consistent, consistency=consistency)
    mode_ = plan.check_changelog(changelog, level)
    begin = plan.parse_start(start) if start is not None else plan.default_start(log, follow=follow)
    resolved = resolved_engine(engine, output)
    if checkpoint is not None and resolved == "spark" and not follow:
        raise InvalidInputError(
            "--checkpoint with the Spark engine (--engine spark, or a path output) needs "
            "--follow: a bounded Spark read keeps no progress to resume from",
            hint="use the consumer engine (the default for stdout) for a bounded read that goes "
            "on where the last one stopped",
        )
    if resolved == "consumer" and not output.streamed:
        raise InvalidInputError(
            f"--output {output.path} writes {output.kind.capitalize()} files, which the consumer "
            "engine does not",
            hint="use --engine spark (the default for a Delta or Parquet path), or --output "
            "jsonl[:PATH]",
        )
    return ReadRequest(
        table,
        "log",
        resolved,
        output,
        level=level,
        changelog=mode_,
        start=begin,
        follow=follow,
        limit=limit,
        checkpoint=None if checkpoint is None else Path(checkpoint),
        bootstrap=bootstrap or log.address,
        client_properties=dict(client_properties),
        timeout_s=timeout_s,
    )


def resolved_engine(engine: str, output: plan.OutputSpec) -> plan.Engine:
    """The engine of a log read: ``auto`` is the consumer for a streamed output, else Spark."""
    auto: plan.Engine = "consumer" if output.streamed else "spark"
    return auto if engine == "auto" else engine  # type: ignore[return-value]


class _Limit(Exception):
    """Raised inside a read when ``--limit`` rows were emitted."""


def read_with_consumer(
    req: ReadRequest, sink: Sink, *, stop: Callable[[], bool] = lambda: False
) -> ReadSummary:
    """A log read with the confluent-kafka engine; returns when bounded and done, when ``stop()``
    is true (follow), or at ``--limit``."""
    from logstore_cli.catalog.epochs import EpochConfirmer, fenced_pending
    from logstore_cli.catalog.snapshot import snapshot_batches
    from logstore_cli.read.consumer import ReaderCheckpoint, ReaderDecider, SourceConf, open_reader
    from logstore_cli.read.fold import ArrowRows
    from logstore_cli.read.hybrid import resolve_hybrid

    assert req.level is not None and req.start is not None and req.spec.log_store is not None
    began = time.monotonic()
    summary = ReadSummary(req.name, "log", "consumer", req.level)
    schema = req.schema
    log = req.spec.log_store
    conf = SourceConf(
        req.bootstrap or log.address, req.client_properties, log.topic, req.timeout_s,
        system=log.system, admin_url=req.admin_url,
    )  # fmt: skip
    saved = None
    store = None
    if req.checkpoint is not None:
        store = ReaderCheckpoint(req.checkpoint, table=req.name, topic=log.topic, level=req.level)
        saved = store.load()
    hybrid = None
    if req.start.kind == "snapshot" and saved is None:
        hybrid = resolve_hybrid(req.location, conf, req.start.version)
    emitted = 0

    def emit(kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        nonlocal emitted
        if not plan.keeps(kind, req.changelog):
            return
        sink.change(kind, row, meta)
        emitted += 1
        if req.limit is not None and emitted >= req.limit:
            raise _Limit

    def reload_schema() -> RowSchema:
        """The table's columns read again (delta-rs): a record has a column the read's schema
        lacks, as alter-table --add-column adds one; the sink learns of it first."""
        from logstore_cli.catalog import warehouse as wh
        from logstore_cli.catalog.schema import columns_from_delta_schema

        table = req.table
        if isinstance(table, StoredTableOn):
            state = wh.read_delta_on(table.ref.storage)
        else:
            state = wh.read_delta(table.ref.path)
        spec = dataclasses.replace(req.spec, columns=columns_from_delta_schema(state.schema))
        new = RowSchema.of(spec)
        if set(schema.names) < set(new.names):
            sink.schema_changed(new)
        return new

    shown: Callable[[int], str] | None = None  # how a Pulsar position reads ("L:E:B")
    if log.system == "pulsar":
        from logstore_cli.logformat.pulsar_form import position_text

        shown = position_text
    reader = open_reader(
        conf,
        schema,
        req.level,
        committed_through=None if hybrid is None else hybrid.committed_through,
        state=saved,
        confirm=EpochConfirmer(req.location),  # a marker releases what Delta committed
        reload_schema=reload_schema,
    )
    before = reader.decider.stats()  # a restored state's counts are the last run's
    try:
        try:
            if hybrid is not None:
                summary.snapshot_version = hybrid.version
                meta = {"version": hybrid.version}
                arrow = ArrowRows(schema)  # Arrow's Python values as the wire format takes them
                for rows in snapshot_batches(req.location, hybrid.version, list(schema.names)):
                    for row in rows:
                        summary.snapshot_rows += 1
                        emit(RowKind.INSERT, arrow(row), meta)
                sink.flush()
            start = reader.start_offsets(hybrid if hybrid is not None else req.start)
            end = None if req.follow else reader.end_offsets()
            summary.end_offsets = {
                p: o if shown is None else shown(o) for p, o in (end or {}).items()
            }
            saved_at: dict[int, int] | None = None
            positions = cast(ReaderDecider, reader.decider).positions  # where the read is
            for batch in reader.read(start, end, stop=stop):
                for partition, emission in batch:
                    if emission.retraction:
                        summary.retractions += 1
                    found = plan.emission_meta(partition, emission)
                    if shown is not None:
                        found["offset"] = shown(emission.offset)  # Pulsar: the message id
                    emit(emission.kind, emission.row, found)
                sink.flush()
                if store is not None and positions != saved_at:
                    # Only when the read moved on: an idle follow polls ten times a second.
                    store.save(reader.decider)
                    saved_at = dict(positions)
        except _Limit:
            summary.limited = True
            sink.flush()
            # Saving here would skip the rest of the record batch the limit cut short.
        stats = reader.stats
        summary.records, summary.markers = stats.records, stats.markers
        summary.skipped = stats.foreign + stats.malformed
        pending = [e for found in reader.pending().values() for e in found]
        fenced = fenced_pending(req.location, pending) if pending else []
        summary.pending_epochs = len(pending) - len(fenced)  # per partition, as always
        summary.fenced_epochs = len({(e.writer, e.epoch) for e in fenced})
        after = reader.decider.stats()
        summary.unconfirmed_markers = after.unconfirmed_markers - before.unconfirmed_markers
        summary.unconfirmed_records = after.unconfirmed_records - before.unconfirmed_records
    finally:
        reader.close()
    summary.rows = emitted
    summary.seconds = time.monotonic() - began
    return summary
