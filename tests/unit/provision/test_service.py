from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import StoredTable, spec_from_delta
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import (
    BrokerError,
    InvalidInputError,
    LogstoreError,
    TableConflictError,
    TableExistsError,
    TopicInUseError,
    TopicSpecError,
)
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import ColumnSpec, TableSpec
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
    assert topics.calls == ["validate create orders_log", "create orders_log"]
    assert topics.topics["orders_log"] == TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    state = delta.states[WH / "db" / "orders"]
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
    # the broker is asked to validate the topic, nothing is changed
    assert delta.calls == [] and topics.calls == ["validate create orders_log"]
    assert topics.topics == {}


def test_existing_identical_table(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    with pytest.raises(TableExistsError, match="already exists") as info:
        service.create_tables([spec()], WH, stores)
    assert info.value.hint and "--if-not-exists" in info.value.hint
    plans = service.create_tables([spec()], WH, stores, if_not_exists=True)
    assert plans[0].is_noop
    ddl_flag = spec(DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    assert service.create_tables([ddl_flag], WH, stores)[0].is_noop
    assert _mem(stores)[1].calls == ["validate create orders_log", "create orders_log"]


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
    delta.fail["create"] = LogstoreError("disk on fire")
    with pytest.raises(LogstoreError, match="disk on fire"):
        service.create_tables([spec()], WH, stores)
    assert topics.calls == ["validate create orders_log", "create orders_log", "delete orders_log"]
    assert topics.topics == {} and delta.states == {}


def test_delta_failure_keeps_a_topic_that_existed_before(stores: Stores) -> None:
    delta, topics = _mem(stores)
    topics.topics["orders_log"] = TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    delta.fail["create"] = LogstoreError("disk on fire")
    with pytest.raises(LogstoreError):
        service.create_tables([spec()], WH, stores)
    assert "orders_log" in topics.topics and topics.calls == []


def test_a_refused_table_stops_the_whole_input_before_anything_is_made(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    other = spec(DDL.replace("db.orders", "db.other").replace("orders_log", "other_log"))
    with pytest.raises(TableExistsError):
        service.create_tables([other, spec()], WH, stores)
    assert "other_log" not in topics.topics and WH / "db" / "other" not in delta.states


def test_duplicate_table_in_input(stores: Stores) -> None:
    with pytest.raises(InvalidInputError, match="defined twice"):
        service.create_tables([spec(), spec()], WH, stores)


def test_location_and_or_replace_are_refused(stores: Stores) -> None:
    with pytest.raises(InvalidInputError, match="LOCATION is not supported"):
        service.create_tables([replace(spec(), location="/x")], WH, stores)
    with pytest.raises(InvalidInputError, match="OR REPLACE"):
        service.create_tables([replace(spec(), or_replace=True)], WH, stores)


def _stored(stores: Stores, name: str = "db.orders") -> StoredTable:
    delta, _ = _mem(stores)
    db, table = name.split(".")
    ref = wh.TableRef(db, table, WH / db / table)
    state = delta.states[ref.path]
    return StoredTable(ref, state, spec_from_delta(ref, state, None))


def _alter(stores: Stores, set_: dict[str, str], unset: list[str] | None = None, **kw: Any) -> Any:
    return service.alter_table(_stored(stores), stores, set_, unset or [], warehouse=WH, **kw)


def _drop(stores: Stores, name: str = "db.orders", **kw: Any) -> service.DropResult:
    stored = _stored(stores, name)
    return service.drop_table(stored.ref, stored.spec, stores, warehouse=WH, **kw)


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
    off = _alter(stores, {"log-store.enabled": "false"}, [])
    assert off.topic == service.TopicChange("orders_log", "keep")
    assert "orders_log" in topics.topics
    assert (
        spec_from_delta(_stored(stores).ref, delta.states[WH / "db" / "orders"], None).log_store
        is None
    )

    topics.topics.clear()
    on = _alter(stores, {"log-store.enabled": "true"}, [])
    assert on.topic and on.topic.action == "create"
    assert topics.topics["orders_log"].partitions == 3

    grown = _alter(stores, {"log.system.partitions": "5"}, [])
    assert grown.topic and grown.topic.action == "add-partitions"
    assert topics.topics["orders_log"].partitions == 5
    with pytest.raises(TableConflictError, match="cannot reduce"):
        _alter(stores, {"log.system.partitions": "2"}, [])

    gone = _alter(stores, {}, ["log-store.enabled"], delete_topic=True)
    assert gone.topic == service.TopicChange("orders_log", "delete")
    assert "orders_log" not in topics.topics


def test_alter_changes_topic_configs_of_an_existing_topic(stores: Stores) -> None:
    _, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    result = _alter(stores, {"log.topic.cleanup.policy": "compact"}, ["log.topic.retention.ms"])
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
    again = _alter(stores, {"log.topic.cleanup.policy": "compact"}, [])
    assert again.topic is None  # nothing about the topic changed
    assert topics.calls.count("alter-configs orders_log") == 1


def test_alter_refuses_bad_changes(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    with pytest.raises(InvalidInputError, match="secret"):
        _alter(stores, {"properties.sasl.password": "pw"}, [])
    with pytest.raises(InvalidInputError, match="managed by logstore"):
        _alter(stores, {"logstore.primary-key": "name"}, [])
    with pytest.raises(InvalidInputError, match="not a property"):
        _alter(stores, {}, ["no.such.key"])
    with pytest.raises(LogstoreError):  # validated like DDL
        _alter(stores, {"log.consistency": "sometimes"}, [])
    version = _mem(stores)[0].states[WH / "db" / "orders"].version
    assert version == 0  # nothing was applied


def test_alter_switches_the_log_format_only_while_the_topic_is_empty(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    empty = _alter(stores, {"log-store.data-format": "debezium-json"}, [])
    assert empty.topic is None
    assert _stored(stores).spec.log_store is not None
    assert _stored(stores).spec.log_store.data_format == "debezium-json"
    topics.offsets["orders_log"] = {0: 5, 1: 0, 2: 2}
    topics.starts["orders_log"] = {0: 1, 1: 0, 2: 2}
    version = delta.states[WH / "db" / "orders"].version
    with pytest.raises(TableConflictError, match=r"holds 4 record\(s\) in debezium-json") as info:
        _alter(stores, {"log-store.data-format": "json"}, [])
    assert info.value.exit_code == 1 and info.value.hint and "new empty topic" in info.value.hint
    assert delta.states[WH / "db" / "orders"].version == version  # nothing applied
    # records all gone (retention): the switch is allowed again
    topics.starts["orders_log"] = {0: 5, 1: 0, 2: 2}
    _alter(stores, {"log-store.data-format": "json"}, [])
    assert _stored(stores).spec.log_store.data_format == "json"  # type: ignore[union-attr]


def test_drop_with_topic_and_unreachable_broker_keeps_table(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topics.unreachable = True
    with pytest.raises(LogstoreError, match="cannot reach Kafka"):
        _drop(stores, delete_topic=True)
    assert WH / "db" / "orders" in delta.states
    topics.unreachable = False
    result = _drop(stores, delete_topic=True)
    assert result.to_json()["topic"] == {"name": "orders_log", "deleted": True}
    assert delta.states == {} and topics.topics == {}


# ------------------------------------------------------------------------ one topic, one table

OTHER = DDL.replace("db.orders", "db.other")


def test_create_validates_every_topic_with_the_broker_before_anything_is_made(
    stores: Stores,
) -> None:
    delta, topics = _mem(stores)
    topics.fail["validate create"] = TopicSpecError("bad topic config")
    with pytest.raises(TopicSpecError):
        service.create_tables([spec()], WH, stores)
    assert topics.topics == {} and delta.calls == []


def test_a_topic_another_table_uses_is_refused(stores: Stores) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    with pytest.raises(TopicInUseError, match=r"'orders_log' is the log of table 'db\.orders'"):
        service.create_tables([spec(OTHER)], WH, stores)
    with pytest.raises(TopicInUseError, match="is the log of table"):
        service.create_tables([spec(OTHER)], WH, stores, adopt_topic=True)
    assert WH / "db" / "other" not in delta.states


def test_one_topic_for_two_tables_of_one_input_is_refused(stores: Stores) -> None:
    with pytest.raises(TopicInUseError, match=r"db\.orders"):
        service.create_tables([spec(), spec(OTHER)], WH, stores)
    assert _mem(stores)[1].calls == []


def test_a_topic_holding_records_needs_adopt_topic_and_the_adoption_is_recorded(
    stores: Stores,
) -> None:
    delta, topics = _mem(stores)
    topics.topics["orders_log"] = TopicInfo("orders_log", 3, 1, {"retention.ms": "3600000"})
    topics.offsets["orders_log"] = {0: 4, 1: 0, 2: 2}
    topics.starts["orders_log"] = {0: 1, 1: 0, 2: 0}
    with pytest.raises(TableConflictError, match="holds 5 records") as info:
        service.create_tables([spec()], WH, stores)
    assert info.value.hint and "--adopt-topic" in info.value.hint
    assert delta.states == {}
    service.create_tables([spec()], WH, stores, adopt_topic=True)
    props = delta.states[WH / "db" / "orders"].properties
    assert props[wh.P_ADOPTED_TOPIC] == '{"0":4,"1":0,"2":2}'
    assert "orders_log" in topics.topics and not any("create" in c for c in topics.calls)


def test_an_orphan_topic_that_differs_says_how_to_fix_it(stores: Stores) -> None:
    _, topics = _mem(stores)
    topics.topics["orders_log"] = TopicInfo("orders_log", 1, 1, {})
    with pytest.raises(TableConflictError, match="used by no table") as info:
        service.create_tables([spec()], WH, stores)
    assert info.value.hint and "--delete --topic orders_log" in info.value.hint
    assert "partitions: declared 3, existing 1" in (info.value.detail or "")


def test_multi_table_create_failing_part_way_says_what_was_created(stores: Stores) -> None:
    delta, _ = _mem(stores)
    tables = [
        spec(DDL.replace("db.orders", f"db.t{i}").replace("orders_log", f"log{i}"))
        for i in range(3)
    ]
    original = delta.create

    def create_twice(path: Path, *args: Any) -> None:
        if path.name == "t1":
            raise LogstoreError("disk full")
        original(path, *args)

    delta.create = create_twice  # type: ignore[method-assign]
    with pytest.raises(LogstoreError, match="disk full") as info:
        service.create_tables(tables, WH, stores)
    assert "created: db.t0; not created: db.t1, db.t2" in (info.value.detail or "")


@pytest.mark.parametrize(
    ("change", "difference"),
    [
        (("name STRING,", ""), "column name: declared missing, existing string"),
        (("amount DECIMAL(10,2)", "amount DECIMAL(10,2), extra INT"), "column extra: declared int"),
        (("name STRING", "name STRING NOT NULL"), "column name nullability: declared NOT NULL"),
        (("PRIMARY KEY (id)", "PRIMARY KEY (id, name)"), "primary key: declared (id, name)"),
        ((") WITH (", ") PARTITIONED BY (name) WITH ("), "partitioning: declared (name)"),
        (("'3'", "'4'"), "topic orders_log partitions: declared 4, existing 3"),
        (("'log.system.partitions'", "'log.system.replication' = '3', 'log.system.partitions'"),
         "topic orders_log replication: declared 3, existing 1"),
        (("'3600000'", "'60000'"), "topic orders_log config retention.ms: declared 60000"),
    ],
)  # fmt: skip
def test_every_kind_of_difference_is_reported(
    stores: Stores, change: tuple[str, str], difference: str
) -> None:
    service.create_tables([spec()], WH, stores)
    assert change[0] in DDL
    with pytest.raises(TableConflictError) as info:
        service.create_tables([spec(DDL.replace(*change))], WH, stores, if_not_exists=True)
    assert difference in (info.value.detail or "")


# ------------------------------------------------------------------------------ alter write order


def test_a_delta_only_change_needs_no_broker(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topics.unreachable = True
    result = _alter(stores, {"owner": "team-a"}, [])
    assert result.topic is None
    assert delta.states[WH / "db" / "orders"].properties["owner"] == "team-a"


def test_a_topic_change_the_broker_refuses_changes_nothing(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topics.fail["validate alter-configs"] = TopicSpecError("unknown config bogus")
    with pytest.raises(TopicSpecError):
        _alter(stores, {"log.topic.bogus": "1"}, [])
    assert delta.states[WH / "db" / "orders"].version == 0
    assert topics.topics["orders_log"].configs == {"retention.ms": "3600000"}
    topics.fail = {"validate add-partitions": TopicSpecError("too many partitions")}
    with pytest.raises(TopicSpecError):
        _alter(stores, {"log.system.partitions": "99999"}, [])
    assert delta.states[WH / "db" / "orders"].version == 0


def test_a_failed_delta_change_removes_the_topic_it_created(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    _alter(stores, {"log-store.enabled": "false"}, [], delete_topic=True)
    delta.fail["alter"] = LogstoreError("Delta commit failed")
    with pytest.raises(LogstoreError, match="Delta commit failed") as info:
        _alter(stores, {"log-store.enabled": "true"}, [])
    assert "orders_log" not in topics.topics
    assert topics.calls[-2:] == ["create orders_log", "delete orders_log"]
    assert "nothing was changed" in (info.value.detail or "")


def test_a_failed_rollback_is_reported_exactly(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    _alter(stores, {"log-store.enabled": "false"}, [], delete_topic=True)
    delta.fail["alter"] = LogstoreError("Delta commit failed")
    topics.fail["delete"] = BrokerError("broker went away")
    with pytest.raises(LogstoreError, match="Delta commit failed") as info:
        _alter(stores, {"log-store.enabled": "true"}, [])
    detail = info.value.detail or ""
    assert "created topic 'orders_log' (undoing it failed: broker went away)" in detail


def test_a_topic_step_failing_after_the_delta_change_sets_the_properties_back(
    stores: Stores,
) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    path = WH / "db" / "orders"
    before = dict(delta.states[path].properties)
    topics.fail["alter-configs"] = BrokerError("lost the controller")
    with pytest.raises(BrokerError) as info:
        _alter(stores, {"log.system.partitions": "5", "log.topic.cleanup.policy": "compact"}, [])
    assert delta.states[path].properties == before  # set back
    detail = info.value.detail or ""
    assert "topic 'orders_log' now has 5 partitions (cannot be undone)" in detail
    assert "changed the properties" not in detail  # that one was undone


def test_managed_keys_cannot_be_changed_or_removed(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    for set_, unset in (
        ({}, ["logstore.primary-key"]),
        ({"logstore.name": "x"}, []),
        ({wh.CDF: "false"}, []),
        ({}, [wh.CDF]),
    ):
        with pytest.raises(InvalidInputError, match="managed by logstore"):
            _alter(stores, set_, unset)
    assert _mem(stores)[0].states[WH / "db" / "orders"].version == 0


def test_secret_values_are_refused_whatever_the_key(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    for key, value in (("properties.sasl.password", "pw"), ("note", "user password=hunter2")):
        with pytest.raises(InvalidInputError, match="secret"):
            _alter(stores, {key: value}, [])


def test_replication_of_an_existing_topic_is_not_changed(stores: Stores) -> None:
    service.create_tables([spec()], WH, stores)
    with pytest.raises(TableConflictError, match="replication 1"):
        _alter(stores, {"log.system.replication": "3"}, [])


def test_renaming_the_topic_says_what_happens_to_the_old_one(stores: Stores) -> None:
    _, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    kept = _alter(stores, {"log-store.topic": "orders_v2"}, [])
    assert kept.topic is not None
    assert (kept.topic.name, kept.topic.action) == ("orders_v2", "create")
    assert (kept.topic.old_topic, kept.topic.old_topic_action) == ("orders_log", "keep")
    assert "--delete-topic deletes it" in kept.topic.describe()[1]
    assert {"orders_log", "orders_v2"} <= set(topics.topics)
    gone = _alter(stores, {"log-store.topic": "orders_v3"}, [], delete_topic=True)
    assert gone.topic is not None and gone.topic.old_topic_action == "delete"
    assert "orders_v2" not in topics.topics and "orders_v3" in topics.topics


def test_alter_refuses_a_topic_another_table_uses(stores: Stores) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    service.create_tables([spec(OTHER.replace("orders_log", "other_log"))], WH, stores)
    with pytest.raises(TopicInUseError, match=r"'orders_log' is the log of table 'db\.orders'"):
        service.alter_table(
            _stored(stores, "db.other"), stores, {"log-store.topic": "orders_log"}, [],
            warehouse=WH,
        )  # fmt: skip
    assert delta.states[WH / "db" / "other"].version == 0


def _share_topic(stores: Stores) -> None:
    """Two tables on one topic, as an older logstore could leave them."""
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    state = delta.states[WH / "db" / "orders"]
    delta.states[WH / "db" / "other"] = state._replace(path=WH / "db" / "other")


def test_drop_never_deletes_a_topic_another_table_uses(stores: Stores) -> None:
    delta, topics = _mem(stores)
    _share_topic(stores)
    with pytest.raises(TopicInUseError, match=r"also the log of table 'db\.other'"):
        _drop(stores, delete_topic=True)
    assert WH / "db" / "orders" in delta.states and "orders_log" in topics.topics
    with pytest.raises(TopicInUseError, match=r"db\.other"):
        _alter(stores, {"log-store.enabled": "false"}, [], delete_topic=True)
    result = _drop(stores, delete_topic=False)
    assert result.topic is None and "orders_log" in topics.topics


def test_drop_of_an_uncommitted_leftover_needs_no_spec(stores: Stores) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    ref = wh.TableRef("db", "orders", WH / "db" / "orders", committed=False)
    with pytest.raises(InvalidInputError, match="its topic is unknown") as info:
        service.drop_table(ref, None, stores, warehouse=WH, delete_topic=True)
    assert info.value.hint == "drop it without --delete-topic"
    service.drop_table(ref, None, stores, warehouse=WH, delete_topic=False)
    assert delta.states == {}


# ------------------------------------------------------------------ a live writer (issue 18, item 8)


def _written(stores: Stores, tmp_path: Path, host: str = "elsewhere", ttl: float = 60.0) -> Any:
    """A table whose directory holds a writer lease (a job on ``host``: not judged by pid here)."""
    from logstore_cli.catalog.lease import Lease

    service.create_tables([spec()], tmp_path, stores)
    delta, _ = _mem(stores)
    path = tmp_path / "db" / "orders"
    path.mkdir(parents=True)
    lease = Lease.acquire(path, "ingest-7", ttl, host=host, pid=4242)
    ref = wh.TableRef("db", "orders", path)
    stored = StoredTable(ref, delta.states[path], spec_from_delta(ref, delta.states[path], None))
    return stored, lease


@pytest.mark.parametrize("command", ["drop", "alter"])
def test_drop_and_alter_refuse_while_a_live_writer_holds_the_lease(
    stores: Stores, tmp_path: Path, command: str
) -> None:
    stored, _ = _written(stores, tmp_path)
    delta, _ = _mem(stores)
    with pytest.raises(service.TableBeingWrittenError) as caught:
        if command == "drop":
            service.drop_table(stored.ref, stored.spec, stores, warehouse=tmp_path,
                               delete_topic=False)  # fmt: skip
        else:
            service.alter_table(stored, stores, {"log.consistency": "eventual"}, [],
                                warehouse=tmp_path)  # fmt: skip
    error = caught.value
    assert error.exit_code == 1
    assert "is being written by job 'ingest-7' (host elsewhere, pid 4242)" in error.message
    assert "its lease expires at" in error.message
    assert error.hint is not None and "--force" in error.hint and "kill 4242" in error.hint
    assert delta.states[stored.ref.path].version == 0  # nothing dropped, nothing changed
    assert [c for c in delta.calls if not c.startswith("create")] == []


def test_force_goes_past_the_live_writer_and_names_it(stores: Stores, tmp_path: Path) -> None:
    stored, _ = _written(stores, tmp_path)
    altered = service.alter_table(stored, stores, {"log.consistency": "eventual"}, [],
                                  warehouse=tmp_path, force=True)  # fmt: skip
    assert altered.to_json()["forced_past_writer"]["job"] == "ingest-7"
    dropped = service.drop_table(stored.ref, stored.spec, stores, warehouse=tmp_path,
                                 delete_topic=False, force=True)  # fmt: skip
    assert dropped.forced_past is not None and dropped.forced_past.info.host == "elsewhere"
    assert stored.ref.path not in _mem(stores)[0].states


def test_an_expired_or_dead_writer_does_not_block(stores: Stores, tmp_path: Path) -> None:
    import socket

    stored, lease = _written(stores, tmp_path, host=socket.gethostname())
    # This host, pid 4242 with no recorded process identity of ours: judged dead (or never ours).
    assert service.check_no_live_writer(
        stored.ref, "drop", "x", force=False, holder_dead=lambda _: True
    ) is None  # fmt: skip
    later = lease.info.expires_at + 1
    assert service.check_no_live_writer(
        stored.ref, "drop", "x", force=False, clock=lambda: later, holder_dead=lambda _: False
    ) is None  # fmt: skip
    with pytest.raises(service.TableBeingWrittenError):
        service.check_no_live_writer(stored.ref, "drop", "x", force=False,
                                     holder_dead=lambda _: False)  # fmt: skip


def test_alter_adds_nullable_columns_in_one_delta_change_and_no_topic_change(
    stores: Stores,
) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topic_calls = list(topics.calls)
    new = [ColumnSpec("region", "string", comment="where"), ColumnSpec("n", "int")]
    result = _alter(stores, {}, [], add_columns=new)
    assert delta.calls[-1] == "add_columns orders"
    assert [c.name for c in _stored(stores).spec.columns] == ["id", "name", "amount", "region", "n"]
    assert delta.states[WH / "db" / "orders"].version == 1  # one commit
    assert result.topic is None and topics.calls == topic_calls  # the log needs no change
    assert result.to_json()["added_columns"][0] == {
        "name": "region", "type": "string", "nullable": True, "comment": "where",
    }  # fmt: skip


def test_alter_adds_columns_and_changes_properties_together(stores: Stores) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    _alter(stores, {"my.prop": "v"}, [], add_columns=[ColumnSpec("region", "string")])
    assert delta.calls[-2:] == ["add_columns orders", "alter orders"]
    assert _stored(stores).spec.properties["my.prop"] == "v"


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ([ColumnSpec("region", "string", nullable=False)], "NOT NULL: the rows already written"),
        ([ColumnSpec("NAME", "string")], "the table has a column 'name'"),
        ([ColumnSpec("a", "int"), ColumnSpec("A", "bigint")], "'A': it is given twice"),
        ([ColumnSpec("id", "decimal(20,0)")], "cannot change column 'id' from bigint to decimal"),
    ],
)
def test_alter_refuses_columns_both_stores_cannot_take(
    stores: Stores, columns: list[ColumnSpec], message: str
) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    with pytest.raises(InvalidInputError, match=message) as caught:
        _alter(stores, {"my.prop": "v"}, [], add_columns=columns)
    assert caught.value.exit_code == 2
    assert delta.states[WH / "db" / "orders"].version == 0  # nothing was applied


def test_a_dry_run_adds_no_column(stores: Stores) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    result = _alter(stores, {}, [], add_columns=[ColumnSpec("region", "string")], dry_run=True)
    assert result.added_columns and delta.states[WH / "db" / "orders"].version == 0


def test_adding_columns_goes_past_a_live_writer_which_stops_at_its_next_epoch(
    stores: Stores, tmp_path: Path
) -> None:
    stored, _ = _written(stores, tmp_path)
    result = service.alter_table(stored, stores, {}, [], warehouse=tmp_path,
                                 add_columns=[ColumnSpec("region", "string")])  # fmt: skip
    assert result.writer_stops and result.forced_past is not None
    assert _mem(stores)[0].calls[-1] == "add_columns orders"
    # With a property change as well, the live writer still refuses it.
    with pytest.raises(service.TableBeingWrittenError):
        service.alter_table(stored, stores, {"my.prop": "v"}, [], warehouse=tmp_path,
                            add_columns=[ColumnSpec("n", "int")])  # fmt: skip


def test_alter_widens_a_column_in_the_delta_table_and_leaves_the_topic(stores: Stores) -> None:
    delta, topics = _mem(stores)
    service.create_tables([spec()], WH, stores)
    topic_calls = list(topics.calls)
    result = _alter(stores, {}, [], widen_columns=[ColumnSpec("AMOUNT", "decimal(18,2)")])
    assert delta.calls[-1] == "widen_columns orders"
    assert [(c.name, c.type) for c in _stored(stores).spec.columns][2] == (
        "amount",
        "decimal(18,2)",
    )
    assert result.topic is None and topics.calls == topic_calls
    assert result.to_json()["widened_columns"][0]["name"] == "amount"  # the table's own name


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ([ColumnSpec("amount", "decimal(12,3)")], "from DECIMAL\\(10,2\\) to DECIMAL\\(12,3\\)"),
        ([ColumnSpec("id", "int")], "from BIGINT to INT: not a type widening"),
        ([ColumnSpec("name", "binary")], "from STRING to BINARY"),
        ([ColumnSpec("nope", "bigint")], "'nope': the table has no such column"),
        ([ColumnSpec("amount", "decimal(12,2)")] * 2, "given twice"),
        ([ColumnSpec("amount", "decimal(12,2)", nullable=False)], "changes the type only"),
    ],
)
def test_alter_refuses_what_is_not_a_widening(
    stores: Stores, columns: list[ColumnSpec], message: str
) -> None:
    delta, _ = _mem(stores)
    service.create_tables([spec()], WH, stores)
    with pytest.raises(InvalidInputError, match=message) as caught:
        _alter(stores, {}, [], widen_columns=columns)
    assert caught.value.exit_code == 2 and caught.value.hint
    if "from" in message:
        assert "INT → BIGINT" in caught.value.hint  # names the allowed ones
    assert delta.states[WH / "db" / "orders"].version == 0


def test_widening_goes_past_a_live_writer_which_stops(stores: Stores, tmp_path: Path) -> None:
    stored, _ = _written(stores, tmp_path)
    result = service.alter_table(stored, stores, {}, [], warehouse=tmp_path,
                                 widen_columns=[ColumnSpec("amount", "decimal(11,2)")])  # fmt: skip
    assert result.writer_stops and _mem(stores)[0].calls[-1] == "widen_columns orders"
