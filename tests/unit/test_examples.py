"""The examples shipped in configs/ stay valid."""

from __future__ import annotations

from pathlib import Path

from logstore_cli.ddl import ParseOptions, parse_ddl

CONFIGS = Path(__file__).parents[2] / "configs"


def test_demo_ddl_parses_both_vocabularies() -> None:
    tables = parse_ddl(
        (CONFIGS / "demo.sql").read_text(),
        "demo.sql",
        ParseOptions(default_bootstrap_servers="h:1"),
    )
    by_name = {t.name: t for t in tables}
    assert set(by_name) == {"demo.orders", "demo.users"}
    orders, users = by_name["demo.orders"], by_name["demo.users"]
    assert orders.log_store and orders.log_store.consistency.value == "eventual"
    assert orders.log_store.partitions == 3 and orders.log_store.address == "h:1"
    assert users.log_store and users.log_store.consistency.value == "committed"
    assert [c.type for c in users.columns] == [
        "int",
        "string",
        "array<string>",
        "struct<city:string,zip:string>",
    ]


def test_demo_pulsar_ddl_is_amoros_pulsar_table() -> None:
    """scripts/demo.sh --log pulsar replaces this address with its standalone's."""
    text = (CONFIGS / "demo-pulsar.sql").read_text()
    assert text.count("pulsar://127.0.0.1:6650") == 1
    (orders,) = parse_ddl(text, "demo-pulsar.sql", ParseOptions())
    assert orders.name == "demo.orders" and orders.log_store is not None
    assert orders.log_store.system == "pulsar"
    assert orders.log_store.address == "pulsar://127.0.0.1:6650"
    assert orders.log_store.partitions == 3
    assert orders.log_store.consistency.value == "eventual"


def test_paimon_example_writes_debezium_json() -> None:
    (table,) = parse_ddl(
        (CONFIGS / "paimon.sql").read_text(),
        "paimon.sql",
        ParseOptions(default_bootstrap_servers="h:1"),
    )
    assert table.name == "shop.orders" and table.log_store is not None
    assert table.log_store.data_format == "debezium-json"
    assert table.log_store.consistency.value == "committed"
    assert table.log_store.changelog_mode.value == "all-kinds"
