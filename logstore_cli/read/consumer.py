"""The consumer engine of a log read: confluent-kafka, no JVM (docs/design.md §6.4, §6.5).

:class:`LogSource` is one ``confluent_kafka.Consumer`` on a table's topic, with partitions assigned
by hand: no consumer group is joined and no offset is ever committed (logstore's progress is the
reader's own state). It answers metadata questions (partitions, watermarks, offsets for a time)
within its deadline and decodes the records of an offset range (what a Spark task of the Python
data source reads). :class:`LogReader` is the engine of ``logstore read --mode log`` and
``logstore verify``: every partition of the topic through one consumer, each record decoded once
and fed to the partition's decider (``logformat.consistency``), the emissions handed out one list
per consumed batch. :class:`ReaderCheckpoint` keeps a following read's decider state in a file.

Errors are domain errors: an unreachable cluster, rejected credentials, missing ACLs through the
client's :class:`~logstore_cli.kafka.errors.KafkaErrorMapper`; records a read needs that retention
deleted as :class:`RecordsDeletedError` (a reader never emits part of an epoch); records of a newer
wire format as an error telling to upgrade. Foreign records (no logstore headers) are skipped and
counted; malformed ones skipped, counted and logged once per partition (offset, never the value).
Client property values never reach a log line or a message.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from logstore_cli.errors import (
    BrokerError,
    InvalidInputError,
    LogstoreError,
    RecordsDeletedError,
    TopicNotFoundError,
)
from logstore_cli.kafka.client_config import java_only_reason, librdkafka_config
from logstore_cli.kafka.errors import KafkaErrorMapper, Operation, check_topic_name, reason
from logstore_cli.logformat.consistency import (
    Confirm,
    DeciderStateError,
    Emission,
    Item,
    Level,
    PendingEpoch,
    TopicDecider,
    check_level,
)
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import CommitMarker, RecordDecoder, RowSchema, decode
from logstore_cli.read.plan import HybridStart, Start

if TYPE_CHECKING:
    from logstore_cli.read.pulsar_source import PulsarLogSource

log = logging.getLogger(__name__)

#: Settings the engine depends on; client properties cannot change them.
FIXED: Final[Mapping[str, str | bool]] = {
    "enable.auto.commit": False,  # never commit offsets: the reader's state is its progress
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,  # how a bounded read sees a partition's end
    "auto.offset.reset": "error",  # an offset retention deleted is an error, never a silent jump
    # Read to the high watermark: the bound of a bounded read. With read_committed an open
    # transaction of another producer (an adopted topic) would hold every partition's end back.
    "isolation.level": "read_uncommitted",
    "allow.auto.create.topics": False,
}
#: Throughput defaults (client properties may change them): large fetches, a deep local queue.
TUNING: Final[Mapping[str, int]] = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 500_000,
    "queued.max.messages.kbytes": 256 * 1024,
    # A fetch the broker holds open (no new records) delays every metadata and offsets request
    # sent after it on the same connection until it returns: at the default 500 ms, each
    # partition after the first of a bounded read waited ~0.5 s in list_topics. New records
    # still end the wait at once; an idle partition costs a few more fetches a second.
    "fetch.wait.max.ms": 100,
}
#: The consumer needs a group id to be built; it never joins the group nor commits to it.
DEFAULT_GROUP: Final = "logstore-reader"

# Messages per consume() call: a batch that stays in the CPU caches (500 read 10-20 % faster than
# 10,000 in scripts/bench_read.py runs; a read yields once per batch, which costs little).
BATCH: Final = 500
_NO_END: Final = 1 << 63  # the end offset of a following read's partitions
_STEP_S: Final = 0.2  # first wait of a metadata request; doubles up to _STEP_MAX_S
_STEP_MAX_S: Final = 1.0
#: How often a following read looks for partitions added to the topic.
DISCOVER_EVERY_S = 10.0
# While the cluster is down (follow): how often to ask whether it is back.
_PROBE_EVERY_S: Final = 1.0

_NOT_FOUND: Final = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
_AUTHENTICATION: Final = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL}
)
_EOF: Final = KafkaError._PARTITION_EOF
_OUT_OF_RANGE: Final = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})

_UPGRADE_HINT = "upgrade logstore (pip install -U logstore) to read records of a newer format"


class Collections:
    """Python's cyclic garbage collector, paused while a read runs and run by ``tick()`` instead.

    A read allocates several GC-tracked objects per record (confluent-kafka's header tuples, the
    change, its emission) and holds a ``committed`` epoch's records until its marker: the automatic
    collector re-scanned what was held every few thousand records, about a quarter of the reader's
    time (measured: 7.3 against 9.1 us per record; already with thresholds raised a hundredfold).
    The objects of a read hold no reference cycles (reference counting frees them), so pausing
    loses nothing; ``tick()`` between batches still collects the young generation every 10 s and
    all of them every 5 minutes, so a following read running for days cannot accumulate garbage
    another library leaves in cycles. (Not more often: one young collection while an epoch's
    records were held took 51 ms, for 170,000 objects.)
    """

    YOUNG_EVERY_S: Final = 10.0
    FULL_EVERY_S: Final = 300.0

    def __init__(self) -> None:
        self._young = self._full = 0.0

    def __enter__(self) -> Self:
        self._was_enabled = gc.isenabled()
        gc.disable()
        now = time.monotonic()
        self._young, self._full = now + self.YOUNG_EVERY_S, now + self.FULL_EVERY_S
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self._young:
            self._young = now + self.YOUNG_EVERY_S
            if now >= self._full:
                self._full = now + self.FULL_EVERY_S
                gc.collect()
            else:
                gc.collect(0)


class _Record(Protocol):
    """A ``Message`` as consume() returns it. The client's stubs allow None for partition and
    offset, which it sets on every record and end of partition; one cast per batch says so
    instead of a check per record."""

    def error(self) -> KafkaError | None: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes]] | None: ...


@dataclass(frozen=True)
class SourceConf:
    """Where a table's log is: plain and picklable, so that a Spark task builds its own source.

    ``client_properties`` are the table's Kafka client properties (without their DDL prefix); they
    may hold secrets, so they are never logged.
    """

    bootstrap: str
    client_properties: Mapping[str, str]
    topic: str
    timeout_s: float = 10.0
    # "pulsar": ``bootstrap`` is the service URL and ``admin_url`` its admin REST API (design §7.1)
    system: str = "kafka"
    admin_url: str | None = None

    def __repr__(self) -> str:
        keys = ", ".join(sorted(self.client_properties))
        pulsar = (
            f", system='pulsar', admin_url={self.admin_url!r}" if self.system == "pulsar" else ""
        )
        return (
            f"SourceConf(bootstrap={self.bootstrap!r}, client_properties=<{keys}>, "
            f"topic={self.topic!r}, timeout_s={self.timeout_s!r}{pulsar})"
        )


@dataclass
class ReadStats:
    """What a read saw and did, for progress and summary output."""

    records: int = 0  # change records decoded
    markers: int = 0  # commit markers decoded
    foreign: int = 0  # records without logstore headers (skipped)
    malformed: int = 0  # records that break the wire format (skipped, logged)
    emitted: int = 0  # emissions handed out, retractions included
    retractions: int = 0  # of which retractions


def consumer_config(conf: SourceConf) -> tuple[dict[str, Any], list[str]]:
    """``(librdkafka config without callbacks, client properties ignored)`` of a source's consumer:
    the client properties mapped by :func:`librdkafka_config`, :data:`TUNING` unless they set it,
    :data:`FIXED` always, and the admin's short connection time-outs."""
    if not conf.bootstrap.strip():
        raise InvalidInputError(
            "no Kafka bootstrap servers given",
            hint="set the table's 'log-store.address' / 'kafka.bootstrap.servers', "
            "or the bootstrap servers in the config file",
        )
    if not conf.timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {conf.timeout_s}")
    config, ignored = librdkafka_config(conf.bootstrap, conf.client_properties)
    for key, value in FIXED.items():
        given = config.pop(key, None)
        if given is not None and str(given).strip().lower() != str(value).lower():
            ignored.append(key)
    config.update(FIXED)
    for key, default in TUNING.items():
        config.setdefault(key, default)
    config.setdefault("group.id", DEFAULT_GROUP)
    ms = int(conf.timeout_s * 1000)
    config.setdefault("socket.connection.setup.timeout.ms", max(1000, min(ms // 2, 30000)))
    config.setdefault("socket.timeout.ms", max(ms, 10))
    if "reconnect.backoff.ms" not in config:
        config.setdefault("reconnect.backoff.max.ms", 1000)  # a broker back is found within 1s
    return config, ignored


def _positions_gone(topic: str, partition: int, start: int, low: int) -> RecordsDeletedError:
    gone = f"offsets {start} to {low - 1}" if low - 1 > start else f"offset {start}"
    return RecordsDeletedError(
        f"partition {partition} of Kafka topic '{topic}' no longer holds {gone}, which this "
        f"read needs (the log now starts at offset {low}): the topic's retention deleted them",
        hint="reading on from the oldest record left could show part of an epoch, so the read "
        "stops: start later (--from latest, timestamp:MS or snapshot), or delete the checkpoint "
        "to start over; raise the topic's retention.ms if readers fall this far behind",
    )


class LogSource:
    """One consumer on a table's topic, partitions assigned by hand (no group, no commits).

    Every call ends within ``conf.timeout_s`` (``consume_range`` when it makes no progress for that
    long). Use it as a context manager, or call :meth:`close`. Not thread-safe.
    """

    def __init__(
        self,
        conf: SourceConf,
        schema: RowSchema | None = None,
        *,
        reload_schema: Callable[[], RowSchema] | None = None,
    ) -> None:
        self.conf = conf
        self.schema = schema
        # The table's schema read again, for a record with a column ``schema`` lacks: a column
        # added (alter-table --add-column) after this read started.
        self.reload_schema = reload_schema
        self._next_reload = 0.0  # monotonic time before which a reload found nothing new
        # decode() for this table's records, several times faster on the common shape.
        self.decode: Callable[[bytes | None, bytes | None, Any], Item] = (
            RecordDecoder(schema) if schema is not None else functools.partial(decode, schema=None)
        )
        self.topic = conf.topic
        self._read_op = Operation("read", "READ", conf.topic, also=("DESCRIBE",))
        check_topic_name(self._read_op)
        config, ignored = consumer_config(conf)
        for key in ignored:
            why = java_only_reason(key) or "set by logstore's reader or not translatable"
            log.debug("ignoring Kafka client property %r: %s", key, why)
        self.ignored_properties: tuple[str, ...] = tuple(ignored)
        self._errors = KafkaErrorMapper.for_config(
            config, conf.client_properties, timeout_s=conf.timeout_s
        )
        config.update(self._errors.callbacks())
        config["error_cb"] = self._on_error
        self._login_failed = False  # rejected credentials or TLS: fatal at every moment
        self._down = False  # librdkafka reported every broker down, none answered since
        self._reached = False  # a broker answered this client
        try:
            self._consumer: Consumer | None = Consumer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise self._errors.invalid_properties(exc) from None
        self._assigned: list[TopicPartition] = []
        self._warned_malformed: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            try:
                consumer.close()  # no group joined, nothing to commit: returns at once
            except (KafkaException, RuntimeError) as exc:
                log.debug("closing the Kafka consumer: %s", self._errors.redact(reason(exc)))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(
            "a LogSource cannot be pickled: pass its SourceConf and build it where it is used"
        )

    # -- metadata ----------------------------------------------------------------------------------

    def partitions(self) -> list[int]:
        """The topic's partitions, ascending; TopicNotFoundError when the topic does not exist."""
        op = Operation("describe", "DESCRIBE", self.topic)
        deadline = self._begin()
        consumer = self._client()
        last: KafkaException | None = None
        step = _STEP_S
        while True:
            wait = max(min(deadline - time.monotonic(), step), 0.05)
            try:
                metadata = consumer.list_topics(self.topic, timeout=wait)
            except KafkaException as exc:
                last = exc
            else:
                self._reach()
                topic = metadata.topics.get(self.topic)
                error: KafkaError | None = topic.error if topic is not None else None
                if topic is None or (error is not None and error.code() in _NOT_FOUND):
                    raise self._errors.not_found(op)
                if error is None and topic.partitions:
                    return sorted(topic.partitions)
                if error is not None and error.code() != KafkaError.LEADER_NOT_AVAILABLE:
                    raise self._errors.map(KafkaException(error), op)
            self._serve()
            self._raise_if_fatal()
            if time.monotonic() >= deadline:
                raise self._errors.timed_out(op, detail=reason(last) if last else None)
            step = min(step * 2, _STEP_MAX_S)

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """``{partition: (low, high)}``: the oldest offset held and the offset the next record
        gets, asked of the broker now (not cached)."""
        partitions = self.partitions()
        op = Operation("read the offsets of", "DESCRIBE", self.topic)
        deadline = time.monotonic() + self.conf.timeout_s
        consumer = self._client()
        result: dict[int, tuple[int, int]] = {}
        for partition in partitions:
            tp = TopicPartition(self.topic, partition)
            last: KafkaException | None = None
            while partition not in result:
                wait = max(min(deadline - time.monotonic(), _STEP_MAX_S), 0.05)
                try:
                    found = consumer.get_watermark_offsets(tp, timeout=wait, cached=False)
                except KafkaException as exc:
                    last = exc
                    self._check_request(exc, op)
                else:
                    if found is not None:
                        result[partition] = (int(found[0]), int(found[1]))
                        continue
                self._serve()
                self._raise_if_fatal()
                if time.monotonic() >= deadline:
                    raise self._errors.timed_out(op, detail=reason(last) if last else None)
        return result

    def offsets_for_time(self, timestamp_ms: int) -> dict[int, int]:
        """``{partition: first offset whose record's timestamp is at or after timestamp_ms}``; the
        high watermark where no record is that recent."""
        marks = self.watermarks()
        op = Operation("look up offsets by time in", "DESCRIBE", self.topic)
        deadline = time.monotonic() + self.conf.timeout_s
        request = [TopicPartition(self.topic, p, timestamp_ms) for p in marks]
        consumer = self._client()
        while True:
            wait = max(deadline - time.monotonic(), 0.05)
            try:
                found = consumer.offsets_for_times(request, timeout=wait)
            except KafkaException as exc:
                self._check_request(exc, op)
                self._serve()
                self._raise_if_fatal()
                if time.monotonic() >= deadline:
                    raise self._errors.timed_out(op, detail=reason(exc)) from None
                continue
            result: dict[int, int] = {}
            for tp in found:
                if tp.error is not None:
                    raise self._errors.map(KafkaException(tp.error), op)
                result[tp.partition] = tp.offset if tp.offset >= 0 else marks[tp.partition][1]
            return result

    # -- records -----------------------------------------------------------------------------------

    def consume_range(
        self, partition: int, start: int, end: int, stats: ReadStats | None = None
    ) -> Iterator[tuple[int, Item]]:
        """Every logstore record at offsets ``[start, end)`` of ``partition``, in offset order,
        decoded with the source's schema. Foreign and malformed records are skipped (and counted in
        ``stats``); a record of a newer format raises. RecordsDeletedError when the log no longer
        holds ``start``; BrokerError when no record arrives for ``timeout_s``."""
        if start >= end:
            return
        stats = stats if stats is not None else ReadStats()
        marks = self.watermarks()
        if partition not in marks:
            raise InvalidInputError(
                f"Kafka topic '{self.topic}' has no partition {partition} (it has {len(marks)})"
            )
        self._check_start(partition, start, marks[partition])
        self._assign({partition: start})
        try:
            position = start
            idle_since = time.monotonic()
            while position < end:
                messages = self._consume(BATCH, min(0.5, self.conf.timeout_s))
                if messages:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= self.conf.timeout_s:
                    raise self._stalled({partition: position}, {partition: end})
                for msg in messages:
                    err = msg.error()
                    if err is not None:
                        if err.code() == _EOF:
                            position = max(position, msg.offset())
                        else:
                            self._message_error(err, msg, follow=False)
                        continue
                    offset = msg.offset()
                    if offset >= end:
                        position = end
                        break
                    position = offset + 1
                    item = self._decode(msg, partition, offset, stats)
                    if item is not None:
                        yield offset, item
        finally:
            self._unassign()

    # -- internals shared with LogReader -----------------------------------------------------------

    def _decode(self, msg: _Record, partition: int, offset: int, stats: ReadStats) -> Item | None:
        item: Item | None
        try:
            item = self.decode(msg.key(), msg.value(), msg.headers())
        except WireFormatError as exc:
            item = self._redecode(exc, msg, partition, offset, stats)
            if item is None:
                return None
        if isinstance(item, CommitMarker):
            stats.markers += 1
        else:
            stats.records += 1
        return item

    def _redecode(
        self, exc: WireFormatError, msg: _Record, partition: int, offset: int, stats: ReadStats
    ) -> Item | None:
        """A record ``decode`` refused: with a column the reader's schema lacks, or a value its
        (narrower) type cannot hold, decoded again with the table's schema read again if that has
        more columns or other (widened) types (``self.decode`` is then the new schema's); else
        skipped (``_skip``). None when skipped."""
        if exc.reason in ("column", "value") and self._newer_schema():
            try:
                return self.decode(msg.key(), msg.value(), msg.headers())
            except WireFormatError as again:
                exc = again
        self._skip(exc, partition, offset, stats)
        return None

    def _newer_schema(self) -> bool:
        if self.reload_schema is None or self.schema is None:
            return False
        now = time.monotonic()
        if now < self._next_reload:
            return False  # a run of malformed records reads the Delta log once a second at most
        schema = self.reload_schema()
        if set(schema.columns) <= set(self.schema.columns):
            self._next_reload = now + 1.0
            return False  # nothing was added or widened: the record is malformed
        log.info(
            "table columns now %s: a column was added or widened",
            ", ".join(f"{name} {type_}" for name, type_ in schema.columns),
        )
        self.schema, self.decode = schema, RecordDecoder(schema)
        return True

    def _skip(self, exc: WireFormatError, partition: int, offset: int, stats: ReadStats) -> None:
        """A record ``decode`` refused: skip it (foreign, malformed) or stop (newer format)."""
        if exc.reason == "foreign":
            stats.foreign += 1
            return
        if exc.reason == "version":
            raise LogstoreError(
                f"partition {partition} offset {offset} of Kafka topic '{self.topic}': "
                f"{exc.message}",
                hint=_UPGRADE_HINT,
            ) from None
        stats.malformed += 1
        if partition not in self._warned_malformed:
            self._warned_malformed.add(partition)
            # Not exc.message: it may quote the record's values, which may be confidential.
            why = (
                "a column value does not fit the table's type"
                if exc.reason == "value"
                else "it claims logstore wire format 1 but breaks it (headers, key or value)"
            )
            log.warning(
                "skipping a malformed record at partition %d offset %d of topic %r: %s; further "
                "malformed records of this partition are counted, not logged (look at it with "
                "kafka-console-consumer --partition %d --offset %d --max-messages 1 "
                "--property print.headers=true)",
                partition, offset, self.topic, why, partition, offset,
            )  # fmt: skip

    def _on_error(self, err: KafkaError) -> None:
        """librdkafka's ``error_cb`` (served by consume()): the mapper's view, plus what a long
        read must tell apart (a lost cluster is waited out, rejected credentials are not)."""
        code = err.code()
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            return  # the group id is only a name: nothing is committed, no group is joined
        self._errors.on_error(err)
        if code in _AUTHENTICATION:
            self._login_failed = True
        elif code == KafkaError._ALL_BROKERS_DOWN:
            self._down = True

    def _client(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("LogSource is closed")
        return self._consumer

    def _begin(self) -> float:
        self._errors.begin()
        return time.monotonic() + self.conf.timeout_s

    def _reach(self) -> None:
        self._reached = True
        self._down = False
        self._errors.reached()

    def _serve(self) -> None:
        """Serve the client's callbacks (error_cb) when that cannot consume a record."""
        if not self._assigned:
            self._client().consume(1, 0)

    def _raise_if_fatal(self) -> None:
        """Rejected credentials or TLS always end a call; every address refusing the connection
        ends it only before any broker answered (later it is an outage, waited out)."""
        if self._login_failed or not self._reached:
            error = self._errors.fatal()
            if error is not None:
                raise error

    def _check_request(self, exc: KafkaException, op: Operation) -> None:
        """Raise the domain error of a failed request unless waiting may help."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None:
            raise self._errors.map(exc, op) from None
        code = err.code()
        if code in _NOT_FOUND:
            raise self._errors.not_found(op) from None
        if code in (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
            *_AUTHENTICATION,
        ):
            raise self._errors.map(exc, op) from None

    def _check_start(self, partition: int, start: int, marks: tuple[int, int]) -> None:
        low, high = marks
        if start < low:
            raise _positions_gone(self.topic, partition, start, low)
        if start > high:
            raise InvalidInputError(
                f"partition {partition} of Kafka topic '{self.topic}' ends at offset {high}, "
                f"before the offset {start} this read starts from",
                hint="was the topic deleted and created again? Delete the checkpoint to start "
                "over, or start from --from earliest / latest",
            )

    def _assign(self, offsets: Mapping[int, int]) -> None:
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        if tps:
            self._client().incremental_assign(tps)
            self._assigned.extend(tps)

    def _release(self, partitions: list[int]) -> None:
        drop = [tp for tp in self._assigned if tp.partition in partitions]
        if drop:
            self._client().incremental_unassign(
                [TopicPartition(self.topic, tp.partition) for tp in drop]
            )
            self._assigned = [tp for tp in self._assigned if tp.partition not in partitions]

    def _unassign(self) -> None:
        if self._consumer is not None and self._assigned:
            self._assigned = []
            self._consumer.unassign()

    def _consume(self, count: int, timeout: float) -> list[_Record]:
        """Up to ``count`` records already fetched; when there are none, wait at most ``timeout``
        for the first. (``consume(count, timeout)`` waits the whole time-out unless ``count``
        records come: a following read showed each record 60 ms late at the median, 110-150 ms
        at p99; now 0.3 ms and 2-13 ms, scripts/bench_read.py.)"""
        client = self._client()
        try:
            found = client.consume(count, 0)
            if not found and timeout > 0:
                found = client.consume(1, timeout)  # returns as soon as one record is there
            return cast(list[_Record], found)
        except KafkaException as exc:
            raise self._errors.map(exc, self._read_op) from None

    def _message_error(self, err: KafkaError, msg: _Record, *, follow: bool) -> None:
        """An error consume() returned in place of a record (not an end of partition)."""
        code = err.code()
        partition = msg.partition()
        if code in _OUT_OF_RANGE:
            # The fetch offset fell below the log start (retention) while the read ran.
            offset = msg.offset()
            raise _positions_gone(
                self.topic, -1 if partition is None else partition,
                offset if offset is not None and offset >= 0 else 0,
                self._low_watermark(partition),
            )  # fmt: skip
        if code in _NOT_FOUND:
            if follow:
                try:
                    self.partitions()  # stale metadata after a broker restart? Ask again.
                except TopicNotFoundError:
                    raise
                except BrokerError:
                    pass  # the cluster is away: a following read waits for it
                return
            raise self._errors.not_found(self._read_op)
        if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
            raise self._errors.denied(
                self._read_op, cluster=code == KafkaError.CLUSTER_AUTHORIZATION_FAILED
            )
        if code in _AUTHENTICATION or err.fatal():
            self._login_failed = self._login_failed or code in _AUTHENTICATION
            raise self._errors.map(KafkaException(err), self._read_op)
        log.debug(
            "Kafka consumer error on partition %s: %s", partition, self._errors.redact(err.str())
        )

    def _low_watermark(self, partition: int | None) -> int:
        if partition is None:
            return 0
        try:
            found = self._client().get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=self.conf.timeout_s, cached=False
            )
        except KafkaException:
            return 0
        return int(found[0]) if found is not None else 0

    def _stalled(self, positions: Mapping[int, int], ends: Mapping[int, int]) -> LogstoreError:
        """The error of a bounded read that got nothing for ``timeout_s``."""
        self._raise_if_fatal()
        behind = ", ".join(
            f"{p} at {positions[p]} of {ends[p]}" for p in sorted(positions) if p in ends
        )
        return self._errors.timed_out(self._read_op, detail=f"partitions still to read: {behind}")


# -- the engine --------------------------------------------------------------------------------------


_POSITIONS_KEY: Final = "reader_positions"


class ReaderDecider(TopicDecider):
    """A ``TopicDecider`` that also knows where the reader is in each partition.

    A partition's decider only moves on with logstore records; the reader's position moves on with
    every record (foreign and malformed ones too) and with each end of partition. A following read
    resumed from a checkpoint starts each partition there, also a partition that held nothing yet:
    starting it at ``latest`` again would lose what was written between the two runs. ``state()``
    carries the positions beside the decider's own fields, which ``TopicDecider.restore`` ignores.
    """

    def __init__(
        self,
        level: str,
        *,
        committed_through: Mapping[str, int] | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        super().__init__(level, committed_through=committed_through, confirm=confirm)
        self.positions: dict[int, int] = {}

    def state(self) -> dict[str, Any]:
        state = super().state()
        state[_POSITIONS_KEY] = {str(p): o for p, o in sorted(self.positions.items())}
        return state

    @classmethod
    def restore(cls, snapshot: Any, *, confirm: Confirm | None = None) -> ReaderDecider:
        decider = super().restore(snapshot, confirm=confirm)
        assert isinstance(decider, ReaderDecider)
        raw = snapshot.get(_POSITIONS_KEY, {})  # a plain TopicDecider state has none
        if not isinstance(raw, dict) or not all(
            isinstance(p, str) and p.isdigit() and type(o) is int and o >= 0 for p, o in raw.items()
        ):
            raise DeciderStateError(f"state.{_POSITIONS_KEY}: expected partition -> offset")
        decider.positions = {int(p): o for p, o in raw.items()}
        return decider


class Bounds(Protocol):
    """What a reader asks of its source for the bounds of a read (``LogSource``, and Pulsar's)."""

    def watermarks(self) -> dict[int, tuple[int, int]]: ...

    def offsets_for_time(self, timestamp_ms: int) -> dict[int, int]: ...

    def close(self) -> None: ...


class LogReader:
    """A log read: every partition of the topic through one consumer, decided at ``level``.

    ``committed_through`` (writer -> epoch) marks epochs resolved before the first record (a hybrid
    read's snapshot). ``state`` (a ``decider.state()`` saved earlier, e.g. by
    :class:`ReaderCheckpoint`) restores the decider instead: the read continues where it stopped.
    ``confirm`` checks markers against the Delta log (``catalog.epochs.EpochConfirmer``).
    """

    def __init__(
        self,
        conf: SourceConf,
        schema: RowSchema,
        level: Level,
        *,
        committed_through: Mapping[str, int] | None = None,
        state: Any | None = None,
        confirm: Confirm | None = None,
        reload_schema: Callable[[], RowSchema] | None = None,
    ) -> None:
        self._init_decider(level, committed_through, state, confirm)
        self._source = LogSource(conf, schema, reload_schema=reload_schema)
        self.topic = conf.topic

    def _init_decider(
        self,
        level: Level,
        committed_through: Mapping[str, int] | None,
        state: Any | None,
        confirm: Confirm | None,
    ) -> None:
        self._level = check_level(level)
        self._restored = state is not None
        if state is not None:
            decider = ReaderDecider.restore(state, confirm=confirm)
            if decider.level != self._level:
                raise InvalidInputError(
                    f"the saved reader state is of the {decider.level} level, not {self._level}",
                    hint=f"read with --consistency {decider.level}, or start over without it",
                )
            self._decider = decider
        else:
            self._decider = ReaderDecider(
                self._level, committed_through=committed_through, confirm=confirm
            )
        self._stats = ReadStats()

    @property
    def decider(self) -> TopicDecider:
        return self._decider

    @property
    def stats(self) -> ReadStats:
        return self._stats

    @property
    def source(self) -> LogSource:
        return self._source

    @property
    def positions(self) -> dict[int, int]:
        """Where the read is in each partition: the offset after the last record or end of
        partition it saw (for progress and lag; saved with the decider's state)."""
        return dict(self._decider.positions)

    def pending(self) -> dict[int, list[PendingEpoch]]:
        return self._decider.pending()

    def _bounds(self) -> Bounds:
        """The source the bounds are asked of (a Pulsar reader's is its own, ``pulsar_source``)."""
        return self._source

    def close(self) -> None:
        self._bounds().close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- bounds --------------------------------------------------------------------------------------

    def start_offsets(self, start: Start | HybridStart) -> dict[int, int]:
        """Where each partition starts: ``--from`` earliest / latest / timestamp, or after a hybrid
        read's snapshot (partitions its commit does not name start at the earliest offset)."""
        source = self._bounds()
        if isinstance(start, HybridStart):
            marks = source.watermarks()
            return {p: start.offsets.get(p, low) for p, (low, _) in marks.items()}
        if start.kind == "timestamp":
            assert start.timestamp_ms is not None
            return source.offsets_for_time(start.timestamp_ms)
        if start.kind == "snapshot":
            raise ValueError("a snapshot start is a HybridStart (read.plan.hybrid_start)")
        marks = source.watermarks()
        return {p: low if start.kind == "earliest" else high for p, (low, high) in marks.items()}

    def end_offsets(self) -> dict[int, int]:
        """Each partition's high watermark now: the bound of a bounded read."""
        return {p: high for p, (_, high) in self._bounds().watermarks().items()}

    # -- the read ------------------------------------------------------------------------------------

    def _resume_offsets(
        self, start: Mapping[int, int], marks: Mapping[int, tuple[int, int]]
    ) -> dict[int, int]:
        """Each partition's first offset to read: where the restored state says, else ``start``
        (earliest where neither knows it: a partition added since)."""
        if not self._restored:
            return {p: start.get(p, low) for p, (low, _) in marks.items()}
        result: dict[int, int] = {}
        decider = self._decider
        known = decider.resume_points()
        for partition, (low, _) in marks.items():
            saved = decider.positions.get(partition)
            point = known.get(partition)
            at: int | None = saved
            if point is not None and point.position is not None:
                part = decider.partition(partition)
                if (
                    point.offset is not None
                    and point.offset < point.position
                    and not part.pending()
                ):
                    at = point.offset  # resumed from a resume point: it re-reads from there
                else:
                    # The state holds the open epochs' records: go on after the last offset read.
                    at = max(point.position, saved or 0)
            # Neither knows the partition: it was created after the saved read began.
            result[partition] = low if at is None else at
        return result

    def read(
        self,
        start: Mapping[int, int],
        end: Mapping[int, int] | None,
        *,
        stop: Callable[[], bool] = lambda: False,
        poll_s: float = 0.1,
    ) -> Iterator[list[tuple[int, Emission]]]:
        """Read from ``start`` (or where the restored state says) to ``end`` (None: follow until
        ``stop()``); one list of ``(partition, emission)`` per consumed batch, possibly empty.

        Once the caller has handled a list, ``decider.state()`` covers exactly what was handed out.
        """
        source = self._source
        follow = end is None
        marks = source.watermarks()
        positions = self._resume_offsets(start, marks)
        ends: dict[int, int] = {}
        for partition, at in positions.items():
            ends[partition] = _NO_END if end is None else end.get(partition, at)
        self._decider.positions.update(positions)
        active = {p for p, at in positions.items() if follow or at < ends[p]}
        for partition in sorted(active):
            source._check_start(partition, positions[partition], marks[partition])
        if not active:
            return
        source._assign({p: positions[p] for p in active})
        try:
            with Collections() as collections:
                yield from self._loop(positions, ends, active, follow, stop, poll_s, collections)
        finally:
            source._unassign()

    def _loop(
        self,
        positions: dict[int, int],
        ends: dict[int, int],
        active: set[int],
        follow: bool,
        stop: Callable[[], bool],
        poll_s: float,
        collections: Collections,
    ) -> Iterator[list[tuple[int, Emission]]]:
        source = self._source
        stats = self._stats
        decode_record = source.decode
        if isinstance(decode_record, RecordDecoder):
            decode_record = decode_record.__call__  # a bound method: no call slot to look up
        deciders = {p: self._decider.partition(p) for p in positions}
        feed = {p: d.feed for p, d in deciders.items()}
        retracts = self._level == "eventual"  # the only level that retracts
        base = self._stats.records, self._stats.markers
        seen = (
            sum(d.stats.records for d in deciders.values()),
            sum(d.stats.markers for d in deciders.values()),
        )
        reader_positions = self._decider.positions
        timeout_s = source.conf.timeout_s
        idle_since = time.monotonic()
        lost = False  # follow: the cluster is down and that was reported
        next_probe = 0.0
        next_discovery = time.monotonic() + DISCOVER_EVERY_S
        gone = 0  # follow: metadata checks in a row that found the topic deleted
        while active:
            if stop():
                return
            messages = source._consume(BATCH, poll_s)
            out: list[tuple[int, Emission]] = []
            done: list[int] = []
            for msg in messages:  # the hot path: once per record
                err = msg.error()
                if err is None:
                    partition = msg.partition()
                    offset = msg.offset()
                    end = ends[partition]
                    if offset < end:
                        after = reader_positions[partition] = offset + 1
                        item: Item | None
                        try:
                            item = decode_record(msg.key(), msg.value(), msg.headers())
                        except WireFormatError as exc:
                            item = source._redecode(exc, msg, partition, offset, stats)
                            decode_record = source.decode  # the table's, if read again
                        if item is not None:
                            emitted = feed[partition](offset, item)
                            if emitted:
                                if len(emitted) == 1:  # none and eventual: one per record
                                    out.append((partition, emitted[0]))
                                else:
                                    out.extend([(partition, e) for e in emitted])
                        if after < end:
                            continue
                elif err.code() == _EOF:
                    partition = msg.partition()
                    # The end of a partition may lie past a bounded read's end: the records in
                    # between were not read, so the position (a checkpoint's) must not pass them.
                    offset = min(msg.offset(), ends[partition])
                    if offset > reader_positions[partition]:
                        reader_positions[partition] = offset
                    if offset < ends[partition]:
                        continue
                else:
                    source._message_error(err, msg, follow=follow)
                    continue
                if partition in active:  # a bounded read reached the partition's end
                    active.discard(partition)
                    done.append(partition)
            now = time.monotonic()
            if messages:
                idle_since = now
                if lost:
                    lost = False
                    source._reach()
                    log.warning("Kafka at %s is reachable again; reading on", source.conf.bootstrap)
            if out:
                stats.emitted += len(out)
                if retracts:
                    stats.retractions += sum(1 for _, e in out if e.retraction)
            if done:
                source._release(done)
            stats.records = base[0] + sum(d.stats.records for d in deciders.values()) - seen[0]
            stats.markers = base[1] + sum(d.stats.markers for d in deciders.values()) - seen[1]
            collections.tick()
            yield out
            if follow:
                if source._login_failed:
                    source._raise_if_fatal()
                if source._down and not lost:
                    lost = True
                    log.warning(
                        "lost the connection to Kafka at %s; waiting for it to come back",
                        source.conf.bootstrap,
                    )
                if lost and now >= next_probe:
                    next_probe = now + _PROBE_EVERY_S
                    if self._probe():
                        lost = False
                        log.warning(
                            "Kafka at %s is reachable again; reading on", source.conf.bootstrap
                        )
                if not lost and now >= next_discovery:
                    next_discovery = now + DISCOVER_EVERY_S
                    added = self._new_partitions(positions)
                    if added is None:
                        # Once more a probe later: a single answer might come from a broker that
                        # has not caught up yet. librdkafka keeps fetching a deleted topic's
                        # partitions without an error, so without this the read waits for ever.
                        gone += 1
                        if gone >= 2:
                            raise self._deleted()
                        next_discovery = now + _PROBE_EVERY_S
                        continue
                    gone = 0
                    for partition, low in added.items():
                        positions[partition] = reader_positions[partition] = low
                        ends[partition] = _NO_END
                        deciders[partition] = self._decider.partition(partition)
                        feed[partition] = deciders[partition].feed
                        active.add(partition)
                    source._assign(added)
            elif active and now - idle_since >= timeout_s:
                raise source._stalled(
                    {p: reader_positions[p] for p in active}, {p: ends[p] for p in active}
                )
            elif active:
                source._raise_if_fatal()

    def _deleted(self) -> TopicNotFoundError:
        return TopicNotFoundError(
            f"Kafka topic '{self.topic}' was deleted while the read followed it (at "
            f"{self._source.conf.bootstrap})",
            hint="the changes read until then were written out; the table's log went with the "
            "topic: find out who deleted it before ingesting or reading again",
        )

    def _new_partitions(self, known: Mapping[int, int]) -> dict[int, int] | None:
        """Partitions added to the topic since the read began (a following read), each with its
        earliest offset: everything in them was written after the read began; None when a broker
        says the topic does not exist. Best effort: what cannot be asked now is asked at the next
        check."""
        client = self._source._client()
        try:
            metadata = client.list_topics(self.topic, timeout=_STEP_MAX_S)
        except KafkaException:
            return {}
        topic = metadata.topics.get(self.topic)
        if topic is None or (topic.error is not None and topic.error.code() in _NOT_FOUND):
            return None
        if topic.error is not None:
            return {}  # a refusal shows in the records' errors
        added: dict[int, int] = {}
        for partition in sorted(set(topic.partitions) - set(known)):
            try:
                found = client.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=_STEP_MAX_S, cached=False
                )
            except KafkaException:
                continue
            if found is not None:
                added[partition] = int(found[0])
        if added:
            log.info(
                "Kafka topic %r has new partitions %s; reading them from their start",
                self.topic, ", ".join(map(str, added)),
            )  # fmt: skip
        return added

    def _probe(self) -> bool:
        """Whether a broker answers a metadata request now (follow, while the cluster is down)."""
        try:
            self._source._client().list_topics(self.topic, timeout=0.5)
        except KafkaException:
            return False
        self._source._reach()
        return True


# -- checkpoint ------------------------------------------------------------------------------------


def open_source(
    conf: SourceConf,
    schema: RowSchema | None = None,
    *,
    reload_schema: Callable[[], RowSchema] | None = None,
) -> LogSource | PulsarLogSource:
    """The log source of ``conf.system``: Kafka's, or Pulsar's (``read.pulsar_source``, which
    imports pulsar-client: only for a Pulsar table). Both read ``[start, end)`` ranges of ordered
    positions (Kafka offsets, Pulsar message ids as ordinals) and answer the same bounds."""
    if conf.system == "pulsar":
        from logstore_cli.read.pulsar_source import PulsarLogSource

        return PulsarLogSource(conf, schema, reload_schema=reload_schema)
    return LogSource(conf, schema, reload_schema=reload_schema)


def open_reader(
    conf: SourceConf,
    schema: RowSchema,
    level: Level,
    *,
    committed_through: Mapping[str, int] | None = None,
    state: Any | None = None,
    confirm: Confirm | None = None,
    reload_schema: Callable[[], RowSchema] | None = None,
) -> LogReader:
    """The ``LogReader`` of ``conf.system`` (``PulsarLogReader`` on Pulsar), as ``open_source``."""
    reader_class = LogReader
    if conf.system == "pulsar":
        from logstore_cli.read.pulsar_source import PulsarLogReader

        reader_class = PulsarLogReader
    return reader_class(
        conf, schema, level, committed_through=committed_through, state=state, confirm=confirm,
        reload_schema=reload_schema,
    )  # fmt: skip


CHECKPOINT_FORMAT: Final = 1


class ReaderCheckpoint:
    """``--checkpoint PATH`` of a following read: the decider's state in a JSON file
    ``{format, table, topic, level, state}``, written atomically, private (0600), never through a
    symlink. A checkpoint of another table, topic or level is refused, not guessed at."""

    def __init__(self, path: Path, *, table: str, topic: str, level: Level) -> None:
        self.path = Path(path)
        self.table = table
        self.topic = topic
        self.level = check_level(level)

    def load(self) -> Any | None:
        """The saved decider state; None when there is no checkpoint yet."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unusable(exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidInputError(
                    f"the checkpoint {self.path} is not a regular file",
                    hint="give --checkpoint the path of a file (it is created when missing)",
                )
            with os.fdopen(fd, "rb", closefd=False) as handle:
                raw = handle.read()
        finally:
            os.close(fd)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise self._damaged("it is not JSON") from None
        if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
            raise self._damaged(
                f"it is not a format-{CHECKPOINT_FORMAT} checkpoint of logstore's reader"
            )
        for name in ("table", "topic", "level"):
            if not isinstance(data.get(name), str):
                raise self._damaged(f"it names no {name}")
        mine = (self.table, self.topic, self.level)
        theirs = (data["table"], data["topic"], data["level"])
        if mine != theirs:
            raise InvalidInputError(
                f"the checkpoint {self.path} is of table {theirs[0]} (topic '{theirs[1]}', "
                f"{theirs[2]} level), not of table {mine[0]} (topic '{mine[1]}', {mine[2]} level)",
                hint="give each read its own --checkpoint file; delete this one only if its read "
                "is not needed any more",
            )
        state = data.get("state")
        try:
            ReaderDecider.restore(state)
        except DeciderStateError as exc:
            raise self._damaged(exc.message) from None
        return state

    def save(self, decider: TopicDecider) -> None:
        """Replace the checkpoint with ``decider``'s state: whole or not at all."""
        body = {
            "format": CHECKPOINT_FORMAT,
            "table": self.table,
            "topic": self.topic,
            "level": self.level,
            "state": decider.state(),
        }
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        parent = self.path.parent
        try:
            self._make_parent(parent)
            try:
                info = os.lstat(self.path)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
                    raise InvalidInputError(
                        f"the checkpoint {self.path} is a symbolic link or not a regular file; "
                        "logstore does not write through it",
                        hint="give --checkpoint the path of a regular file",
                    )
            fd, temp = tempfile.mkstemp(dir=parent, prefix=f".{self.path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            _fsync_dir(parent)
        except OSError as exc:
            raise LogstoreError(
                f"cannot save the read's checkpoint to {self.path}: {exc.strerror or exc}",
                hint="check that its directory is writable, or give another --checkpoint path",
            ) from None

    @staticmethod
    def _make_parent(parent: Path) -> None:
        """Create the missing directories of ``parent``, each private (0700)."""
        missing = []
        at = parent
        while not os.path.lexists(at):
            missing.append(at)
            if at.parent == at:
                break
            at = at.parent
        for directory in reversed(missing):
            os.mkdir(directory, 0o700)

    def _damaged(self, why: str) -> InvalidInputError:
        return InvalidInputError(
            f"the checkpoint {self.path} cannot be read: {why}",
            hint="it is damaged or not a logstore checkpoint: delete it to start the read over "
            "from --from, or give another --checkpoint path",
        )

    def _unusable(self, exc: OSError) -> InvalidInputError:
        if exc.errno == errno.ELOOP:
            return InvalidInputError(
                f"the checkpoint {self.path} is a symbolic link; logstore does not read or write "
                "through one",
                hint="give --checkpoint the path of a regular file",
            )
        return InvalidInputError(
            f"cannot read the checkpoint {self.path}: {exc.strerror or exc}",
            hint="check the path and its permissions",
        )


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
