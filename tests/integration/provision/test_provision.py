"""Provisioning against the real broker and real delta-spark, read back by delta-rs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import StoredTable, describe_table, list_tables, load_table
from logstore_cli.config import KafkaConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import LogstoreError, TableConflictError
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from logstore_cli.provision.service import Stores


def _ddl(topic: str, bootstrap: str, table: str = "shop.orders") -> str:
    return f"""
    CREATE TABLE {table} (
      id BIGINT, customer STRING, amount DECIMAL(10,2), tags ARRAY<STRING>,
      PRIMARY KEY (id) NOT ENFORCED
    ) WITH (
      'log-store.enabled' = 'true',
      'log-store.topic' = '{topic}',
      'log-store.address' = '{bootstrap}',
      'log.system.partitions' = '2',
      'log-store.consistency-guarantee.enabled' = 'true'
    );
    """


def _spec(topic: str, bootstrap: str, table: str = "shop.orders") -> TableSpec:
    return parse_ddl(_ddl(topic, bootstrap, table), "t.sql", ParseOptions())[0]


@pytest.fixture
def stores(spark: SparkSession, tmp_path: Path) -> Iterator[Stores]:
    """The real stores on the warehouse ``tmp_path`` (the shared session is not closed here)."""
    topics = KafkaTopicStore(KafkaConfig(timeout_s=15))
    yield Stores(DeltaLogStore(tmp_path, SparkDeltaStore(tmp_path, lambda: spark)), topics)
    topics.close()


def _stored(warehouse: Path, name: str) -> StoredTable:
    return load_table(warehouse, name)


def _alter(warehouse: Path, stores: Stores, set_: dict[str, str], unset: list[str]) -> Any:
    return service.alter_table(
        _stored(warehouse, "shop.orders"), stores, set_, unset, warehouse=warehouse
    )


def test_create_describe_alter_drop(
    stores: Stores, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    spec = _spec(topic_name, kafka_bootstrap)
    service.create_tables([spec], tmp_path, stores)
    path = tmp_path / "shop" / "orders"

    # an independent Delta reader sees the schema, NOT NULL key, CDF and the DDL's properties
    dt = DeltaTable(str(path))
    fields = {f.name: f for f in dt.schema().fields}
    assert list(fields) == ["id", "customer", "amount", "tags"]
    assert fields["id"].nullable is False and fields["customer"].nullable is True
    conf = dt.metadata().configuration
    assert conf["delta.enableChangeDataFeed"] == "true"
    assert conf["log-store.topic"] == topic_name
    assert conf[wh.P_PRIMARY_KEY] == "id"

    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 2

    d = describe_table(_stored(tmp_path, "shop.orders"), stores.topics).to_json()
    assert d["delta"]["version"] == 0
    assert d["log_store"]["consistency"] == "eventual"
    assert [p["end_offset"] for p in d["topic"]["partitions"]] == [0, 0]

    # identical again: no-op with the flag; a different definition: conflict, nothing touched
    assert service.create_tables([spec], tmp_path, stores, if_not_exists=True)[0].is_noop
    changed = parse_ddl(
        _ddl(topic_name, kafka_bootstrap).replace("customer STRING", "customer INT"), "t.sql"
    )
    with pytest.raises(TableConflictError, match="differs"):
        service.create_tables(changed, tmp_path, stores, if_not_exists=True)

    result = _alter(
        tmp_path, stores,
        {"log.system.partitions": "4", "log.consistency": "eventual",
         "log.topic.retention.ms": "7200000"}, [],
    )  # fmt: skip
    assert result.topic and result.topic.action == "add-partitions"
    assert DeltaTable(str(path)).metadata().configuration["log.system.partitions"] == "4"
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 4
        assert info.configs.get("retention.ms") == "7200000"

    _alter(tmp_path, stores, {}, ["log.consistency", "log.topic.retention.ms"])
    assert "log.consistency" not in DeltaTable(str(path)).metadata().configuration
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and "retention.ms" not in info.configs

    rows = list_tables(tmp_path)
    assert [r.name for r in rows] == ["shop.orders"]
    assert rows[0].log_store is not None and rows[0].log_store.topic == topic_name

    stored = _stored(tmp_path, "shop.orders")
    service.drop_table(stored.ref, stored.spec, stores, warehouse=tmp_path, delete_topic=True)
    assert not path.exists()
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        assert admin.describe_topic(topic_name) is None


class FailingDelta(SparkDeltaStore):
    """The real store, failing at the Delta commit: a mid-way failure after the topic exists."""

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        raise LogstoreError("injected failure at the Delta step")


def test_failure_at_delta_step_removes_the_new_topic(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    topics = KafkaTopicStore(KafkaConfig(timeout_s=15))
    stores = Stores(FailingDelta(tmp_path, lambda: spark), topics)
    try:
        with pytest.raises(LogstoreError, match="injected failure"):
            service.create_tables([_spec(topic_name, kafka_bootstrap)], tmp_path, stores)
    finally:
        topics.close()
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        assert admin.describe_topic(topic_name) is None
    assert wh.list_tables(tmp_path) == []


def test_property_values_are_stored_exactly_as_given(
    stores: Stores, kafka_bootstrap: str, topic_name: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("SECPW", "s3cr3t-from-env")
    service.create_tables([_spec(topic_name, kafka_bootstrap)], tmp_path, stores)
    values = {
        "note.env": "${env:SECPW}",
        "note.home": "${env:HOME}/x",
        "note.var": "${spark.master}",
        "note.quotes": "it's a \\ back'slash \\' and \\\\u0041",
        "note.spaces": "  padded  ",
    }
    _alter(tmp_path, stores, values, [])
    conf = DeltaTable(str(tmp_path / "shop" / "orders")).metadata().configuration
    assert {k: conf[k] for k in values} == values
    assert "s3cr3t-from-env" not in repr(conf)


def test_create_over_an_interrupted_create_s_leftover(
    stores: Stores, tmp_path: Path, spark: SparkSession
) -> None:
    half = tmp_path / "shop" / "plain"
    (half / "_delta_log" / "_staged_commits").mkdir(parents=True)
    (half / "part-00000-orphan.parquet").write_bytes(b"PAR1")
    ddl = "CREATE TABLE shop.plain (id BIGINT) USING delta;"
    service.create_tables(parse_ddl(ddl, "t.sql"), tmp_path, stores)
    assert wh.has_committed_version(half)
    assert not (half / "part-00000-orphan.parquet").exists()


def test_a_topic_with_records_is_adopted_only_when_asked(
    stores: Stores, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic_name, 2, 1, {})
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(3):
        producer.produce(topic_name, value=b"old", partition=i % 2)
    assert producer.flush(15) == 0
    spec = _spec(topic_name, kafka_bootstrap)
    with pytest.raises(TableConflictError, match="holds 3 records"):
        service.create_tables([spec], tmp_path, stores)
    assert wh.list_tables(tmp_path) == []
    service.create_tables([spec], tmp_path, stores, adopt_topic=True)
    conf = DeltaTable(str(tmp_path / "shop" / "orders")).metadata().configuration
    assert conf[wh.P_ADOPTED_TOPIC] == '{"0":2,"1":1}'


def test_a_topic_config_the_broker_refuses_changes_nothing(
    stores: Stores, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    service.create_tables([_spec(topic_name, kafka_bootstrap)], tmp_path, stores)
    path = tmp_path / "shop" / "orders"
    with pytest.raises(LogstoreError, match="topic"):
        _alter(tmp_path, stores, {"log.topic.cleanup.policy": "sometimes"}, [])
    assert DeltaTable(str(path)).version() == 0
    with pytest.raises(LogstoreError):
        _alter(tmp_path, stores, {"log.system.partitions": "3", "log.topic.no.such": "1"}, [])
    assert DeltaTable(str(path)).version() == 0
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 2
