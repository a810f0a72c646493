"""Provisioning a Pulsar table (issue 23) without a server: the admin URL, the Pulsar topic store
over a fake admin API (retention always set, deduplication on, what validate-only checks), and
the store chosen per table by its log system, through the provisioning service and in-memory
stores. The real standalone: tests/integration/pulsar/test_pulsar_tables.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import StoredTable, spec_from_delta
from logstore_cli.config import PulsarConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import (
    BrokerError,
    InvalidInputError,
    TableConflictError,
    TopicExistsError,
)
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.logformat.pulsar_form import message_id, ordinal
from logstore_cli.model import LogStoreSpec, TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.pulsar_topics import PulsarTopicStore, TopicStoreBySystem
from logstore_cli.provision.service import Stores
from logstore_cli.pulsar.admin import (
    MessagePosition,
    PulsarAdmin,
    PulsarTopic,
    TopicName,
    admin_url_for,
)
from tests.unit.provision.fakes import MemDelta, MemTopics

pytestmark = pytest.mark.unit

WH = Path("/wh")
PULSAR_DDL = """CREATE TABLE db.orders (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
  'log-store.address' = 'pulsar://127.0.0.1:6650', 'log-store.topic' = 'orders'{extra});"""
KAFKA_DDL = """CREATE TABLE db.clicks (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'log-store.enabled' = 'true', 'log-store.address' = 'broker:9092', 'log-store.topic' = 'clicks');"""
FULL = "persistent://public/default/orders"


def table(ddl: str) -> TableSpec:
    return parse_ddl(ddl, "t.sql", ParseOptions())[0]


def pulsar_table(extra: str = "") -> TableSpec:
    return table(PULSAR_DDL.format(extra=extra))


def log_of(spec: TableSpec) -> LogStoreSpec:
    assert spec.log_store is not None
    return spec.log_store


# -- the admin URL --------------------------------------------------------------------------------


def test_the_admin_url_is_configured_else_the_local_standalone_else_port_8080() -> None:
    local = ("pulsar://127.0.0.1:41000", "http://127.0.0.1:41001")
    assert admin_url_for("pulsar://p1:6650", "http://admin:9", local) == "http://admin:9"
    assert admin_url_for("pulsar://127.0.0.1:41000", None, local) == "http://127.0.0.1:41001"
    assert admin_url_for("pulsar://localhost:41000", None, local) == "http://127.0.0.1:41001"
    assert admin_url_for("pulsar://p1:6650,p2:6650", None, local) == "http://p1:8080"
    assert admin_url_for("pulsar://p1:6650", None, None) == "http://p1:8080"


def test_the_store_asks_for_the_local_standalone_only_without_a_configured_url() -> None:
    asked: list[int] = []

    def local() -> tuple[str, str] | None:
        asked.append(1)
        return ("pulsar://127.0.0.1:6650", "http://127.0.0.1:7000")

    log = log_of(pulsar_table())
    assert PulsarTopicStore(PulsarConfig(), local=local).admin_url(log) == "http://127.0.0.1:7000"
    configured = PulsarTopicStore(PulsarConfig(admin_url="http://a:1"), local=local)
    assert configured.admin_url(log) == "http://a:1"
    assert len(asked) == 1


# -- the Pulsar topic store over a fake admin API ------------------------------------------------


@dataclass
class FakeAdmin:
    """The admin API as the store uses it, in memory (``fail``: a method name -> its error)."""

    web_url: str = "http://fake:8080"
    topics: dict[str, PulsarTopic] = field(default_factory=dict)
    dedup: dict[str, bool] = field(default_factory=dict)
    entries: dict[str, dict[int, int]] = field(default_factory=dict)
    last: dict[str, dict[int, MessagePosition]] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=lambda: {"public/default"})
    fail: dict[str, BaseException] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    def describe_topic(self, topic: TopicName) -> PulsarTopic | None:
        return self.topics.get(str(topic))

    def namespace_exists(self, topic: TopicName) -> bool:
        return f"{topic.tenant}/{topic.namespace}" in self.namespaces

    def write_quorum(self, topic: TopicName) -> int | None:
        return 1

    def create_topic(
        self, topic: TopicName, partitions: int, *, retention_minutes: int, retention_mb: int
    ) -> None:
        self._call("create_topic")
        if str(topic) in self.topics:
            raise TopicExistsError("exists")
        self.topics[str(topic)] = PulsarTopic(
            str(topic), partitions, retention_minutes, retention_mb
        )

    def set_deduplication(self, topic: TopicName, enabled: bool) -> None:
        self._call("set_deduplication")
        self.dedup[str(topic)] = enabled

    def set_retention(self, topic: TopicName, minutes: int, mb: int) -> None:
        self._call("set_retention")
        t = self.topics[str(topic)]
        self.topics[str(topic)] = PulsarTopic(t.name, t.partitions, minutes, mb)

    def add_partitions(self, topic: TopicName, total: int) -> None:
        self._call("add_partitions")
        t = self.topics[str(topic)]
        self.topics[str(topic)] = PulsarTopic(t.name, total, t.retention_minutes, t.retention_mb)

    def delete_topic(self, topic: TopicName) -> None:
        self._call("delete_topic")
        del self.topics[str(topic)]

    def held_entries(self, topic: TopicName, partitions: int) -> dict[int, int]:
        return {p: self.entries.get(str(topic), {}).get(p, 0) for p in range(partitions)}

    def last_positions(
        self, topic: TopicName, partitions: int
    ) -> dict[int, MessagePosition | None]:
        return {p: self.last.get(str(topic), {}).get(p) for p in range(partitions)}


def fake_store(admin: FakeAdmin) -> PulsarTopicStore:
    return PulsarTopicStore(PulsarConfig(), admin=lambda url, timeout: cast(PulsarAdmin, admin))


def test_create_sets_the_retention_explicitly_and_turns_deduplication_on() -> None:
    admin = FakeAdmin()
    store = fake_store(admin)
    log = log_of(pulsar_table())
    store.create(log, 3, None, {})
    # Kafka's default retention (7 days, no size limit), never Pulsar's "delete what no
    # subscription holds"
    assert admin.topics[FULL] == PulsarTopic(FULL, 3, 7 * 24 * 60, -1)
    assert admin.dedup == {FULL: True}
    assert store.describe(log) == TopicInfo(
        FULL, 3, 1, {"retention.ms": str(7 * 24 * 3_600_000), "retention.bytes": "-1"}
    )
    other = log_of(table(PULSAR_DDL.format(extra="").replace("'orders'", "'t2'")))
    store.create(other, 1, None, {"retention.ms": "3600000", "retention.bytes": "-1"})
    assert admin.topics["persistent://public/default/t2"].retention_minutes == 60


def test_a_topic_whose_deduplication_fails_is_deleted_again() -> None:
    admin = FakeAdmin(fail={"set_deduplication": BrokerError("Pulsar answered 500")})
    with pytest.raises(BrokerError):
        fake_store(admin).create(log_of(pulsar_table()), 1, None, {})
    assert admin.topics == {} and admin.calls[-1] == "delete_topic"


def test_validate_only_creates_nothing_and_needs_the_namespace() -> None:
    admin = FakeAdmin()
    store = fake_store(admin)
    store.create(log_of(pulsar_table()), 1, None, {}, validate_only=True)
    assert admin.topics == {} and admin.calls == []
    elsewhere = log_of(table(PULSAR_DDL.format(extra="").replace("'orders'", "'shop/eu/o'")))
    with pytest.raises(InvalidInputError, match=r"namespace 'shop/eu' .* does not exist"):
        store.create(elsewhere, 1, None, {}, validate_only=True)
    with pytest.raises(InvalidInputError, match="replication cannot be set"):
        store.create(log_of(pulsar_table()), 1, 3, {}, validate_only=True)
    with pytest.raises(InvalidInputError, match=r"takes no topic config 'cleanup\.policy'"):
        store.create(log_of(pulsar_table()), 1, None, {"cleanup.policy": "compact"})


def test_alter_merges_the_retention_and_unset_goes_back_to_logstores_default() -> None:
    admin = FakeAdmin()
    store = fake_store(admin)
    log = log_of(pulsar_table())
    store.create(log, 1, None, {"retention.ms": "3600000", "retention.bytes": "1048576"})
    store.alter_configs(log, {"retention.ms": "7200000"}, [], validate_only=True)
    assert admin.topics[FULL].retention_minutes == 60  # validate-only changed nothing
    store.alter_configs(log, {"retention.ms": "7200000"}, [])
    assert (admin.topics[FULL].retention_minutes, admin.topics[FULL].retention_mb) == (120, 1)
    store.alter_configs(log, {}, ["retention.bytes", "retention.ms"])
    assert (admin.topics[FULL].retention_minutes, admin.topics[FULL].retention_mb) == (10080, -1)


def test_partitions_only_grow_and_offsets_count_what_a_partition_holds() -> None:
    admin = FakeAdmin()
    store = fake_store(admin)
    log = log_of(pulsar_table())
    store.create(log, 2, None, {})
    with pytest.raises(InvalidInputError, match="can only grow"):
        store.add_partitions(log, 2, validate_only=True)
    store.add_partitions(log, 4, validate_only=True)
    assert admin.topics[FULL].partitions == 2
    store.add_partitions(log, 4)
    assert admin.topics[FULL].partitions == 4
    admin.entries[FULL] = {1: 5}
    assert store.end_offsets(log) == {0: 0, 1: 5, 2: 0, 3: 0}
    assert store.start_offsets(log) == {0: 0, 1: 0, 2: 0, 3: 0}
    store.delete(log)
    assert store.describe(log) is None


def test_adoption_positions_are_just_after_each_partitions_last_message() -> None:
    admin = FakeAdmin()
    store = fake_store(admin)
    log = log_of(pulsar_table())
    store.create(log, 3, None, {})
    admin.last[FULL] = {0: MessagePosition(7, 41), 2: MessagePosition(9, 0, 3)}
    positions = store.adoption_positions(log)
    assert positions == {0: ordinal(7, 41) + 1, 1: 0, 2: ordinal(9, 0, 3) + 1}
    # Odd: "just after" the message, where a read that has read it goes on.
    assert message_id(positions[0]) == (7, 41, -1, False)
    assert message_id(positions[2]) == (9, 0, 3, False)
    assert TopicStoreBySystem(MemTopics(), lambda: store).adoption_positions(log) == positions


# -- the store per log system, through the provisioning service -----------------------------------


@pytest.fixture
def by_system() -> tuple[Stores, MemTopics, MemTopics, list[int]]:
    kafka, pulsar, made = MemTopics(), MemTopics(), []

    def make() -> Any:
        made.append(1)
        return pulsar

    return Stores(MemDelta(), TopicStoreBySystem(kafka, make)), kafka, pulsar, made


def test_each_table_gets_the_store_of_its_log_system(
    by_system: tuple[Stores, MemTopics, MemTopics, list[int]],
) -> None:
    stores, kafka, pulsar, made = by_system
    service.create_tables([table(KAFKA_DDL)], WH, stores)
    assert made == []  # a Kafka-only run never builds the Pulsar store
    assert kafka.calls == ["validate create clicks", "create clicks"]
    service.create_tables([pulsar_table(", 'log.system.partitions' = '2'")], WH, stores)
    assert pulsar.calls == [f"validate create {FULL}", f"create {FULL}"]
    assert pulsar.topics[FULL].partitions == 2 and "orders" not in kafka.topics
    assert kafka.calls == ["validate create clicks", "create clicks"]


def test_a_failed_delta_create_removes_the_new_pulsar_topic(
    by_system: tuple[Stores, MemTopics, MemTopics, list[int]],
) -> None:
    stores, kafka, pulsar, _ = by_system
    assert isinstance(stores.delta, MemDelta)
    stores.delta.fail["create"] = OSError("disk full")
    with pytest.raises(OSError):
        service.create_tables([pulsar_table()], WH, stores)
    assert pulsar.calls[-1] == f"delete {FULL}" and pulsar.topics == {}
    assert kafka.calls == []


def test_close_closes_the_stores_that_were_built() -> None:
    closed: list[str] = []

    class Closing(MemTopics):
        def close(self) -> None:
            closed.append("kafka")

    TopicStoreBySystem(Closing(), lambda: MemTopics()).close()
    assert closed == ["kafka"]


def test_a_pulsar_topic_holding_messages_is_adopted_at_its_last_message_ids(
    by_system: tuple[Stores, MemTopics, MemTopics, list[int]],
) -> None:
    stores, _, pulsar, _ = by_system
    two = pulsar_table(", 'log.system.partitions' = '2'")
    pulsar.topics[FULL] = TopicInfo(FULL, 2, 1, {})
    pulsar.offsets[FULL] = {0: 3, 1: 0}  # messages held (PulsarTopicStore.end_offsets)
    after_last = ordinal(12, 2) + 1
    pulsar.positions[FULL] = {0: after_last, 1: 0}  # PulsarTopicStore.adoption_positions
    with pytest.raises(TableConflictError, match=r"Pulsar topic .* holds 3 records"):
        service.create_tables([two], WH, stores)
    assert isinstance(stores.delta, MemDelta) and stores.delta.states == {}
    plans = service.create_tables([two], WH, stores, adopt_topic=True)
    assert plans[0].to_json()["topic"]["adopted_records"] == 3
    props = stores.delta.states[WH / "db" / "orders"].properties
    # The positions, never the counts: message 12:2:-1's ordinal + 1 ("just after it").
    assert props[wh.P_ADOPTED_TOPIC] == f'{{"0":{after_last},"1":0}}'
    assert wh.adopted_positions(props) == {0: after_last, 1: 0}
    assert f"create {FULL}" not in pulsar.calls  # the topic is taken as it is


def test_turning_the_log_store_on_over_a_pulsar_topic_holding_messages_needs_adopt_topic(
    by_system: tuple[Stores, MemTopics, MemTopics, list[int]],
) -> None:
    stores, _, pulsar, _ = by_system
    pulsar.topics[FULL] = TopicInfo(FULL, 1, 1, {})
    pulsar.offsets[FULL] = {0: 3}
    plain = table("CREATE TABLE db.orders (id BIGINT, PRIMARY KEY (id) NOT ENFORCED);")
    service.create_tables([plain], WH, stores)
    assert isinstance(stores.delta, MemDelta)
    ref = wh.TableRef("db", "orders", WH / "db" / "orders")
    state = stores.delta.states[ref.path]
    stored = StoredTable(ref, state, spec_from_delta(ref, state, None))
    turn_on = {
        "log-store.enabled": "true",
        "log-store.type": "pulsar",
        "log-store.address": "pulsar://127.0.0.1:6650",
        "log-store.topic": "orders",
    }
    with pytest.raises(TableConflictError, match=r"Pulsar topic .* holds 3 records"):
        service.alter_table(stored, stores, turn_on, [], warehouse=WH)
    service.alter_table(stored, stores, turn_on, [], warehouse=WH, adopt_topic=True)
    assert stores.delta.states[ref.path].properties["log-store.type"] == "pulsar"


def test_two_service_urls_of_one_pulsar_are_the_same_cluster() -> None:
    # The scheme is written once: the same hosts in another order are still one cluster, so a
    # second table on its topic is refused.
    assert service.same_cluster("pulsar://a:6650,b:6650", "pulsar://b:6650,a:6650")
    assert service.same_cluster("pulsar://a:6650", "pulsar://c:6650,A:6650")
    assert not service.same_cluster("pulsar://a:6650", "pulsar://b:6650")
    assert service.same_cluster("k1:9092,k2:9092", "k2:9092")  # Kafka as before
