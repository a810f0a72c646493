"""The table model: frozen, hashable, JSON in the documented shape, secrets never shown."""

from __future__ import annotations

import dataclasses

import pytest

from logstore_cli.model import (
    ChangelogMode,
    ColumnSpec,
    Consistency,
    FrozenMap,
    LogStoreSpec,
    TableSpec,
    is_secret_key,
)

pytestmark = pytest.mark.unit


def _log() -> LogStoreSpec:
    return LogStoreSpec(
        system="kafka",
        address="h:9092",
        topic="t",
        consistency=Consistency.EVENTUAL,
        changelog_mode=ChangelogMode.ALL_KINDS,
        partitions=1,
        replication=1,
        client_properties={"sasl.jaas.config": "password=hunter2", "acks": "all"},
    )


def _table() -> TableSpec:
    return TableSpec(
        database="db",
        table="t",
        columns=[ColumnSpec("id", "bigint", nullable=False), ColumnSpec("v", "string")],
        primary_key=["id"],
        using="delta",
        properties={"log-store.enabled": "true", "properties.ssl.key.password": "hunter2"},
        log_store=_log(),
    )


def test_frozen_and_hashable() -> None:
    t = _table()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.table = "x"  # type: ignore[misc]
    assert isinstance(t.columns, tuple) and isinstance(t.properties, FrozenMap)
    assert hash(t) == hash(_table()) and t == _table()
    with pytest.raises(TypeError):
        t.properties["x"] = "y"  # type: ignore[index]


def test_to_json_has_the_documented_keys() -> None:
    data = _table().to_json()
    assert list(data)[:8] == [
        "name",
        "database",
        "table",
        "columns",
        "primary_key",
        "using",
        "log_store",
        "properties",
    ]
    assert data["name"] == "db.t"
    assert data["columns"][0] == {
        "name": "id",
        "type": "bigint",
        "nullable": False,
        "comment": None,
    }
    log = data["log_store"]
    assert {
        "enabled",
        "system",
        "address",
        "topic",
        "consistency",
        "changelog_mode",
        "partitions",
        "replication",
        "client_properties",
    } <= set(log)
    assert log["consistency"] == "eventual" and log["client_properties"]["acks"] == "all"


def test_secrets_redacted_in_json_and_repr() -> None:
    t = _table()
    assert "hunter2" not in str(t.to_json())
    assert "hunter2" not in repr(t)
    assert t.properties["properties.ssl.key.password"] == "hunter2"  # the model keeps raw values


def test_names() -> None:
    assert dataclasses.replace(_table(), database=None).name == "t"
    assert dataclasses.replace(_table(), catalog="c").name == "c.db.t"
    assert _table().column("ID") == ColumnSpec("id", "bigint", nullable=False)


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.jaas.config", True),
        ("ssl.truststore.password", True),
        ("ssl.key.password", True),
        ("ssl.keystore.key", True),
        ("fs.s3a.access.key", True),
        ("sasl.oauthbearer.client.secret", True),
        ("api_token", True),
        ("log.key.format", False),
        ("key.serializer", False),
        ("ssl.keystore.location", False),
        ("primary_key_columns", False),
        ("kafka.topic", False),
    ],
)
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret
