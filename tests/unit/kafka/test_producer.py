"""LogProducer without a broker: its configuration, its arguments, and its batch logic over an
in-memory stand-in for ``confluent_kafka.Producer`` (delivery reports, errors, full queues)."""

from __future__ import annotations

import logging
import pickle
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from logstore_cli.errors import (
    EXIT_FAILURE,
    EXIT_INVALID_INPUT,
    BrokerError,
    ConfigError,
    KafkaAuthorizationError,
    TopicNotFoundError,
    TopicSpecError,
)
from logstore_cli.kafka import producer as kproducer
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.partitioner import partition_for
from tests.unit.kafka.secrets_helpers import BOOT, PLAIN, SECRET, all_text, jaas

TOPIC = "orders-log"
HEADERS = [("logstore.writer", b"w-1"), ("logstore.kind", b"+I")]


# -- configuration ---------------------------------------------------------------------------------


def test_the_config_fixes_what_the_wire_format_and_the_protocol_need() -> None:
    conf = LogProducer.config_for(BOOT, {}, timeout_s=12.5, linger_ms=20)
    assert conf["bootstrap.servers"] == BOOT
    assert conf["acks"] == "all"
    assert conf["enable.idempotence"] == "true"
    assert conf["partitioner"] == "murmur2_random"
    assert conf["allow.auto.create.topics"] == "false"
    assert conf["delivery.report.only.error"] is False
    assert conf["linger.ms"] == 20
    assert conf["message.timeout.ms"] == 12500


def test_the_connection_tuning_is_the_admins() -> None:
    conf = LogProducer.config_for(BOOT, {}, timeout_s=7)
    with KafkaAdmin(BOOT, timeout_s=7) as admin:
        admin_conf = admin._conf
    for key in (
        "socket.connection.setup.timeout.ms",
        "socket.timeout.ms",
        "reconnect.backoff.max.ms",
    ):
        assert conf[key] == admin_conf[key], key
    assert conf["request.timeout.ms"] <= conf["message.timeout.ms"]


def test_client_properties_are_mapped_and_cannot_override_the_fixed_settings() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
        "compression.type": "lz4",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "acks": "1",
        "enable.idempotence": "false",
        "partitioner": "random",
        "allow.auto.create.topics": "true",
        "delivery.timeout.ms": "999999",
        "queue.buffering.max.ms": "1000",
        "transactional.id": "tx-1",
        "delivery.report.only.error": "true",
    }
    conf = LogProducer.config_for(BOOT, props, timeout_s=5)
    assert conf["sasl.mechanism"] == "PLAIN"
    assert conf["sasl.username"] == "alice"
    assert conf["sasl.password"] == SECRET
    assert conf["compression.type"] == "lz4"
    assert "value.serializer" not in conf
    assert "delivery.timeout.ms" not in conf  # librdkafka's alias of message.timeout.ms
    assert "queue.buffering.max.ms" not in conf  # alias of linger.ms
    assert "transactional.id" not in conf
    assert (conf["acks"], conf["enable.idempotence"], conf["partitioner"]) == (
        "all",
        "true",
        "murmur2_random",
    )
    assert conf["message.timeout.ms"] == 5000
    with LogProducer(BOOT, props, TOPIC, timeout_s=5) as producer:  # librdkafka accepts it
        assert set(producer.ignored_properties) == {
            "value.serializer",
            "acks",
            "enable.idempotence",
            "partitioner",
            "allow.auto.create.topics",
            "delivery.timeout.ms",
            "queue.buffering.max.ms",
            "transactional.id",
            "delivery.report.only.error",
        }


def test_properties_that_agree_with_the_fixed_settings_are_not_reported_as_ignored() -> None:
    props = {"acks": "-1", "enable.idempotence": "TRUE", "partitioner": "murmur2_random"}
    with LogProducer(BOOT, props, TOPIC, timeout_s=5) as producer:
        assert producer.ignored_properties == ()


def test_the_config_is_plain_picklable_data() -> None:
    props = {"sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET)}
    conf = LogProducer.config_for(BOOT, props, timeout_s=5)
    assert pickle.loads(pickle.dumps(conf)) == conf
    assert not [key for key, value in conf.items() if callable(value)]
    assert LogProducer.config_for(BOOT, props, timeout_s=5) == conf  # pure: same in, same out


def test_a_producer_is_built_from_arguments_that_survive_pickling() -> None:
    # What a Spark task receives: the arguments, pickled by the driver.
    args = pickle.loads(pickle.dumps((BOOT, {"compression.type": "zstd"}, TOPIC)))
    with LogProducer(*args, timeout_s=5, linger_ms=1) as producer:
        assert producer.topic == TOPIC


def test_the_producer_itself_refuses_pickling_with_what_to_do_instead() -> None:
    with (
        LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer,
        pytest.raises(TypeError, match="build it inside the Spark task"),
    ):
        pickle.dumps(producer)


def test_an_unknown_property_is_a_config_error_and_a_secret_is_redacted() -> None:
    with pytest.raises(ConfigError, match=r'"no\.such\.setting"') as info:
        LogProducer(BOOT, {"no.such.setting": "1"}, TOPIC, timeout_s=5)
    assert info.value.exit_code == EXIT_INVALID_INPUT
    # A password pasted into the wrong key: librdkafka quotes the invalid value back.
    with pytest.raises(ConfigError, match=r"security\.protocol") as info:
        LogProducer(
            BOOT, {"sasl.password": SECRET, "security.protocol": SECRET}, TOPIC, timeout_s=5
        )
    assert SECRET not in all_text(info.value)


def test_ignored_properties_are_logged_by_name_never_by_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=kproducer.__name__)
    with LogProducer(BOOT, {"ssl.truststore.password": SECRET}, TOPIC, timeout_s=5):
        pass
    assert "ssl.truststore.password" in caplog.text
    assert SECRET not in caplog.text


def test_bad_arguments_fail_before_any_network_call() -> None:
    with pytest.raises(ConfigError, match="no Kafka bootstrap servers"):
        LogProducer("  ", {}, TOPIC, timeout_s=5)
    for name in ("bad name", "", "x" * 250):
        with pytest.raises(TopicSpecError, match="not a valid topic name"):
            LogProducer(BOOT, {}, name, timeout_s=5)
    with pytest.raises(ValueError, match="timeout_s"):
        LogProducer(BOOT, {}, TOPIC, timeout_s=0)
    with pytest.raises(ValueError, match="linger_ms"):
        LogProducer(BOOT, {}, TOPIC, timeout_s=1, linger_ms=1000)
    with pytest.raises(ValueError, match="linger_ms"):
        LogProducer.config_for(BOOT, {}, timeout_s=1, linger_ms=-1)


# -- the batch logic, over an in-memory client -----------------------------------------------------


@dataclass
class FakeClock:
    """The producer's clock (see the ``clock`` fixture): time passes only while a client given it
    waits in poll/flush, by the time-out it was given, so a deadline is counted in waits, not in
    how loaded the machine is."""

    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now

    def wait(self, timeout: float) -> None:
        self.now += max(timeout, 0.0)


@dataclass
class FakeClient:
    """``confluent_kafka.Producer`` in memory: keeps what is produced, reports deliveries on
    poll()/flush() as the settings below say."""

    conf: dict[str, Any]
    partitions: int = 3
    topic_error: KafkaError | None = None
    fail_with: KafkaError | None = None  # every delivery fails with this
    deliver: bool = True  # False: records stay undelivered
    capacity: int | None = None  # the queue's size; produce() raises BufferError beyond it
    fatal: KafkaError | None = None  # poll()/flush() raise it as confluent-kafka does
    queue: list[tuple[int, Any]] = field(default_factory=list)
    produced: list[tuple[bytes | None, bytes, Any, int]] = field(default_factory=list)
    offsets: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    metadata_reads: int = 0
    closed: bool = False
    clock: FakeClock | None = None  # poll/flush wait on it

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        partition: int,
        callback: Any,
        on_delivery: Any,
        timestamp: int,
        headers: Any,
    ) -> None:
        assert topic == TOPIC and callback is not None
        if self.capacity is not None and len(self.queue) >= self.capacity:
            raise BufferError("Local: Queue full")
        if partition >= self.partitions:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        if partition < 0:
            partition = partition_for(key, self.partitions) if key is not None else 0
        self.produced.append((key, value, headers, partition))
        self.queue.append((partition, callback))

    def poll(self, timeout: float = -1) -> int:
        if self.clock is not None:
            self.clock.wait(timeout)
        return self._serve()

    def flush(self, timeout: float = -1) -> int:
        if self.clock is not None:
            self.clock.wait(timeout)
        self._serve()
        return len(self.queue)

    def _serve(self) -> int:
        if self.fatal is not None:
            # confluent-kafka raises a fatal error from error_cb; a delivery report served in the
            # same call then turns it into a SystemError caused by it.
            try:
                raise KafkaException(self.fatal)
            except KafkaException as exc:
                raise SystemError("on_delivery returned a result with an exception set") from exc
        if not self.deliver:
            return 0
        served, self.queue = self.queue, []
        for partition, callback in served:
            if self.fail_with is not None:
                callback(self.fail_with, Message(topic=TOPIC, partition=partition))
            else:
                offset = self.offsets[partition]
                self.offsets[partition] += 1
                callback(None, Message(topic=TOPIC, partition=partition, offset=offset))
        return len(served)

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        self.metadata_reads += 1
        partitions = {} if self.topic_error else {i: object() for i in range(self.partitions)}
        return _Namespace(topics={topic: _Namespace(error=self.topic_error, partitions=partitions)})

    def purge(self) -> None:
        purged, self.queue = self.queue, []
        for partition, callback in purged:
            callback(KafkaError(KafkaError._PURGE_QUEUE), Message(topic=TOPIC, partition=partition))

    def close(self) -> bool:
        self.closed = True
        return True

    def __len__(self) -> int:
        return len(self.queue)


class _Namespace:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeClient]]:
    """The in-memory clients the LogProducers of the test build, in order."""
    built: list[FakeClient] = []

    def factory(conf: dict[str, Any]) -> FakeClient:
        built.append(FakeClient(conf))
        return built[-1]

    monkeypatch.setattr(kproducer, "Producer", factory)
    yield built


def _keys(n: int) -> list[bytes]:
    return [b'{"id":%d}' % i for i in range(n)]


def test_flush_returns_each_partitions_end_offset_after_the_batch(
    clients: list[FakeClient],
) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        for key in _keys(50):
            producer.send(key, b"{}", HEADERS)
        client = clients[0]
        first = producer.flush()
        assert first == dict(client.offsets)  # every partition written: offset after its last
        assert sum(first.values()) == 50
        producer.send(None, b"m", HEADERS, partition=1)  # only partition 1 in this batch
        assert producer.flush() == {1: first[1] + 1}
        assert producer.flush() == {}  # nothing sent since
    assert client.produced[-1] == (None, b"m", HEADERS, 1)
    assert client.closed


def test_records_keep_their_headers_and_keys_go_to_the_partitioner(
    clients: list[FakeClient],
) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        producer.send(b'{"id":42}', b"v", HEADERS)
        producer.flush()
    key, value, headers, partition = clients[0].produced[0]
    assert (key, value, headers) == (b'{"id":42}', b"v", HEADERS)
    assert partition == partition_for(b'{"id":42}', 3)  # -1 reached the client: "partitioner"


@pytest.mark.parametrize(
    ("code", "error_type", "says"),
    [
        (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            TopicNotFoundError,
            f"Kafka topic '{TOPIC}' does not exist",
        ),
        (KafkaError._UNKNOWN_TOPIC, TopicNotFoundError, f"Kafka topic '{TOPIC}' does not exist"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaAuthorizationError, "User:alice WRITE"),
        (KafkaError._MSG_TIMED_OUT, BrokerError, f"did not write to topic '{TOPIC}' within 5s"),
        (KafkaError.MSG_SIZE_TOO_LARGE, BrokerError, "as too large"),
        (KafkaError.INVALID_RECORD, BrokerError, f"failed to write to Kafka topic '{TOPIC}'"),
    ],
)
def test_a_failed_delivery_raises_a_domain_error_without_secrets(
    clients: list[FakeClient], code: int, error_type: type[BrokerError], says: str
) -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
    }
    with LogProducer(BOOT, props, TOPIC, timeout_s=5) as producer:
        producer.send(b"k", b"v", HEADERS)
        producer.send(b"k", b"v", HEADERS)
        clients[0].fail_with = KafkaError(code, f"broker says {SECRET}")
        with pytest.raises(error_type) as info:
            producer.flush()
    error = info.value
    assert says in str(error)
    assert error.exit_code == EXIT_FAILURE
    assert error.hint
    assert SECRET not in all_text(error)


def test_a_failed_delivery_stops_the_sends_and_the_next_batch_starts_clean(
    clients: list[FakeClient],
) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        producer.send(b"a", b"v", HEADERS)
        client = clients[0]
        client.fail_with = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
        client.capacity = 1  # the next send finds the queue full and serves the failed report
        with pytest.raises(KafkaAuthorizationError):
            producer.send(b"b", b"v", HEADERS)
        client.fail_with, client.capacity = None, None
        producer.send(b"c", b"v", HEADERS)
        ends = producer.flush()  # the failed batch is over; this one succeeds
    assert sum(ends.values()) == 1
    assert [key for key, *_ in client.produced] == [b"a", b"c"]


def test_a_full_queue_is_waited_out_by_serving_delivery_reports(clients: list[FakeClient]) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        producer.send(b"k", b"v", HEADERS)
        clients[0].capacity = 1
        for key in _keys(10):
            producer.send(key, b"v", HEADERS)  # each one waits for the report of the one before
        assert sum(producer.flush().values()) == 11


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(kproducer, "time", SimpleNamespace(monotonic=fake.monotonic))
    return fake


def test_a_queue_that_stays_full_fails_at_the_deadline(
    clients: list[FakeClient], clock: FakeClock
) -> None:
    timeout_s = 0.3
    with LogProducer(BOOT, {}, TOPIC, timeout_s=timeout_s) as producer:
        producer.send(b"k", b"v", HEADERS)
        client = clients[0]
        client.capacity, client.deliver = 1, False
        client.clock = clock
        started = clock.now
        with pytest.raises(
            BrokerError, match=f"did not write to topic '{TOPIC}' within 0.3s"
        ) as info:
            producer.send(b"k2", b"v", HEADERS)
        waited = clock.now - started
    # it waited its time-out and grace, polling, and gave up at the first check past them
    deadline = timeout_s + kproducer._GRACE_S
    assert deadline <= waited <= deadline + kproducer._POLL_S + 1e-9
    assert "queue stayed full" in (info.value.detail or "")


def test_flush_fails_at_the_deadline_when_records_stay_undelivered(
    clients: list[FakeClient], clock: FakeClock
) -> None:
    timeout_s = 0.3
    with LogProducer(BOOT, {}, TOPIC, timeout_s=timeout_s) as producer:
        producer.send(b"k", b"v", HEADERS)
        client = clients[0]
        client.deliver = False
        client.clock = clock
        started = clock.now
        with pytest.raises(BrokerError, match=f"within {timeout_s:g}s") as info:
            producer.flush()
        waited = clock.now - started
    # flushes of at most 0.5 s each, the last one ending at the deadline: no more, no less
    assert waited == pytest.approx(timeout_s + kproducer._GRACE_S)
    assert info.value.detail == "1 record(s) not delivered"


def test_a_missing_topic_fails_before_any_record_is_queued(clients: list[FakeClient]) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        clients[0].topic_error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        with pytest.raises(TopicNotFoundError, match=f"'{TOPIC}' does not exist at {BOOT}"):
            producer.partition_count()
        with pytest.raises(TopicNotFoundError):
            producer.send(b"k", b"v", HEADERS)
    assert clients[0].produced == []


def test_the_topic_is_looked_up_once_not_per_record(clients: list[FakeClient]) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        for key in _keys(3000):
            producer.send(key, b"v", HEADERS)
        producer.flush()
    assert clients[0].metadata_reads == 1


def test_an_explicit_partition_the_topic_lacks_is_refused_after_rereading_the_metadata(
    clients: list[FakeClient],
) -> None:
    with LogProducer(BOOT, {}, TOPIC, timeout_s=5) as producer:
        assert producer.partition_count() == 3
        with pytest.raises(BrokerError, match=f"'{TOPIC}' has no partition 5 \\(it has 3\\)"):
            producer.send(None, b"m", HEADERS, partition=5)
        clients[0].partitions = 6  # partitions added since: the marker goes there
        producer.send(None, b"m", HEADERS, partition=5)
        assert producer.flush() == {5: 1}
        with pytest.raises(ValueError, match="partition must be >= 0"):
            producer.send(None, b"m", HEADERS, partition=-1)


def test_close_discards_unflushed_records_and_a_closed_producer_refuses_calls(
    clients: list[FakeClient],
) -> None:
    producer = LogProducer(BOOT, {}, TOPIC, timeout_s=5)
    producer.send(b"k", b"v", HEADERS)
    client = clients[0]
    client.deliver = False
    producer.close()
    producer.close()  # idempotent
    assert client.closed
    assert len(client) == 0  # purged, not waited for
    for call in (
        lambda: producer.send(b"k", b"v", HEADERS),
        producer.flush,
        producer.partition_count,
    ):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_a_fatal_client_error_is_mapped_and_every_later_call_repeats_it(
    clients: list[FakeClient],
) -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
    }
    with LogProducer(BOOT, props, TOPIC, timeout_s=5) as producer:
        producer.send(b"k", b"v", HEADERS)
        # The idempotent producer was refused its producer id: a missing WRITE on the topic.
        clients[0].fatal = KafkaError(
            KafkaError.CLUSTER_AUTHORIZATION_FAILED, f"no PID for {SECRET}", fatal=True
        )
        with pytest.raises(KafkaAuthorizationError) as info:
            producer.flush()
        with pytest.raises(KafkaAuthorizationError) as again:
            producer.send(b"k", b"v", HEADERS)
    assert again.value is info.value
    assert str(info.value) == f"Kafka at {BOOT} denied User:alice WRITE on topic '{TOPIC}'"
    assert f"grant WRITE on topic '{TOPIC}' to User:alice" in (info.value.hint or "")
    assert SECRET not in all_text(info.value)
