from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import (
    InvalidInputError,
    LogstoreError,
    TableConflictError,
    TableExistsError,
)
from logstore_cli.kafka.admin import TopicInfo
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.plan import Step
from logstore_cli.provision.service import Stores
from tests.unit.provision.fakes import MemDelta, MemTopics

WH = Path("/wh")
DDL = """
CREATE TABLE db.orders (
  id BIGINT, name STRING, amount DECIMAL(10,2),
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'log-store.enabled' = 'true',
  'log-store.topic' = 'orders_log',
  'log-store.address' = 'broker:9092',
  'log.system.partitions' = '3',
  'properties.sasl.jaas.config' = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";',
  'log.topic.retention.ms' = '3600000'
);
"""


def spec(ddl: str = DDL) -> TableSpec:
    return parse_ddl(ddl, "t.sql", ParseOptions())[0]


@pytest.fixture
def stores() -> Stores:
    return Stores(MemDelta(), MemTopics())


def _mem(stores: Stores) -> tuple[MemDelta, MemTopics]:
    assert isinstance(stores.delta, MemDelta) and isinstance(stores.topics, MemTopics)
    return stores.delta, stores.topics


def test_create_makes_topic_then_delta_with_self_describing_properties(stores: Stores) -> None:
    plans = service.create_tables([spec()], WH, stores, dry_run=False)
    delta, topics = _mem(stores)
    assert [p.delta for p in plans] == [Step.CREATE]
    assert topics.calls == ["create orders_log"]
    assert topics.topics["orders_log"] == TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    state = delta.tables[WH / "db" / "orders"]
    assert state.properties[wh.CDF] == "true"
    assert state.properties[wh.P_PRIMARY_KEY] == "id"
    assert state.properties["log-store.topic"] == "orders_log"
    # the secret is not stored anywhere in the table, only its key is remembered
    assert "properties.sasl.jaas.config" not in state.properties
    assert state.properties[wh.P_SECRET_KEYS] == "properties.sasl.jaas.config"
    assert "hunter2" not in repr(state.properties)
    assert [c["nullable"] for c in state.schema["fields"]] == [False, True, True]


def test_dry_run_touches_nothing(stores: Stores) -> None:
    plans = service.create_tables([spec()], WH, stores, dry_run=True)
    delta, topics = _mem(stores)
    assert plans[0].to_json()["topic"]["action"] == "create"
    assert delta.calls == [] and topics.calls == []


def test_existing_identical_table(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    with pytest.raises(TableExistsError, match="already exists") as info:
        service.create_tables([spec()], WH, stores)
    assert info.value.hint and "--if-not-exists" in info.value.hint
    plans = service.create_tables([spec()], WH, stores, if_not_exists=True)
    assert plans[0].is_noop
    ddl_flag = spec(DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    assert service.create_tables([ddl_flag], WH, stores)[0].is_noop
    assert _mem(stores)[1].calls == ["create orders_log"]


def test_existing_different_table_is_a_conflict_showing_the_difference(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    changed = spec(DDL.replace("name STRING", "name INT").replace("'3'", "'6'"))
    with pytest.raises(TableConflictError) as info:
        service.create_tables([changed], WH, stores, if_not_exists=True)
    detail = info.value.detail or ""
    assert "column name type: declared int, existing string" in detail
    assert "topic orders_log partitions: declared 6, existing 3" in detail


def test_precreated_identical_topic_is_used(stores: Stores) -> None:
    _, topics = _mem(stores)
    topics.topics["orders_log"] = TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    plans = service.create_tables([spec()], WH, stores)
    assert plans[0].topic is Step.EXISTS
    assert topics.calls == []


def test_delta_failure_removes_the_topic_this_call_created(stores: Stores) -> None:
    delta, topics = _mem(stores)
    delta.fail_create = LogstoreError("disk on fire")
    with pytest.raises(LogstoreError, match="disk on fire"):
        service.create_tables([spec()], WH, stores)
    assert topics.calls == ["create orders_log", "delete orders_log"]
    assert topics.topics == {} and delta.tables == {}


def test_delta_failure_keeps_a_topic_that_existed_before(stores: Stores) -> None:
    delta, topics = _mem(stores)
    topics.topics["orders_log"] = TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    delta.fail_create = LogstoreError("disk on fire")
    with pytest.raises(LogstoreError):
        service.create_tables([spec()], WH, stores)
    assert "orders_log" in topics.topics and topics.calls == []


def test_a_refused_table_stops_the_whole_input_before_anything_is_made(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    other = spec(DDL.replace("db.orders", "db.other").replace("orders_log", "other_log"))
    with pytest.raises(TableExistsError):
        service.create_tables([other, spec()], WH, stores)
    assert "other_log" not in topics.topics and WH / "db" / "other" not in delta.tables


def test_duplicate_table_in_input(stores: Stores) -> None:
    with pytest.raises(InvalidInputError, match="defined twice"):
        service.create_tables([spec(), spec()], WH, stores)


def test_location_and_or_replace_are_refused(stores: Stores) -> None:
    from dataclasses import replace

    with pytest.raises(InvalidInputError, match="LOCATION is not supported"):
        service.create_tables([replace(spec(), location="/x")], WH, stores)
    with pytest.raises(InvalidInputError, match="OR REPLACE"):
        service.create_tables([replace(spec(), or_replace=True)], WH, stores)


def _stored(stores: Stores, name: str = "db.orders") -> service.StoredTable:
    delta, _ = _mem(stores)
    db, table = wh.split_name(name)
    ref = wh.TableRef(db, table, WH / db / table)
    state = delta.tables[ref.path]
    return service.StoredTable(ref, state, service.spec_from_delta(ref, state, None))


def test_spec_round_trips_through_delta_properties(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    back = _stored(stores).spec
    original = spec()
    assert back.columns == original.columns
    assert back.primary_key == ("id",)
    assert back.log_store is not None and original.log_store is not None
    assert back.log_store.topic == original.log_store.topic
    assert back.log_store.partitions == 3
    assert "sasl.jaas.config" not in back.log_store.client_properties


def test_alter_turns_log_store_off_and_on(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    off = service.alter_table(_stored(stores), stores, {"log-store.enabled": "false"}, [])
    assert off.topic == service.TopicChange("orders_log", "keep")
    assert "orders_log" in topics.topics
    assert (
        service.spec_from_delta(
            _stored(stores).ref, delta.tables[WH / "db" / "orders"], None
        ).log_store
        is None
    )

    topics.topics.clear()
    on = service.alter_table(_stored(stores), stores, {"log-store.enabled": "true"}, [])
    assert on.topic and on.topic.action == "create"
    assert topics.topics["orders_log"].partitions == 3

    grown = service.alter_table(_stored(stores), stores, {"log.system.partitions": "5"}, [])
    assert grown.topic and grown.topic.action == "add-partitions"
    assert topics.topics["orders_log"].partitions == 5
    with pytest.raises(TableConflictError, match="cannot reduce"):
        service.alter_table(_stored(stores), stores, {"log.system.partitions": "2"}, [])

    gone = service.alter_table(
        _stored(stores), stores, {}, ["log-store.enabled"], delete_topic=True
    )
    assert gone.topic == service.TopicChange("orders_log", "delete")
    assert "orders_log" not in topics.topics


def test_alter_changes_topic_configs_of_an_existing_topic(stores: Stores) -> None:
    _, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    result = service.alter_table(
        _stored(stores), stores, {"log.topic.cleanup.policy": "compact"}, ["log.topic.retention.ms"]
    )
    assert result.topic is not None
    assert result.topic.to_json() == {
        "name": "orders_log",
        "action": "exists",
        "partitions": 3,
        "replication": 1,
        "configs_set": {"cleanup.policy": "compact"},
        "configs_unset": ["retention.ms"],
    }
    assert topics.topics["orders_log"].configs == {"cleanup.policy": "compact"}
    # the same change again asks nothing of the topic
    again = service.alter_table(
        _stored(stores), stores, {"log.topic.cleanup.policy": "compact"}, []
    )
    assert again.topic is not None and not again.topic.configs_set
    assert topics.calls.count("alter-configs orders_log") == 1


def test_alter_refuses_bad_changes(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    with pytest.raises(InvalidInputError, match="secret"):
        service.alter_table(_stored(stores), stores, {"properties.sasl.password": "pw"}, [])
    with pytest.raises(InvalidInputError, match="managed by logstore"):
        service.alter_table(_stored(stores), stores, {"logstore.primary-key": "name"}, [])
    with pytest.raises(InvalidInputError, match="not a property"):
        service.alter_table(_stored(stores), stores, {}, ["no.such.key"])
    with pytest.raises(LogstoreError):  # validated like DDL
        service.alter_table(_stored(stores), stores, {"log.consistency": "sometimes"}, [])
    version = _mem(stores)[0].tables[WH / "db" / "orders"].version
    assert version == 0  # nothing was applied


def test_drop_with_topic_and_unreachable_broker_keeps_table(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topics.unreachable = True
    with pytest.raises(LogstoreError, match="cannot reach Kafka"):
        service.drop_table(_stored(stores), stores, delete_topic=True)
    assert WH / "db" / "orders" in delta.tables
    topics.unreachable = False
    result = service.drop_table(_stored(stores), stores, delete_topic=True)
    assert result["topic"] == {"name": "orders_log", "deleted": True}
    assert delta.tables == {} and topics.topics == {}


def test_describe_redacts_and_reports_offsets(stores: Stores) -> None:
    _, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topics.offsets["orders_log"] = {0: 5, 1: 0, 2: 7}
    d = service.describe_table(_stored(stores), stores.topics)
    assert d["topic"]["partitions"] == [
        {"partition": 0, "end_offset": 5},
        {"partition": 1, "end_offset": 0},
        {"partition": 2, "end_offset": 7},
    ]
    assert d["secret_keys_not_stored"] == ["properties.sasl.jaas.config"]
    assert "hunter2" not in repr(d)
    topics.unreachable = True
    d = service.describe_table(_stored(stores), stores.topics)
    assert d["topic"]["error"].startswith("cannot reach Kafka")
