"""The admin layer against the real local broker: topic lifecycle, error mapping, deadlines."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from logstore_cli.errors import (
    EXIT_FAILURE,
    EXIT_INVALID_INPUT,
    BrokerError,
    TopicExistsError,
    TopicNotFoundError,
    TopicSpecError,
)
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.local_broker import free_port
from logstore_cli.kafka.types import TopicInfo

TIMEOUT_S = 15.0
# A refused connection ends a call at once, not after its time-out: a time-out this long is never
# reached by a call that does not wait, however loaded the machine (no speed is asserted).
REFUSED_TIMEOUT_S = 120.0

#: Every admin call, against a topic that does not matter when no broker answers.
CALLS: dict[str, Callable[[KafkaAdmin], object]] = {
    "ping": lambda admin: admin.ping(),
    "describe_topic": lambda admin: admin.describe_topic("t"),
    "create_topic": lambda admin: admin.create_topic("t", 1, 1),
    "create_topic(validate_only)": lambda admin: admin.create_topic("t", 1, 1, validate_only=True),
    "delete_topic": lambda admin: admin.delete_topic("t"),
    "add_partitions": lambda admin: admin.add_partitions("t", 2),
    "alter_topic_configs": lambda admin: admin.alter_topic_configs("t", {"retention.ms": "1000"}),
    "start_offsets": lambda admin: admin.start_offsets("t"),
    "end_offsets": lambda admin: admin.end_offsets("t"),
}


@pytest.fixture
def admin(kafka_bootstrap: str) -> KafkaAdmin:
    return KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S)


def _produce(bootstrap: str, topic: str, n: int) -> Counter[int]:
    """Produce ``n`` keyed records; the number delivered to each partition."""
    delivered: Counter[int] = Counter()
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            partition = msg.partition()
            assert partition is not None  # a delivered record has one
            delivered[partition] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=f"key-{i}".encode(), value=b"v", on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []
    return delivered


def test_topic_lifecycle(kafka_bootstrap: str, admin: KafkaAdmin, topic_name: str) -> None:
    with admin:
        assert admin.describe_topic(topic_name) is None
        admin.create_topic(
            topic_name, 3, 1, {"retention.ms": "3600000", "max.message.bytes": "2000000"}
        )
        # create_topic returns once the topic is usable: a describe right after sees it all
        assert admin.describe_topic(topic_name) == TopicInfo(
            name=topic_name,
            partitions=3,
            replication=1,
            configs={"retention.ms": "3600000", "max.message.bytes": "2000000"},
        )
        assert admin.end_offsets(topic_name) == {0: 0, 1: 0, 2: 0}

        admin.add_partitions(topic_name, 5)
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 5
        admin.add_partitions(topic_name, 5)  # already there: a no-op, not an error

        delivered = _produce(kafka_bootstrap, topic_name, 200)
        offsets = admin.end_offsets(topic_name)
        assert sorted(offsets) == [0, 1, 2, 3, 4]
        assert sum(offsets.values()) == 200
        assert offsets == {p: delivered.get(p, 0) for p in range(5)}

        admin.delete_topic(topic_name)
        assert admin.describe_topic(topic_name) is None  # gone when delete_topic returns
        admin.delete_topic(topic_name)  # already gone: no error


def test_create_twice_is_topic_exists(admin: KafkaAdmin, topic_name: str) -> None:
    with admin:
        admin.create_topic(topic_name, 1, 1)
        with pytest.raises(TopicExistsError) as info:
            admin.create_topic(topic_name, 1, 1)
        assert topic_name in str(info.value)
        assert info.value.exit_code == EXIT_FAILURE
        assert info.value.hint
        admin.delete_topic(topic_name)


def test_replication_beyond_the_brokers_is_a_clear_input_error(
    admin: KafkaAdmin, topic_name: str
) -> None:
    with admin:
        with pytest.raises(TopicSpecError) as info:
            admin.create_topic(topic_name, 2, 3)
        message = str(info.value)
        assert "replication 3" in message and topic_name in message
        assert "1 broker" in message  # the broker's own explanation
        assert "log.system.replication" in (info.value.hint or "")
        assert info.value.exit_code == EXIT_INVALID_INPUT
        assert admin.describe_topic(topic_name) is None


@pytest.mark.parametrize(
    ("configs", "named"),
    [
        ({"retention.ms": "not-a-number"}, "retention.ms"),
        ({"retention.msx": "1000"}, "retention.msx"),
    ],
)
def test_invalid_config_is_a_clear_error_naming_it(
    admin: KafkaAdmin, topic_name: str, configs: dict[str, str], named: str
) -> None:
    with admin:
        with pytest.raises(TopicSpecError) as info:
            admin.create_topic(topic_name, 1, 1, configs)
        assert named in str(info.value)
        assert info.value.exit_code == EXIT_INVALID_INPUT
        assert admin.describe_topic(topic_name) is None


def test_validate_only_creates_nothing(admin: KafkaAdmin, topic_name: str) -> None:
    with admin:
        admin.create_topic(topic_name, 2, 1, {"retention.ms": "1000"}, validate_only=True)
        assert admin.describe_topic(topic_name) is None
        # ... yet the broker did validate the request
        with pytest.raises(TopicSpecError, match="replication 3"):
            admin.create_topic(topic_name, 2, 3, validate_only=True)
        with pytest.raises(TopicSpecError, match=r"retention\.ms"):
            admin.create_topic(topic_name, 2, 1, {"retention.ms": "x"}, validate_only=True)
        assert admin.describe_topic(topic_name) is None


def test_partitions_never_shrink_and_missing_topics_are_named(
    admin: KafkaAdmin, topic_name: str
) -> None:
    with admin:
        with pytest.raises(TopicNotFoundError, match=topic_name):
            admin.add_partitions(topic_name, 2)
        with pytest.raises(TopicNotFoundError, match=topic_name):
            admin.end_offsets(topic_name)
        admin.create_topic(topic_name, 3, 1)
        with pytest.raises(TopicSpecError, match="from 3 to 2 partitions") as info:
            admin.add_partitions(topic_name, 2)
        assert info.value.exit_code == EXIT_INVALID_INPUT
        info_after = admin.describe_topic(topic_name)
        assert info_after is not None and info_after.partitions == 3
        admin.delete_topic(topic_name)


def test_java_only_client_properties_are_ignored_not_fatal(kafka_bootstrap: str) -> None:
    props = {
        "group.id": "flink-consumer",
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    with KafkaAdmin(kafka_bootstrap, props, timeout_s=TIMEOUT_S) as admin:
        admin.ping()
        assert set(admin.ignored_properties) == {"key.deserializer", "value.deserializer"}


def test_ping_answers(admin: KafkaAdmin) -> None:
    with admin:
        admin.ping()  # an answer: a time-out would raise


@pytest.mark.parametrize("call", ["ping", "describe_topic", "create_topic", "end_offsets"])
def test_unreachable_broker_fails_within_the_deadline(
    call: str, capfd: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens there
    timeout_s = 2.0
    with (
        KafkaAdmin(f"127.0.0.1:{port}", timeout_s=timeout_s) as admin,
        pytest.raises(BrokerError) as info,
    ):
        if call == "ping":
            admin.ping()
        elif call == "describe_topic":
            admin.describe_topic("t")
        elif call == "create_topic":
            admin.create_topic("t", 1, 1)
        else:
            admin.end_offsets("t")
    assert str(info.value) == f"cannot reach Kafka at 127.0.0.1:{port}"  # refused: no waiting
    assert info.value.exit_code == EXIT_FAILURE
    assert "broker" in (info.value.hint or "")
    assert "Connection refused" in (info.value.detail or "")
    # librdkafka's own connection-refused chatter goes to Python logging, not to our stderr
    assert "Connection refused" not in capfd.readouterr().err


@pytest.mark.parametrize("call", list(CALLS))
def test_a_refused_connection_fails_at_once_not_after_the_timeout(
    call: str, capfd: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens there: the connection is refused
    with KafkaAdmin(f"127.0.0.1:{port}", timeout_s=REFUSED_TIMEOUT_S) as admin:
        started = time.monotonic()
        with pytest.raises(BrokerError) as info:
            CALLS[call](admin)
        elapsed = time.monotonic() - started
    assert elapsed < REFUSED_TIMEOUT_S, f"{call} waited out its {REFUSED_TIMEOUT_S:g}s"
    assert str(info.value) == f"cannot reach Kafka at 127.0.0.1:{port}"  # no wait to speak of
    assert info.value.exit_code == EXIT_FAILURE
    assert "broker" in (info.value.hint or "")
    assert "Connection refused" in (info.value.detail or "")
    assert "Connection refused" not in capfd.readouterr().err


def test_every_refused_bootstrap_address_fails_at_once() -> None:
    bootstrap = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    with KafkaAdmin(bootstrap, timeout_s=REFUSED_TIMEOUT_S) as admin:
        started = time.monotonic()
        with pytest.raises(BrokerError, match=f"^cannot reach Kafka at {bootstrap}$"):
            admin.describe_topic("t")
        assert time.monotonic() - started < REFUSED_TIMEOUT_S  # not waited out


def test_calls_after_a_refused_one_fail_at_once_too() -> None:
    """The same client, call after call (as provisioning reuses it): each ends promptly."""
    port = free_port()
    with KafkaAdmin(f"127.0.0.1:{port}", timeout_s=REFUSED_TIMEOUT_S) as admin:
        for call in ("describe_topic", "ping", "create_topic", "describe_topic"):
            started = time.monotonic()
            with pytest.raises(BrokerError, match="cannot reach Kafka") as info:
                CALLS[call](admin)
            elapsed = time.monotonic() - started
            assert elapsed < REFUSED_TIMEOUT_S, f"{call} waited out its time-out"
            assert "Connection refused" in (info.value.detail or "")


def test_one_refused_bootstrap_address_among_live_ones_is_no_failure(
    kafka_bootstrap: str, topic_name: str
) -> None:
    """Only when every bootstrap address refuses is the cluster unreachable."""
    bootstrap = f"127.0.0.1:{free_port()},{kafka_bootstrap}"
    for _ in range(3):  # librdkafka picks the first address to try at random
        with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
            admin.ping()
            assert admin.describe_topic(topic_name) is None
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
        admin.create_topic(topic_name, 1, 1)
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 1
        admin.delete_topic(topic_name)


def test_start_offsets_tell_whether_a_topic_holds_records(
    kafka_bootstrap: str, admin: KafkaAdmin, topic_name: str
) -> None:
    with admin:
        admin.create_topic(topic_name, 2, 1)
        assert admin.start_offsets(topic_name) == admin.end_offsets(topic_name) == {0: 0, 1: 0}
        delivered = _produce(kafka_bootstrap, topic_name, 50)
        end = admin.end_offsets(topic_name)
        assert end == {p: delivered.get(p, 0) for p in (0, 1)}
        assert admin.start_offsets(topic_name) == {0: 0, 1: 0}  # records held: start < end
        # Delete the records of the fuller partition: its start moves up to its end.
        full = max(end, key=lambda p: end[p])
        raw = AdminClient({"bootstrap.servers": kafka_bootstrap})
        futures = raw.delete_records(
            [TopicPartition(topic_name, full, end[full])], request_timeout=TIMEOUT_S
        )
        for future in futures.values():
            future.result(timeout=TIMEOUT_S)
        start = admin.start_offsets(topic_name)
        assert start[full] == end[full]
        assert start[1 - full] == 0
        admin.delete_topic(topic_name)
        with pytest.raises(TopicNotFoundError, match=topic_name):
            admin.start_offsets(topic_name)


def test_validate_only_changes_nothing_yet_the_broker_checks(
    admin: KafkaAdmin, topic_name: str
) -> None:
    with admin:
        admin.create_topic(topic_name, 2, 1, {"retention.ms": "3600000"})
        before = TopicInfo(topic_name, 2, 1, {"retention.ms": "3600000"})
        admin.add_partitions(topic_name, 4, validate_only=True)
        admin.alter_topic_configs(
            topic_name, {"retention.ms": "1000", "cleanup.policy": "compact"}, validate_only=True
        )
        admin.alter_topic_configs(topic_name, {}, ["retention.ms"], validate_only=True)
        assert admin.describe_topic(topic_name) == before
        # ... yet the broker did check the changes
        with pytest.raises(TopicSpecError, match=r"retention\.ms") as info:
            admin.alter_topic_configs(topic_name, {"retention.ms": "x"}, validate_only=True)
        assert info.value.exit_code == EXIT_INVALID_INPUT
        with pytest.raises(TopicSpecError, match=r"retention\.msx"):
            admin.alter_topic_configs(topic_name, {"retention.msx": "1"}, validate_only=True)
        with pytest.raises(TopicSpecError, match="from 2 to 1 partitions"):
            admin.add_partitions(topic_name, 1, validate_only=True)
        missing = topic_name + "-missing"
        with pytest.raises(TopicNotFoundError, match=missing):
            admin.add_partitions(missing, 3, validate_only=True)
        with pytest.raises(TopicNotFoundError, match=missing):
            admin.alter_topic_configs(missing, {"retention.ms": "1000"}, validate_only=True)
        assert admin.describe_topic(topic_name) == before
        # and the same changes, made for real, take effect
        admin.add_partitions(topic_name, 4)
        admin.alter_topic_configs(topic_name, {"retention.ms": "1000"})
        assert admin.describe_topic(topic_name) == TopicInfo(
            topic_name, 4, 1, {"retention.ms": "1000"}
        )
        admin.delete_topic(topic_name)
