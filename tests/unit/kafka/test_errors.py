"""The error mapper every Kafka client owns: librdkafka's errors -> domain errors, secrets redacted.

No broker: the client errors and exceptions are built the way librdkafka reports them (same codes,
same wording); the real ones are exercised in tests/integration/kafka.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from logstore_cli.errors import (
    EXIT_FAILURE,
    EXIT_INVALID_INPUT,
    BrokerError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    TopicExistsError,
    TopicNotFoundError,
    TopicSpecError,
)
from logstore_cli.kafka.client_config import librdkafka_config
from logstore_cli.kafka.errors import KafkaErrorMapper, Operation, check_topic_name

BOOT = "127.0.0.1:1"
SECRET = "Pa55-w0rd-never-shown"
CREATE = Operation("create", "CREATE", "orders")
REFUSED = f"{BOOT}/bootstrap: Connect to ipv4#{BOOT} failed: Connection refused (after 0ms in state CONNECT)"


def _mapper(bootstrap: str = BOOT, **props: str) -> KafkaErrorMapper:
    conf, _ = librdkafka_config(bootstrap, props)
    return KafkaErrorMapper.for_config(conf, props, timeout_s=10)


def _exc(code: int, text: str = "") -> KafkaException:
    return KafkaException(KafkaError(code, text) if text else KafkaError(code))


def _all_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), *map(str, exc.args)]
    parts += [str(getattr(exc, name, "")) for name in ("message", "hint", "detail")]
    return "\n".join(parts)


# -- when waiting cannot help (fatal) --------------------------------------------------------------


def test_a_refused_bootstrap_address_is_fatal_once_all_brokers_are_reported_down() -> None:
    mapper = _mapper()
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    assert mapper.fatal() is None  # not yet: librdkafka has not tried every broker
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    error = mapper.fatal()
    assert isinstance(error, BrokerError)
    assert str(error) == f"cannot reach Kafka at {BOOT}"  # at once: it waited for nothing
    assert error.detail == REFUSED  # the connection's own failure, not the summary
    assert error.exit_code == EXIT_FAILURE


def test_all_brokers_down_without_a_failed_connection_is_not_fatal() -> None:
    # A broker closing an idle connection: librdkafka reports all brokers down, then reconnects.
    mapper = _mapper()
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert mapper.fatal() is None
    assert mapper.brokers_down


def test_a_server_with_two_addresses_is_given_up_only_when_both_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``localhost`` is ::1 and 127.0.0.1 on many systems, and a broker may listen on one of them:
    librdkafka reports all brokers down after ::1 refuses, then connects to 127.0.0.1."""
    asked: list[tuple[Any, ...]] = []

    def getaddrinfo(host: str, port: int, family: int, kind: int) -> list[tuple[Any, ...]]:
        asked.append((host, port, family, kind))
        return [
            (socket.AF_INET6, kind, 6, "", ("::1", port, 0, 0)),
            (socket.AF_INET, kind, 6, "", ("127.0.0.1", port)),
        ]

    monkeypatch.setattr("logstore_cli.kafka.errors.socket.getaddrinfo", getaddrinfo)
    mapper = _mapper("localhost:9092")
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, "Connect to ipv6#[::1]:9092 failed"))
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert mapper.fatal() is None
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:9092 failed"))
    assert isinstance(mapper.fatal(), BrokerError)
    assert asked == [("localhost", 9092, socket.AF_UNSPEC, socket.SOCK_STREAM)]


def test_the_address_family_setting_limits_the_addresses_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    families: list[int] = []

    def getaddrinfo(host: str, port: int, family: int, kind: int) -> list[tuple[Any, ...]]:
        families.append(family)
        return [(family, kind, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr("logstore_cli.kafka.errors.socket.getaddrinfo", getaddrinfo)
    mapper = _mapper("localhost:9092", **{"broker.address.family": "v4"})
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:9092 failed"))
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert isinstance(mapper.fatal(), BrokerError)
    assert families == [socket.AF_INET]


def test_an_unresolvable_name_is_fatal_without_asking_the_resolver_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def getaddrinfo(*_: object) -> list[tuple[Any, ...]]:
        raise AssertionError("the resolver just failed: it must not be asked again")

    monkeypatch.setattr("logstore_cli.kafka.errors.socket.getaddrinfo", getaddrinfo)
    mapper = _mapper("nohost.invalid:9092")
    mapper.on_error(
        KafkaError(KafkaError._RESOLVE, "Failed to resolve 'nohost.invalid:9092': Name or service")
    )
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    error = mapper.fatal()
    assert isinstance(error, BrokerError)
    assert "Failed to resolve" in (error.detail or "")


def test_each_call_starts_with_no_client_errors_but_remembers_the_outage() -> None:
    mapper = _mapper()
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    mapper.begin()
    assert mapper.fatal() is None
    assert mapper.brokers_down  # the handle will not report it again soon
    mapper.reached()
    assert not mapper.brokers_down
    mapper.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    mapper.begin(new_client=True)
    assert not mapper.brokers_down


def test_rejected_credentials_are_fatal_and_never_show_the_password() -> None:
    mapper = _mapper(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": SECRET,
        }
    )
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    mapper.on_error(
        KafkaError(KafkaError._AUTHENTICATION, f"SASL authentication error: bad password {SECRET}")
    )
    error = mapper.fatal()
    assert isinstance(error, KafkaAuthenticationError)
    assert "rejected the client's credentials (User:alice)" in str(error)
    assert SECRET not in _all_text(error)
    assert "***" in (error.detail or "")


def test_a_failed_tls_handshake_is_fatal_with_a_hint_at_the_ssl_settings() -> None:
    mapper = _mapper(**{"security.protocol": "SSL"})
    mapper.on_error(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed"))
    error = mapper.fatal()
    assert isinstance(error, BrokerError)
    assert str(error) == f"the TLS handshake with Kafka at {BOOT} failed"
    assert "ssl.ca.location" in (error.hint or "")
    assert "certificate verify failed" in (error.detail or "")


# -- request errors (map) --------------------------------------------------------------------------


def test_authorization_errors_name_the_principal_the_acls_and_a_kafka_acls_line() -> None:
    mapper = _mapper(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": SECRET,
        }
    )
    op = Operation("describe", "DESCRIBE", "orders", also=("DESCRIBE_CONFIGS",))
    error = mapper.map(_exc(KafkaError.TOPIC_AUTHORIZATION_FAILED), op)
    assert isinstance(error, KafkaAuthorizationError)
    assert str(error) == (
        f"Kafka at {BOOT} denied User:alice DESCRIBE on topic 'orders'; this call also needs "
        "DESCRIBE_CONFIGS"
    )
    assert (error.hint or "").startswith(
        "grant DESCRIBE and DESCRIBE_CONFIGS on topic 'orders' to User:alice (kafka-acls.sh "
        f"--bootstrap-server {BOOT} --add --allow-principal User:alice --operation Describe "
        "--operation DescribeConfigs --topic 'orders')"
    )
    cluster = mapper.map(_exc(KafkaError.CLUSTER_AUTHORIZATION_FAILED), CREATE)
    assert str(cluster) == (
        f"Kafka at {BOOT} denied User:alice CREATE on the cluster (to create topic 'orders')"
    )
    assert "--operation Create --cluster" in (cluster.hint or "")


def test_a_producer_operation_reads_naturally() -> None:
    error = _mapper().map(
        _exc(KafkaError.TOPIC_AUTHORIZATION_FAILED), Operation("write to", "WRITE", "orders")
    )
    assert str(error) == f"Kafka at {BOOT} denied User:ANONYMOUS WRITE on topic 'orders'"
    assert "--operation Write --topic 'orders'" in (error.hint or "")


def test_principals_without_a_user_name_get_no_acl_command() -> None:
    error = _mapper(**{"security.protocol": "SSL"}).map(
        _exc(KafkaError.TOPIC_AUTHORIZATION_FAILED), CREATE
    )
    assert "the principal of the client's TLS certificate" in str(error)
    assert "kafka-acls.sh" not in (error.hint or "")


@pytest.mark.parametrize(
    ("code", "kind", "message"),
    [
        (KafkaError.TOPIC_ALREADY_EXISTS, TopicExistsError, f"Kafka topic 'orders' already exists at {BOOT}"),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, TopicNotFoundError, f"Kafka topic 'orders' does not exist at {BOOT}"),
        (KafkaError.INVALID_PARTITIONS, TopicSpecError, "cannot create Kafka topic 'orders' with that partition count: "),
        (KafkaError.INVALID_CONFIG, TopicSpecError, "cannot create Kafka topic 'orders' with its topic configs: "),
        (KafkaError.INVALID_REQUEST, TopicSpecError, "cannot create Kafka topic 'orders' with that request: "),
        (KafkaError.POLICY_VIOLATION, BrokerError, "the cluster's topic policy refused to create Kafka topic 'orders': "),
        (KafkaError.TOPIC_DELETION_DISABLED, BrokerError, f"Kafka at {BOOT} does not allow deleting topics (Kafka topic 'orders')"),
        (KafkaError.UNKNOWN, BrokerError, f"Kafka at {BOOT} failed to create Kafka topic 'orders': UNKNOWN: "),
    ],
)  # fmt: skip
def test_broker_error_codes_become_domain_errors(code: int, kind: type, message: str) -> None:
    error = _mapper().map(_exc(code), CREATE)
    assert type(error) is kind
    assert str(error).startswith(message)
    assert error.hint
    expected = EXIT_INVALID_INPUT if issubclass(kind, TopicSpecError) else EXIT_FAILURE
    assert error.exit_code == expected


def test_replication_errors_name_the_replication_asked_for() -> None:
    said = "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 1 broker(s) are registered."
    error = _mapper().map(_exc(KafkaError.INVALID_REPLICATION_FACTOR, said), CREATE, replication=3)
    assert isinstance(error, TopicSpecError)
    assert str(error) == f"cannot create Kafka topic 'orders' with replication 3: {said}"
    assert "log.system.replication" in (error.hint or "")


def test_a_time_out_is_unreachable_only_when_connections_failed() -> None:
    mapper = _mapper()
    slow = mapper.map(_exc(KafkaError._TIMED_OUT, "Failed while waiting for controller"), CREATE)
    assert str(slow) == f"Kafka at {BOOT} did not create topic 'orders' within 10s"
    assert slow.detail == "Failed while waiting for controller"
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    down = mapper.map(_exc(KafkaError._TIMED_OUT, "Failed while waiting for controller"), CREATE)
    assert str(down) == f"cannot reach Kafka at {BOOT} within 10s"
    assert down.detail == REFUSED


def test_secret_values_are_redacted_wherever_they_appear() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{SECRET}";'
    )
    mapper = _mapper(**{"sasl.jaas.config": jaas, "ssl.key.password": "abc"})
    said = f"broker said {SECRET} and abc but not abcdef"
    assert (
        mapper.redact(said) == "broker said *** and *** but not abcdef"
    )  # short: whole words only
    error = mapper.map(_exc(KafkaError.POLICY_VIOLATION, said), CREATE)
    assert SECRET not in _all_text(error)


def test_invalid_properties_name_the_key_and_never_the_value() -> None:
    mapper = _mapper(**{"sasl.password": SECRET})
    error = mapper.invalid_properties(
        KafkaException(
            KafkaError(KafkaError._INVALID_ARG, f'Invalid value "{SECRET}" for "security.protocol"')
        )
    )
    assert str(error) == (
        'the Kafka client properties are invalid: Invalid value "***" for "security.protocol"'
    )
    assert error.exit_code == EXIT_INVALID_INPUT
    assert "librdkafka" in (error.hint or "")


@pytest.mark.parametrize("name", ["bad name", "", "x" * 250, ".", "..", "ünïcode", "a/b"])
def test_invalid_topic_names_are_spec_errors(name: str) -> None:
    with pytest.raises(TopicSpecError, match="not a valid topic name"):
        check_topic_name(Operation("create", "CREATE", name))


def test_valid_topic_names_pass() -> None:
    for name in ("orders", "orders.v1_log-2", "x" * 249, "..."):
        check_topic_name(Operation("create", "CREATE", name))


# -- a time-out while part of a cluster is down ----------------------------------------------------

CLUSTER = "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"
OFFSETS = Operation("read the end offsets of", "DESCRIBE", "orders")


def _refused(address: str) -> KafkaError:
    text = f"{address}/2: Connect to ipv4#{address} failed: Connection refused"
    return KafkaError(KafkaError._TRANSPORT, text)


def test_a_time_out_with_one_node_of_three_down_names_it_instead_of_the_whole_cluster() -> None:
    mapper = _mapper(CLUSTER)
    mapper.begin()
    for _ in range(3):  # librdkafka retries the dead node's address again and again
        mapper.on_error(_refused("127.0.0.1:9102"))
    error = mapper.timed_out(OFFSETS)
    assert "cannot reach" not in str(error)
    assert "127.0.0.1:9102 refused connections, the other brokers answered" in str(error)
    assert "read the end offsets of topic 'orders'" in str(error)
    assert error.hint is not None and "run the same command again" in error.hint


def test_a_time_out_with_every_node_down_is_unreachable() -> None:
    mapper = _mapper(CLUSTER)
    mapper.begin()
    for port in (9101, 9102, 9103):
        mapper.on_error(_refused(f"127.0.0.1:{port}"))
    assert "cannot reach Kafka" in str(mapper.timed_out(OFFSETS))
    partial = _mapper(CLUSTER)
    partial.begin()
    partial.on_error(_refused("127.0.0.1:9101"))
    partial.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "3/3 brokers are down"))
    assert "cannot reach Kafka" in str(partial.timed_out(OFFSETS))


def test_a_single_broker_that_refuses_is_unreachable_as_before() -> None:
    mapper = _mapper()
    mapper.begin()
    mapper.on_error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    assert "cannot reach Kafka" in str(mapper.timed_out(OFFSETS))
