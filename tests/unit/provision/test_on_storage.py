"""provision/on_storage.py on a LocalStorage warehouse with in-memory topics: the same order as a
local warehouse (refusals before any change), what needs Spark refused with exit 2 and nothing
written, the topic undone when the Delta create fails. The S3 runs are tests/e2e/test_remote_tables_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import load_table_on
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import EXIT_INVALID_INPUT, InvalidInputError, LogstoreError
from logstore_cli.model import ColumnSpec, TableSpec
from logstore_cli.provision import on_storage
from logstore_cli.storage.local import LocalStorage
from tests.unit.provision.fakes import MemTopics

LOGGED = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id) NOT ENFORCED) WITH "
    "('log.system' = 'kafka', 'kafka.topic' = 'orders', 'kafka.bootstrap.servers' = 'h:9092')"
)


def _specs(ddl: str) -> list[TableSpec]:
    return parse_ddl(ddl, "<t>", ParseOptions(default_bootstrap_servers="h:9092"))


def _log(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "shop" / "orders" / "_delta_log").glob("*.json"))


def test_create_then_alter_and_add_a_column(tmp_path: Path) -> None:
    warehouse, topics = LocalStorage(tmp_path), MemTopics()
    plans = on_storage.create_tables_on(_specs(LOGGED), warehouse, topics)
    assert plans[0].path == f"{tmp_path}/shop/orders" and "orders" in topics.topics
    stored = load_table_on(warehouse, "shop.orders", default_bootstrap="h:9092")
    on_storage.alter_table_on(
        stored, topics, {"owner": "a"}, [], warehouse=warehouse,
        add_columns=[ColumnSpec("note", "string")],
    )  # fmt: skip
    again = load_table_on(warehouse, "shop.orders", default_bootstrap="h:9092")
    assert again.state.version == 2 and again.spec.properties["owner"] == "a"
    assert [c.name for c in again.spec.columns] == ["id", "qty", "note"]


def test_a_second_table_on_the_same_topic_is_refused_before_anything(tmp_path: Path) -> None:
    warehouse, topics = LocalStorage(tmp_path), MemTopics()
    on_storage.create_tables_on(_specs(LOGGED), warehouse, topics)
    calls = list(topics.calls)
    with pytest.raises(LogstoreError, match=r"shop\.orders"):
        on_storage.create_tables_on(
            _specs(LOGGED.replace("shop.orders", "shop.copy")), warehouse, topics
        )
    assert topics.calls == calls and not (tmp_path / "shop" / "copy").exists()


def test_what_needs_spark_is_refused_before_any_change(tmp_path: Path) -> None:
    warehouse, topics = LocalStorage(tmp_path), MemTopics()
    with pytest.raises(InvalidInputError, match="needs Spark") as info:
        on_storage.create_tables_on(
            _specs(LOGGED.replace(") WITH (", ") WITH ('delta.enableDeletionVectors' = 'true', ")),
            warehouse, topics,
        )  # fmt: skip
    assert info.value.exit_code == EXIT_INVALID_INPUT and "stage 2b" in info.value.message
    assert topics.topics == {} and not (tmp_path / "shop").exists()
    with pytest.raises(InvalidInputError, match="needs Spark"):
        on_storage.create_tables_on(
            _specs(LOGGED), warehouse, topics,
            spark_defaults=["spark.databricks.delta.properties.defaults.appendOnly"],
        )  # fmt: skip
    assert topics.topics == {}

    on_storage.create_tables_on(_specs(LOGGED), warehouse, topics)
    stored = load_table_on(warehouse, "shop.orders", default_bootstrap="h:9092")
    with pytest.raises(InvalidInputError, match="type widening"):
        on_storage.alter_table_on(
            stored, topics, {}, [], warehouse=warehouse,
            widen_columns=[ColumnSpec("qty", "bigint")],
        )  # fmt: skip
    assert _log(tmp_path) == ["00000000000000000000.json"]


def test_a_failed_delta_create_removes_the_topic_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from logstore_cli.provision import delta_log

    def fail(*_: object) -> None:
        raise LogstoreError("the store said no")

    monkeypatch.setattr(delta_log, "create_on", fail)
    topics = MemTopics()
    with pytest.raises(LogstoreError, match="the store said no"):
        on_storage.create_tables_on(_specs(LOGGED), LocalStorage(tmp_path), topics)
    assert topics.calls == ["validate create orders", "create orders", "delete orders"]
    assert wh.list_tables_on(LocalStorage(tmp_path)) == []
