"""The ingest job: a Spark Structured Streaming query whose ``foreachBatch`` double-writes each
micro-batch (an *epoch*) to the Kafka log and the Delta table, exactly once (docs/consistency.md).

The protocol itself, step by step, is ``logstore_cli/ingest/epoch.py`` (pure); this module gives it
its ports over Spark and the stores: ``SparkQuarantine`` (malformed records), ``KafkaLogSink``
(the driver's idempotent producer: records and markers), ``DeltaCommitter`` (MERGE with Delta's
idempotent-write transaction ids; the commit point), and the lease (``catalog/lease.py``; on S3
``catalog/storage_lease.py``).

The job is the table's one writer (a lease under the table) and names its writer id in the
checkpoint. The table has two names: its *location* (a local directory, or a ``Storage`` rooted at
it on S3), through which logstore reads and writes everything of its own, and the URI Spark opens
(``spark_path``: the same directory, or ``s3a://…``). A test-only fault hook (``LOGSTORE_FAULT_KILL_AT``) kills the process at a crash point.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)
from pyspark.sql.window import Window

from logstore_cli.catalog import epochs
from logstore_cli.catalog.delta_log import TableLocation, delta_rs_args, spark_path
from logstore_cli.catalog.lease import LeaseLostError, local_time
from logstore_cli.catalog.outside import Follower, only_maintenance_since
from logstore_cli.catalog.schema_watch import SchemaWatch
from logstore_cli.errors import BrokerError, InvalidInputError, LogstoreError, OutsideWriteError
from logstore_cli.ingest import merge_engine, plan
from logstore_cli.ingest.epoch import (
    CRASH_POINTS,
    PAUSE_POINTS,
    CarryReport,
    Committed,
    Compacted,
    CompactionConflict,
    CompactionFailed,
    EpochProtocol,
    EpochReport,
    LogSink,
    OutsidePending,
    Produced,
)
from logstore_cli.ingest.failures import DELTA_RS_CONFLICT, explain_commit_failure
from logstore_cli.ingest.outside import KINDS, ORDER, OutsideCommit, describe_all
from logstore_cli.interrupt import StopOnCtrlC
from logstore_cli.logformat.values import (
    ArrayType,
    MapType,
    SqlType,
    StructType,
    spark_json_identical,
)
from logstore_cli.logformat.wire import (
    CommitMarker,
    EpochEncoder,
    EpochId,
    Fence,
    LogFormat,
    LogPosition,
    RowKind,
    RowSchema,
    TxnState,
    change_value,
    commit_metadata,
    decode_txn_version,
    encode_marker,
    envelope,
    fence_metadata,
    fenced_txn_version,
    parse_fence_metadata,
    tombstones,
    unfence_metadata,
)
from logstore_cli.model import ChangelogMode, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from logstore_cli.catalog.lease import HeldLease
    from logstore_cli.jobs.sources import SourceRequest
    from logstore_cli.kafka.admin import KafkaAdmin
    from logstore_cli.kafka.producer import LogProducer
    from logstore_cli.storage import Storage

log = logging.getLogger(__name__)

# The job's own compaction: what Delta's auto compaction would do, but between epochs. Delta's own
# (``delta.autoOptimize.autoCompact``) is off in the job: it runs inside the epoch's commit and its
# OPTIMIZE commit would carry the epoch's metadata (checked on Delta 4.0.1).
COMPACTION_CONF = {
    "spark.databricks.delta.optimize.minFileSize": str(64 * 1024 * 1024),
    "spark.databricks.delta.optimize.maxFileSize": str(128 * 1024 * 1024),
}
AUTO_COMPACT = "spark.databricks.delta.autoCompact.enabled"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
WRITER_FILE = "logstore-writer.json"
OUTSIDE_FILE = "logstore-outside.json"  # in the checkpoint: see DeltaOutsideWrites
KILL_AT_ENV = "LOGSTORE_FAULT_KILL_AT"  # test-only: "<point>[:<epoch>]"
# Test-only: "<point>[:<epoch>]"; the driver creates PAUSE_FILE_ENV's file there and waits until it
# is deleted (a fault test kills a Spark worker, or the driver, at that moment of the epoch).
PAUSE_AT_ENV = "LOGSTORE_FAULT_PAUSE_AT"
PAUSE_FILE_ENV = "LOGSTORE_FAULT_PAUSE_FILE"
PAUSE_TIMEOUT_S = 600.0
DEFAULT_TRIGGER_S = 2.0
DEFAULT_LEASE_TTL_S = 60.0


class EpochStopped(Exception):
    """Raised into Spark when a stop was asked before an epoch began: the batch is then not
    recorded as done, and runs again when the job restarts."""


# -- the job's description ----------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaTarget:
    bootstrap: str
    client: Mapping[str, str]
    topic: str
    timeout_s: float


# Where logstore's own files of a job live (the writer id, the outside-write state, quarantine): a
# local directory, or a ``Storage`` (S3) rooted there. Spark gets the matching text (``paths``).
StateLocation: TypeAlias = "Path | Storage"


@dataclass(frozen=True)
class PulsarTarget:
    """A Pulsar table's log (design §7.1): its service URL, admin API and full topic name."""

    service_url: str
    admin_url: str
    topic: str  # persistent://tenant/namespace/topic
    timeout_s: float


@dataclass(frozen=True)
class IngestJob:
    table: TableSpec
    # The table as logstore reads and writes it (its Delta log, the lease): a directory, or a
    # ``Storage`` rooted at the table. Spark gets ``table_uri``; never a Path made of a URI.
    location: TableLocation
    paths: plan.JobPaths  # what Spark is given (``paths.table`` is ``table_uri``)
    stores: plan.Stores
    source: SourceRequest
    kafka: KafkaTarget | None  # None when the job writes no log
    trigger_s: float = DEFAULT_TRIGGER_S
    once: bool = False
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    max_epochs: int | None = None  # stop after this many epochs ran (tests, benchmarks)
    # Outside writes at or below this Delta version are not carried into the log (the user chose
    # to go on without them: e.g. no Change Data Feed was recorded for them).
    skip_outside_through: int | None = None
    # The checkpoint as logstore reads and writes in it (the writer id), when not the local
    # directory ``paths.checkpoint`` names (a checkpoint on S3).
    checkpoint_storage: Storage | None = None
    pulsar: PulsarTarget | None = None  # the log on Pulsar (then ``kafka`` is None)
    # Who commits a keyed epoch to Delta: merge_engine.AUTO (delta-rs when it can) or SPARK.
    delta_engine: str = merge_engine.AUTO

    @property
    def table_uri(self) -> str:
        """The table as Spark opens it (the local path, or ``s3a://…``)."""
        return spark_path(self.location)

    @property
    def checkpoint(self) -> StateLocation:
        """The checkpoint as logstore reads and writes in it (Spark gets ``paths.checkpoint``)."""
        if self.checkpoint_storage is not None:
            return self.checkpoint_storage
        return Path(self.paths.checkpoint)

    @property
    def quarantine(self) -> StateLocation:
        """Where the job's quarantine files go: below the table, on its storage."""
        if isinstance(self.location, Path):
            return Path(self.paths.quarantine)
        return self.location.child(f"{plan.STATE_DIR}/quarantine/{self.paths.job}")


@dataclass
class RunSummary:
    writer: str
    epochs: int = 0
    rows: int = 0
    quarantined: int = 0
    last: EpochReport | None = None
    stopped_by_user: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "done",
            "writer": self.writer,
            "epochs": self.epochs,
            "rows": self.rows,
            "quarantined": self.quarantined,
            "delta_version": self.last.delta_version if self.last else None,
            "stopped_by_user": self.stopped_by_user,
        }


# -- writer id ------------------------------------------------------------------------------------


def writer_id(checkpoint: StateLocation) -> str:
    """The job's writer id, kept in its checkpoint: the same across restarts, new with a new or
    deleted checkpoint (batch ids restart at 0 then, and an old id would make Delta skip them)."""
    if not isinstance(checkpoint, Path):
        return _stored_writer_id(checkpoint)
    path = checkpoint / WRITER_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        writer = data["writer"]
        if not isinstance(writer, str) or not writer:
            raise ValueError("no writer")
        return writer
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LogstoreError(
            f"the checkpoint's writer id file {path} is unreadable: {exc}",
            hint="delete the whole checkpoint directory to start the job over "
            "(it re-reads its source from the beginning)",
        ) from exc
    offsets = checkpoint / "offsets"
    if offsets.is_dir() and any(offsets.iterdir()):
        raise InvalidInputError(
            f"the checkpoint {checkpoint} has Spark progress but no writer id ({WRITER_FILE})",
            hint="it was not made by logstore ingest, or was partly deleted: delete the whole "
            "directory to start over, or pass another --checkpoint",
        )
    writer = "w-" + secrets.token_hex(8)
    checkpoint.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint / f".{WRITER_FILE}.{os.getpid()}"
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump({"writer": writer, "created_ms": int(time.time() * 1000)}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return writer


def _parse_writer(data: bytes, where: str) -> str:
    try:
        writer = json.loads(data.decode("utf-8"))["writer"]
        if not isinstance(writer, str) or not writer:
            raise ValueError("no writer")
    except (ValueError, KeyError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
        raise LogstoreError(
            f"the checkpoint's writer id file {where} is unreadable: {exc}",
            hint="delete the whole checkpoint to start the job over (it re-reads its source "
            "from the beginning)",
        ) from exc
    return writer


def _stored_writer_id(checkpoint: Storage) -> str:
    """``writer_id`` of a checkpoint on object storage: created only if absent (of two jobs
    starting on one checkpoint, both end up with the one id written first)."""
    where = f"{checkpoint.uri}/{WRITER_FILE}"
    blob = checkpoint.read(WRITER_FILE)
    if blob is not None:
        return _parse_writer(blob.data, where)
    if checkpoint.list("offsets").files:
        raise InvalidInputError(
            f"the checkpoint {checkpoint.uri} has Spark progress but no writer id ({WRITER_FILE})",
            hint="it was not made by logstore ingest, or was partly deleted: delete all of it "
            "to start over, or pass another --checkpoint",
        )
    writer = "w-" + secrets.token_hex(8)
    data = json.dumps({"writer": writer, "created_ms": int(time.time() * 1000)}).encode()
    if checkpoint.put_if_absent(WRITER_FILE, data) is not None:
        return writer
    blob = checkpoint.read(WRITER_FILE)  # another start wrote it first: its id is the one
    if blob is None:
        raise LogstoreError(
            f"the checkpoint's writer id file {where} vanished while it was created",
            hint="another process deletes this checkpoint: stop it, then start the job again",
        )
    return _parse_writer(blob.data, where)


def new_attempt() -> str:
    return "a-" + secrets.token_hex(6)


# -- test-only fault hook -------------------------------------------------------------------------


# Where the pause hook may also hold the job's start (tests send a stop signal there).
START_POINTS = ("before-spark", "before-query")


def _kill_point(
    env: str = KILL_AT_ENV, valid: tuple[str, ...] = CRASH_POINTS
) -> tuple[str, int | None] | None:
    spec = os.environ.get(env)
    if not spec:
        return None
    point, _, epoch = spec.partition(":")
    if point not in valid:
        raise InvalidInputError(f"{env}={spec!r}: unknown point (valid: {valid})")
    return point, int(epoch) if epoch else None


def _pause_point(point: str, epoch: int | None = None) -> None:
    """Hold the job here while the test-only pause file exists (see PAUSE_AT_ENV)."""
    wanted = _kill_point(PAUSE_AT_ENV, CRASH_POINTS + START_POINTS + PAUSE_POINTS)
    if wanted is None or wanted[0] != point or wanted[1] not in (None, epoch):
        return
    given = os.environ.get(PAUSE_FILE_ENV)
    if not given:
        raise InvalidInputError(f"{PAUSE_AT_ENV} is set without {PAUSE_FILE_ENV}")
    path = Path(given)
    path.write_text(str(os.getpid()), "utf-8")
    deadline = time.monotonic() + PAUSE_TIMEOUT_S
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # poll interval of a condition with a deadline


def start_point(point: str) -> None:
    """A moment of the job's start where the test-only pause hook may hold it."""
    _pause_point(point)


def crash_point(point: str, epoch: int) -> None:
    """Die here, as a machine failure would, when the test-only hook asks for this point."""
    _pause_point(point, epoch)
    wanted = _kill_point()
    if wanted is None or wanted[0] != point or wanted[1] not in (None, epoch):
        return
    # The whole process group (Spark's JVM too) when we lead it, else just this process.
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


# -- producing from the driver --------------------------------------------------------------------


def _arrow_to_python(t: SqlType) -> Callable[[Any], Any] | None:
    """Arrow's Python values -> the ones ``logformat`` encodes: only maps differ (Arrow gives a
    list of pairs); None when no conversion is needed."""
    if isinstance(t, MapType):
        key, value = _arrow_to_python(t.key), _arrow_to_python(t.value)

        def to_dict(v: Any) -> Any:
            if v is None:
                return None
            return {(key(k) if key else k): (value(x) if value else x) for k, x in v}

        return to_dict
    if isinstance(t, ArrayType):
        element = _arrow_to_python(t.element)
        if element is None:
            return None
        return lambda v: None if v is None else [element(x) for x in v]
    if isinstance(t, StructType):
        inner = {name: _arrow_to_python(f) for name, f in t.fields}
        if not any(inner.values()):
            return None

        def fix_struct(v: Any) -> Any:
            if v is None:
                return None
            return {n: (inner[n](x) if inner[n] else x) for n, x in v.items()}  # type: ignore[misc]

        return fix_struct
    return None


# -- one epoch: the protocol's ports over a Spark micro-batch -------------------------------------


def _name(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


@dataclass
class SparkBatch:
    """One micro-batch as the ports see it: the cached DataFrame, its good records and the
    names of the arrival fields that order a key's changes."""

    frame: DataFrame
    arrival_fields: list[str]
    # The good records' count, once a port learnt it (the quarantine's look at the batch): the
    # file-only count then runs no Spark job of its own.
    good_rows: int | None = None

    @property
    def good(self) -> DataFrame:
        return self.frame.filter(F.col(plan.ERROR).isNull())


class SparkQuarantine:
    """``Quarantine``: the batch's malformed records, one file per writer and epoch, in a local
    directory or below the table on its ``Storage`` (one whole-object put: atomic there)."""

    def __init__(self, directory: StateLocation) -> None:
        self.directory = directory

    def write(self, batch: SparkBatch, writer: str, epoch: int) -> int:
        frame = batch.frame
        error = F.col(plan.ERROR)
        # One look reads the source into the cache and counts the good records (the log sink
        # sizes its pieces by it) and the malformed ones, collected only when there are some.
        stats = frame.agg(
            F.count(F.when(error.isNull(), F.lit(1))).alias("good"),
            F.count(error).alias("bad"),
        ).first()
        assert stats is not None  # a global aggregation has one row
        batch.good_rows = int(stats["good"])
        bad = frame.filter(error.isNotNull()).select(plan.ERROR, plan.RAW, plan.ORIGIN)
        found = bad.collect() if stats["bad"] else []
        # Named by writer and epoch: a retry rewrites its own file, a new writer (a deleted
        # checkpoint restarts at epoch 0) never overwrites an old one.
        name = f"{writer}-epoch-{epoch:020d}.jsonl"
        if not found:
            return 0
        lines = [
            json.dumps(
                {"reason": reason, "raw": raw, "source": origin, "writer": writer, "epoch": epoch},
                ensure_ascii=False,
            )
            + "\n"
            for reason, raw, origin in found
        ]
        if not isinstance(self.directory, Path):
            self.directory.write(name, "".join(lines).encode("utf-8"))  # a retry replaces it
            return len(found)
        target = self.directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")  # a killed write's leftover is reused
        with tmp.open("w", encoding="utf-8") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)  # a retried epoch rewrites the same file: counted once
        return len(found)


# The most rows of an epoch's records the driver sorts and sends at once (SparkLogSink._sorted).
PIECE_ROWS = 500_000
_PIECE = "_ls_piece"


class SortedPiece(NamedTuple):
    """Rows of an epoch in the order they are sent: their kinds, keys and values."""

    rows: int
    kinds: list[str]
    keys: list[bytes | None]
    values: list[bytes]


class SparkLogSink:
    """What every log system's sink shares: Spark encodes and collects the epoch's records (as
    Arrow), the driver sorts them (sequence, then arrival: a key's order) and sends them itself
    (``KafkaLogSink``, ``jobs.pulsar_sink.PulsarLogSink``), so a retried Spark task can never
    send a record twice and every delivery is reported."""

    # What to do about a record too large for the log (the end of the quarantine reason).
    too_large_hint = "write smaller rows"
    piece_rows = PIECE_ROWS

    def __init__(self, table: TableSpec, topic: str, max_bytes: int | None = None) -> None:
        self.topic = topic
        self.max_bytes = max_bytes  # the largest key + value a record may carry (None: unchecked)
        self.schema = RowSchema.of(table)
        self.columns = [c.name for c in table.columns]
        self.keys = list(table.primary_key)
        self.upsert = plan.upsert_kind(table).value
        self.log_kinds = frozenset(k.value for k in plan.log_kinds(table))
        # Spark's to_json writes these types exactly as wire format 1 does: it encodes them.
        self.spark_encodes = all(spark_json_identical(c.type) for c in table.columns)
        # The values' format (docs/design.md §7): the row, or the row in debezium-json's envelope.
        self.fmt = LogFormat(table.log_store.data_format if table.log_store else LogFormat.JSON)
        # debezium-json in upsert mode: a -D is a tombstone, as Paimon wrote it.
        self.tombstones = tombstones(
            self.fmt,
            table.log_store is not None and table.log_store.changelog_mode is ChangelogMode.UPSERT,
        )

    def _sorted(self, batch: SparkBatch) -> Iterator[SortedPiece]:
        """The epoch's good rows, their kinds, keys and values in the order they are sent, in
        pieces of at most about ``piece_rows`` rows: an epoch above it (the carry of a backfill
        of millions of rows, a first run over a large source) is range-partitioned by Spark on
        the sort order and read one piece at a time, so the driver holds one piece, not the
        epoch (whole, 10 million rows exhausted a 1 GiB driver)."""
        frame = self._log_frame(batch)
        arrival = [f"a{i}" for i in range(len(batch.arrival_fields))]
        rows = batch.good_rows if batch.good_rows is not None else frame.count()
        if rows <= self.piece_rows:
            yield self._piece(frame.toArrow(), arrival)
            return
        # Records with one sort key (a carried commit's: same version and rank) would all land in
        # one range: a row id splits them; their order among themselves is free (they are of
        # different keys), a key's order is the sort's.
        order = [F.col(c).asc_nulls_first() for c in ("seq", *arrival)] + [F.col(_PIECE)]
        count = -(-rows // self.piece_rows)
        ranged = (
            frame.withColumn(_PIECE, F.monotonically_increasing_id())
            .repartitionByRange(count, *order)
            .withColumn(_PIECE, F.spark_partition_id())
            .localCheckpoint()  # one shuffle; each piece is then a scan of what it kept
        )
        for piece in range(count):  # range partitions are in the order's order
            table = ranged.filter(F.col(_PIECE) == F.lit(piece)).drop(_PIECE).toArrow()
            if table.num_rows:
                yield self._piece(table, arrival)

    def _piece(self, table: Any, arrival: list[str]) -> SortedPiece:
        import pyarrow.compute as pc

        sort_keys = [("seq", "ascending", "at_start")]
        sort_keys += [(a, "ascending", "at_start") for a in arrival]
        table = table.take(pc.sort_indices(table, sort_keys=sort_keys))
        keys, values = self._encoded(table)
        return SortedPiece(table.num_rows, table.column("kind").to_pylist(), keys, values)

    def mark_oversized(self, frame: DataFrame) -> DataFrame:
        """Records too large for the topic become malformed ones (quarantined with their size and
        the limit, in neither store) instead of failing every run of the epoch at delivery.

        The size is the record's key and value as Spark's ``to_json`` writes them: the log's bytes
        exactly where Spark encodes the table's types (``spark_json_identical``), within a few
        bytes otherwise (the producer's own check then still refuses a record at the very edge)."""
        if self.max_bytes is None:
            return frame
        opts = {"ignoreNullFields": "false"}
        value = F.to_json(F.struct(*[F.col(_name(c)).alias(c) for c in self.columns]), opts)
        # debezium-json wraps the row: count its envelope (33 bytes, either kind) too.
        size = F.octet_length(value) + F.lit(0 if self.fmt is LogFormat.JSON else _ENVELOPE_BYTES)
        if self.tombstones:
            # A -D is sent as its key alone (a tombstone): its row never reaches the topic.
            size = F.when(F.col(plan.KIND) == F.lit(RowKind.DELETE.value), F.lit(0)).otherwise(size)
        if self.keys:
            key = F.to_json(F.struct(*[F.col(_name(k)).alias(k) for k in self.keys]), opts)
            size = size + F.octet_length(key)
        too_large = F.col(plan.ERROR).isNull() & (size > F.lit(self.max_bytes))
        reason = F.concat(
            F.lit("too large for the log: the record's key and value are "),
            size.cast("string"),
            F.lit(
                f" bytes, topic '{self.topic}' takes at most {self.max_bytes} "
                f"({self.too_large_hint})"
            ),
        )
        return frame.withColumns(
            {
                plan.ERROR: F.when(too_large, reason).otherwise(F.col(plan.ERROR)),
                # What the source gave when it kept it, else the row as the log would carry it.
                plan.RAW: F.when(too_large, F.coalesce(F.col(plan.RAW), value)).otherwise(
                    F.col(plan.RAW)
                ),
            }
        )

    def _log_frame(self, batch: SparkBatch) -> DataFrame:
        """The epoch's records for the log: the key and value bytes (Spark's ``to_json`` where it
        writes wire format 1 byte for byte, else the columns for Python to encode), the kind,
        and the sequence and arrival fields to order them by."""
        kind = F.coalesce(F.col(plan.KIND), F.lit(self.upsert))
        if self.spark_encodes:
            opts = {"ignoreNullFields": "false"}
            key = (
                F.to_json(F.struct(*[F.col(_name(k)).alias(k) for k in self.keys]), opts)
                if self.keys
                else F.lit(None).cast("string")
            )
            value = F.to_json(F.struct(*[F.col(_name(c)).alias(c) for c in self.columns]), opts)
            payload = [key.cast("binary").alias("k"), value.cast("binary").alias("v")]
        else:
            payload = [F.col(_name(c)).alias(f"c{i}") for i, c in enumerate(self.columns)]
        arrival = [
            F.col(plan.ARRIVAL).getField(name).alias(f"a{i}")
            for i, name in enumerate(batch.arrival_fields)
        ]
        return batch.good.select(
            *payload, kind.alias("kind"), F.col(plan.SEQ).alias("seq"), *arrival
        )

    def _encoded(self, table: Any) -> tuple[list[bytes | None], list[bytes]]:
        if self.spark_encodes:
            return table.column("k").to_pylist(), table.column("v").to_pylist()
        columns = []
        for i, name in enumerate(self.columns):
            values = table.column(f"c{i}").to_pylist()
            fix = _arrow_to_python(self.schema.type_of(name))
            columns.append([fix(v) for v in values] if fix else values)
        encoder = EpochEncoder(self.schema, EpochId("-", 0, "-"))  # headers unused here
        key, value = encoder.key, encoder.value
        rows = list(zip(*columns, strict=True)) if columns else []
        return [key(r) for r in rows], [value(r) for r in rows]


class KafkaLogSink(SparkLogSink):
    """``LogSink`` on Kafka: the driver's idempotent producer."""

    too_large_hint = (
        "raise the topic's max.message.bytes and the table's kafka.message.max.bytes, "
        "or write smaller rows"
    )

    def __init__(
        self,
        table: TableSpec,
        producer: LogProducer,
        admin: KafkaAdmin,
        topic: str,
        max_bytes: int | None = None,
    ) -> None:
        super().__init__(table, topic, max_bytes)
        self.producer = producer
        self.admin = admin

    def produce(self, batch: SparkBatch, eid: EpochId) -> Produced:
        encoder = EpochEncoder(self.schema, eid, self.fmt)
        headers = {kind: encoder.headers(RowKind(kind)) for kind in self.log_kinds}
        send = self.producer.send
        rows = produced = 0
        wrap = self.fmt is not LogFormat.JSON
        upsert = self.tombstones
        for piece in self._sorted(batch):
            rows += piece.rows
            for key, value, kind in zip(piece.keys, piece.values, piece.kinds, strict=True):
                if kind in headers:  # a kind the changelog mode leaves out (upsert: -U): not sent
                    sent = (
                        change_value(value, RowKind(kind), self.fmt, upsert=upsert)
                        if wrap
                        else value
                    )
                    send(key, sent, headers[kind])
                    produced += 1
        delivered = self.producer.flush()
        # Exact, as the lease keeps other writers out.
        offsets = self.admin.end_offsets(self.topic)
        for partition, end in delivered.items():
            if offsets.get(partition, 0) < end:
                raise BrokerError(
                    f"partition {partition} of topic {self.topic} ends at "
                    f"{offsets.get(partition)} although a record was delivered at {end - 1}",
                    hint="something else deletes records of the topic; check its retention",
                )
        return Produced(rows, produced, offsets)

    def publish_markers(self, marker: CommitMarker) -> None:
        _, value, headers = encode_marker(marker, self.fmt)
        for partition in range(self.producer.partition_count()):
            self.producer.send(None, value, headers, partition=partition)
        self.producer.flush()


_ENVELOPE_BYTES = max(
    len(envelope(b"", kind, LogFormat.DEBEZIUM_JSON)) for kind in (RowKind.INSERT, RowKind.DELETE)
)


FENCE_ATTEMPTS = 5  # fence commits lost in a row to the fenced writer's own epoch commits
_CONCURRENT_TXN = re.compile(r"DELTA_CONCURRENT_TRANSACTION|ConcurrentTransactionException")


class WriterFenced(LeaseLostError):
    """Another job took the table over and fenced this job's writer in Delta (docs/consistency.md
    §6): Delta refused or skipped this epoch's commit, so nothing of it is in the table."""

    def __init__(
        self, table: str, eid: EpochId, state: TxnState, found: tuple[int, Fence, int | None] | None
    ) -> None:
        last = "none" if state.last_epoch is None else str(state.last_epoch)
        if found is None:
            who = f"another job took table {table} over"
        else:
            version, fence, stamp = found
            at = f" at {local_time(stamp / 1000)}" if stamp is not None else ""
            who = (
                f"job {fence.job or '?'} (writer {fence.by}) took table {table} over{at} "
                f"(fencing token {fence.token}, Delta version {version})"
            )
        super().__init__(
            f"fenced: {who}; epoch {eid.epoch} of this job's writer {eid.writer} was not "
            f"committed (its last committed epoch: {last})",
            hint="this job stopped without committing or publishing markers, so the records it "
            "produced for the epoch are never released; run it again once the other job has "
            "ended: it resumes from its checkpoint, exactly once",
        )


# Key types whose range goes into the MERGE condition: a collected value is the same literal again
# (no time zone, no float -0.0/NaN equality questions), and Delta keeps min/max statistics of them.
_RANGED = (ByteType, ShortType, IntegerType, LongType, DecimalType, StringType, DateType)


@dataclass(frozen=True)
class MergeSource:
    """An epoch's MERGE source, and each ranged key column's (name, min, max) in it."""

    frame: DataFrame
    bounds: list[tuple[str, Any, Any]]
    rows: int  # the frame's rows: one per key


def _committed(commit: epochs.EpochCommit) -> Committed:
    return Committed(commit.epoch, commit.version, commit.positions)


def _table_facts(table: Any) -> merge_engine.TableFacts:
    """What ``merge_engine.choose`` needs of a table delta-rs opened."""
    import pyarrow as pa

    protocol = table.protocol()
    fields = json.loads(table.schema().to_json()).get("fields", [])
    sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    return merge_engine.TableFacts(
        min_reader=protocol.min_reader_version,
        min_writer=protocol.min_writer_version,
        reader_features=_features(protocol.reader_features),
        writer_features=_features(protocol.writer_features),
        generated_columns=merge_engine.has_generated_columns(fields),
        table_bytes=sum(int(size) for size in sizes if size is not None),
    )


def _features(names: list[str] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(names)


class DeltaCommitter:
    """``TableCommitter``: the Delta table, read through its log, written with MERGE (append
    without a key) and Delta's idempotent-write transaction ids — a keyed epoch's MERGE by
    delta-rs where ``merge_engine.choose`` says it can, else by Spark."""

    def __init__(
        self,
        table: TableSpec,
        path: TableLocation,
        spark: SparkSession | None = None,
        engine: str = merge_engine.AUTO,
    ) -> None:
        self.name = table.name
        self.path = path  # the Delta log as logstore reads it (epochs, fences)
        self.uri = spark_path(path)  # the table as Spark opens it
        self.spark = spark  # for commits without a batch (``mark``)
        self.columns = [c.name for c in table.columns]
        self.keys = list(table.primary_key)
        self.log_kinds = frozenset(k.value for k in plan.log_kinds(table))
        self.engine = engine  # merge_engine.AUTO or SPARK: who commits a keyed epoch
        self.last_engine: str | None = None  # who committed the last epoch (tests, benchmarks)
        self._said: set[str] = set()  # the reasons for Spark already logged

    def committed(self, writer: str, epoch: int) -> Committed | None:
        done = epochs.committed_version(self.path, writer)
        if done is None or done < epoch:
            return None
        found = epochs.find_epoch_commit(self.path, writer, epoch)
        if found is None:
            raise LogstoreError(
                f"Delta records epoch {epoch} of writer {writer} as committed, but its "
                "commit is no longer in the Delta log",
                hint="the commit files were cleaned up (log retention); delete the job's "
                "checkpoint to start the job over with a new writer id",
            )
        return _committed(found)

    def latest(self) -> Committed | None:
        found = epochs.latest_epoch_commit(self.path)
        return None if found is None else _committed(found)

    def count(self, batch: SparkBatch) -> int:
        if batch.good_rows is not None:
            return batch.good_rows
        return batch.good.count()

    def commit(self, batch: SparkBatch, eid: EpochId, offsets: Mapping[int, LogPosition]) -> int:
        """Commit the epoch to Delta, idempotently; returns the version it committed as. A commit
        that lost the race to commits changing no data raises CompactionConflict (the protocol
        commits again)."""
        try:
            versions = epochs.commit_versions(self.path)
        except LogstoreError:
            versions = []  # no log to read: the write itself says what is wrong (a table gone)
        before = versions[0] if versions else -1
        try:
            self._write(batch, eid, offsets)
        except Exception as exc:
            self._raise_if_fenced(eid, exc)  # refused (conflict) or skipped: a takeover's fence
            explained = explain_commit_failure(str(exc), "")
            if (
                explained is not None
                and explained.cause == "another-writer"
                and only_maintenance_since(self.path, before)
            ):
                raise CompactionConflict(
                    f"the commit of epoch {eid.epoch} lost the race to a compaction of the table",
                    detail=_first_line(exc),
                ) from exc
            raise
        try:
            return self._committed_as(eid)
        except LogstoreError as exc:
            self._raise_if_fenced(eid, exc)  # an append without a key is skipped silently
            raise

    def _raise_if_fenced(self, eid: EpochId, cause: BaseException) -> None:
        """WriterFenced when Delta records ``eid.writer`` as fenced (the commit failed or was
        skipped because of it); nothing when it does not, or the table cannot be read."""
        try:
            state = epochs.writer_txn(self.path, eid.writer)
        except LogstoreError:
            return
        if state.fenced:
            raise WriterFenced(self.name, eid, state, self._find_fence(eid.writer)) from cause

    def _find_fence(self, fenced: str, limit: int = 200) -> tuple[int, Fence, int | None] | None:
        """The newest fence commit of writer ``fenced`` among the ``limit`` newest commits: its
        version, its fence and its time (ms)."""
        for version in epochs.commit_versions(self.path)[:limit]:
            info = epochs.commit_info(self.path, version) or {}
            meta = info.get("userMetadata")
            fence = parse_fence_metadata(meta if isinstance(meta, str) else None)
            if fence is not None and fence.fenced == fenced:
                stamp = info.get("inCommitTimestamp", info.get("timestamp"))
                return version, fence, stamp if isinstance(stamp, int) else None
        return None

    def fence(self, fence: Fence) -> int | None:
        """Fence writer ``fence.fenced``, the holder of a lease this job took over: a commit
        without data (an empty append, as ``mark``) that sets its transaction version to
        ``fenced_txn_version`` of its newest epoch, with ``fence`` as its metadata. An epoch
        commit of that writer whose snapshot predates it then fails (Delta: a concurrent commit
        set a transaction id it read), a later one is skipped (its epoch is below the version).
        The fence's Delta version; None when the writer was fenced already."""
        if self.spark is None:
            raise LogstoreError("a commit without data needs the job's Spark session")
        path = self.uri
        for _ in range(FENCE_ATTEMPTS):
            state = epochs.writer_txn(self.path, fence.fenced)
            if state.fenced:
                return None
            schema = self.spark.read.format("delta").load(path).schema
            try:
                (
                    self.spark.createDataFrame([], schema)
                    .write.format("delta")
                    .mode("append")
                    .option("txnAppId", fence.fenced)
                    .option("txnVersion", str(fenced_txn_version(state.last_epoch)))
                    .option("userMetadata", fence_metadata(fence))
                    .save(path)
                )
            except Exception as exc:
                if _CONCURRENT_TXN.search(str(exc)):
                    continue  # the fenced writer committed an epoch meanwhile: fence after it
                raise
            found = self._find_fence(fence.fenced)
            return None if found is None else found[0]
        raise LogstoreError(
            f"could not fence writer {fence.fenced} of table {self.name}: it committed an epoch "
            f"before each of {FENCE_ATTEMPTS} attempts",
            hint="the job that held the table before still runs: stop it, then start this one",
        )

    def unfence(self, writer: str) -> int | None:
        """Take down a fence on this job's own ``writer`` (a takeover fenced it, and the job now
        holds the lease again): a commit that sets its transaction version back to its newest
        committed epoch (-1: none). Delta's writer options cannot lower a transaction version, so
        the commit is written here, put if absent as Delta's protocol asks. The commit's version;
        None when the writer was not fenced."""
        from deltalake import DeltaTable

        from logstore_cli.provision.delta_log import ENGINE, put_commit, put_if_absent

        for _ in range(FENCE_ATTEMPTS):
            state = epochs.writer_txn(self.path, writer)
            if not state.fenced:
                return None
            uri, options = delta_rs_args(self.path)
            try:
                dt = DeltaTable(uri, storage_options=options)
                config = dict(dt.metadata().configuration)
            except Exception as exc:  # delta-rs' own errors
                raise LogstoreError(f"cannot read the Delta table at {self.uri}: {exc}") from exc
            version = dt.version() + 1
            now = int(time.time() * 1000)
            info: dict[str, Any] = {
                "timestamp": now,
                "operation": "Manual Update",
                "operationParameters": {},
                "readVersion": version - 1,
                "isolationLevel": "Serializable",
                "isBlindAppend": False,
                "operationMetrics": {},
                "userMetadata": unfence_metadata(writer, state.last_epoch),
                "engineInfo": ENGINE,
                "txnId": secrets.token_hex(16),
            }
            if config.get("delta.enableInCommitTimestamps") == "true":
                # Such a table's commits carry a timestamp above the previous commit's, first.
                before = epochs.commit_info(self.path, version - 1) or {}
                last = before.get("inCommitTimestamp")
                floor = last + 1 if isinstance(last, int) else now
                info = {"inCommitTimestamp": max(now, floor), **info}
            txn = {
                "appId": writer,
                "version": -1 if state.last_epoch is None else state.last_epoch,
                "lastUpdated": now,
            }
            text = json.dumps({"commitInfo": info}, separators=(",", ":")) + "\n"
            text += json.dumps({"txn": txn}, separators=(",", ":")) + "\n"
            if (
                put_if_absent(self.path, version, text)
                if isinstance(self.path, Path)
                else put_commit(self.path, version, text)  # If-None-Match: * on S3
            ):
                return version
        raise LogstoreError(
            f"could not take down the fence on writer {writer} of table {self.name}: other "
            f"commits took the next {FENCE_ATTEMPTS} versions first",
            hint="another job writes the table: stop it, then start this one again",
        )

    def _write(self, batch: SparkBatch, eid: EpochId, offsets: Mapping[int, LogPosition]) -> None:
        from delta.tables import DeltaTable

        good = batch.good
        path = self.uri
        meta = commit_metadata(eid, offsets)
        session: SparkSession = good.sparkSession  # the foreachBatch clone: see design.md §8
        if not self.keys:
            # delta-rs' snapshot first, as for a MERGE (below): a commit landing while the rows
            # are computed fails this one.
            opened = self._open_for_delta_rs()
            rows = good.filter(F.coalesce(F.col(plan.KIND), F.lit("+I")).isin("+I", "+U")).select(
                *[F.col(_name(c)) for c in self.columns]
            )
            if opened is not None:
                # at most the batch's good records (known once the quarantine counted them)
                bound = batch.good_rows if batch.good_rows is not None else rows.count()
                if self._delta_rs_takes(opened[1], bound, append=True) and (
                    self._append_with_delta_rs(opened[0], rows, eid, meta)
                ):
                    return
            self.last_engine = merge_engine.SPARK
            (
                rows.write.format("delta")
                .mode("append")
                .option("txnAppId", eid.writer)
                .option("txnVersion", str(eid.epoch))
                .option("userMetadata", meta)
                .save(path)
            )
        else:
            # delta-rs' snapshot first, as Spark's MERGE reads its own before the source: a commit
            # landing while the source is computed fails this one (see _merge_with_delta_rs).
            opened = self._open_for_delta_rs()
            source = self.merge_source(batch)
            if (
                opened is not None
                and self._delta_rs_takes(opened[1], source.rows)
                and self._merge_with_delta_rs(opened[0], source, eid, meta)
            ):
                return
            self.last_engine = merge_engine.SPARK
            latest = source.frame
            removing = F.col(f"s.{plan.KIND}").isin(*[k.value for k in plan.REMOVING_KINDS])
            keeping = F.col(f"s.{plan.KIND}").isNull() | ~removing
            on = self.merge_condition(source)
            values: dict[str, str | Column] = {
                _name(c): F.col(f"s.{_name(c)}") for c in self.columns
            }
            conf = session.conf
            conf.set(TXN_APP_ID, eid.writer)
            conf.set(TXN_VERSION, str(eid.epoch))
            conf.set(USER_METADATA, meta)
            try:
                target = DeltaTable.forPath(session, path)
                result = (
                    target.alias("t")
                    .merge(latest.alias("s"), on)
                    .whenMatchedDelete(condition=removing)
                    .whenMatchedUpdate(condition=keeping, set=values)
                    .whenNotMatchedInsert(condition=keeping, values=values)
                    .execute()
                )
                if not result.collect():
                    raise LogstoreError(
                        f"Delta skipped epoch {eid.epoch} of writer {eid.writer} as already "
                        "written, though it records no such commit",
                        hint="another job may be writing with this checkpoint's writer id",
                    )
            finally:
                for key in (TXN_APP_ID, TXN_VERSION, USER_METADATA):
                    conf.unset(key)

    def _open_for_delta_rs(self) -> tuple[Any, merge_engine.TableFacts] | None:
        """The table's snapshot opened by delta-rs and what ``merge_engine.choose`` needs of it;
        None when Spark commits whatever the epoch (``merge_engine.spark_regardless``)."""
        if merge_engine.spark_regardless(self.engine) is not None:
            return None  # asked for: nothing to say
        try:
            from deltalake import DeltaTable

            # On S3 and HDFS with the storage options (keys for delta-rs only, never logged):
            # its commit there is a put if absent (S3's If-None-Match: *, HDFS's rename without
            # overwrite of a file written aside), so a commit that lost the race fails whole.
            uri, options = delta_rs_args(self.path)
            opened = DeltaTable(uri, storage_options=options)
            return opened, _table_facts(opened)
        except Exception as exc:  # Spark's MERGE then fails, or not, saying why in its words
            self._say(f"delta-rs cannot open the table ({_first_line(exc)})")
            return None

    def _delta_rs_takes(
        self, facts: merge_engine.TableFacts, rows: int, *, append: bool = False
    ) -> bool:
        choice = merge_engine.choose(columns=self.columns, rows=rows, table=facts, append=append)
        if not choice.delta_rs:
            self._say(choice.reason)
        return choice.delta_rs

    def _say(self, reason: str) -> None:
        """Log once per reason why Spark commits (a job of thousands of epochs says it once)."""
        if reason not in self._said:
            self._said.add(reason)
            log.info("Spark commits the epochs of %s: %s", self.name, reason)

    def _merge_with_delta_rs(
        self, table: Any, source: MergeSource, eid: EpochId, meta: str
    ) -> bool:
        """The epoch's MERGE by delta-rs, on the snapshot ``table`` holds: the same clauses, the
        same transaction id and ``userMetadata`` as Spark's; True when committed (see
        ``_commit_with_delta_rs``)."""
        self._check_unwritten(table, eid)
        rows = self._without_noop_removals(table, source.frame.toArrow())
        quoted = {c: f"`{c}`" for c in [*self.columns, plan.KIND]}
        on = " AND ".join(f"t.{quoted[k]} = s.{quoted[k]}" for k in self.keys)
        kind = f"s.{quoted[plan.KIND]}"
        removing = ", ".join(sorted(f"'{k.value}'" for k in plan.REMOVING_KINDS))
        keeping = f"{kind} IS NULL OR {kind} NOT IN ({removing})"
        values = {quoted[c]: f"s.{quoted[c]}" for c in self.columns}

        def merge(props: Any, hooks: Any) -> None:
            (
                table.merge(
                    rows,
                    on,
                    source_alias="s",
                    target_alias="t",
                    # the source is in memory: its key statistics prune the files it scans
                    streamed_exec=False,
                    commit_properties=props,
                    post_commithook_properties=hooks,
                )
                .when_matched_delete(f"{kind} IN ({removing})")
                .when_matched_update(values, keeping)
                .when_not_matched_insert(values, keeping)
                .execute()
            )

        return self._commit_with_delta_rs(table, eid, meta, merge)

    def _append_with_delta_rs(self, table: Any, rows: DataFrame, eid: EpochId, meta: str) -> bool:
        """A keyless table's epoch appended by delta-rs, on the snapshot ``table`` holds, with the
        transaction id and ``userMetadata`` Spark's append writes; True when committed (see
        ``_commit_with_delta_rs``)."""
        from deltalake import write_deltalake

        self._check_unwritten(table, eid)
        data = rows.toArrow()

        def append(props: Any, hooks: Any) -> None:
            write_deltalake(
                table, data, mode="append", commit_properties=props,
                post_commithook_properties=hooks,
            )  # fmt: skip

        return self._commit_with_delta_rs(table, eid, meta, append)

    @staticmethod
    def _check_unwritten(table: Any, eid: EpochId) -> None:
        """Spark's idempotent write skips an epoch whose writer's transaction version is at or
        above it (done, or fenced): the same check, on the very snapshot delta-rs commits over (a
        separately loaded one would let a fence landing in between through)."""
        state = decode_txn_version(table.transaction_version(eid.writer))
        if state.fenced or (state.last_epoch is not None and state.last_epoch >= eid.epoch):
            raise LogstoreError(
                f"Delta skipped epoch {eid.epoch} of writer {eid.writer}: its transaction version "
                f"({state.last_epoch}{', fenced' if state.fenced else ''}) is at or past it",
                hint="another job may be writing with this checkpoint's writer id",
            )

    def _commit_with_delta_rs(
        self, table: Any, eid: EpochId, meta: str, write: Callable[[Any, Any], None]
    ) -> bool:
        """``write(commit_properties, post_commit_hooks)`` — a delta-rs MERGE or append — as the
        epoch's commit, with its transaction id and metadata. No retry: any commit after the
        snapshot ``table`` holds (a fence, an outside write, a compaction) fails it with
        DELTA_RS_CONFLICT, which ``commit`` sorts out as it does Spark's conflicts. Any other
        failure of delta-rs (it commits last, so nothing was committed) is logged and returns
        False: Spark commits the epoch, and this job's later ones."""
        from deltalake import CommitProperties, PostCommitHookProperties, Transaction
        from deltalake.exceptions import CommitFailedError

        props = CommitProperties(
            app_transactions=[Transaction(app_id=eid.writer, version=eid.epoch)],
            custom_metadata={"userMetadata": meta},
            max_commit_retries=0,
        )
        # checkpoints as Spark writes them, after the commit (_checkpoint_if_due)
        hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
        read_version = table.version()
        try:
            write(props, hooks)
        except CommitFailedError as exc:
            raise LogstoreError(
                f"{DELTA_RS_CONFLICT}: another commit took the Delta version after "
                f"{read_version} first; epoch {eid.epoch} was not committed",
                detail=str(exc),
            ) from exc
        except Exception as exc:
            self.engine = merge_engine.SPARK
            log.warning(
                "delta-rs could not commit epoch %d of %s (%s); Spark commits it and this "
                "job's later epochs",
                eid.epoch,
                self.name,
                _first_line(exc),
            )
            return False
        self.last_engine = merge_engine.DELTA_RS
        self._checkpoint_if_due(table)
        return True

    def _without_noop_removals(self, table: Any, rows: Any) -> Any:
        """``rows`` (Arrow) less the removals (``-D``, ``-U``) of keys ``table``'s snapshot does
        not hold: they change nothing (a key inserted and deleted within the epoch), and delta-rs
        1.6.6 fails a MERGE into a table with a Change Data Feed when a source row matches no
        target row and no clause (its all-null output row fails the key's NOT NULL check). Only
        the key columns of the files that can hold those keys are read (statistics prune)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        kinds = rows.column(plan.KIND)
        removing = pa.array(sorted(k.value for k in plan.REMOVING_KINDS)).cast(kinds.type)
        mask = pc.fill_null(pc.is_in(kinds, value_set=removing), False)
        removals = rows.filter(mask)
        if removals.num_rows == 0:
            return rows
        dataset = table.to_pyarrow_dataset()
        wanted = None
        for key in self.keys:
            values = pc.unique(removals.column(key)).cast(dataset.schema.field(key).type)
            test = ds.field(key).isin(values)
            wanted = test if wanted is None else wanted & test
        held = dataset.to_table(columns=self.keys, filter=wanted)
        held = held.cast(pa.schema([removals.schema.field(k) for k in self.keys]))
        held = held.group_by(self.keys).aggregate([])  # each key once: a semi join
        kept = removals.join(held, keys=self.keys, join_type="left semi")
        kept = kept.select(rows.column_names).cast(rows.schema)
        return pa.concat_tables([rows.filter(pc.invert(mask)), kept])

    def _checkpoint_if_due(self, table: Any) -> None:
        """A Delta checkpoint at every ``delta.checkpointInterval``-th version (10 by default),
        as Spark writes one after its commits; delta-rs would wait for every 100th. A failure
        is logged: the epoch is committed, and a later commit writes the next checkpoint."""
        version = table.version()
        try:
            interval = int(table.metadata().configuration.get("delta.checkpointInterval", "10"))
        except ValueError:
            interval = 10
        if interval <= 0 or version <= 0 or version % interval:
            return
        try:
            table.create_checkpoint()
            table.cleanup_metadata()  # the log files past delta.logRetentionDuration, as Spark
        except Exception as exc:
            log.warning("no Delta checkpoint at version %d of %s: %s", version, self.name, exc)

    def merge_source(self, batch: SparkBatch) -> MergeSource:
        """The MERGE's source: each key's latest change among ``batch``'s good records (less those
        the table ignores), only the table's columns and the kind. One aggregation over the
        cached batch counts its good records (``batch.good_rows``) and the kept ones' distinct
        keys: when every key occurs once (the usual epoch) the ranking, a shuffle and sort that
        Delta would run in each of its passes over the source, is skipped; it would keep every
        row. The same aggregation gives each key column's range in the epoch (``bounds``)."""
        keys = [F.col(_name(k)) for k in self.keys]
        ranged = [k for k in self.keys if isinstance(batch.frame.schema[k].dataType, _RANGED)]
        frame = batch.good
        in_kept = F.lit(True)
        if RowKind.UPDATE_BEFORE.value not in self.log_kinds:
            # An upsert changelog has no -U: the table ignores them too, or a -U ending an
            # epoch (its +U in the next) would delete a row the log still shows.
            in_kept = F.col(plan.KIND).isNull() | (F.col(plan.KIND) != RowKind.UPDATE_BEFORE.value)
        kept = frame.filter(in_kept)
        stats = frame.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count(F.when(in_kept, F.lit(1))).alias("kept"),
            F.count_distinct(F.when(in_kept, F.struct(*keys))).alias("keys"),
            *[
                F.min(F.when(in_kept, F.col(_name(k)))).alias(f"min{i}")
                for i, k in enumerate(ranged)
            ],
            *[
                F.max(F.when(in_kept, F.col(_name(k)))).alias(f"max{i}")
                for i, k in enumerate(ranged)
            ],
        ).first()
        assert stats is not None  # a global aggregation has one row
        batch.good_rows = int(stats["rows"])
        latest = kept
        if int(stats["keys"]) != int(stats["kept"]):  # a key changed twice: the latest wins
            order = [F.col(plan.SEQ).desc_nulls_last(), F.col(plan.ARRIVAL).desc()]
            last = Window.partitionBy(*keys).orderBy(*order)
            latest = (
                kept.withColumn("_ls_rank", F.row_number().over(last))
                .filter(F.col("_ls_rank") == 1)
                .drop("_ls_rank")
            )
        bounds = [
            (k, stats[f"min{i}"], stats[f"max{i}"])
            for i, k in enumerate(ranged)
            if stats[f"min{i}"] is not None
        ]
        frame = latest.select(*[F.col(_name(c)) for c in self.columns], F.col(plan.KIND))
        return MergeSource(frame, bounds, int(stats["keys"]))

    def merge_condition(self, source: MergeSource) -> Column:
        """``t.k = s.k`` for every key column, and each ranged key's epoch range on the target
        (``t.k BETWEEN min AND max``): a target row outside it matches no change of the epoch, so
        the MERGE is the same, and Delta skips the files whose statistics lie outside it instead of
        joining every file of the table (keys that grow, or changes to recent keys)."""
        parts = [F.col(f"t.{_name(k)}") == F.col(f"s.{_name(k)}") for k in self.keys]
        parts += [
            F.col(f"t.{_name(k)}").between(F.lit(low), F.lit(high))
            for k, low, high in source.bounds
        ]
        on = parts[0]
        for part in parts[1:]:
            on = on & part
        return on

    def compact(self) -> Compacted:
        """Delta's OPTIMIZE (bin-packing) of the files under 64 MiB into files of up to 128 MiB
        (Delta's auto-compaction sizes: compacted files are not rewritten again and again), run
        between epochs with no epoch metadata set."""
        from delta.tables import DeltaTable

        if self.spark is None:
            raise LogstoreError("a compaction needs the job's Spark session")
        conf = self.spark.conf
        for key, value in COMPACTION_CONF.items():
            conf.set(key, value)
        try:
            metrics = (
                DeltaTable.forPath(self.spark, self.uri)
                .optimize()
                .executeCompaction()
                .collect()[0]["metrics"]
            )
        except Exception as exc:
            explained = explain_commit_failure(str(exc), "")
            if explained is not None and explained.cause == "another-writer":
                raise CompactionFailed(
                    "the compaction lost the race to another program's commit; the next one "
                    "tries again",
                    detail=_first_line(exc),
                ) from exc
            raise
        finally:
            for key in COMPACTION_CONF:
                conf.unset(key)
        removed, added = int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"])
        version = epochs.commit_versions(self.path)[0] if removed or added else None
        return Compacted(removed, added, version)

    def mark(self, eid: EpochId, offsets: Mapping[int, LogPosition]) -> int:
        """A commit without data that records ``eid`` (an empty append: Delta 4.0.1 commits it
        with its transaction id and metadata, and skips it when the id is already recorded)."""
        if self.spark is None:
            raise LogstoreError("a commit without data needs the job's Spark session")
        path = self.uri
        schema = self.spark.read.format("delta").load(path).schema
        (
            self.spark.createDataFrame([], schema)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", eid.writer)
            .option("txnVersion", str(eid.epoch))
            .option("userMetadata", commit_metadata(eid, offsets))
            .save(path)
        )
        return self._committed_as(eid)

    def _committed_as(self, eid: EpochId) -> int:
        for version in epochs.commit_versions(self.path)[:20]:
            found = epochs.epoch_of(self.path, version)
            if found is not None and found.epoch == eid:
                return version
        raise LogstoreError(
            f"epoch {eid.epoch} of writer {eid.writer} is not among the table's newest commits "
            "after it committed",
            hint="another process is committing to the table; stop it and restart the job",
        )


def _shown(location: StateLocation) -> str:
    return str(location) if isinstance(location, Path) else location.uri


def _table_id(path: TableLocation) -> str | None:
    """The Delta table's id (``metaData.id``): a table created again at the same path has another."""
    from deltalake import DeltaTable

    uri, options = delta_rs_args(path)
    try:
        return str(DeltaTable(uri, storage_options=options).metadata().id)
    except Exception:  # delta-rs' own errors: the job's first commit says what is wrong
        return None


# Delta's errors for a feed that is not there: never recorded, or its files removed by a VACUUM.
_FEED_GONE = re.compile(r"DELTA_MISSING_CHANGE_DATA|FileNotFound|FILE_NOT_FOUND|does not exist")


class DeltaOutsideWrites:
    """``OutsideWrites``: the table's outside writes, found in its Delta log (``Follower``: only
    new commit files are read each epoch), their changes read from Delta's Change Data Feed.

    The changes are the feed's rows in Delta's order (version, then removal before new image). A
    write committed *before* an epoch commit that is already in the log (a blind append that did
    not conflict with the job's MERGE, or a write from before outside writes were carried) would
    land in the log after that epoch's records: on a table with a key, the carry then ends with the
    current image of every key those writes touched (``+U``, or ``-D`` when the key is gone), read
    from the snapshot at ``through``, so that folding the log by key gives the table."""

    ARRIVAL_FIELDS = ("version", "rank")

    def __init__(
        self,
        spark: SparkSession,
        table: TableSpec,
        path: TableLocation,
        skip_through: int | None = None,
        checkpoint: StateLocation | None = None,
    ) -> None:
        self.spark = spark
        self.table = table
        self.path = path  # the Delta log as logstore reads it
        self.uri = spark_path(path)  # the table as Spark opens it
        self.skip_through = skip_through
        # Where the job keeps the version through which it found nothing left to carry: a
        # restart reads the commits after it, not the whole log (1.3M files after a month of 2 s
        # epochs, at about 0.25 ms each).
        self.checkpoint = checkpoint
        self.table_id = _table_id(path) if checkpoint is not None else None
        self.follower = Follower(path, known=self._known())
        self._saved = self.follower.known
        self.columns = [c.name for c in table.columns]
        self.keys = list(table.primary_key)

    def _known(self) -> int | None:
        if self.checkpoint is None:
            return None
        try:
            if isinstance(self.checkpoint, Path):
                text = (self.checkpoint / OUTSIDE_FILE).read_bytes()
            else:
                blob = self.checkpoint.read(OUTSIDE_FILE)
                if blob is None:
                    return None
                text = blob.data
            saved = json.loads(text)
            value, table_id = saved.get("checked_through"), saved.get("table_id")
        except (OSError, ValueError, AttributeError, LogstoreError):
            return None  # none yet, or unreadable: the first look reads the whole log
        if table_id is None or table_id != self.table_id:
            return None  # another table at this path (dropped and created again)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _remember(self, through: int) -> None:
        """Keep ``through`` in the checkpoint: every outside write up to it is carried."""
        if self.checkpoint is None or through == self._saved:
            return
        saved = json.dumps({"checked_through": through, "table_id": self.table_id})
        try:
            if isinstance(self.checkpoint, Path):
                state = self.checkpoint / OUTSIDE_FILE
                tmp = state.with_name(f".{state.name}.{os.getpid()}")
                tmp.write_text(saved, "utf-8")
                os.replace(tmp, state)
            else:
                self.checkpoint.write(OUTSIDE_FILE, saved.encode("utf-8"))  # a whole-object put
        except (OSError, LogstoreError) as exc:  # only a saving: the next start reads more
            log.info("could not save %s in %s: %s", OUTSIDE_FILE, _shown(self.checkpoint), exc)
            return
        self._saved = through

    def pending(self) -> OutsidePending | None:
        found = self.follower.new()
        if not found.commits:
            self._remember(found.checked_through)
            return None
        skip = self.skip_through
        skipped = tuple(
            c
            for c in found.commits
            if skip is not None and c.version <= skip and not self._readable(c)
        )
        carried = tuple(c for c in found.commits if c not in skipped)
        return OutsidePending(carried, found.checked_through, skipped)

    def _readable(self, commit: OutsideCommit) -> bool:
        """Whether the feed of ``commit`` can be read (Delta says so only when it runs a read)."""
        try:
            self._feed(commit).limit(1).count()
        except OutsideWriteError:
            return False
        except Exception as exc:
            if _FEED_GONE.search(str(exc)):
                return False
            raise self._unreadable((commit,), exc) from exc
        return True

    def changes(self, pending: OutsidePending) -> SparkBatch:
        from functools import reduce

        frames = [self._feed(commit) for commit in pending.commits]
        if frames:
            feed = reduce(lambda a, b: a.unionByName(b), frames)
            latest = epochs.latest_epoch_commit(self.path)
            if self.keys and latest is not None and latest.version > pending.commits[0].version:
                feed = feed.unionByName(self._restated(feed, pending.through))
        else:  # every write skipped: the carry records only that they were seen
            feed = self._empty()
        try:
            # Read now: an unreadable feed fails here, as the refusal it is, before any record.
            frame = feed.localCheckpoint()
        except Exception as exc:  # Spark's AnalysisException or a Py4J error
            raise self._unreadable(pending.commits, exc) from exc
        return SparkBatch(frame, list(self.ARRIVAL_FIELDS))

    def _feed(self, commit: OutsideCommit) -> DataFrame:
        version = str(commit.version)
        try:
            feed = (
                self.spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", version)
                .option("endingVersion", version)
                .load(self.uri)
            )
        except Exception as exc:
            raise self._unreadable((commit,), exc) from exc
        kinds = F.create_map(*[F.lit(x) for t, k in KINDS.items() for x in (t, k.value)])
        ranks = F.create_map(*[F.lit(x) for t, r in ORDER.items() for x in (t, r)])
        change = F.col("_change_type")
        return self._frame(feed, kinds[change], F.col("_commit_version"), ranks[change])

    def _restated(self, feed: DataFrame, through: int) -> DataFrame:
        """Every key ``feed`` touched, as the snapshot at ``through`` holds it."""
        keys = [F.col(_name(k)) for k in self.keys]
        touched = feed.select(*keys).distinct()
        now = (
            self.spark.read.format("delta")
            .option("versionAsOf", str(through))
            .load(self.uri)
            .select(*[F.col(_name(c)) for c in self.columns])
        )
        present = now.join(touched, on=self.keys, how="left_semi")
        gone = touched.join(now.select(*keys), on=self.keys, how="left_anti")
        gone = gone.select(
            *[
                F.col(_name(c))
                if c in self.keys
                else F.lit(None).cast(now.schema[c].dataType).alias(c)
                for c in self.columns
            ]
        )
        after = F.lit(through + 1)
        return self._frame(
            present, F.lit(plan.upsert_kind(self.table).value), after, F.lit(ORDER["insert"])
        ).unionByName(self._frame(gone, F.lit("-D"), after, F.lit(ORDER["delete"])))

    def _empty(self) -> DataFrame:
        schema = self.spark.read.format("delta").load(self.uri).schema
        empty = self.spark.createDataFrame([], schema)
        return self._frame(empty, F.lit(None).cast("string"), F.lit(0), F.lit(0))

    def _frame(self, frame: DataFrame, kind: Column, version: Column, rank: Column) -> DataFrame:
        """The batch shape the log sink reads (the sources' normalized columns)."""
        return frame.select(
            *[F.col(_name(c)) for c in self.columns],
            kind.cast("string").alias(plan.KIND),
            F.lit(None).cast("long").alias(plan.SEQ),
            F.struct(version.cast("long").alias("version"), rank.cast("int").alias("rank")).alias(
                plan.ARRIVAL
            ),
            F.lit(None).cast("string").alias(plan.ERROR),
            F.lit(None).cast("string").alias(plan.RAW),
            F.concat(F.lit("delta:version "), version.cast("string")).alias(plan.ORIGIN),
        )

    def _unreadable(
        self, commits: tuple[OutsideCommit, ...], exc: BaseException
    ) -> OutsideWriteError:
        text = str(exc)
        name, path = self.table.name, self.uri
        what = describe_all(commits)
        ddl = f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)"
        m = re.search(r"not\s+recorded\s+for\s+version\s+\[(\d+)\]", text)
        skip = m.group(1) if m else str(commits[-1].version) if commits else "VERSION"
        if "DELTA_MISSING_CHANGE_DATA" in text:
            where = f" (version {m.group(1)})" if m else ""
            return OutsideWriteError(
                f"table {name} was changed outside logstore at {what}, and Delta recorded no "
                f"Change Data Feed for it{where}: delta.enableChangeDataFeed was off, so ingest "
                "cannot carry those changes into the log; nothing was written",
                hint="turn the feed back on for later writes (in Spark SQL: "
                f"{ddl}); to go on without carrying these writes (log readers will not see "
                "them, and `logstore verify` will show the rows that differ), run the same "
                f"ingest with --skip-outside-through {skip}",
                detail=_first_line(exc),
            )
        if _FEED_GONE.search(text):
            reason = "the files of its Change Data Feed are gone (a VACUUM removed them)"
        else:
            reason = "its Change Data Feed cannot be read"
        return OutsideWriteError(
            f"table {name} was changed outside logstore at {what}, and {reason}: ingest cannot "
            "carry those changes into the log; nothing was written",
            hint="to go on without carrying these writes (log readers will not see them, and "
            "`logstore verify` will show the rows that differ), run the same ingest with "
            f"--skip-outside-through {skip}",
            detail=_first_line(exc),
        )


class EpochWriter:
    """The ``foreachBatch`` callback: one call per epoch, run through ``EpochProtocol``."""

    def __init__(
        self,
        job: IngestJob,
        protocol: EpochProtocol[SparkBatch],
        on_epoch: Callable[[EpochReport], None],
    ) -> None:
        self.job = job
        self.writer = protocol.writer
        self.protocol = protocol
        self.on_epoch = on_epoch
        self.stop_requested = threading.Event()
        self.in_flight = threading.Lock()
        self.failure: BaseException | None = None
        self.summary = RunSummary(self.writer)

    # foreachBatch entry point: errors are kept for the CLI (Spark would wrap them in a trace).
    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.in_flight:
            if self.stop_requested.is_set():
                raise EpochStopped("stop requested before the epoch began")
            try:
                report = self.run(batch, int(batch_id))
            except BaseException as exc:
                self.failure = exc
                raise
        self.summary.epochs += 1
        self.summary.rows += report.rows
        self.summary.quarantined += report.quarantined
        self.summary.last = report
        self.on_epoch(report)

    def run(self, batch: DataFrame, epoch: int) -> EpochReport:
        log = self.protocol.log
        if isinstance(log, SparkLogSink):
            batch = log.mark_oversized(batch)
        frame = batch.persist()
        try:
            arrival = list(frame.schema[plan.ARRIVAL].dataType.fieldNames())  # type: ignore[attr-defined]
            return self.protocol.run(epoch, SparkBatch(frame, arrival))
        finally:
            frame.unpersist()


def _log_limits(job: IngestJob, admin: KafkaAdmin) -> tuple[dict[str, str], int]:
    """The producer's client properties, with its batches kept under the topic's
    ``max.message.bytes`` (librdkafka fills a batch up to its own ``batch.size``, and the broker
    refuses a batch above the topic's limit whole); and the largest key + value one record may
    carry (see ``max_key_and_value_bytes``)."""
    from logstore_cli.kafka.producer import LogProducer, max_key_and_value_bytes

    assert job.kafka is not None
    try:
        info = admin.describe_topic(job.kafka.topic)
        topic_configs = dict(info.configs) if info is not None else {}
    except LogstoreError as exc:  # e.g. no DescribeConfigs ACL: Kafka's default is assumed
        log.info("the configs of topic %s could not be read: %s", job.kafka.topic, exc.message)
        topic_configs = {}
    client = dict(job.kafka.client)
    topic_max = topic_configs.get("max.message.bytes", "")
    if topic_max.strip().isdigit() and "batch.size" not in client:
        client["batch.size"] = str(max(1, int(topic_max) - BATCH_FRAMING))
    conf = LogProducer.config_for(job.kafka.bootstrap, client, timeout_s=job.kafka.timeout_s)
    return client, max_key_and_value_bytes(conf, topic_configs)


def protocol_for(
    spark: SparkSession,
    job: IngestJob,
    writer: str,
    lease: HeldLease,
    producer: LogProducer | None,
    admin: KafkaAdmin | None,
    max_bytes: int | None = None,
    on_carry: Callable[[CarryReport], None] = lambda report: None,
    sink: LogSink[SparkBatch] | None = None,
) -> EpochProtocol[SparkBatch]:
    """The job's protocol over the Spark, log and Delta ports its stores need (``sink``: a log
    sink made by the caller, the Pulsar one; else Kafka's over ``producer`` and ``admin``)."""
    spark.conf.set(AUTO_COMPACT, "false")  # the job compacts between epochs itself
    log = sink
    if job.stores.log and job.kafka is not None and producer is not None and admin is not None:
        log = KafkaLogSink(job.table, producer, admin, job.kafka.topic, max_bytes)
    table = (
        DeltaCommitter(job.table, job.location, spark, job.delta_engine)
        if job.stores.file
        else None
    )
    outside = None  # carried only by a job that writes both stores
    if log is not None and table is not None:
        outside = DeltaOutsideWrites(
            spark, job.table, job.location, job.skip_outside_through, job.checkpoint
        )
    return EpochProtocol(
        writer,
        log=log,
        table=table,
        quarantine=SparkQuarantine(job.quarantine),
        lease=lease,
        commit_margin_s=job.lease_ttl_s / 3,
        new_attempt=new_attempt,
        crash_point=crash_point,
        outside=outside,
        on_carry=on_carry,
        compact_every=plan.compact_every(job.table),
        schema=SchemaWatch(
            job.location,
            job.table.name,
            [c.name for c in job.table.columns],
            {c.name: c.type for c in job.table.columns},
        ),
    )


# -- the query ------------------------------------------------------------------------------------


@dataclass
class IngestRun:
    """A started ingest: the query and what the driver loop needs to watch it."""

    query: StreamingQuery
    writer: EpochWriter
    lease: HeldLease
    markers: LogProducer | None
    closers: list[Callable[[], None]] = field(default_factory=list)


def acquire_lease(job: IngestJob) -> HeldLease:
    """The table's writer lease for this job (before Spark starts: a refusal comes at once):
    ``flock`` on a local table (``Lease``), conditional writes on object storage
    (``StorageLease``)."""
    from logstore_cli.catalog.lease import Lease

    name, ttl = job.table.name, job.lease_ttl_s
    if isinstance(job.location, Path):
        return Lease.acquire(job.location, job.paths.job, ttl, table=name)
    from logstore_cli.catalog.storage_lease import acquire_lease as acquire_on

    return acquire_on(job.location, job.paths.job, ttl, table=name)


def _spark_checkpoint(job: IngestJob) -> str:
    """The checkpoint as Spark is given it: the local path as before, or the ``s3a://`` URI."""
    checkpoint = job.checkpoint
    return str(checkpoint) if isinstance(checkpoint, Path) else job.paths.checkpoint


def take_over(spark: SparkSession, job: IngestJob, writer: str, lease: HeldLease) -> list[int]:
    """Before this job's first Delta commit (docs/consistency.md §6, "The fence"): take down a
    fence on its own writer (it holds the lease now), fence the writers of the leases it took over
    that were not released, then record its writer in the lease. The fence commits' versions."""
    info = lease.info
    owed = [w for w in info.unfenced if w != writer]
    fenced: list[int] = []
    if job.stores.file:
        table = DeltaCommitter(job.table, job.location, spark)
        lease.check()
        table.unfence(writer)
        for other in owed:
            version = table.fence(Fence(info.fence, writer, other, job.paths.job))
            if version is not None:
                fenced.append(version)
                prev = lease.took_over
                whose = f" of job {prev.job}" if prev is not None and prev.writer == other else ""
                log.warning(
                    "fenced writer %s%s in table %s (Delta version %d): it held the lease this "
                    "job took over, and can no longer commit an epoch",
                    other, whose, job.table.name, version,
                )  # fmt: skip
        owed = []
    lease.set_writer(writer, tuple(owed))  # a job writing no Delta leaves the fences owed
    return fenced


BATCH_FRAMING = 128  # a record batch's own bytes at the broker, beyond its records

GENERATE_ONCE_BATCH = 20_000  # changes per epoch of 'generate --once' (maxChangesPerBatch)


def _open_stream(spark: SparkSession, job: IngestJob) -> DataFrame:
    if isinstance(job.source.spec, plan.GenerateSource):
        from dataclasses import replace

        from logstore_cli.jobs.generate_source import MAX_PER_BATCH_OPTION, generate_stream

        options = dict(job.source.options)
        if job.once:
            options.setdefault(MAX_PER_BATCH_OPTION, str(GENERATE_ONCE_BATCH))
        return generate_stream(spark, replace(job.source, options=options), once=job.once)
    from logstore_cli.jobs.sources import open_source

    return open_source(spark, job.source)


def check_source_topic(job: IngestJob) -> None:
    """A ``kafka:`` source topic must exist: Spark's Kafka source would wait for it forever."""
    from logstore_cli.errors import TopicNotFoundError
    from logstore_cli.kafka.admin import KafkaAdmin

    spec = job.source.spec
    bootstrap = (
        spec.bootstrap or job.source.kafka_bootstrap if isinstance(spec, plan.KafkaSource) else None
    )
    if not isinstance(spec, plan.KafkaSource) or not bootstrap:
        return  # not a Kafka source; without brokers open_source says what to pass
    timeout = job.kafka.timeout_s if job.kafka is not None else 10.0
    with KafkaAdmin(bootstrap, job.source.kafka_client, timeout_s=timeout) as admin:
        if admin.describe_topic(spec.topic) is None:
            raise TopicNotFoundError(
                f"the source topic {spec.topic!r} does not exist at {bootstrap}",
                hint="create it first, or check --source and --source-bootstrap",
            )


def progress_after(query: StreamingQuery, after: int | None) -> list[dict[str, Any]]:
    """The query's progress reports of the batches after batch ``after`` (None: all it keeps), as
    their JSON, oldest first. Read from the newest back, one report's JSON per batch: PySpark's
    ``recentProgress`` converts every report the query keeps (its last 100), each in dozens of
    py4j calls, which made an epoch seconds slower once a hundred epochs had run."""
    reports = query._jsq.recentProgress()  # a Java array, oldest first
    found: list[dict[str, Any]] = []
    for i in range(len(reports) - 1, -1, -1):
        report = reports[i]
        if after is not None and int(report.batchId()) <= after:
            break
        found.append(json.loads(report.json()))
    return found[::-1]


def _source_done(run: IngestRun) -> bool:
    """Whether a generated source with --total has been processed to its end."""
    spec = run.writer.job.source.spec
    if not isinstance(spec, plan.GenerateSource) or spec.total is None:
        return False
    if spec.total == 0:
        return True
    progress = run.query.lastProgress
    if not progress:
        return False
    end = progress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    return isinstance(end, dict) and int(end.get("change", 0)) >= spec.total


def start(
    spark: SparkSession,
    job: IngestJob,
    lease: HeldLease,
    *,
    on_epoch: Callable[[EpochReport], None],
    on_start: Callable[[str], None] = lambda writer: None,
    stop: Callable[[], bool] = lambda: False,
    on_carry: Callable[[CarryReport], None] = lambda report: None,
) -> IngestRun:
    """Prepare the checkpoint and the log, and start the query, holding ``lease`` (from
    ``acquire_lease``; released when the run ends, or here if the start fails)."""
    closers: list[Callable[[], None]] = [lease.release]
    markers: LogProducer | None = None
    max_bytes: int | None = None
    admin: KafkaAdmin | None = None
    try:
        lease.keep_alive(job.lease_ttl_s / 4)
        # The source first: its checks are about the user's input (exit 2), before any broker.
        stream = _open_stream(spark, job)
        check_source_topic(job)
        writer = writer_id(job.checkpoint)
        take_over(spark, job, writer, lease)
        if job.stores.log and job.kafka is not None:
            from logstore_cli.kafka.admin import KafkaAdmin
            from logstore_cli.kafka.producer import LogProducer

            admin = KafkaAdmin(job.kafka.bootstrap, job.kafka.client, timeout_s=job.kafka.timeout_s)
            closers.insert(0, admin.close)
            client, max_bytes = _log_limits(job, admin)
            markers = LogProducer(
                job.kafka.bootstrap, client, job.kafka.topic, timeout_s=job.kafka.timeout_s
            )
            closers.insert(0, markers.close)
            markers.partition_count()  # the topic exists and the brokers answer, before Spark
        sink = None
        if job.stores.log and job.pulsar is not None:
            from logstore_cli.jobs.pulsar_sink import PulsarLogSink

            pulsar_sink = PulsarLogSink.open(
                job.table, job.pulsar
            )  # the topic exists, before Spark
            closers.insert(0, pulsar_sink.close)
            sink = pulsar_sink
        protocol = protocol_for(
            spark, job, writer, lease, markers, admin, max_bytes, on_carry, sink=sink
        )
        # The start-up rule and the carry of outside writes, before the query produces anything.
        protocol.start()
        epoch_writer = EpochWriter(job, protocol, on_epoch)
        writer_stream = (
            stream.writeStream.queryName(f"logstore-ingest-{job.paths.job}")
            .option("checkpointLocation", _spark_checkpoint(job))
            .foreachBatch(epoch_writer)
        )
        if job.once and isinstance(job.source.spec, plan.GenerateSource):
            # Spark 4.0.1 gives Python sources no batch size under availableNow (one huge epoch):
            # back-to-back batches of at most GENERATE_ONCE_BATCH changes, stopped when done.
            writer_stream = writer_stream.trigger(processingTime="0 seconds")
        elif job.once:
            writer_stream = writer_stream.trigger(availableNow=True)
        else:
            writer_stream = writer_stream.trigger(processingTime=f"{job.trigger_s} seconds")
        _pause_point("before-query")
        if stop():  # asked while Spark started: the query never starts, no epoch runs
            interrupt = KeyboardInterrupt()
            interrupt.add_note(
                "stopped before the query started: no epoch ran, nothing was written; run the "
                "same command to start the job"
            )
            raise interrupt
        on_start(writer)
        query = writer_stream.start()
    except BaseException:
        for close in closers:
            close()
        raise
    return IngestRun(query, epoch_writer, lease, markers, closers)


def wait(run: IngestRun, *, stop: Callable[[], bool], poll_s: int = 1) -> RunSummary:
    """Drive a started ingest until it ends: by itself (--once, or a source that is done), on
    ``stop()`` (Ctrl-C: after the epoch in flight), or on an error (re-raised as the domain error
    the epoch raised, not Spark's wrapper)."""
    writer = run.writer
    try:
        while True:
            if stop():  # first: a stop asked while the query started never waits for a poll
                _stop_after_epoch(run)
                writer.summary.stopped_by_user = True
                break
            try:
                if run.query.awaitTermination(poll_s):
                    break
            except Exception:  # the query failed: _raise_failure says why, in our terms
                break
            if _source_done(run) or (
                run.writer.job.max_epochs is not None
                and writer.summary.epochs >= run.writer.job.max_epochs
            ):
                _stop_after_epoch(run)
                break
        _raise_failure(run)
    finally:
        for close in run.closers:
            close()
    return writer.summary


def stop_on_ctrl_c(say: Callable[[str], None], *, quiet_second: bool = False) -> StopOnCtrlC:
    """Ctrl-C once: ask ``wait`` to stop after the epoch in flight (pass ``requested.is_set`` as
    its ``stop``). Twice: KeyboardInterrupt. Enter it after the Spark session started: it replaces
    PySpark's own SIGINT handler, which cancels the running Spark jobs (the epoch in flight would
    die half-way instead of finishing)."""
    return StopOnCtrlC(
        say,
        "stopping after the epoch in flight (Ctrl-C again to stop at once)",
        quiet_second=quiet_second,
    )


def _stop_after_epoch(run: IngestRun) -> None:
    """Stop the query between epochs: no epoch begins after the flag (it raises EpochStopped
    under the lock and runs again on restart), the one in flight finishes. ``query.stop()`` is
    called without the lock: an epoch waiting for it must be able to see the flag and end."""
    run.writer.stop_requested.set()
    with run.writer.in_flight:
        pass
    run.query.stop()


def _raise_failure(run: IngestRun) -> None:
    failure = run.writer.failure
    if isinstance(failure, LogstoreError):
        raise failure
    exc = run.query.exception()
    if exc is None and failure is None:
        return
    if failure is not None and not isinstance(failure, EpochStopped):
        explained = explain_commit_failure(str(failure), run.writer.job.table.name)
        if explained is not None:
            raise LogstoreError(
                explained.message, hint=explained.hint, detail=_first_line(failure)
            ) from failure
        raise LogstoreError(
            f"the ingest epoch failed: {type(failure).__name__}: {_first_line(failure)}",
            hint="the job can be restarted: the epoch runs again and nothing is written twice",
        ) from failure
    if exc is not None:
        if "EpochStopped" in str(exc):
            return
        raise LogstoreError(
            f"the ingest query failed: {_first_line(exc)}",
            hint="the job can be restarted: the epoch runs again and nothing is written twice",
        )


def _first_line(exc: BaseException, limit: int = 400) -> str:
    """The gist of a Spark or Python error: its first line (Spark appends JVM stack traces)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else repr(exc)
    return line if len(line) <= limit else line[: limit - 1] + "…"
