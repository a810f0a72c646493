"""Client properties written for Java/Flink clients -> librdkafka settings, without leaking secrets.

No broker: constructing a confluent-kafka client only validates the configuration (it may try to
connect to 127.0.0.1:1 in the background, which nothing answers).
"""

from __future__ import annotations

import logging
import re

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from logstore_cli.errors import EXIT_INVALID_INPUT, ConfigError, TopicSpecError
from logstore_cli.kafka import admin as kadmin
from logstore_cli.kafka.admin import (
    JAVA_ONLY_KEYS,
    KafkaAdmin,
    librdkafka_config,
)
from logstore_cli.model import is_secret_key, redact

BOOT = "127.0.0.1:1"  # nothing listens on port 1
SECRET = "Pa55-w0rd-never-shown"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def _all_text(exc: BaseException) -> str:
    """Everything a user or a log could see of an error."""
    parts = [str(exc), repr(exc), *map(str, exc.args)]
    parts += [str(getattr(exc, name, "")) for name in ("message", "hint", "detail")]
    return "\n".join(parts)


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("tests.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def test_librdkafka_settings_pass_through_and_bootstrap_is_set() -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "client.id": "logstore",
        "group.id": "flink-group",  # a consumer setting, but a librdkafka one: kept
        "acks": "all",
    }
    conf, ignored = librdkafka_config("b1:9092,b2:9092", props)
    assert conf == {"bootstrap.servers": "b1:9092,b2:9092", **props}
    assert ignored == []


def test_bootstrap_argument_wins_over_the_property() -> None:
    conf, ignored = librdkafka_config("a:9092", {"bootstrap.servers": "a:9092"})
    assert conf == {"bootstrap.servers": "a:9092"} and ignored == []  # same value: nothing to say
    conf, ignored = librdkafka_config("a:9092", {"bootstrap.servers": "elsewhere:9092"})
    assert conf == {"bootstrap.servers": "a:9092"}
    assert ignored == ["bootstrap.servers"]


def test_plain_jaas_becomes_username_and_password() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": _jaas(PLAIN, username="alice", password=SECRET),
    }
    conf, ignored = librdkafka_config(BOOT, props)
    assert "sasl.jaas.config" not in conf
    assert conf["sasl.username"] == "alice"
    assert conf["sasl.password"] == SECRET
    assert conf["sasl.mechanism"] == "PLAIN"  # the only mechanism PlainLoginModule serves
    assert ignored == []


def test_scram_jaas_keeps_the_declared_mechanism() -> None:
    props = {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": _jaas(SCRAM, username="bob", password=SECRET),
    }
    conf, _ = librdkafka_config(BOOT, props)
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("bob", SECRET)


def test_scram_jaas_without_mechanism_is_a_clear_error_without_the_secret() -> None:
    with pytest.raises(ConfigError) as info:
        librdkafka_config(BOOT, {"sasl.jaas.config": _jaas(SCRAM, username="bob", password=SECRET)})
    assert "SCRAM-SHA-256 or SCRAM-SHA-512" in (info.value.hint or "")
    assert info.value.exit_code == EXIT_INVALID_INPUT
    assert SECRET not in _all_text(info.value)


def test_jaas_module_and_mechanism_must_agree() -> None:
    props = {
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": _jaas(PLAIN, username="a", password=SECRET),
    }
    with pytest.raises(ConfigError, match=r"PlainLoginModule but sasl\.mechanism is SCRAM-SHA-256"):
        librdkafka_config(BOOT, props)


def test_explicit_sasl_settings_win_over_jaas() -> None:
    props = {
        "sasl.username": "explicit",
        "sasl.password": "explicit-pw",
        "sasl.jaas.config": _jaas(PLAIN, username="from-jaas", password=SECRET),
    }
    conf, _ = librdkafka_config(BOOT, props)
    assert (conf["sasl.username"], conf["sasl.password"]) == ("explicit", "explicit-pw")


def test_jaas_quoting_escapes_and_unquoted_values() -> None:
    jaas = f'{PLAIN}  required\n  username=alice\n  password="a\\"b\\\\c;d" ;'
    conf, _ = librdkafka_config(BOOT, {"sasl.jaas.config": jaas})
    assert conf["sasl.username"] == "alice"
    assert conf["sasl.password"] == 'a"b\\c;d'


@pytest.mark.parametrize(
    "jaas",
    [
        f'{PLAIN} username="u" password="{SECRET}";',  # no control flag
        f'{PLAIN} required username="u" password="{SECRET}',  # unterminated quote
        f'{PLAIN} required username="u" password="{SECRET}"; trailing junk',
        SECRET,
    ],
)
def test_malformed_jaas_is_rejected_without_echoing_it(jaas: str) -> None:
    with pytest.raises(ConfigError, match="not a JAAS entry") as info:
        librdkafka_config(BOOT, {"sasl.jaas.config": jaas})
    assert SECRET not in _all_text(info.value)


def test_jaas_missing_password_names_the_option() -> None:
    with pytest.raises(ConfigError, match="lacks the option\\(s\\) password"):
        librdkafka_config(BOOT, {"sasl.jaas.config": _jaas(PLAIN, username="u")})


def test_unsupported_login_module_names_the_module_not_the_secret() -> None:
    module = "com.example.CustomLoginModule"
    with pytest.raises(ConfigError, match=re.escape(module)) as info:
        librdkafka_config(BOOT, {"sasl.jaas.config": _jaas(module, token=SECRET)})
    assert SECRET not in _all_text(info.value)
    assert "sasl." in (info.value.hint or "")


def test_kerberos_and_oauth_jaas_translation() -> None:
    krb = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        'keyTab="/etc/kafka.keytab" principal="svc@EXAMPLE.COM" serviceName="kafka";'
    )
    conf, _ = librdkafka_config(BOOT, {"sasl.jaas.config": krb})
    assert conf["sasl.mechanism"] == "GSSAPI"
    assert conf["sasl.kerberos.keytab"] == "/etc/kafka.keytab"
    assert conf["sasl.kerberos.principal"] == "svc@EXAMPLE.COM"
    assert conf["sasl.kerberos.service.name"] == "kafka"

    oauth = _jaas(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        clientId="cid",
        clientSecret=SECRET,
        scope="kafka",
    )
    conf, _ = librdkafka_config(BOOT, {"sasl.jaas.config": oauth})
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    assert conf["sasl.oauthbearer.method"] == "oidc"
    assert conf["sasl.oauthbearer.client.id"] == "cid"
    assert conf["sasl.oauthbearer.client.secret"] == SECRET
    assert conf["sasl.oauthbearer.scope"] == "kafka"


def test_java_only_keys_are_dropped_and_listed() -> None:
    props = {
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "ssl.truststore.location": "/etc/truststore.jks",
        "ssl.truststore.password": SECRET,
        "com.example.custom.class": "com.example.Foo",  # any key naming a Java class
        "partition.discovery.interval.ms": "10000",  # a Flink connector option
        "group.id": "g",
        "client.id": "c",
    }
    conf, ignored = librdkafka_config(BOOT, props)
    assert sorted(ignored) == sorted(set(props) - {"group.id", "client.id"})
    assert conf == {"bootstrap.servers": BOOT, "group.id": "g", "client.id": "c"}


def test_java_spellings_of_values_are_translated() -> None:
    conf, ignored = librdkafka_config(
        BOOT,
        {
            "ssl.endpoint.identification.algorithm": "",  # Java: empty disables the check
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        },
    )
    assert conf["ssl.endpoint.identification.algorithm"] == "none"
    assert conf["partition.assignment.strategy"] == "range,cooperative-sticky"
    assert ignored == []
    _, ignored = librdkafka_config(
        BOOT, {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"}
    )
    assert ignored == ["partition.assignment.strategy"]  # no librdkafka equivalent


def test_secret_keys_are_recognised_and_redacted() -> None:
    for key in (
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "sasl.oauthbearer.client.secret",
        "ssl.key.pem",
        "sasl.oauthbearer.config",
    ):
        assert is_secret_key(key), key
    for key in ("sasl.username", "security.protocol", "bootstrap.servers", "ssl.ca.location"):
        assert not is_secret_key(key), key
    shown = redact({"sasl.username": "alice", "sasl.password": SECRET})
    assert shown == {"sasl.username": "alice", "sasl.password": "***"}


@pytest.mark.parametrize("key", sorted(k for k in JAVA_ONLY_KEYS if "." in k))
def test_every_java_only_key_is_really_rejected_by_librdkafka(key: str) -> None:
    """The drop list is no guess: librdkafka itself refuses each key."""
    with pytest.raises(KafkaException, match=r"No such configuration property|not supported"):
        AdminClient({"bootstrap.servers": BOOT, "logger": _quiet_logger(), key: "1"})


def test_a_flink_style_property_set_is_accepted_by_librdkafka() -> None:
    flink_props = {
        "bootstrap.servers": BOOT,
        "group.id": "flink-consumer",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": _jaas(PLAIN, username="alice", password=SECRET),
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
    assert SECRET not in _all_text(info.value)
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
