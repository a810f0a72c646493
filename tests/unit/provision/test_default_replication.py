"""A topic whose DDL sets no ``log.system.replication`` gets the cluster's default
(``default.replication.factor``); an explicit one is honoured; plans say which."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import TableConflictError
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.service import Stores
from tests.unit.provision.fakes import MemDelta, MemTopics

WH = Path("/wh")


def _spec(replication: str | None = None) -> TableSpec:
    extra = f", 'log.system.replication' = '{replication}'" if replication else ""
    ddl = (
        "CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        "'log-store.enabled' = 'true', 'log-store.topic' = 't_log', "
        f"'log-store.address' = 'b:9092', 'log.system.partitions' = '2'{extra});"
    )
    return parse_ddl(ddl, "t.sql", ParseOptions())[0]


def _stores(default_replication: int) -> tuple[Stores, MemTopics]:
    topics = MemTopics(default_replication=default_replication)
    return Stores(MemDelta(), topics), topics


def test_undeclared_replication_is_the_clusters_default() -> None:
    spec = _spec()
    assert spec.log_store is not None and spec.log_store.replication is None
    assert spec.log_store.to_json()["replication"] is None
    stores, topics = _stores(default_replication=3)
    dry = service.create_tables([spec], WH, stores, dry_run=True)
    assert dry[0].to_json()["topic"]["replication"] is None  # "broker default": not yet known
    service.create_tables([spec], WH, stores)
    assert topics.topics["t_log"] == TopicInfo("t_log", 2, 3, {})  # what the cluster chose


def test_an_existing_topic_matches_any_replication_and_plans_show_its_own() -> None:
    stores, topics = _stores(default_replication=3)
    service.create_tables([_spec()], WH, stores)
    plans = service.create_tables([_spec()], WH, stores, if_not_exists=True)
    assert plans[0].is_noop and plans[0].differences == ()
    assert plans[0].to_json()["topic"]["replication"] == 3  # the topic's real replication
    del topics


def test_declared_replication_is_honoured_and_compared() -> None:
    stores, topics = _stores(default_replication=3)
    service.create_tables([_spec("1")], WH, stores)
    assert topics.topics["t_log"].replication == 1
    with pytest.raises(TableConflictError) as info:
        service.create_tables([_spec("2")], WH, stores, if_not_exists=True)
    assert "replication" in str(info.value.message) + str(info.value.detail)
