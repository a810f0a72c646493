"""KafkaAdmin without a broker: its configuration is checked when it is built, bad input fails before
any network call, and nothing it logs or raises shows a secret.

Constructing a confluent-kafka client only validates the configuration (it may try to connect to
127.0.0.1:1 in the background, which nothing answers).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from logstore_cli.errors import (
    EXIT_INVALID_INPUT,
    BrokerError,
    ConfigError,
    LogstoreError,
    TopicSpecError,
)
from logstore_cli.kafka import admin as kadmin
from logstore_cli.kafka.admin import KafkaAdmin
from tests.unit.kafka.secrets_helpers import BOOT, PLAIN, SECRET, all_text, jaas


def test_a_flink_style_property_set_is_accepted_by_librdkafka() -> None:
    flink_props = {
        "bootstrap.servers": BOOT,
        "group.id": "flink-consumer",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "ssl.endpoint.identification.algorithm": "",
        "max.block.ms": "60000",
        "partition.discovery.interval.ms": "30000",
    }
    with KafkaAdmin(BOOT, flink_props, timeout_s=1) as admin:  # librdkafka accepts the mapping
        assert set(admin.ignored_properties) == {
            "key.deserializer",
            "value.deserializer",
            "key.serializer",
            "value.serializer",
            "max.block.ms",
            "partition.discovery.interval.ms",
        }


def test_ignored_keys_are_logged_by_name_never_by_value(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=kadmin.__name__)
    with KafkaAdmin(BOOT, {"ssl.truststore.password": SECRET}, timeout_s=1):
        pass
    assert "ssl.truststore.password" in caplog.text
    assert "ssl.ca.location" in caplog.text  # says what to use instead
    assert SECRET not in caplog.text


def test_unknown_property_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r'"no\.such\.setting"') as info:
        KafkaAdmin(BOOT, {"no.such.setting": "1"})
    assert info.value.exit_code == EXIT_INVALID_INPUT
    assert "librdkafka" in (info.value.hint or "")


def test_a_secret_echoed_by_librdkafka_is_redacted() -> None:
    # A password pasted into the wrong key: librdkafka quotes the invalid value back.
    props = {"sasl.password": SECRET, "security.protocol": SECRET}
    with pytest.raises(ConfigError, match=r"security\.protocol") as info:
        KafkaAdmin(BOOT, props)
    assert SECRET not in all_text(info.value)
    assert "***" in str(info.value)


def test_invalid_topic_names_fail_before_any_network_call() -> None:
    with KafkaAdmin(BOOT, timeout_s=30) as admin:
        for name in ("bad name", "", "x" * 250, "..", "ünïcode"):
            with pytest.raises(TopicSpecError, match="not a valid topic name"):
                admin.describe_topic(name)
        with pytest.raises(TopicSpecError, match="0 partitions"):
            admin.create_topic("t", 0, 1)
        with pytest.raises(TopicSpecError, match="replication 0"):
            admin.create_topic("t", 1, 0)
        with pytest.raises(TopicSpecError, match="0 partitions"):
            admin.add_partitions("t", 0)


def test_empty_bootstrap_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no Kafka bootstrap servers"):
        KafkaAdmin("  ")


def test_closed_admin_refuses_calls() -> None:
    admin = KafkaAdmin(BOOT, timeout_s=1)
    admin.close()
    admin.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        admin.ping()


class _Offset:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class _Partition:
    def __init__(self, pid: int) -> None:
        self.id = pid


class _Description:
    def __init__(self, partitions: int) -> None:
        self.partitions = [_Partition(p) for p in range(partitions)]


class _MovingLeaders:
    """An AdminClient whose first list_offsets attempts go to a dead leader: ``hangs`` attempts
    that never answer, then ``fails`` that answer NOT_LEADER_FOR_PARTITION, then the offsets."""

    def __init__(self, hangs: int, fails: int) -> None:
        self.hangs, self.fails = hangs, fails
        self.describes = 0
        self.lists = 0
        self.closed = 0  # handles destroyed: each retry asks with a new one

    def __exit__(self, *exc: object) -> None:
        self.closed += 1

    def poll(self, timeout: float) -> int:
        return 0

    def describe_topics(self, topics: object, request_timeout: float) -> dict[str, Future[object]]:
        self.describes += 1
        done: Future[object] = Future()
        done.set_result(_Description(2))
        return {"t": done}

    def list_offsets(
        self, request: dict[object, object], request_timeout: float
    ) -> dict[object, Future[object]]:
        self.lists += 1
        futures: dict[object, Future[object]] = {}
        for tp in request:
            f: Future[object] = Future()
            if self.lists <= self.hangs:
                pass  # the dead leader never answers
            elif self.lists <= self.hangs + self.fails:
                f.set_exception(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
            else:
                f.set_result(_Offset(10 + tp.partition))  # type: ignore[attr-defined]
            futures[tp] = f
        return futures


def test_end_offsets_are_retried_with_fresh_metadata_when_a_leader_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kadmin, "_ATTEMPT_MIN_S", 0.2)
    with KafkaAdmin(BOOT, timeout_s=0.4) as admin:
        real = admin._admin
        fake = _MovingLeaders(hangs=1, fails=1)
        admin._admin = fake  # type: ignore[assignment]
        monkeypatch.setattr(admin, "_new_client", lambda: fake)  # the same cluster, a new handle
        try:
            admin.timeout_s = 5.0  # room for three attempts of 1.25 s (the first one hangs)
            assert admin.end_offsets("t") == {0: 10, 1: 11}
        finally:
            admin._admin = real
    assert fake.lists == 3 and fake.describes == 3  # each attempt re-read the metadata
    # ... with a fresh handle: an old one's metadata cache can keep naming the dead leader
    assert fake.closed == 2


def test_a_leader_that_never_comes_back_times_out_with_the_usual_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kadmin, "_ATTEMPT_MIN_S", 0.2)
    with KafkaAdmin(BOOT, timeout_s=0.8) as admin:
        real = admin._admin
        fake = _MovingLeaders(hangs=1000, fails=0)
        admin._admin = fake  # type: ignore[assignment]
        monkeypatch.setattr(admin, "_new_client", lambda: fake)
        try:
            with pytest.raises(BrokerError, match="end offsets"):
                admin.end_offsets("t")
        finally:
            admin._admin = real
    assert fake.lists >= 2  # attempts of a slice of the time-out each, not one long wait


def test_a_non_retriable_error_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refused(_MovingLeaders):
        def list_offsets(
            self, request: dict[object, object], request_timeout: float
        ) -> dict[object, Future[object]]:
            self.lists += 1
            futures: dict[object, Future[object]] = {}
            for tp in request:
                f: Future[object] = Future()
                f.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
                futures[tp] = f
            return futures

    with KafkaAdmin(BOOT, timeout_s=5) as admin:
        real = admin._admin
        fake = Refused(0, 0)
        admin._admin = fake  # type: ignore[assignment]
        try:
            with pytest.raises(LogstoreError):
                admin.end_offsets("t")
        finally:
            admin._admin = real
    assert fake.lists == 1
