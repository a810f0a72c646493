"""LogProducer against the real broker: where records land, what flush reports, what arrives, and
how it fails (missing topic, unreachable or silent brokers, missing ACLs)."""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from logstore_cli.errors import (
    EXIT_FAILURE,
    BrokerError,
    KafkaAuthorizationError,
    TopicNotFoundError,
)
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.local_broker import free_port
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.partitioner import partition_for
from tests.plugins.authz_broker import AuthzBroker

TIMEOUT_S = 15.0
# A failure that needs no waiting (a missing topic, a refused connection) ends before its time-out:
# one this long is never reached by a call that does not wait, however loaded the machine.
PATIENT_TIMEOUT_S = 120.0


def _headers(i: int) -> list[tuple[str, bytes]]:
    """The five format headers, then a foreign one with an empty value: order and bytes must hold."""
    return [
        ("logstore.writer", b"w-5c1e"),
        ("logstore.epoch", str(i).encode()),
        ("logstore.attempt", b"a-91d0"),
        ("logstore.kind", b"+I"),
        ("logstore.format", b"1"),
        ("traceparent", b""),
    ]


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
        admin.create_topic(topic, partitions, 1)


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Message]:
    """Every record of the topic, from the beginning, once ``expected`` of them have arrived."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        while len(records) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append(msg)
    finally:
        consumer.close()
    assert len(records) == expected, f"read {len(records)} of {expected} records"
    return records


def _ends_of(records: list[Message]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in records:
        partition, offset = record.partition(), record.offset()
        assert partition is not None and offset is not None
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def test_keyed_records_land_where_partition_for_says_with_their_headers_intact(
    kafka_bootstrap: str, topic_name: str
) -> None:
    partitions = 6
    _create(kafka_bootstrap, topic_name, partitions)
    keys = [b'{"id":%d}' % i for i in range(400)] + ['{"name":"Zoë"}'.encode()]
    sent = {key: (b'{"row":%d}' % i, _headers(i)) for i, key in enumerate(keys)}
    with LogProducer(kafka_bootstrap, {}, topic_name, timeout_s=TIMEOUT_S) as producer:
        assert producer.partition_count() == partitions
        for key, (value, headers) in sent.items():
            producer.send(key, value, headers)
        ends = producer.flush()
    records = _read_all(kafka_bootstrap, topic_name, partitions, len(sent))
    for record in records:
        key = record.key()
        assert key is not None
        assert record.partition() == partition_for(key, partitions), key
        assert (record.value(), record.headers()) == sent[key]
    # A fresh topic: the offsets after the batch are what the partitions hold, and every partition
    # got some of 401 keys.
    assert ends == _ends_of(records)
    assert ends == Counter(record.partition() for record in records)
    assert len(ends) == partitions
    with KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S) as admin:
        assert admin.end_offsets(topic_name) == ends


def test_each_flush_reports_its_own_batch_and_markers_go_to_the_partition_named(
    kafka_bootstrap: str, topic_name: str
) -> None:
    partitions = 3
    _create(kafka_bootstrap, topic_name, partitions)
    marker = [("logstore.kind", b"COMMIT")]
    with LogProducer(kafka_bootstrap, {}, topic_name, timeout_s=TIMEOUT_S) as producer:
        for i in range(30):
            producer.send(b'{"id":%d}' % i, b"{}", _headers(i))
        first = producer.flush()
        for _ in range(20):  # a table without a key: null keys, spread by the partitioner
            producer.send(None, b"{}", _headers(0))
        keyless = producer.flush()
        for partition in range(partitions):
            producer.send(None, b'{"delta_version":1}', marker, partition=partition)
        markers = producer.flush()
    assert sum(first.values()) == 30
    assert sum(keyless[p] - first.get(p, 0) for p in keyless) == 20
    after_keyless = {p: keyless.get(p, first.get(p, 0)) for p in range(partitions)}
    assert markers == {p: after_keyless[p] + 1 for p in range(partitions)}
    records = _read_all(kafka_bootstrap, topic_name, partitions, 30 + 20 + partitions)
    last = {record.partition(): record for record in sorted(records, key=lambda r: r.offset() or 0)}
    for partition, record in last.items():
        assert record.offset() == markers[partition] - 1
        assert (record.key(), record.value(), record.headers()) == (
            None,
            b'{"delta_version":1}',
            marker,
        )


def test_a_missing_topic_fails_fast_and_is_not_created(
    kafka_bootstrap: str, topic_name: str
) -> None:
    with LogProducer(kafka_bootstrap, {}, topic_name, timeout_s=PATIENT_TIMEOUT_S) as producer:
        started = time.monotonic()
        with pytest.raises(TopicNotFoundError) as info:
            producer.send(b"k", b"v", _headers(0))
        assert time.monotonic() - started < PATIENT_TIMEOUT_S  # not waited out
        with pytest.raises(TopicNotFoundError):
            producer.partition_count()
    assert str(info.value) == f"Kafka topic '{topic_name}' does not exist at {kafka_bootstrap}"
    assert info.value.exit_code == EXIT_FAILURE
    assert "create-table" in (info.value.hint or "")
    with KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S) as admin:
        assert admin.describe_topic(topic_name) is None  # no auto-creation by the producer


CALLS: dict[str, Callable[[LogProducer], object]] = {
    "send": lambda producer: producer.send(b"k", b"v", _headers(0)),
    "partition_count": lambda producer: producer.partition_count(),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_refused_bootstrap_fails_at_once_naming_the_address(
    call: str, capfd: pytest.CaptureFixture[str]
) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    with LogProducer(bootstrap, {}, "t", timeout_s=PATIENT_TIMEOUT_S) as producer:
        started = time.monotonic()
        with pytest.raises(BrokerError) as info:
            CALLS[call](producer)
        elapsed = time.monotonic() - started
    assert elapsed < PATIENT_TIMEOUT_S, f"{call} waited out its {PATIENT_TIMEOUT_S:g}s"
    assert str(info.value) == f"cannot reach Kafka at {bootstrap}"  # at once: no "within"
    assert info.value.exit_code == EXIT_FAILURE
    assert "Connection refused" in (info.value.detail or "")
    assert "Connection refused" not in capfd.readouterr().err  # librdkafka's chatter is logged


@pytest.fixture
def silent_bootstrap() -> Iterator[str]:
    """An address that accepts connections and never answers a request."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize("call", list(CALLS))
def test_a_silent_bootstrap_fails_within_the_timeout_naming_the_address(
    call: str, silent_bootstrap: str
) -> None:
    timeout_s = 3.0
    with (
        LogProducer(silent_bootstrap, {}, "t", timeout_s=timeout_s) as producer,
        pytest.raises(BrokerError) as info,
    ):
        CALLS[call](producer)
    # the deadline ended it (its message), not a hang; how far past it librdkafka noticed is load
    assert str(info.value) == f"cannot reach Kafka at {silent_bootstrap} within {timeout_s:g}s"
    assert info.value.exit_code == EXIT_FAILURE


def _grant(broker: AuthzBroker, topic: str, operation: AclOperation) -> None:
    """Grant ``operation`` on ``topic`` to alice, as the super user on the PLAINTEXT listener."""
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
        "User:alice", "*", operation, AclPermissionType.ALLOW,
    )  # fmt: skip
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(timeout=TIMEOUT_S)


@pytest.mark.parametrize("granted", [None, AclOperation.DESCRIBE])
def test_a_producer_without_write_permission_is_told_which_acl_to_add(
    authz_broker: AuthzBroker, topic_name: str, granted: AclOperation | None
) -> None:
    _create(authz_broker.bootstrap, topic_name, 2)
    if granted is not None:
        _grant(authz_broker, topic_name, granted)
    password = authz_broker.passwords["alice"]
    props = authz_broker.client_properties("alice")
    with LogProducer(authz_broker.sasl_bootstrap, props, topic_name, timeout_s=TIMEOUT_S) as alice:
        started = time.monotonic()
        with pytest.raises(KafkaAuthorizationError) as info:
            alice.send(b"k", b"v", _headers(0))
            alice.flush()
        assert time.monotonic() - started < TIMEOUT_S  # an answer, not a time-out
    error = info.value
    assert "User:alice WRITE" in str(error), str(error)
    assert f"grant WRITE on topic '{topic_name}' to User:alice" in (error.hint or "")
    assert password not in "\n".join(
        [str(error), repr(error), error.hint or "", error.detail or ""]
    )
