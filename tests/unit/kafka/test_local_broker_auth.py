"""The local broker's optional SASL_PLAINTEXT listener and extra server properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.kafka import local_broker


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_default_properties_have_no_sasl(tmp_path: Path) -> None:
    props = _props(local_broker.server_properties(9092, 9093, tmp_path))
    assert not any("sasl" in key for key in props)
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"


def test_sasl_listener_with_plain_users(tmp_path: Path) -> None:
    text = local_broker.server_properties(
        9092, 9093, tmp_path, sasl_port=9094, sasl_plain_users={"admin": "a-pw", "alice": "b-pw"}
    )
    props = _props(text)
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094"
    )
    assert props["advertised.listeners"].endswith(",SASL_PLAINTEXT://127.0.0.1:9094")
    assert "SASL_PLAINTEXT:SASL_PLAINTEXT" in props["listener.security.protocol.map"]
    assert props["inter.broker.listener.name"] == "PLAINTEXT"  # broker traffic stays anonymous
    assert props["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == "PLAIN"
    jaas = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="a-pw" user_alice="b-pw";'
    )


def test_extra_properties_are_applied_last(tmp_path: Path) -> None:
    extra = {"super.users": "User:ANONYMOUS", "num.partitions": "3"}
    props = _props(local_broker.server_properties(1, 2, tmp_path, extra_properties=extra))
    assert props["super.users"] == "User:ANONYMOUS"
    assert props["num.partitions"] == "3"


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ({}, "at least one"),
        ({"bad user": "pw"}, "user name"),
        ({"alice": 'has"quote'}, "password"),
        ({"alice": "back\\slash"}, "password"),
        ({"alice": ""}, "password"),
    ],
)
def test_unsafe_users_are_refused(tmp_path: Path, users: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        local_broker.server_properties(1, 2, tmp_path, sasl_port=3, sasl_plain_users=users)


def test_multi_line_property_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one line"):
        local_broker.server_properties(1, 2, tmp_path, extra_properties={"a": "b\nc=d"})


def test_sasl_port_and_users_go_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="together"):
        local_broker.server_properties(1, 2, tmp_path, sasl_port=3)
