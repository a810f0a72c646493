"""Provisioning against the real broker and real delta-spark, read back by delta-rs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from logstore_cli.catalog import warehouse as wh
from logstore_cli.config import KafkaConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import LogstoreError, TableConflictError
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
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
def stores(spark: SparkSession) -> Iterator[Stores]:
    topics = KafkaTopicStore(KafkaConfig(timeout_s=15))
    yield Stores(SparkDeltaStore(lambda: spark), topics)  # the shared session is not closed here
    topics.close()


def _stored(warehouse: Path, name: str) -> service.StoredTable:
    return service.load_table(warehouse, name)


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

    d = service.describe_table(_stored(tmp_path, "shop.orders"), stores.topics)
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

    result = service.alter_table(
        _stored(tmp_path, "shop.orders"), stores,
        {"log.system.partitions": "4", "log.consistency": "eventual",
         "log.topic.retention.ms": "7200000"}, [],
    )  # fmt: skip
    assert result.topic and result.topic.action == "add-partitions"
    assert DeltaTable(str(path)).metadata().configuration["log.system.partitions"] == "4"
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and info.partitions == 4
        assert info.configs.get("retention.ms") == "7200000"

    service.alter_table(
        _stored(tmp_path, "shop.orders"), stores, {}, ["log.consistency", "log.topic.retention.ms"]
    )
    assert "log.consistency" not in DeltaTable(str(path)).metadata().configuration
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        info = admin.describe_topic(topic_name)
        assert info is not None and "retention.ms" not in info.configs

    rows = service.list_tables(tmp_path)
    assert [r["name"] for r in rows] == ["shop.orders"]
    assert rows[0]["log_store"]["topic"] == topic_name

    service.drop_table(_stored(tmp_path, "shop.orders"), stores, delete_topic=True)
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
    stores = Stores(FailingDelta(lambda: spark), topics)
    try:
        with pytest.raises(LogstoreError, match="injected failure"):
            service.create_tables([_spec(topic_name, kafka_bootstrap)], tmp_path, stores)
    finally:
        topics.close()
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        assert admin.describe_topic(topic_name) is None
    assert wh.list_tables(tmp_path) == []
