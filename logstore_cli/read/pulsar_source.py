"""The log read on Pulsar (issue 23, design §7.1): the Pulsar counterpart of ``consumer.py``'s
``LogSource`` and ``LogReader``, imported only for a table whose log is on Pulsar.

Each partition (``…-partition-N``) is read by its own pulsar-client ``Reader`` (no subscription
is kept, nothing is acknowledged: the read's progress is its own state, as on Kafka). A message id
becomes one ordered integer per partition (``logformat.pulsar_form.ordinal``: even for a message,
odd for "just after it"), so the decider (``logformat.consistency``), reader checkpoints and
``verify`` run unchanged; a position shown to users is ``"L:E:B"`` again (``position_text``).

``watermarks`` are (the first message held, just after the last one) per partition, from a Reader
at the earliest message and the admin API's last message id; an empty partition is ``(0, 0)``
("earliest"). Pulsar's retention deletes whole ledgers from a partition's start; a start below the
first message held is refused as deleted records (a read never emits part of an epoch) unless it is
0, the start of a partition that held nothing when it was last read.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Final, Self

from logstore_cli.errors import (
    BrokerError,
    InvalidInputError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    LogstoreError,
    RecordsDeletedError,
    TopicNotFoundError,
)
from logstore_cli.logformat.consistency import Confirm, Emission, Item, Level
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.pulsar_form import from_pulsar, message_id, ordinal, position_text
from logstore_cli.logformat.wire import CommitMarker, RecordDecoder, RowSchema, decode
from logstore_cli.pulsar.admin import PulsarAdmin, TopicName, admin_url_for
from logstore_cli.read.consumer import (
    BATCH,
    DISCOVER_EVERY_S,
    Collections,
    LogReader,
    ReadStats,
    SourceConf,
)

log = logging.getLogger(__name__)

_NO_END: Final = 1 << 200  # a following read's partitions: above every ordinal
_UPGRADE_HINT = "upgrade logstore (pip install -U logstore) to read records of a newer format"
#: verify's note on a Pulsar table (``read.verify.verify_table``'s ``unknown_start``).
UNKNOWN_START: Final = (
    "Pulsar's message ids do not show whether the topic's retention deleted a partition's oldest "
    "messages: each partition was read from the oldest message it holds (if the log and Delta "
    "differ by rows of the oldest epochs, that is why: give the topic infinite retention, "
    "log.topic.retention.ms = -1, if verify matters for this table)"
)
# The C++ client logs through this logger; shown only when logstore's own debug log is on (an
# outage would otherwise print a line per reconnect while a following read waits it out).
_CLIENT_LOG: Final = logging.getLogger("logstore_cli.pulsar.client")


def client_error(exc: Exception, what: str, conf: SourceConf) -> LogstoreError:
    """The domain error of a pulsar-client exception raised while doing ``what``."""
    import pulsar

    where = f"Pulsar at {conf.bootstrap}"
    if isinstance(exc, pulsar.TopicNotFound):
        return TopicNotFoundError(
            f"the Pulsar topic {conf.topic} does not exist ({where}, {what})",
            hint="was the table's topic deleted? 'logstore describe' shows the table's log store",
        )
    if isinstance(exc, pulsar.AuthenticationError):
        return KafkaAuthenticationError(
            f"{where} refused the credentials ({what})", hint="check the client's token"
        )
    if isinstance(exc, pulsar.AuthorizationError):
        return KafkaAuthorizationError(
            f"{where} refused to let this client {what}",
            hint=f"grant the role the consume permission on {conf.topic}",
        )
    if isinstance(exc, pulsar.Timeout | pulsar.ConnectError | pulsar.LookupError):
        return BrokerError(
            f"{where} did not answer within {conf.timeout_s:g}s ({what})",
            hint="is Pulsar running? ('logstore pulsar status' for the local one)",
        )
    return BrokerError(f"{where} failed to {what}: {exc}")


class PulsarLogSource:
    """Readers on a Pulsar table's partitions, and the admin API for its metadata.

    ``partitions``, ``watermarks``, ``offsets_for_time`` and ``consume_range`` answer as
    ``LogSource``'s do (``read.verify.LogRange``), in ordinals. Use it as a context manager.
    """

    def __init__(
        self,
        conf: SourceConf,
        schema: RowSchema | None = None,
        *,
        reload_schema: Callable[[], RowSchema] | None = None,
    ) -> None:
        import pulsar

        self._pulsar = pulsar
        self.conf = conf
        self.schema = schema
        self.reload_schema = reload_schema
        self._next_reload = 0.0
        self.decode: Callable[[bytes | None, bytes | None, Any], Item] = (
            RecordDecoder(schema) if schema is not None else functools.partial(decode, schema=None)
        )
        self.topic = conf.topic
        self.name = TopicName.parse(conf.topic)
        self._admin = PulsarAdmin(
            conf.admin_url or admin_url_for(conf.bootstrap, None, None), timeout_s=conf.timeout_s
        )
        if not log.isEnabledFor(logging.DEBUG):
            _CLIENT_LOG.setLevel(logging.CRITICAL)
        try:
            self._client: Any = pulsar.Client(
                conf.bootstrap,
                operation_timeout_seconds=max(1, round(conf.timeout_s)),
                connection_timeout_ms=max(1000, int(conf.timeout_s * 1000)),
                logger=_CLIENT_LOG,
            )
        except Exception as exc:  # the client's own errors (an invalid service URL)
            raise InvalidInputError(
                f"cannot use the Pulsar service URL {conf.bootstrap!r}: {exc}",
                hint="the table's 'log-store.address' is pulsar://host:port[,host:port…]",
            ) from None
        self._warned_malformed: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing after a failure: the failure is what is reported
                log.debug("closing the Pulsar client: %s", exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------------------

    def partitions(self) -> list[int]:
        """The topic's partitions, ascending; TopicNotFoundError when the topic does not exist."""
        found = self._admin.describe_topic(self.name)
        if found is None:
            raise TopicNotFoundError(
                f"the Pulsar topic {self.name} does not exist (admin API {self._admin.web_url})",
                hint="was the table's topic deleted? 'logstore describe' shows the table's log "
                "store; drop and create the table again to start a new log",
            )
        return list(range(found.partitions))

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """``{partition: (first message held, just after the last one)}``; ``(0, 0)`` when the
        partition holds nothing."""
        partitions = self.partitions()
        last = self._admin.last_positions(self.name, len(partitions))
        out: dict[int, tuple[int, int]] = {}
        for partition in partitions:
            end = last.get(partition)
            if end is None:
                out[partition] = (0, 0)
                continue
            high = ordinal(end.ledger, end.entry, end.batch) + 1
            first = self._first(partition, 0)
            out[partition] = (high, high) if first is None else (first, high)
        return out

    def offsets_for_time(self, timestamp_ms: int) -> dict[int, int]:
        """``{partition: the first message published at or after timestamp_ms}``; just after the
        last one where none is that recent."""
        out: dict[int, int] = {}
        for partition, (low, high) in self.watermarks().items():
            found = None if low == high else self._first(partition, 0, timestamp_ms)
            out[partition] = high if found is None else found
        return out

    def _first(self, partition: int, start: int, timestamp_ms: int | None = None) -> int | None:
        """The ordinal of the first message at or after ``start`` (or published at or after
        ``timestamp_ms``); None when there is none."""
        reader = self.open_reader(partition, start)
        try:
            if timestamp_ms is not None:
                reader.seek(timestamp_ms)
            if not reader.has_message_available():
                return None
            return self._ordinal(reader.read_next(int(self.conf.timeout_s * 1000)))
        except self._pulsar.PulsarException as exc:
            raise client_error(exc, f"read partition {partition}", self.conf) from None
        finally:
            reader.close()

    # -- records -----------------------------------------------------------------------------------

    def open_reader(self, partition: int, start: int) -> Any:
        """A Reader on ``partition`` positioned at ``start`` (an ordinal: at that message; odd:
        just after the message before it; 0: the earliest message)."""
        pulsar = self._pulsar
        if start == 0:
            first, inclusive = pulsar.MessageId.earliest, True
        else:
            ledger, entry, batch, inclusive = message_id(start)
            first = pulsar.MessageId(partition, ledger, entry, batch)
        try:
            return self._client.create_reader(
                self.name.partition(partition),
                first,
                start_message_id_inclusive=inclusive,
                receiver_queue_size=BATCH * 2,
            )
        except pulsar.PulsarException as exc:
            raise client_error(exc, f"read partition {partition}", self.conf) from None

    def take(self, reader: Any, partition: int, count: int, wait_ms: int) -> list[Any]:
        """Up to ``count`` messages already received; when there are none, wait ``wait_ms`` for
        the first."""
        out: list[Any] = []
        pulsar = self._pulsar
        try:
            while len(out) < count:
                out.append(reader.read_next(0 if out or wait_ms <= 0 else wait_ms))
        except pulsar.Timeout:
            pass
        except pulsar.PulsarException as exc:
            raise client_error(exc, f"read partition {partition}", self.conf) from None
        return out

    @staticmethod
    def _ordinal(message: Any) -> int:
        mid = message.message_id()
        return ordinal(mid.ledger_id(), mid.entry_id(), mid.batch_index())

    def consume_range(
        self, partition: int, start: int, end: int, stats: ReadStats | None = None
    ) -> Iterator[tuple[int, Item]]:
        """Every logstore record at positions ``[start, end)`` of ``partition`` in order, as
        ``LogSource.consume_range``."""
        if start >= end:
            return
        stats = stats if stats is not None else ReadStats()
        marks = self.watermarks()
        if partition not in marks:
            raise InvalidInputError(
                f"Pulsar topic {self.name} has no partition {partition} (it has {len(marks)})"
            )
        self.check_start(partition, start, marks[partition])
        reader = self.open_reader(partition, start)
        try:
            position = start
            idle_since = time.monotonic()
            while position < end:
                messages = self.take(reader, partition, BATCH, 200)
                if messages:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= self.conf.timeout_s:
                    raise self.stalled({partition: position}, {partition: end})
                for message in messages:
                    at = self._ordinal(message)
                    if at >= end:
                        position = end
                        break
                    position = at + 1
                    item = self.decode_message(message, partition, at, stats)
                    if item is not None:
                        if isinstance(item, CommitMarker):
                            stats.markers += 1
                        else:
                            stats.records += 1
                        yield at, item
        finally:
            reader.close()

    def decode_message(
        self, message: Any, partition: int, at: int, stats: ReadStats
    ) -> Item | None:
        """The message decoded (format 1's Pulsar form); None when skipped (foreign, malformed)."""
        record = from_pulsar(message.partition_key() or None, message.data(), message.properties())
        try:
            return self.decode(*record)
        except WireFormatError as exc:
            if exc.reason in ("column", "value") and self._newer_schema():
                try:
                    return self.decode(*record)
                except WireFormatError as again:
                    exc = again
            self._skip(exc, partition, at, stats)
            return None

    def _newer_schema(self) -> bool:
        if self.reload_schema is None or self.schema is None:
            return False
        now = time.monotonic()
        if now < self._next_reload:
            return False
        schema = self.reload_schema()
        if set(schema.columns) <= set(self.schema.columns):
            self._next_reload = now + 1.0
            return False
        self.schema, self.decode = schema, RecordDecoder(schema)
        return True

    def _skip(self, exc: WireFormatError, partition: int, at: int, stats: ReadStats) -> None:
        if exc.reason == "foreign":
            stats.foreign += 1
            return
        where = f"partition {partition} message {position_text(at)} of Pulsar topic {self.name}"
        if exc.reason == "version":
            raise LogstoreError(f"{where}: {exc.message}", hint=_UPGRADE_HINT) from None
        stats.malformed += 1
        if partition not in self._warned_malformed:
            self._warned_malformed.add(partition)
            # Not exc.message: it may quote the record's values, which may be confidential.
            log.warning(
                "skipping a malformed record at %s: it claims logstore wire format 1 but breaks "
                "it (properties, key or value, or a value the table's type cannot hold); further "
                "malformed records of this partition are counted, not logged",
                where,
            )

    def check_start(self, partition: int, start: int, marks: tuple[int, int]) -> None:
        """Refuse a start retention deleted records after, or one past the partition's end."""
        low, high = marks
        if 0 < start < low:
            raise RecordsDeletedError(
                f"partition {partition} of Pulsar topic {self.name} now starts at message "
                f"{position_text(low)}, after {position_text(start)} where this read goes on: the "
                "topic's retention deleted messages it may need",
                hint="reading on from the oldest message left could show part of an epoch, so the "
                "read stops: start later (--from latest, timestamp:MS or snapshot), or delete the "
                "checkpoint to start over; raise the topic's retention if readers fall this far "
                "behind",
            )
        if start > high:
            raise InvalidInputError(
                f"partition {partition} of Pulsar topic {self.name} ends at "
                f"{position_text(high)}, before {position_text(start)} where this read starts",
                hint="was the topic deleted and created again? Delete the checkpoint to start "
                "over, or start from --from earliest / latest",
            )

    def stalled(self, positions: Mapping[int, int], ends: Mapping[int, int]) -> BrokerError:
        behind = ", ".join(
            f"{p} at {position_text(positions[p])} of {position_text(ends[p])}"
            for p in sorted(positions)
            if p in ends
        )
        return BrokerError(
            f"Pulsar at {self.conf.bootstrap} sent nothing for {self.conf.timeout_s:g}s while "
            f"reading topic {self.name} (partitions still to read: {behind})",
            hint="is Pulsar running and reachable? ('logstore pulsar status' for the local one)",
        )


class PulsarLogReader(LogReader):
    """``LogReader`` on Pulsar: the same decider and checkpoint state, positions as ordinals."""

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
        self._pulsar_source = PulsarLogSource(conf, schema, reload_schema=reload_schema)
        self.topic = conf.topic

    def _bounds(self) -> PulsarLogSource:
        # start_offsets, end_offsets and close are LogReader's, asked of the Pulsar source (a
        # partition a hybrid start's commit does not name held nothing then: all of it comes after)
        return self._pulsar_source

    def read(
        self,
        start: Mapping[int, int],
        end: Mapping[int, int] | None,
        *,
        stop: Callable[[], bool] = lambda: False,
        poll_s: float = 0.1,
    ) -> Iterator[list[tuple[int, Emission]]]:
        source = self._pulsar_source
        follow = end is None
        marks = source.watermarks()
        positions = self._resume_offsets(start, marks)
        ends = {p: _NO_END if end is None else end.get(p, at) for p, at in positions.items()}
        self._decider.positions.update(positions)
        active = {p for p, at in positions.items() if follow or at < ends[p]}
        for partition in sorted(active):
            source.check_start(partition, positions[partition], marks[partition])
        if not active:
            return
        readers = {p: source.open_reader(p, positions[p]) for p in sorted(active)}
        try:
            with Collections() as collections:
                yield from self._pulsar_loop(
                    readers, positions, ends, active, follow, stop, poll_s, collections
                )
        finally:
            for reader in readers.values():
                try:
                    reader.close()
                except Exception as exc:
                    log.debug("closing a Pulsar reader: %s", exc)

    def _pulsar_loop(
        self,
        readers: dict[int, Any],
        positions: dict[int, int],
        ends: dict[int, int],
        active: set[int],
        follow: bool,
        stop: Callable[[], bool],
        poll_s: float,
        collections: Collections,
    ) -> Iterator[list[tuple[int, Emission]]]:
        source = self._pulsar_source
        stats = self._stats
        deciders = {p: self._decider.partition(p) for p in positions}
        retracts = self._level == "eventual"
        base = stats.records, stats.markers
        seen = (
            sum(d.stats.records for d in deciders.values()),
            sum(d.stats.markers for d in deciders.values()),
        )
        reader_positions = self._decider.positions
        timeout_s = source.conf.timeout_s
        idle_since = time.monotonic()
        next_discovery = time.monotonic() + DISCOVER_EVERY_S
        lost = False
        idle = False
        while active:
            if stop():
                return
            out: list[tuple[int, Emission]] = []
            got = 0
            # A round takes what the readers hold without waiting; a round after an idle one waits
            # a share of poll_s on each partition (a Reader cannot wait on others), so an idle
            # partition never holds a busy one back.
            wait = max(10, int(poll_s * 1000) // len(active)) if idle else 0
            for partition in sorted(active):
                messages = source.take(readers[partition], partition, BATCH, wait)
                got += len(messages)
                end = ends[partition]
                feed = deciders[partition].feed
                for message in messages:
                    at = source._ordinal(message)
                    if at >= end:
                        reader_positions[partition] = max(reader_positions[partition], end)
                        break
                    reader_positions[partition] = at + 1
                    item = source.decode_message(message, partition, at, stats)
                    if item is not None:
                        out.extend((partition, e) for e in feed(at, item))
                if reader_positions[partition] >= end:
                    active.discard(partition)  # a bounded read reached the partition's end
            now = time.monotonic()
            idle = not got
            if got:
                idle_since = now
            if out:
                stats.emitted += len(out)
                if retracts:
                    stats.retractions += sum(1 for _, e in out if e.retraction)
            stats.records = base[0] + sum(d.stats.records for d in deciders.values()) - seen[0]
            stats.markers = base[1] + sum(d.stats.markers for d in deciders.values()) - seen[1]
            collections.tick()
            yield out
            if follow and now >= next_discovery:
                next_discovery = now + DISCOVER_EVERY_S
                try:
                    found = source.partitions()
                except TopicNotFoundError:
                    raise TopicNotFoundError(
                        f"Pulsar topic {source.name} was deleted while the read followed it",
                        hint="the changes read until then were written out; the table's log went "
                        "with the topic: find out who deleted it before ingesting or reading again",
                    ) from None
                except BrokerError:
                    if not lost:
                        lost = True
                        log.warning(
                            "lost the connection to Pulsar at %s; waiting for it to come back",
                            source.conf.bootstrap,
                        )
                    continue
                if lost:
                    lost = False
                    log.warning(
                        "Pulsar at %s is reachable again; reading on", source.conf.bootstrap
                    )
                for partition in sorted(set(found) - set(positions)):
                    log.info(
                        "Pulsar topic %s has a new partition %d; reading it from its start",
                        source.name, partition,
                    )  # fmt: skip
                    positions[partition] = reader_positions[partition] = 0
                    ends[partition] = _NO_END
                    deciders[partition] = self._decider.partition(partition)
                    readers[partition] = source.open_reader(partition, 0)
                    active.add(partition)
            elif not follow and active and now - idle_since >= timeout_s:
                raise source.stalled(
                    {p: reader_positions[p] for p in active}, {p: ends[p] for p in active}
                )
