"""The log's producer: change records from Spark tasks, commit markers from the driver.

:class:`LogProducer` wraps ``confluent_kafka.Producer`` with what the write path of an epoch
(docs/design.md §6.2, §7) needs:

* **Wire-format settings that cannot be overridden**: ``acks=all`` and idempotence (each
  partition keeps the order records were sent in, across retries), ``partitioner=murmur2_random``
  (a key lands where the Java client's default partitioner puts it), no topic auto-creation.
* **Batches**: :meth:`flush` waits for every record sent since the last flush and returns each
  partition's end offset after them, or raises the batch's first delivery error as a domain error.
* **Deadlines**: a record that is not delivered within ``timeout_s`` of being sent fails
  (librdkafka's ``message.timeout.ms``); every wait of ours ends soon after. A producer that has
  never reached a broker fails at once when every bootstrap address refuses the connection.

The end offsets and the errors come from a delivery report per record (confluent-kafka builds a
``Message`` for it; the callback only keeps the highest offset per partition). That is most of the
cost over a bare confluent-kafka producer: about 0.7 µs of CPU per record, with throughput against the
local broker within the run-to-run noise (100k records of 100 bytes with 5 headers: 136k rows/s
against the bare producer's 124k, medians of 9). ``delivery.report.only.error`` would save the
``Message`` but lose the offsets.

A producer is built from plain, picklable arguments, so a Spark task builds its own. It is not
thread-safe.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, NoReturn, Self

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from logstore_cli.errors import BrokerError, ConfigError, LogstoreError
from logstore_cli.kafka.client_config import java_only_reason, librdkafka_config
from logstore_cli.kafka.errors import KafkaErrorMapper, Operation, check_topic_name, reason

log = logging.getLogger(__name__)

#: Settings the wire format and the epoch protocol depend on; client properties cannot change them.
FIXED: Final[Mapping[str, str | bool]] = {
    "acks": "all",
    "enable.idempotence": "true",
    "partitioner": "murmur2_random",
    "allow.auto.create.topics": "false",  # logstore provisions the topic, with its partition count
    # The end offsets come from the delivery reports (confluent-kafka wants a bool here).
    "delivery.report.only.error": False,
}
# librdkafka's other names for settings this module sets (the last one given would win), and settings
# that would break it: a transactional producer needs init_transactions, which this one never calls.
_DROPPED: Final[Mapping[str, str]] = {
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "delivery.timeout.ms": "message.timeout.ms",
    "transactional.id": "transactions (logstore commits epochs with markers, not transactions)",
}

# librdkafka checks for timed-out messages about once a second; our waits allow for that.
_GRACE_S = 1.5
_POLL_S = 0.05
# Sends between two checks of the delivery reports (see LogProducer._check).
_CHECK_EVERY = 1000
_METADATA_STEP_S = 0.2
_METADATA_STEP_MAX_S = 1.0

_NOT_FOUND: Final = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
_TIMED_OUT: Final = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT})
_TOO_LARGE: Final = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


def _config(
    bootstrap: str, client_properties: Mapping[str, str], timeout_s: float, linger_ms: int
) -> tuple[dict[str, Any], list[str]]:
    """``(librdkafka config, client properties ignored)``; see :meth:`LogProducer.config_for`."""
    if not bootstrap.strip():
        raise ConfigError(
            "no Kafka bootstrap servers given",
            hint="set the table's 'log-store.address' / 'kafka.bootstrap.servers', "
            "or the bootstrap servers in the config file",
        )
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    ms = int(timeout_s * 1000)
    if not 0 <= linger_ms < ms:
        raise ValueError(f"linger_ms must be in [0, {ms}) (below the time-out), got {linger_ms}")
    conf, ignored = librdkafka_config(bootstrap, client_properties)
    for key in (*FIXED, *_DROPPED, "linger.ms", "message.timeout.ms"):
        value = conf.pop(key, None)
        if value is not None and _normalized(key, value) != _normalized(key, FIXED.get(key)):
            ignored.append(key)
    conf.update(FIXED)
    conf["linger.ms"] = linger_ms
    conf["message.timeout.ms"] = ms
    # The admin's connection tuning (see KafkaAdmin): short connection set-up and request
    # time-outs, and a broker that comes back is found within a second.
    conf.setdefault("socket.connection.setup.timeout.ms", max(1000, min(ms // 2, 30000)))
    conf.setdefault("socket.timeout.ms", max(ms, 10))
    conf.setdefault("request.timeout.ms", min(ms, 30000))
    if "reconnect.backoff.ms" not in conf:
        conf.setdefault("reconnect.backoff.max.ms", 1000)
    return conf, ignored


def _closed(*args: object) -> NoReturn:
    raise RuntimeError("LogProducer is closed")


def _refuse(error: LogstoreError, *args: object) -> NoReturn:
    raise error


def _normalized(key: str, value: object) -> str:
    text = str(value).strip().lower()
    return "all" if key == "acks" and text == "-1" else text


class _Batch:
    """The records sent since the last flush: end offset per partition and the first failure."""

    __slots__ = ("ends", "error", "failed")

    def __init__(self) -> None:
        self.ends: dict[int, int] = {}
        self.error: KafkaError | None = None
        self.failed = 0

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        # The hot path: one call per record, from poll()/flush() on the caller's thread.
        if err is None:
            partition, offset = msg.partition(), msg.offset()
            if (
                partition is not None
                and offset is not None
                and offset >= self.ends.get(partition, 0)
            ):
                self.ends[partition] = offset + 1
        else:
            self.failed += 1
            if self.error is None:
                self.error = err


# librdkafka's and Kafka's defaults: the producer's largest message, the broker's largest batch.
_CLIENT_MAX_MESSAGE = 1_000_000
_TOPIC_MAX_MESSAGE = 1_048_588
# What a record costs beyond its key and value: its five headers (names and values, ~130 bytes)
# and their framing in librdkafka's size check, the record and batch framing at the broker.
RECORD_OVERHEAD = 512


def max_key_and_value_bytes(
    producer_config: Mapping[str, Any], topic_configs: Mapping[str, str]
) -> int:
    """The largest key plus value (bytes) that one record of the log may carry: under the
    producer's ``message.max.bytes`` (librdkafka refuses a larger message before sending) and,
    without compression, the topic's ``max.message.bytes`` (the broker refuses a larger batch;
    its compressed size counts, which cannot be known ahead when the producer compresses). A
    topic without its own setting gets Kafka's default: a broker whose default was lowered refuses
    such records at delivery instead. Pure."""

    def number(value: Any, default: int) -> int:
        try:
            return int(str(value).strip())
        except (TypeError, ValueError):
            return default

    limit = number(
        producer_config.get("message.max.bytes", _CLIENT_MAX_MESSAGE), _CLIENT_MAX_MESSAGE
    )
    compression = (
        str(
            producer_config.get(
                "compression.type", producer_config.get("compression.codec", "none")
            )
        )
        .strip()
        .lower()
    )
    if compression in ("none", ""):
        topic = number(
            topic_configs.get("max.message.bytes", _TOPIC_MAX_MESSAGE), _TOPIC_MAX_MESSAGE
        )
        limit = min(limit, topic)
    return max(0, limit - RECORD_OVERHEAD)


class LogProducer:
    """Produces records to one topic in batches; :meth:`flush` ends a batch.

    Build it where it is used (a Spark task, the driver) from plain arguments; use it as a context
    manager or call :meth:`close`. Not thread-safe.
    """

    def __init__(
        self,
        bootstrap: str,
        client_properties: Mapping[str, str],
        topic: str,
        *,
        timeout_s: float,
        linger_ms: int = 5,
    ) -> None:
        conf, ignored = _config(bootstrap, client_properties, timeout_s, linger_ms)
        self._write = Operation("write to", "WRITE", topic)
        check_topic_name(self._write)
        for key in ignored:
            # The driver's admin already warned about these; a task's log needs no repeat.
            why = java_only_reason(key) or "set by logstore or not translatable for librdkafka"
            log.debug("ignoring Kafka client property %r: %s", key, why)
        #: Client properties dropped: Java-only, or settings the log's producer fixes.
        self.ignored_properties: tuple[str, ...] = tuple(ignored)
        self.bootstrap_servers = bootstrap
        self.topic = topic
        self.timeout_s = timeout_s
        self._errors = KafkaErrorMapper.for_config(conf, client_properties, timeout_s=timeout_s)
        conf.update(self._errors.callbacks())
        try:
            self._producer: Producer | None = Producer(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise self._errors.invalid_properties(exc) from None
        self._produce: Callable[..., None] = self._producer.produce
        self._batch = _Batch()
        self._on_delivery = self._batch.on_delivery
        self._partitions: int | None = None  # known once the topic was found
        self._reached = False  # a broker has answered this producer
        self._until_check = 0  # check before the first send
        self._fatal: LogstoreError | None = None  # the client cannot go on: this is why

    @staticmethod
    def config_for(
        bootstrap: str,
        client_properties: Mapping[str, str],
        *,
        timeout_s: float,
        linger_ms: int = 5,
    ) -> dict[str, Any]:
        """The librdkafka configuration of a producer (pure, picklable; no callbacks): the client
        properties mapped by :func:`librdkafka_config` and the settings of :data:`FIXED`, with
        ``message.timeout.ms`` = ``timeout_s``. Raises ConfigError for untranslatable properties."""
        return _config(bootstrap, client_properties, timeout_s, linger_ms)[0]

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the client. Records sent since the last flush are discarded, not waited for."""
        if self._producer is None:
            return
        producer, self._producer = self._producer, None
        self._produce = _closed
        try:
            if len(producer):
                producer.purge()
                producer.flush(_GRACE_S)  # serves the purged records' reports (to the old batch)
            producer.close()
        except (KafkaException, SystemError) as exc:  # a fatal error: reported, or moot now
            log.debug("closing the Kafka producer: %s", self._errors.redact(str(exc)))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a LogProducer cannot be pickled: build it inside the Spark task from its plain "
            "arguments (bootstrap, client properties, topic, timeout_s, linger_ms)"
        )

    # -- the API -----------------------------------------------------------------------------------

    def send(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        partition: int | None = None,
    ) -> None:
        """Queue one record (a null value: a debezium-json commit marker or tombstone).
        ``partition`` None: the partitioner picks it (murmur2 of the key, as the Java client
        does; null keys are spread). Blocks while the client's queue is full, at most
        ``timeout_s``. Raises a BrokerError when the record cannot be queued or a record of the
        batch already failed (that batch is then over: its other records are not waited for)."""
        # The hot path: once per record, so every attribute load counts.
        if partition is None:
            partition = -1  # librdkafka's "unassigned": the partitioner decides
        elif partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        if not self._until_check:
            self._check()
        self._until_check -= 1
        try:
            # Positional (cheaper than keywords): the callback goes in produce()'s 'callback' slot,
            # the older name of on_delivery; confluent-kafka ignores on_delivery when callback is set.
            self._produce(self.topic, value, key, partition, self._on_delivery, None, 0, headers)
        except (BufferError, KafkaException) as exc:
            self._produce_slowly(exc, key, value, headers, partition)

    def flush(self) -> dict[int, int]:
        """Wait for every record sent since the last flush; ``{partition: offset after the batch's
        last record there}`` for the partitions the batch wrote to. Raises a BrokerError when a
        record failed, or when records are still undelivered ``timeout_s`` (and a little) later."""
        producer = self._client()
        if self._fatal is not None:
            raise self._fatal
        batch = self._batch
        deadline = time.monotonic() + self.timeout_s + _GRACE_S
        try:
            while True:
                remaining = self._serve(producer.flush, min(deadline - time.monotonic(), 0.5))
                if batch.error is not None:
                    raise self._delivery_error(batch)
                if remaining == 0:
                    return dict(sorted(batch.ends.items()))
                if time.monotonic() >= deadline:
                    self._serve(producer.poll, 0)  # the reason may be among the client errors
                    raise self._errors.timed_out(
                        self._write, detail=f"{remaining} record(s) not delivered"
                    )
        finally:
            self._end_batch()

    def partition_count(self) -> int:
        """The topic's partition count, from the cluster's metadata, within ``timeout_s``;
        TopicNotFoundError when the topic does not exist."""
        self._partitions = self._metadata(Operation("describe", "DESCRIBE", self.topic))
        return self._partitions

    # -- internals ---------------------------------------------------------------------------------

    def _client(self) -> Producer:
        if self._producer is None:
            raise RuntimeError("LogProducer is closed")
        return self._producer

    def _serve(self, wait: Callable[[float], int], timeout: float) -> int:
        """``poll`` or ``flush`` of the client, for at most ``timeout`` seconds. A fatal client
        error (the idempotent producer cannot go on) comes out of it as an exception, or as a
        SystemError caused by one when a delivery report was served in the same call."""
        try:
            return wait(max(timeout, 0))
        except (KafkaException, SystemError) as exc:
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, KafkaException):
                cause = cause.__cause__ or cause.__context__
            err = cause.args[0] if cause is not None and cause.args else None
            if not isinstance(err, KafkaError):
                raise
            if self._fatal is None:
                self._fatal = self._fatal_error(err)
                if self._producer is not None:  # every later send fails the same way
                    self._produce = functools.partial(_refuse, self._fatal)
            raise self._fatal from None

    def _fatal_error(self, err: KafkaError) -> LogstoreError:
        if err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            # The broker refused the idempotent producer an id: WRITE on the topic grants it.
            error = self._errors.denied(self._write, cluster=False)
            error.detail = self._errors.redact(err.str())
            return error
        return self._error(err)

    def _end_batch(self) -> None:
        self._batch = _Batch()
        self._on_delivery = self._batch.on_delivery
        self._errors.begin()

    def _fail_batch(self, batch: _Batch) -> NoReturn:
        """Raise the failed batch's error; the next send starts a new batch."""
        try:
            raise self._delivery_error(batch)
        finally:
            self._end_batch()

    def _check(self) -> None:
        """Before the first send and every _CHECK_EVERY sends: serve the delivery reports (their
        memory is freed as they come), raise the batch's first failure, find the topic once."""
        self._serve(self._client().poll, 0)
        if self._batch.error is not None:
            self._fail_batch(self._batch)
        if self._partitions is None:
            self._partitions = self._metadata(self._write)
        self._until_check = _CHECK_EVERY

    def _produce_slowly(
        self,
        exc: BufferError | KafkaException,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        partition: int,
    ) -> None:
        """produce() refused the record with ``exc``. Queue full: serve delivery reports until it
        fits, at most ``timeout_s``. A partition beyond the known count may have been added since
        the metadata was read: read it once more. Anything else is the record's error."""
        producer = self._client()
        deadline = time.monotonic() + self.timeout_s + _GRACE_S
        looked_again = False
        while True:
            if isinstance(exc, KafkaException):
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if err is None or err.code() != KafkaError._UNKNOWN_PARTITION or looked_again:
                    raise self._error(err, exc) from None
                looked_again = True
                self._partitions = self._metadata(self._write)
                if partition >= self._partitions:
                    raise BrokerError(
                        f"Kafka topic '{self.topic}' has no partition {partition} "
                        f"(it has {self._partitions})",
                        hint="the topic changed under the table: check it with 'logstore describe'",
                    ) from None
            else:
                if time.monotonic() >= deadline:
                    self._serve(producer.poll, 0)
                    raise self._errors.timed_out(
                        self._write,
                        detail=f"the client's queue stayed full ({len(producer)} records)",
                    ) from None
                self._serve(producer.poll, _POLL_S)
                if self._batch.error is not None:
                    self._fail_batch(self._batch)
            try:
                self._produce(
                    self.topic, value, key, partition, self._on_delivery, None, 0, headers
                )
                return
            except (BufferError, KafkaException) as again:
                exc = again

    def _metadata(self, op: Operation) -> int:
        """The topic's partition count from a metadata request, within ``timeout_s``."""
        producer = self._client()
        deadline = time.monotonic() + self.timeout_s
        last: KafkaException | None = None
        step = _METADATA_STEP_S
        while True:
            wait = max(min(deadline - time.monotonic(), step), 0.05)
            try:
                metadata = producer.list_topics(self.topic, timeout=wait)
            except KafkaException as exc:
                last = exc
            else:
                self._reached = True
                self._errors.reached()
                topic = metadata.topics.get(self.topic)
                error: KafkaError | None = topic.error if topic is not None else None
                if topic is None or (error is not None and error.code() in _NOT_FOUND):
                    raise self._errors.not_found(op)
                if error is None and topic.partitions:
                    return len(topic.partitions)
                if error is not None and error.code() != KafkaError.LEADER_NOT_AVAILABLE:
                    raise self._errors.map(KafkaException(error), op)
                # no leader yet (the topic is being created): ask again
            self._serve(producer.poll, 0)  # serves error_cb
            if not self._reached:
                # Before any broker answered, every bootstrap address refusing is the verdict;
                # later, an outage (a broker restart) is waited out until the deadline.
                fatal = self._errors.fatal()
                if fatal is not None:
                    raise fatal
            if time.monotonic() >= deadline:
                raise self._errors.timed_out(op, detail=reason(last) if last else None)
            step = min(step * 2, _METADATA_STEP_MAX_S)

    def _delivery_error(self, batch: _Batch) -> LogstoreError:
        assert batch.error is not None
        self._serve(self._client().poll, 0)  # the client errors say why, e.g. which broker refused
        error = self._error(batch.error)
        if batch.failed > 1 and error.detail is None:
            error.detail = f"{batch.failed} records of the batch failed"
        return error

    def _error(self, err: KafkaError | None, exc: KafkaException | None = None) -> LogstoreError:
        """The domain error for a record's failure ``err``, or for produce()'s exception ``exc``
        (whose ``err`` may be None)."""
        op = self._write
        if err is None:
            return self._errors.map(exc or KafkaException(KafkaError(KafkaError.UNKNOWN)), op)
        code = err.code()
        if code == KafkaError._FATAL and self._fatal is None and self._producer is not None:
            # produce() refused the record because the client failed after the last poll (e.g.
            # the broker refused the idempotent producer an id): the next poll says why. Only a
            # look: whatever the poll raises, the record's own error below stands.
            with contextlib.suppress(LogstoreError, KafkaException, SystemError):
                self._serve(self._producer.poll, 0)
        if code == KafkaError._FATAL and self._fatal is not None:
            return self._fatal  # what made the client fail, not its refusal since
        if code in _NOT_FOUND:
            return self._errors.not_found(op)
        if code in _TIMED_OUT:
            return self._errors.timed_out(op, detail=err.str())
        if code in _TOO_LARGE:
            return BrokerError(
                f"Kafka at {self.bootstrap_servers} refused a record for topic '{self.topic}' as "
                "too large",
                hint="raise the topic's max.message.bytes (and the client's message.max.bytes in "
                "the table's properties), or write smaller rows",
                detail=self._errors.redact(err.str()),
            )
        if code == KafkaError._UNKNOWN_PARTITION:
            return BrokerError(
                f"Kafka topic '{self.topic}' at {self.bootstrap_servers} lost a partition the "
                "producer wrote to",
                hint="the topic changed under the table: check it with 'logstore describe'",
                detail=self._errors.redact(err.str()),
            )
        return self._errors.map(exc or KafkaException(err), op)
