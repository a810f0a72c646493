"""Amoro's Pulsar log store in DDL (issue 23): ``log-store.type`` = ``pulsar``, its service URL,
its topic names (short or full) and what a Pulsar topic cannot take, in both DDL shapes."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.ddl.properties import check_properties, pulsar_retention
from logstore_cli.errors import DDLError

pytestmark = pytest.mark.unit

# Amoro's documented Pulsar log store, in Spark SQL and in Flink SQL.
SPARK = """CREATE TABLE db.orders (
  id BIGINT,
  amount DOUBLE,
  PRIMARY KEY (id)
) USING delta
TBLPROPERTIES (
  'log-store.enabled' = 'true',
  'log-store.type' = 'pulsar',
  'log-store.address' = {address},
  'log-store.topic' = {topic}{extra}
);"""
FLINK = """CREATE TABLE db.orders (
  id BIGINT,
  amount DOUBLE,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'log-store.enabled' = 'true',
  'log-store.type' = 'pulsar',
  'log-store.address' = {address},
  'log-store.topic' = {topic}{extra}
);"""
SHAPES = pytest.mark.parametrize("shape", [SPARK, FLINK], ids=["spark", "flink"])


def ddl(
    shape: str,
    address: str = "pulsar://127.0.0.1:6650",
    topic: str = "orders",
    extra: str = "",
) -> str:
    return shape.format(address=f"'{address}'", topic=f"'{topic}'", extra=extra)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of ``text`` holding ``needle`` (the shapes differ in their head)."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def errors(text: str) -> list[tuple[int | None, int | None, str]]:
    # A Kafka default must never stand in for anything of a Pulsar log store.
    with pytest.raises(DDLError) as info:
        parse_ddl(text, "t.sql", ParseOptions(default_bootstrap_servers="kafka:9092"))
    return [(d.line, d.col, d.message) for d in info.value.errors]


@SHAPES
def test_amoro_pulsar_ddl_gives_a_pulsar_log_store(shape: str) -> None:
    (table,) = parse_ddl(ddl(shape), options=ParseOptions(default_bootstrap_servers="k:9092"))
    log = table.log_store
    assert log is not None
    assert log.system == "pulsar"
    assert log.address == "pulsar://127.0.0.1:6650"
    assert log.topic == "persistent://public/default/orders"  # a short name: public/default
    assert table.to_json()["log_store"]["system"] == "pulsar"


@SHAPES
def test_full_topic_name_and_several_hosts(shape: str) -> None:
    text = ddl(shape, "pulsar://p1:6650, p2:6651", "persistent://shop/eu/orders.v2")
    (table,) = parse_ddl(text)
    assert table.log_store is not None
    assert table.log_store.address == "pulsar://p1:6650,p2:6651"
    assert table.log_store.topic == "persistent://shop/eu/orders.v2"


def test_kafka_stays_the_default_system() -> None:
    (table,) = parse_ddl(
        "CREATE TABLE t (a INT) WITH ('log-store.enabled' = 'true', 'log-store.topic' = 't', "
        "'log-store.address' = 'h:9092');"
    )
    assert table.log_store is not None and table.log_store.system == "kafka"


@SHAPES
@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1:6650",
        "http://127.0.0.1:8080",
        "pulsar://host",
        "pulsar://h:0",
        "pulsar+ssl://h:6651",
    ],
)
def test_a_bad_service_url_is_an_error_at_its_value(shape: str, address: str) -> None:
    text = ddl(shape, address)
    ((line, col, message),) = errors(text)
    assert (line, col) == (line_of(text, "log-store.address"), 25)  # at the value
    assert message.startswith(f"invalid Pulsar service URL '{address}' in 'log-store.address'")
    assert "pulsar://host:port[,host:port…]" in message


def test_a_pulsar_table_needs_its_address() -> None:
    text = (
        "CREATE TABLE t (a INT) WITH ('log-store.enabled' = 'true', "
        "'log-store.type' = 'pulsar', 'log-store.topic' = 't');"
    )
    ((_, _, message),) = errors(text)
    assert "no Pulsar service URL is set" in message
    assert "'log-store.address' = 'pulsar://host:6650'" in message


def test_a_pulsar_url_on_a_kafka_table_says_to_set_the_type() -> None:
    text = (
        "CREATE TABLE t (a INT) WITH ('log-store.enabled' = 'true', "
        "'log-store.address' = 'pulsar://h:6650', 'log-store.topic' = 't');"
    )
    ((line, col, message),) = errors(text)
    assert (line, col) == (1, 82)
    assert "is a Pulsar service URL, but the log store is Kafka" in message
    assert "'log-store.type' = 'pulsar'" in message


@SHAPES
@pytest.mark.parametrize(
    ("topic", "said"),
    [
        ("a/b", "invalid Pulsar topic name 'a/b'"),
        ("non-persistent://public/default/t", "is not persistent"),
        ("orders-partition-0", "names one partition of a topic"),
        ("bad topic", "invalid Pulsar topic name 'bad topic'"),
    ],
)
def test_a_bad_topic_is_an_error_at_its_value(shape: str, topic: str, said: str) -> None:
    text = ddl(shape, topic=topic)
    ((line, col, message),) = errors(text)
    assert (line, col) == (line_of(text, "log-store.topic"), 23)
    assert said in message and "'log-store.topic'" in message


@SHAPES
def test_what_a_pulsar_topic_cannot_take(shape: str) -> None:
    extra = (
        ",\n  'log.system.replication' = '3',\n  'log.topic.cleanup.policy' = 'compact',"
        "\n  'log.topic.retention.ms' = '90000'"
    )
    text = ddl(shape, extra=extra)
    found = errors(text)
    assert [(line, col) for line, col, _ in found] == [
        (line_of(text, "replication"), 3),
        (line_of(text, "cleanup"), 3),
        (line_of(text, "retention.ms"), 30),
    ]
    assert "does not apply to a Pulsar log store" in found[0][2]
    assert "a Pulsar topic takes only 'log.topic.retention.ms' and" in found[1][2]
    assert "whole number of minutes" in found[2][2]


def test_paimon_and_amoro_must_agree_on_the_system() -> None:
    text = (
        "CREATE TABLE t (a INT) WITH ('log.system' = 'kafka', 'log-store.type' = 'pulsar', "
        "'log-store.address' = 'pulsar://h:6650', 'log-store.topic' = 't');"
    )
    messages = [m for _, _, m in errors(text)]
    assert any("contradicts 'log.system' = 'kafka'" in m for m in messages), messages


def test_kafka_client_settings_on_pulsar_are_a_warning() -> None:
    spec, problems = check_properties(
        {
            "log-store.enabled": "true",
            "log-store.type": "pulsar",
            "log-store.address": "pulsar://h:6650",
            "log-store.topic": "t",
            "properties.acks": "all",
        }
    )
    assert spec is not None
    assert [(p.severity, p.key) for p in problems] == [("warning", "properties.acks")]


def test_pulsar_retention_in_pulsar_units() -> None:
    assert pulsar_retention({}) == (7 * 24 * 60, -1)  # Kafka's defaults, never Pulsar's
    assert pulsar_retention({"retention.ms": "3600000", "retention.bytes": "2097152"}) == (60, 2)
    assert pulsar_retention({"retention.ms": "-1", "retention.bytes": "-1"}) == (-1, -1)
