"""The table model: frozen, hashable, JSON in the documented shape, secrets never shown."""

from __future__ import annotations

import dataclasses

import pytest

from logstore_cli.model import (
    ChangelogMode,
    ColumnSpec,
    Consistency,
    FrozenMap,
    FrozenRecord,
    LogStoreSpec,
    TableSpec,
    edit_distance,
    is_secret_key,
    misspelt_secret_key,
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
        # near misses of secret keys are secrets too
        ("properties.sasl.jass.config", True),
        ("kafka.sasl.jaas.confg", True),
        ("sasl.oauthbaerer.config", True),
        ("kafka.ssl.key.pasword", True),
        ("properties.sasl.pasword", True),
        ("ssl.keystore.passwrod", True),
        ("ssl.truststore.passwd", True),
        ("client.secrte", True),
        ("client_secrets", True),
        ("api_tokn", True),
        ("my.credentals", True),
        ("sslpasword", True),
        # ... but not ordinary keys a typo away from a secret word
        ("passport.number", False),
        ("tests.passed", False),
        ("spark.jars", False),
        ("mistaken.setting", False),
        ("sasl.mechanism", False),
        ("sasl.kerberos.service.name", False),
        ("ssl.endpoint.identification.algorithm", False),
        ("transactional.id", False),
    ],
)
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("properties.sasl.jass.config", "properties.sasl.jaas.config"),
        ("kafka.ssl.key.pasword", "kafka.ssl.key.password"),
        ("properties.sasl.pasword", "properties.sasl.password"),
        ("kafka.sasl_jas_confg", "kafka.sasl.jaas.config"),
        ("Client.Secrte", "Client.secret"),
        ("sasl.jaas.config", None),  # spelt right
        ("client.secrets", None),  # a plural is no typo
        ("kafka.topic", None),
    ],
)
def test_misspelt_secret_key_names_the_key_meant(key: str, meant: str | None) -> None:
    assert misspelt_secret_key(key) == meant


def test_misspelt_secret_keys_are_redacted_and_not_stored() -> None:
    from logstore_cli.catalog.warehouse import stored_properties

    props = {"properties.sasl.jass.config": "hunter2", "kafka.ssl.truststore.passwrod": "hunter2"}
    table = dataclasses.replace(_table(), properties=props)
    assert "hunter2" not in str(table.to_json()) and "hunter2" not in repr(table)
    stored, left_out = stored_properties(table)
    assert "hunter2" not in str(stored)
    assert left_out == list(props)


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("abc", "abc", 0),
        ("abc", "acb", 1),  # a swap of neighbours is one edit
        ("jaas", "jass", 1),
        ("kitten", "sitting", 3),
        ("ca", "abc", 3),  # restricted: no edit of a swapped pair
        ("password", "passport", 2),
    ],
)
def test_edit_distance(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b, 5) == distance
    assert edit_distance(b, a, 5) == distance
    assert edit_distance(a, b, distance) == distance
    if distance:
        assert edit_distance(a, b, distance - 1) == distance  # beyond the limit: limit + 1


def test_secret_rule_is_cached() -> None:
    is_secret_key.cache_clear()
    for _ in range(3):
        is_secret_key("properties.sasl.jass.config")
    assert is_secret_key.cache_info().hits == 2


def _records() -> list[type[FrozenRecord]]:
    import logstore_cli.config  # noqa: F401  (its classes are FrozenRecords too)

    found: list[type[FrozenRecord]] = []
    todo = list(FrozenRecord.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__qualname__)


@pytest.mark.parametrize("cls", _records(), ids=lambda c: c.__qualname__)
def test_a_records_init_takes_and_sets_exactly_its_fields(cls: type[FrozenRecord]) -> None:
    """A FrozenRecord's ``__init__`` is written by hand (start-up, issue 20): a field added to the
    class but not to its ``__init__`` (or a default that differs) would pass mypy and fail only
    where the field is read. The signature is the dataclass's, and every field is set."""
    import inspect

    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == default or (f.default_factory is not dataclasses.MISSING), (p, f)
    assert "__init__" in vars(cls)  # its own, not a generated one
    src = inspect.getsource(cls.__init__)
    for f in fields:
        assert f'"{f.name}"' in src, f"{cls.__qualname__}.__init__ does not set {f.name}"
