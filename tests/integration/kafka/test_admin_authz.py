"""Authentication and authorization errors from a real broker with ACLs on (``authz_broker``)."""

from __future__ import annotations

import time

import pytest
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
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    LogstoreError,
)
from logstore_cli.kafka.admin import KafkaAdmin
from tests.plugins.authz_broker import AuthzBroker

TIMEOUT_S = 15.0
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _all_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), *map(str, exc.args)]
    parts += [str(getattr(exc, name, "")) for name in ("message", "hint", "detail")]
    return "\n".join(parts)


def _grant(broker: AuthzBroker, topic: str, operation: AclOperation) -> None:
    """Grant ``operation`` on ``topic`` to alice, as the super user on the PLAINTEXT listener."""
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
        "User:alice", "*", operation, AclPermissionType.ALLOW,
    )  # fmt: skip
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(timeout=TIMEOUT_S)


def _as_super_user(broker: AuthzBroker) -> KafkaAdmin:
    return KafkaAdmin(broker.sasl_bootstrap, broker.client_properties("admin"), timeout_s=TIMEOUT_S)


def test_alice_without_acls_is_denied_create_with_an_actionable_error(
    authz_broker: AuthzBroker, topic_name: str
) -> None:
    password = authz_broker.passwords["alice"]
    with KafkaAdmin(
        authz_broker.sasl_bootstrap, authz_broker.client_properties("alice"), timeout_s=TIMEOUT_S
    ) as alice:
        alice.ping()  # she is authenticated: what follows is about ACLs only
        with pytest.raises(KafkaAuthorizationError) as info:  # an answer: a time-out is not this
            alice.create_topic(topic_name, 1, 1)
        with pytest.raises(KafkaAuthorizationError, match="User:alice CREATE"):
            alice.create_topic(topic_name, 1, 1, validate_only=True)
    error = info.value
    assert topic_name in str(error)
    assert "CREATE" in str(error)
    assert "User:alice" in str(error)
    assert error.hint is not None
    assert f"grant CREATE on topic '{topic_name}' to User:alice" in error.hint
    assert "properties.sasl" in error.hint
    assert error.exit_code == EXIT_FAILURE
    assert password not in _all_text(error)
    with _as_super_user(authz_broker) as admin:
        assert admin.describe_topic(topic_name) is None  # nothing was created


def test_alice_via_flink_jaas_config_gets_the_same_error_and_no_password(
    authz_broker: AuthzBroker, topic_name: str
) -> None:
    password = authz_broker.passwords["alice"]
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="alice" password="{password}";',
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    with KafkaAdmin(authz_broker.sasl_bootstrap, props, timeout_s=TIMEOUT_S) as alice:
        assert alice.ignored_properties == ("key.deserializer",)
        with pytest.raises(KafkaAuthorizationError, match="User:alice CREATE") as info:
            alice.create_topic(topic_name, 1, 1)
    assert password not in _all_text(info.value)


def test_alice_denied_describe_and_delete_of_an_existing_topic(
    authz_broker: AuthzBroker, topic_name: str
) -> None:
    with _as_super_user(authz_broker) as admin:
        admin.create_topic(topic_name, 1, 1)
        try:
            with KafkaAdmin(
                authz_broker.sasl_bootstrap,
                authz_broker.client_properties("alice"),
                timeout_s=TIMEOUT_S,
            ) as alice:
                with pytest.raises(KafkaAuthorizationError) as described:
                    alice.describe_topic(topic_name)
                assert f"User:alice DESCRIBE on topic '{topic_name}'" in str(described.value)
                # one error names every ACL the call needs, not one per attempt
                assert f"grant DESCRIBE and DESCRIBE_CONFIGS on topic '{topic_name}'" in (
                    described.value.hint or ""
                )
                with pytest.raises(KafkaAuthorizationError) as deleted:
                    alice.delete_topic(topic_name)
                assert f"User:alice DELETE on topic '{topic_name}'" in str(deleted.value)
                # a change the broker only validates needs the same ACL as the change itself
                with pytest.raises(KafkaAuthorizationError) as checked:
                    alice.alter_topic_configs(
                        topic_name, {"retention.ms": "1000"}, validate_only=True
                    )
                assert f"User:alice ALTER_CONFIGS on topic '{topic_name}'" in str(checked.value)
                with pytest.raises(KafkaAuthorizationError, match="User:alice DESCRIBE"):
                    alice.start_offsets(topic_name)
                with pytest.raises(KafkaAuthorizationError) as altered:
                    alice.add_partitions(topic_name, 2)
                assert "grant DESCRIBE and ALTER" in (altered.value.hint or "")
                assert "--operation Describe --operation Alter" in (altered.value.hint or "")
            assert admin.describe_topic(topic_name) is not None  # still there
        finally:
            admin.delete_topic(topic_name)


def test_acls_granted_step_by_step(authz_broker: AuthzBroker, topic_name: str) -> None:
    """With DESCRIBE alone alice still lacks DESCRIBE_CONFIGS; CREATE lets her create."""
    _grant(authz_broker, topic_name, AclOperation.CREATE)
    _grant(authz_broker, topic_name, AclOperation.DESCRIBE)
    with KafkaAdmin(
        authz_broker.sasl_bootstrap, authz_broker.client_properties("alice"), timeout_s=TIMEOUT_S
    ) as alice:
        # ACLs reach the broker's authorizer through the metadata log: poll, with a deadline
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                alice.create_topic(topic_name, 2, 1)
                break
            except KafkaAuthorizationError:
                if time.monotonic() > deadline:
                    raise
        with pytest.raises(KafkaAuthorizationError, match="DESCRIBE_CONFIGS") as info:
            alice.describe_topic(topic_name)
        assert "--operation DescribeConfigs" in (info.value.hint or "")
        assert alice.end_offsets(topic_name) == {0: 0, 1: 0}  # DESCRIBE suffices for offsets
        assert alice.start_offsets(topic_name) == {0: 0, 1: 0}
    with _as_super_user(authz_broker) as admin:
        described = admin.describe_topic(topic_name)
        assert described is not None and described.partitions == 2
        admin.delete_topic(topic_name)


def test_wrong_password_is_an_authentication_error_at_once(authz_broker: AuthzBroker) -> None:
    wrong = "wrong-" + authz_broker.passwords["alice"][::-1]
    props = authz_broker.client_properties("alice", password=wrong)
    # a time-out never reached by a call that does not wait, however loaded the machine
    patient_s = 120.0
    with KafkaAdmin(authz_broker.sasl_bootstrap, props, timeout_s=patient_s) as alice:
        for call in (alice.ping, lambda: alice.create_topic("t-any", 1, 1)):
            started = time.monotonic()
            with pytest.raises(KafkaAuthenticationError) as info:
                call()
            # rejected credentials do not heal: fail at once instead of waiting out the deadline
            assert time.monotonic() - started < patient_s
            assert "rejected the client's credentials (User:alice)" in str(info.value)
            assert "sasl.password" in (info.value.hint or "")
            assert wrong not in _all_text(info.value)
            assert authz_broker.passwords["alice"] not in _all_text(info.value)


def test_the_super_user_can_do_everything(authz_broker: AuthzBroker, topic_name: str) -> None:
    with _as_super_user(authz_broker) as admin:
        admin.create_topic(topic_name, 1, 1, {"retention.ms": "60000"})
        info = admin.describe_topic(topic_name)
        assert info is not None and dict(info.configs) == {"retention.ms": "60000"}
        admin.delete_topic(topic_name)
        assert admin.describe_topic(topic_name) is None


def test_authz_broker_started_within_its_deadline(authz_broker: AuthzBroker) -> None:
    from tests.plugins.authz_broker import AUTHZ_START_TIMEOUT_S

    assert 0 < authz_broker.start_s < AUTHZ_START_TIMEOUT_S


def test_errors_are_logstore_errors(authz_broker: AuthzBroker, topic_name: str) -> None:
    # The CLI edge catches LogstoreError once: every admin error must be one.
    with (
        KafkaAdmin(
            authz_broker.sasl_bootstrap,
            authz_broker.client_properties("alice"),
            timeout_s=TIMEOUT_S,
        ) as alice,
        pytest.raises(LogstoreError),
    ):
        alice.delete_topic(topic_name)
