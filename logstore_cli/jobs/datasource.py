"""The ``logstore`` Spark data source: a table's log read at a consistency level, for users' own
PySpark code and for ``logstore read``'s Spark engine, on Spark 4.0's Python data source API
(``pyspark.sql.datasource``)::

    from logstore_cli.jobs.datasource import register
    register(spark)
    spark.read.format("logstore").option("consistency", "committed").load("db.orders")

The path is a table name of the warehouse; the options are ``OPTIONS``. Everything is decided on
the driver when ``load()`` runs (the table, the level, the start); a bad option or value fails
there, with a message that names the option and its valid values.

**Batch.** One Spark partition per log partition, ``[start, end)`` fixed when the query is
planned (``end``: the high watermark then), so a read is bounded and the same on a retry. Each task
runs one ``PartitionDecider`` (``logformat/consistency.py``) over its partition and yields Arrow
record batches.

**Log systems.** The table's ``log.system`` picks the source (``read.consumer.open_source``):
Kafka's, or Pulsar's (``read.pulsar_source``, whose module and pulsar-client an executor imports
only for a Pulsar table). Positions are ordered integers either way: Kafka offsets, or Pulsar
message ids as ordinals (``logformat.pulsar_form``); ranges and stream offsets hold them as they
are, and ``_ls_offset`` shows a Pulsar one as its message id, ``"ledger:entry:batch"`` (a string
column: an ordinal does not fit a bigint), as the consumer engine prints it.

**Stream** (``readStream``; ``SimpleDataSourceStreamReader``: the driver reads each micro-batch).
The offset is, per partition, the decider's ``ResumePoint`` (``{"p0": {...}, "p1": {...}}``): the
offset to re-read from (the first record of the oldest epoch still open, else the position), the
position (what was read; output below it was delivered) and the epochs resolved. A micro-batch
restores a decider per partition from it, reads up to the high watermark and returns what the
decider emits, so a ``committed`` stream holds an epoch whose marker has not come yet and emits it
in the micro-batch that reads the marker, from records read again. ``readBetweenOffsets`` (a batch
Spark replays after a restart) restores the same deciders and reads up to the end offset's
positions: the same rows as the first time. The first micro-batch is the exception Spark makes:
its start is ``initialOffset()`` asked again, so the initial offset only names the start
(``{"from": "latest"}``), the first ``read`` resolves it, and every later offset keeps those
points (``"origin"``) for a replay of the first micro-batch.
"""

from __future__ import annotations

import difflib
import functools
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from logstore_cli import config as cfg
from logstore_cli.catalog.epochs import EpochConfirmer
from logstore_cli.catalog.tables import StoredTable, StoredTableOn, load_table, load_table_on
from logstore_cli.errors import InvalidInputError, LogstoreError, RecordsDeletedError
from logstore_cli.logformat.consistency import (
    LEVELS,
    Emission,
    Level,
    PartitionDecider,
    ResumePoint,
)
from logstore_cli.logformat.wire import RowSchema
from logstore_cli.model import ColumnSpec
from logstore_cli.read import plan
from logstore_cli.read.consumer import Collections, SourceConf, open_reader, open_source
from logstore_cli.read.hybrid import resolve_hybrid

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from logstore_cli.catalog.delta_log import TableLocation
    from logstore_cli.read.consumer import LogSource
    from logstore_cli.read.pulsar_source import PulsarLogSource

SOURCE_NAME: Final = "logstore"
KIND: Final = "_ls_kind"
PARTITION: Final = "_ls_partition"
OFFSET: Final = "_ls_offset"
WRITER: Final = "_ls_writer"
EPOCH: Final = "_ls_epoch"
# After the table's columns: the row kind (a retraction has the reversed kind), the record's
# partition and offset (of the record retracted, for a retraction), and the epoch that wrote it.
META_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    (KIND, "string"),
    (PARTITION, "int"),
    (OFFSET, "bigint"),
    (WRITER, "string"),
    (EPOCH, "bigint"),
)
# The options, by the lower-case name Spark hands them over with; the value is how users spell it.
OPTIONS: Final[Mapping[str, str]] = {
    name.lower(): name
    for name in (
        "consistency",
        "consistent",
        "changelogMode",
        "from",
        "warehouse",
        "bootstrap",
        "kafkaTimeout",
        "pulsarAdminUrl",
    )
}
ARROW_CHUNK: Final = 8_192  # rows per Arrow record batch
_PATH: Final = "path"  # load("db.orders") arrives as this option
_FROM_VALUES: Final = (
    "earliest, latest, timestamp:<epoch millis>, snapshot or snapshot:<Delta version>"
)

P = ParamSpec("P")
R = TypeVar("R")


# -- errors a user's PySpark code can read ----------------------------------------------------------


def _readable(exc: LogstoreError) -> LogstoreError:
    """The error with its hint in the message: Spark shows a data source's error as its text."""
    text = f'format("{SOURCE_NAME}"): {exc.message}'
    if exc.hint:
        text += f" (hint: {exc.hint})"
    kind = InvalidInputError if isinstance(exc, InvalidInputError) else LogstoreError
    return kind(text, hint=exc.hint, detail=exc.detail)


def _user_errors(method: Callable[P, R]) -> Callable[P, R]:
    @wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except LogstoreError as exc:
            raise _readable(exc) from None

    return run


def _readable_iter(items: Iterator[R]) -> Iterator[R]:
    """``items``, with a domain error raised while they are produced made readable."""
    try:
        yield from items
    except LogstoreError as exc:
        raise _readable(exc) from None


def _bad_value(option: str, value: str, valid: str, example: str) -> InvalidInputError:
    return InvalidInputError(
        f'option "{option}" is {value!r}: valid values are {valid}',
        hint=f'e.g. .option("{option}", "{example}")',
    )


def _choice(options: Mapping[str, str], name: str, valid: tuple[str, ...]) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    text = value.strip()
    if text not in valid:
        raise _bad_value(name, value, ", ".join(valid), valid[0])
    return text


def _check_names(options: Mapping[str, str]) -> None:
    for key in options:
        if key.lower() in OPTIONS or key.lower() == _PATH:
            continue
        near = difflib.get_close_matches(key.lower(), list(OPTIONS), n=1)
        hint = f'did you mean "{OPTIONS[near[0]]}"? ' if near else ""
        raise InvalidInputError(
            f"there is no option {key!r}",
            hint=f"{hint}the options are: {', '.join(OPTIONS.values())}",
        )


def _timeout(options: Mapping[str, str], default: float) -> float:
    value = options.get("kafkatimeout")
    if value is None:
        return default
    valid = f"a number of seconds, more than 0 and at most {cfg.MAX_KAFKA_TIMEOUT_S:g}"
    try:
        seconds = float(value.strip())
    except ValueError:
        raise _bad_value("kafkaTimeout", value, valid, "10") from None
    if not math.isfinite(seconds) or not 0 < seconds <= cfg.MAX_KAFKA_TIMEOUT_S:
        raise _bad_value("kafkaTimeout", value, valid, "10")
    return seconds


def _start(options: Mapping[str, str]) -> plan.Start | None:
    value = options.get("from")
    if value is None:
        return None
    try:
        return plan.parse_start(value)
    except InvalidInputError:
        raise _bad_value("from", value, _FROM_VALUES, "earliest") from None


# -- what a read is, decided on the driver ----------------------------------------------------------


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class ReadSpec:
    """Everything a read needs, small and picklable (sent to the executors with the reader)."""

    table: str
    schema: RowSchema
    source: SourceConf
    level: Level
    changelog: plan.Changelog
    batch_start: plan.Start | plan.HybridStart
    stream_start: plan.Start | plan.HybridStart
    committed_through: Mapping[str, int] = field(default_factory=dict)  # a hybrid start's
    # The Delta table, whose log confirms each marker before it releases anything (as the consumer
    # engine does: docs/consistency.md §10); "" reads without confirming.
    table_path: str = ""

    def schema_check(self) -> Callable[[], RowSchema] | None:
        """For ``LogSource(reload_schema=...)``: a record with a column the read's schema lacks (or
        a value its type cannot hold) finds out whether the table's columns changed since the read
        began. A Spark query keeps the schema it was planned with, so then the read stops, saying
        so, instead of skipping every newer record as malformed; if nothing changed, the record is
        malformed. None without the table's path."""
        if not self.table_path:
            return None
        return functools.partial(_refuse_a_changed_schema, self.table, self.table_path, self.schema)

    def confirmer(self) -> EpochConfirmer | None:
        """A new confirmer (it caches the commits it read): one per task or stream reader."""
        return EpochConfirmer(table_location(self.table_path)) if self.table_path else None

    @property
    def pulsar(self) -> bool:
        return self.source.system == "pulsar"

    def ddl(self) -> str:
        """The Spark schema: the table's columns, then ``META_COLUMNS`` (on Pulsar ``_ls_offset``
        is the message id's text)."""
        meta = [(n, "string" if n == OFFSET and self.pulsar else t) for n, t in META_COLUMNS]
        columns = [*self.schema.columns, *meta]
        return ", ".join(f"{_quote(name)} {sql_type}" for name, sql_type in columns)


@dataclass(frozen=True)
class _Columns:
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]


def _refuse_a_changed_schema(table: str, table_path: str, schema: RowSchema) -> RowSchema:
    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.catalog.schema import columns_from_delta_schema

    location = table_location(table_path)
    state = wh.read_delta(location) if isinstance(location, Path) else wh.read_delta_on(location)
    now = RowSchema.of(_Columns(columns_from_delta_schema(state.schema), state.primary_key))
    if set(now.columns) <= set(schema.columns):
        return schema  # nothing added or widened: the record is malformed
    old = dict(schema.columns)
    changed = [f"{n} {t}" + ("" if n not in old else f" (was {old[n]})")
               for n, t in now.columns if old.get(n) != t]  # fmt: skip
    raise LogstoreError(
        f"the columns of table {table} changed since this query began ({', '.join(changed)}): "
        "a Spark query keeps the columns it was planned with",
        hint="start the query again (a streaming query from its checkpoint) to read the table's "
        "columns as they are now",
    )


def table_location(table_path: str) -> TableLocation:
    """``ReadSpec.table_path`` as the Delta log readers take it: a local directory, or the
    table's storage on a remote warehouse (opened again in each task: a client is not sent over
    the wire; S3 settings from the standard AWS environment, as on the driver)."""
    if not cfg.is_remote_warehouse(table_path):
        return Path(table_path)
    from logstore_cli.storage import open_storage

    return open_storage(table_path)


def _default_bootstrap(config: cfg.Config) -> str | None:
    """The config's brokers, else the local broker's, running or last run (as the CLI resolves
    it, ``cli.context.Context.default_bootstrap``)."""
    if config.kafka.bootstrap_servers:
        return config.kafka.bootstrap_servers
    from logstore_cli.kafka import local_state
    from logstore_cli.paths import state_home

    home = state_home()
    return local_state.local_bootstrap(home) or local_state.last_local_bootstrap(home)


def _pulsar_admin_url(options: Mapping[str, str], config: cfg.Config, service_url: str) -> str:
    """The ``pulsarAdminUrl`` option, else the config's ``[pulsar] admin_url``, else the local
    standalone's when the table's log is on it, else port 8080 of its first host (as the CLI
    resolves it, ``cli.context.pulsar_admin_url``)."""
    from logstore_cli.paths import state_home
    from logstore_cli.pulsar.admin import admin_url_for
    from logstore_cli.pulsar.local_standalone import last_urls

    given = (options.get("pulsaradminurl") or "").strip()
    if "pulsaradminurl" in options and not given.startswith(("http://", "https://")):
        raise _bad_value(
            "pulsarAdminUrl", options["pulsaradminurl"], "http[s]://host:port",
            "http://127.0.0.1:8080",
        )  # fmt: skip
    configured = given or config.pulsar.admin_url
    return admin_url_for(service_url, configured, None if configured else last_urls(state_home()))


def resolve(options: Mapping[str, str]) -> ReadSpec:
    """The read the options ask for (``options``: Spark's, keys in any case), checked."""
    lowered = {k.lower(): v for k, v in options.items()}
    _check_names(lowered)
    name = (lowered.get(_PATH) or "").strip()
    if not name:
        raise InvalidInputError(
            "no table given",
            hint=f'name it in load(): spark.read.format("{SOURCE_NAME}").load("db.orders")',
        )
    consistency = _choice(lowered, "consistency", LEVELS)
    consistent = _choice(lowered, "consistent", ("true", "false")) == "true"
    if consistent and consistency is not None:
        raise InvalidInputError(
            'options "consistent" and "consistency" cannot be combined',
            hint='"consistent" is the table\'s own level (committed when it has none); '
            '"consistency" names one',
        )
    changelog = _choice(lowered, "changelogMode", plan.CHANGELOG_MODES) or "all-kinds"
    start = _start(lowered)
    bootstrap = (lowered.get("bootstrap") or "").strip() or None
    if "bootstrap" in lowered and bootstrap is None:
        raise _bad_value(
            "bootstrap", lowered["bootstrap"], "host:port[,host:port…]", "127.0.0.1:9092"
        )

    given = (lowered.get("warehouse") or "").strip()
    # A remote warehouse (s3://, s3a://, hdfs://) given as the option is checked and written
    # canonically as the warehouse setting is; any other URI is refused as a local path.
    remote = given.startswith(("s3://", "s3a://", "hdfs://"))
    config = cfg.load(None, os.environ, {"warehouse": given} if remote else None)
    timeout_s = _timeout(lowered, config.kafka.timeout_s)
    default_bootstrap = bootstrap or _default_bootstrap(config)
    stored: StoredTable | StoredTableOn
    if remote or (not given and config.remote_warehouse):
        from logstore_cli.storage import open_storage

        stored = load_table_on(
            open_storage(config.warehouse), name, default_bootstrap=default_bootstrap
        )
        table_path = stored.ref.storage.uri
    else:
        warehouse = (
            Path(cfg.local_path(given, 'option "warehouse"')) if given else config.warehouse_path()
        )
        stored = load_table(warehouse, name, default_bootstrap=default_bootstrap)
        table_path = str(stored.ref.path)
    log = stored.spec.log_store
    if log is None:
        raise InvalidInputError(
            f"table {stored.ref.name} has no log store to read",
            hint='read its Delta table with spark.read.format("delta"), or enable the log '
            "store with logstore alter-table (log-store.enabled = true)",
        )
    level = plan.resolve_level(log, consistent=consistent, consistency=consistency)
    if changelog == "append-only" and level == "eventual":
        raise InvalidInputError(
            'changelogMode "append-only" cannot be combined with the eventual read level',
            hint="eventual retracts a failed attempt's records with deletes, which an append-only "
            'changelog cannot carry: read with consistency "committed" (the same rows, once their '
            'epoch commits), or with changelogMode "all-kinds"',
        )
    mode = plan.check_changelog(changelog, level)
    client = dict(config.kafka.client)
    client.update(log.client_properties)  # the table's own keys win, as in the CLI
    admin_url = None
    if log.system == "pulsar":
        admin_url = _pulsar_admin_url(lowered, config, bootstrap or log.address)
    source = SourceConf(
        bootstrap or log.address, client, log.topic, timeout_s,
        system=log.system, admin_url=admin_url,
    )  # fmt: skip
    batch_start: plan.Start | plan.HybridStart = start or plan.default_start(log, follow=False)
    stream_start: plan.Start | plan.HybridStart = start or plan.default_start(log, follow=True)
    through: dict[str, int] = {}
    if start is not None and start.kind == "snapshot":
        try:
            hybrid = resolve_hybrid(table_location(table_path), source, start.version)
        except (InvalidInputError, RecordsDeletedError) as exc:
            # The same error, its hint in the data source's option names.
            raise type(exc)(
                exc.message, hint=(exc.hint or "").replace("--from ", "from=")
            ) from None
        batch_start = stream_start = hybrid
        through = dict(hybrid.committed_through)
    return ReadSpec(
        stored.ref.name,
        RowSchema.of(stored.spec),
        source,
        level,
        mode,
        batch_start,
        stream_start,
        through,
        table_path,
    )


# -- emissions as Arrow -----------------------------------------------------------------------------


class _ArrowRows:
    """Emissions -> Arrow record batches in the source's schema, column by column."""

    def __init__(self, spec: ReadSpec, schema: StructType) -> None:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        self.pa = pa
        self.arrow = to_arrow_schema(schema)
        self.names = spec.schema.names
        self.changelog = spec.changelog
        self.shown: Callable[[int], Any] = _shown(spec)
        self.columns: list[list[Any]] = [[] for _ in range(len(self.arrow))]

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, partition: int, emissions: list[Emission]) -> None:
        columns, width = self.columns, len(self.names)
        for emission in emissions:
            if not plan.keeps(emission.kind, self.changelog):
                continue
            row = emission.record.row
            for i, name in enumerate(self.names):
                columns[i].append(row.get(name))  # a -D may hold only the key columns
            epoch = emission.record.epoch
            columns[width].append(emission.kind.value)
            columns[width + 1].append(partition)
            columns[width + 2].append(self.shown(emission.offset))
            columns[width + 3].append(epoch.writer)
            columns[width + 4].append(epoch.epoch)

    def take(self) -> pa.RecordBatch:
        pa, types = self.pa, self.arrow.types
        arrays = [pa.array(values, type=t) for values, t in zip(self.columns, types, strict=True)]
        self.columns = [[] for _ in range(len(self.arrow))]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)


def _shown(spec: ReadSpec) -> Callable[[int], Any]:
    """How ``_ls_offset`` (and a message) shows a position: a Kafka offset as it is, a Pulsar
    ordinal as its message id ``"L:E:B"``."""
    if spec.pulsar:
        from logstore_cli.logformat.pulsar_form import position_text

        return position_text
    return int


def _emit(
    source: LogSource | PulsarLogSource,
    decider: PartitionDecider,
    partition: int,
    start: int,
    end: int,
    out: _ArrowRows,
) -> Iterator[pa.RecordBatch]:
    """Feed ``[start, end)`` of ``partition`` to ``decider``; what it emits, in record batches
    (the rows of a last, short batch stay in ``out``)."""
    if start >= end:
        return
    with Collections() as collections:
        for offset, item in source.consume_range(partition, start, end):
            out.add(partition, decider.feed(offset, item))
            if len(out) >= ARROW_CHUNK:
                collections.tick()
                yield out.take()


# -- batch ------------------------------------------------------------------------------------------


class KafkaRange(InputPartition):
    """Positions ``[start, end)`` of one log partition (Kafka offsets, or Pulsar ordinals): one
    Spark task."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition = partition
        self.start = start
        self.end = end


class LogBatchReader(DataSourceReader):
    def __init__(self, spec: ReadSpec, schema: StructType) -> None:
        self.spec = spec
        self.schema = schema

    @_user_errors
    def partitions(self) -> list[InputPartition]:
        spec = self.spec
        reader = open_reader(
            spec.source, spec.schema, spec.level, committed_through=spec.committed_through
        )
        try:
            start = reader.start_offsets(spec.batch_start)
            end = reader.end_offsets()
        finally:
            reader.close()
        ranges: list[InputPartition] = []
        for partition in sorted(end):
            first = start.get(partition, end[partition])
            if first < end[partition]:
                ranges.append(KafkaRange(partition, first, end[partition]))
        return ranges

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        if partition is None:
            return iter(())  # Spark's stand-in when there is no range to read
        assert isinstance(partition, KafkaRange)
        return _readable_iter(self._read(partition))

    def _read(self, partition: KafkaRange) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        out = _ArrowRows(spec, self.schema)
        decider = PartitionDecider(
            spec.level, committed_through=spec.committed_through, confirm=spec.confirmer()
        )
        source = open_source(spec.source, spec.schema, reload_schema=spec.schema_check())
        try:
            yield from _emit(
                source, decider, partition.partition, partition.start, partition.end, out
            )
        finally:
            source.close()
        if len(out):
            yield out.take()


# -- stream -----------------------------------------------------------------------------------------

_FROM: Final = "from"  # the initial offset: the start as configured, not yet resolved
_ORIGIN: Final = "origin"  # in every later offset: the points the first micro-batch started at


def _key(partition: int) -> str:
    return f"p{partition}"


def _offset(points: Mapping[int, ResumePoint]) -> dict[str, Any]:
    """Resume points as an offset: a JSON object Spark compares as text, so its order is fixed."""
    out = {}
    for partition in sorted(points):
        body = points[partition].to_json()
        body["committed_through"] = dict(sorted(body["committed_through"].items()))
        out[_key(partition)] = body
    return out


def _points(offset: Mapping[str, Any]) -> dict[int, ResumePoint]:
    """The resume points of an offset's partitions."""
    points: dict[int, ResumePoint] = {}
    for key, body in offset.items():
        if key in (_FROM, _ORIGIN):
            continue
        number = key[1:]
        if not (key.startswith("p") and number.isdigit()):
            raise LogstoreError(
                f"the stream's checkpoint holds an offset {key!r} that is not a partition's",
                hint="the checkpoint belongs to another source: give this query a new "
                "checkpointLocation",
            )
        point = ResumePoint.from_json(body)
        if point.offset is None or point.position is None:
            raise LogstoreError(
                f"the stream's checkpoint holds no offset for partition {number}",
                hint="give this query a new checkpointLocation",
            )
        points[int(number)] = point
    return points


def _describe(start: plan.Start | plan.HybridStart) -> str:
    if isinstance(start, plan.HybridStart):
        return f"snapshot:{start.version}"
    return start.describe()


class LogStreamReader(SimpleDataSourceStreamReader):
    """The log as a stream: read on the driver, one decider per partition per micro-batch.

    The start is resolved by the first ``read``, not by ``initialOffset``: Spark asks
    ``initialOffset`` again when it replays the first micro-batch after a restart, and ``latest``
    (or the newest snapshot) would then be another position. So the initial offset only names the
    start (``{"from": "latest"}``), and every later offset carries the points the first read
    resolved (``origin``), from which a replay of the first micro-batch reads.
    """

    def __init__(self, spec: ReadSpec, schema: StructType) -> None:
        self.spec = spec
        self.schema = schema
        self._source: LogSource | PulsarLogSource | None = None  # the driver's, kept across batches
        self._confirmer: EpochConfirmer | None = None  # its cache too; made on first use

    def __getstate__(self) -> dict[str, Any]:
        # Clients are not sent along (Spark pickles the reader into its planning worker): the
        # Kafka consumer or Pulsar client, and the confirmer's storage (on S3 a client holding an SSL context,
        # which cannot be pickled); the other side opens its own.
        state = dict(self.__dict__)
        state["_source"] = None
        state["_confirmer"] = None
        return state

    @property
    def _confirm(self) -> EpochConfirmer | None:
        if self._confirmer is None and self.spec.table_path:
            self._confirmer = self.spec.confirmer()
        return self._confirmer

    def _open(self) -> LogSource | PulsarLogSource:
        if self._source is None:
            self._source = open_source(
                self.spec.source, self.spec.schema, reload_schema=self.spec.schema_check()
            )
        return self._source

    def initialOffset(self) -> dict[str, Any]:
        return {_FROM: _describe(self.spec.stream_start)}

    def _origin(self) -> dict[int, ResumePoint]:
        spec = self.spec
        reader = open_reader(
            spec.source, spec.schema, spec.level, committed_through=spec.committed_through
        )
        try:
            start = reader.start_offsets(spec.stream_start)
        finally:
            reader.close()
        through = dict(spec.committed_through)
        return {p: ResumePoint(o, o, through) for p, o in start.items()}

    def _new_partition(self, low: int) -> ResumePoint:
        # A partition added after the stream started: all its records are new.
        return ResumePoint(low, low, dict(self.spec.committed_through))

    @_user_errors
    def read(self, start: dict[str, Any]) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:
        spec = self.spec
        if _ORIGIN in start:
            origin = start[_ORIGIN]
            points = _points(start)
        else:
            first = self._origin()
            origin, points = _offset(first), first
        source = self._open()
        marks = source.watermarks()
        out = _ArrowRows(spec, self.schema)
        batches: list[pa.RecordBatch] = []
        after: dict[int, ResumePoint] = {}
        for partition in sorted(set(marks) | set(points)):
            low, high = marks.get(partition, (0, 0))
            point = points.get(partition) or self._new_partition(low)
            assert point.offset is not None and point.position is not None
            if high < point.position:
                at = _shown(spec) if spec.pulsar else "offset {}".format
                raise LogstoreError(
                    f"partition {partition} of topic {spec.source.topic} ends at {at(high)}, "
                    f"before {at(point.position)} where this stream has read to (was the topic "
                    "deleted and created again?)",
                    hint="start the query with a new checkpointLocation",
                )
            decider = PartitionDecider.resume(spec.level, point, confirm=self._confirm)
            batches += _emit(source, decider, partition, point.offset, high, out)
            reached = decider.resume_point()
            # Read through ``high``: records not fed (foreign ones) are not read again either.
            again = reached.offset if decider.pending() and reached.offset is not None else high
            after[partition] = ResumePoint(min(again, high), high, reached.committed_through)
        if len(out):
            batches.append(out.take())
        return iter(batches), {_ORIGIN: origin, **_offset(after)}

    @_user_errors
    def readBetweenOffsets(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        if start == end:
            return iter(())
        # The first micro-batch starts where the first read resolved the start (see the class).
        points = _points(start if _ORIGIN in start else end[_ORIGIN])
        ends = _points(end)
        source = open_source(spec.source, spec.schema, reload_schema=spec.schema_check())
        try:
            marks = source.watermarks() if set(ends) - set(points) else {}
            out = _ArrowRows(spec, self.schema)
            batches: list[pa.RecordBatch] = []
            for partition in sorted(ends):
                low = marks.get(partition, (0, 0))[0]
                point = points.get(partition) or self._new_partition(low)
                stop = ends[partition].position
                assert point.offset is not None and stop is not None
                decider = PartitionDecider.resume(spec.level, point, confirm=self._confirm)
                batches += _emit(source, decider, partition, point.offset, stop, out)
            if len(out):
                batches.append(out.take())
        finally:
            source.close()
        return iter(batches)


# -- the data source --------------------------------------------------------------------------------


class LogstoreDataSource(DataSource):
    """``spark.read.format("logstore").load("db.orders")`` (and ``readStream``)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        try:
            self.spec = resolve(options)
        except LogstoreError as exc:
            raise _readable(exc) from None

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return self.spec.ddl()

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogBatchReader(self.spec, self._check(schema))

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return LogStreamReader(self.spec, self._check(schema))

    def _check(self, schema: StructType) -> StructType:
        expected = [*self.spec.schema.names, *(name for name, _ in META_COLUMNS)]
        if schema.fieldNames() != expected:
            raise _readable(
                InvalidInputError(
                    f"the schema given has the columns {schema.fieldNames()}; the source's are "
                    f"{expected}",
                    hint="do not give a schema: the source takes the table's own",
                )
            )
        return schema


def register(spark: SparkSession) -> None:
    """Register ``format("logstore")`` on the session; again is harmless."""
    spark.dataSource.register(LogstoreDataSource)
