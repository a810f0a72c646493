"""Client properties written for Java/Flink clients -> librdkafka settings, without leaking secrets.

The mapping is pure; librdkafka itself (a client constructed against 127.0.0.1:1, where nothing
answers) confirms that the keys it drops are really none of its settings.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from logstore_cli.errors import EXIT_INVALID_INPUT, ConfigError
from logstore_cli.kafka.client_config import (
    JAVA_ONLY_KEYS,
    bootstrap_addresses,
    client_principal,
    java_only_reason,
    librdkafka_config,
)
from logstore_cli.model import is_secret_key, redact
from tests.unit.kafka.secrets_helpers import BOOT, PLAIN, SCRAM, SECRET, all_text, jaas


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
        "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
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
        "sasl.jaas.config": jaas(SCRAM, username="bob", password=SECRET),
    }
    conf, _ = librdkafka_config(BOOT, props)
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("bob", SECRET)


def test_scram_jaas_without_mechanism_is_a_clear_error_without_the_secret() -> None:
    with pytest.raises(ConfigError) as info:
        librdkafka_config(BOOT, {"sasl.jaas.config": jaas(SCRAM, username="bob", password=SECRET)})
    assert "SCRAM-SHA-256 or SCRAM-SHA-512" in (info.value.hint or "")
    assert info.value.exit_code == EXIT_INVALID_INPUT
    assert SECRET not in all_text(info.value)


def test_jaas_module_and_mechanism_must_agree() -> None:
    props = {
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": jaas(PLAIN, username="a", password=SECRET),
    }
    with pytest.raises(ConfigError, match=r"PlainLoginModule but sasl\.mechanism is SCRAM-SHA-256"):
        librdkafka_config(BOOT, props)


def test_explicit_sasl_settings_win_over_jaas() -> None:
    props = {
        "sasl.username": "explicit",
        "sasl.password": "explicit-pw",
        "sasl.jaas.config": jaas(PLAIN, username="from-jaas", password=SECRET),
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
    assert SECRET not in all_text(info.value)


def test_jaas_missing_password_names_the_option() -> None:
    with pytest.raises(ConfigError, match="lacks the option\\(s\\) password"):
        librdkafka_config(BOOT, {"sasl.jaas.config": jaas(PLAIN, username="u")})


def test_unsupported_login_module_names_the_module_not_the_secret() -> None:
    module = "com.example.CustomLoginModule"
    with pytest.raises(ConfigError, match=re.escape(module)) as info:
        librdkafka_config(BOOT, {"sasl.jaas.config": jaas(module, token=SECRET)})
    assert SECRET not in all_text(info.value)
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

    oauth = jaas(
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
        conf: dict[str, Any] = {"bootstrap.servers": BOOT, "logger": _quiet_logger(), key: "1"}
        AdminClient(conf)


def test_java_only_reason_covers_listed_keys_and_class_names() -> None:
    assert java_only_reason("ssl.truststore.location") == JAVA_ONLY_KEYS["ssl.truststore.location"]
    assert "Java class" in (java_only_reason("com.example.my.partitioner.class") or "")
    assert java_only_reason("client.id") is None


@pytest.mark.parametrize(
    ("conf", "principal"),
    [
        ({}, "User:ANONYMOUS"),
        ({"security.protocol": "PLAINTEXT", "sasl.username": "ignored"}, "User:ANONYMOUS"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "al"},
            "User:al",
        ),
        (
            {
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "scram-sha-512",
                "sasl.username": "b",
            },
            "User:b",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.kerberos.principal": "svc@EXAMPLE.COM"},
            "the Kerberos principal svc@EXAMPLE.COM",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
            "the client's OAUTHBEARER principal",
        ),
        ({"security.protocol": "SSL"}, "the principal of the client's TLS certificate"),
    ],
)
def test_the_principal_named_in_errors_follows_the_configuration(
    conf: dict[str, str], principal: str
) -> None:
    assert client_principal(conf) == principal


def test_the_principal_comes_from_a_translated_jaas_entry_and_shows_no_password() -> None:
    conf, _ = librdkafka_config(
        BOOT,
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": jaas(PLAIN, username="alice", password=SECRET),
        },
    )
    assert client_principal(conf) == "User:alice"


@pytest.mark.parametrize(
    ("bootstrap", "addresses"),
    [
        ("127.0.0.1:9093", [("127.0.0.1", 9093)]),
        ("b1:9092, b2:9093,b3", [("b1", 9092), ("b2", 9093), ("b3", 9092)]),
        ("SASL_SSL://broker.example.com:9094", [("broker.example.com", 9094)]),
        ("[::1]:9095,[fe80::1]", [("::1", 9095), ("fe80::1", 9092)]),
        ("  ", []),
    ],
)
def test_bootstrap_addresses_are_read_as_librdkafka_reads_them(
    bootstrap: str, addresses: list[tuple[str, int]]
) -> None:
    assert bootstrap_addresses(bootstrap) == addresses
