"""Tables whose log store is Pulsar (issue 23), on the real standalone: Amoro's Pulsar DDL from
its docs creates the Delta table and the partitioned topic (retention set, deduplication on);
describe shows it; alter-table grows it and changes its retention; drop-table deletes both;
create-table's modes hold; a failure at either store leaves nothing behind. Through the CLI
in-process (create-table's Delta store needs no JVM for these tables)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logstore_cli.catalog import warehouse as wh
from logstore_cli.cli.app import app
from logstore_cli.config import PulsarConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import LogstoreError
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.pulsar_topics import PulsarTopicStore
from logstore_cli.provision.service import Stores
from logstore_cli.pulsar.admin import PulsarAdmin, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

runner = CliRunner()


def amoro_ddl(service_url: str, topic: str, table: str = "shop.orders", extra: str = "") -> str:
    """Amoro's Pulsar log store as its docs declare it (Flink SQL's shape)."""
    return f"""CREATE TABLE {table} (
      id BIGINT, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED
    ) WITH (
      'log-store.enabled' = 'true',
      'log-store.type' = 'pulsar',
      'log-store.address' = '{service_url}',
      'log-store.topic' = '{topic}',
      'log.system.partitions' = '2'{extra}
    )"""


def env_for(warehouse: Path, pulsar: PulsarInfo) -> dict[str, str]:
    # The standalone's own state dir: the admin URL is found from its state, as after
    # 'logstore pulsar start' (no [pulsar] admin_url).
    return {
        "LOGSTORE_WAREHOUSE": str(warehouse),
        "LOGSTORE_STATE_DIR": str(Path(pulsar.data_dir).parents[1]),
        "LOGSTORE_PULSAR_ADMIN_URL": "",
    }


def cli(env: Mapping[str, str], *args: str) -> Any:
    return runner.invoke(app, list(args), env=dict(env))


def failed(result: Any) -> tuple[int, str]:
    """The exit code and message ``main()`` would give the error the command raised (in-process,
    the runner hands the domain error over rather than rendering it)."""
    exc = result.exception
    assert isinstance(exc, LogstoreError), (result.output, exc)
    return exc.exit_code, f"{exc.message}\n{exc.hint or ''}\n{exc.detail or ''}"


def rest(pulsar: PulsarInfo, path: str) -> Any:
    with urllib.request.urlopen(pulsar.web_url + path, timeout=30) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def test_amoro_pulsar_ddl_creates_describes_alters_and_drops(
    pulsar: PulsarInfo, pulsar_topic: str, tmp_path: Path
) -> None:
    env = env_for(tmp_path, pulsar)
    topic = TopicName.parse(pulsar_topic)
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)

    created = cli(
        env, "create-table", "--sql", amoro_ddl(pulsar.service_url, pulsar_topic), "--json"
    )
    assert created.exit_code == 0, created.output
    (row,) = json.loads(created.stdout)
    assert row["status"] == "created"
    assert row["topic"]["name"] == str(topic) and row["topic"]["action"] == "create"
    assert [r.name for r in wh.list_tables(tmp_path)] == ["shop.orders"]
    found = admin.describe_topic(topic)
    assert found is not None
    # Two partitions; retention set on the topic itself (Kafka's default, 7 days), never left to
    # Pulsar's "delete what no subscription holds"; broker deduplication on.
    assert (found.partitions, found.retention_minutes, found.retention_mb) == (2, 10080, -1)
    assert rest(pulsar, f"{topic.path}/deduplicationEnabled") is True

    described = cli(env, "describe", "shop.orders", "--json")
    assert described.exit_code == 0, described.output
    d = json.loads(described.stdout)
    assert d["log_store"]["system"] == "pulsar"
    assert d["log_store"]["address"] == pulsar.service_url
    assert d["topic"]["exists"] is True and d["topic"]["name"] == str(topic)
    assert [p["end_offset"] for p in d["topic"]["partitions"]] == [0, 0]
    assert d["topic"]["configs"] == {"retention.ms": "604800000", "retention.bytes": "-1"}

    altered = cli(
        env, "alter-table", "shop.orders", "--set", "log.system.partitions=3",
        "--set", "log.topic.retention.ms=3600000", "--json",
    )  # fmt: skip
    assert altered.exit_code == 0, altered.output
    assert json.loads(altered.stdout)["topic"]["action"] == "add-partitions"
    found = admin.describe_topic(topic)
    assert found is not None and (found.partitions, found.retention_minutes) == (3, 60)

    code, said = failed(cli(env, "alter-table", "shop.orders", "--set", "log.system.partitions=1"))
    assert code == 1 and "has 3 partitions; Pulsar cannot reduce them" in said
    code, said = failed(
        cli(env, "alter-table", "shop.orders", "--set", "log.topic.retention.ms=90000")
    )
    assert code == 2 and "whole number of minutes" in said
    unset = cli(env, "alter-table", "shop.orders", "--unset", "log.topic.retention.ms")
    assert unset.exit_code == 0, unset.output
    found = admin.describe_topic(topic)
    assert found is not None and found.retention_minutes == 10080  # logstore's default again

    dropped = cli(env, "drop-table", "shop.orders", "--delete-topic", "--yes", "--json")
    assert dropped.exit_code == 0, dropped.output
    assert json.loads(dropped.stdout)["topic"] == {"name": str(topic), "deleted": True}
    assert admin.describe_topic(topic) is None
    assert wh.list_tables(tmp_path) == []


def test_create_table_modes_on_pulsar(
    pulsar: PulsarInfo, pulsar_topic: str, tmp_path: Path
) -> None:
    env = env_for(tmp_path, pulsar)
    ddl = amoro_ddl(pulsar.service_url, pulsar_topic)
    assert cli(env, "create-table", "--sql", ddl).exit_code == 0
    code, said = failed(cli(env, "create-table", "--sql", ddl))  # error: the table exists
    assert code == 1 and "already exists" in said
    ignore = cli(env, "create-table", "--sql", ddl, "--if-not-exists", "--json")
    assert ignore.exit_code == 0, ignore.output
    assert json.loads(ignore.stdout)[0]["status"] == "exists"
    code, said = failed(
        cli(env, "create-table", "--sql", ddl.replace("'2'", "'4'"), "--if-not-exists")
    )
    assert code == 1 and "partitions" in said

    # A second table on the same Pulsar topic is refused (a topic belongs to one table).
    code, said = failed(cli(env, "create-table", "--sql", ddl.replace("shop.orders", "shop.other")))
    assert code == 1
    assert f"Pulsar topic '{TopicName.parse(pulsar_topic)}' is the log of table" in said

    # A topic left behind empty (an interrupted create) is taken; one holding messages is refused
    # unless --adopt-topic is given (test_a_pulsar_topic_holding_messages_is_adopted).
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    left = TopicName.parse(f"{pulsar_topic}-left")
    admin.create_topic(left, 2, retention_minutes=10080, retention_mb=-1)
    leftover = amoro_ddl(pulsar.service_url, str(left), table="shop.leftover")
    taken = cli(env, "create-table", "--sql", leftover, "--json")
    assert taken.exit_code == 0, taken.output
    assert json.loads(taken.stdout)[0]["topic"]["action"] == "exists"

    held = TopicName.parse(f"{pulsar_topic}-held")
    admin.create_topic(held, 1, retention_minutes=10080, retention_mb=-1)
    _send_one(pulsar.service_url, str(held))
    holding = amoro_ddl(pulsar.service_url, str(held), table="shop.held", extra="")
    holding = holding.replace("'log.system.partitions' = '2'", "'log.system.partitions' = '1'")
    code, said = failed(cli(env, "create-table", "--sql", holding))
    assert code == 1 and "holds 1 record" in said
    assert [r.name for r in wh.list_tables(tmp_path)] == ["shop.leftover", "shop.orders"]


def _send_one(service_url: str, topic: str) -> None:
    import pulsar as client_lib

    client = client_lib.Client(service_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"someone else's message")
        producer.close()
    finally:
        client.close()


def test_a_missing_namespace_creates_nothing(
    pulsar: PulsarInfo, pulsar_topic: str, tmp_path: Path
) -> None:
    env = env_for(tmp_path, pulsar)
    ddl = amoro_ddl(pulsar.service_url, f"persistent://public/nowhere/{pulsar_topic}")
    code, said = failed(cli(env, "create-table", "--sql", ddl))
    assert code == 2 and "the Pulsar namespace 'public/nowhere'" in said
    assert wh.list_tables(tmp_path) == []


def _no_spark() -> Any:
    raise AssertionError("these tables are created without Spark")


class FailingDelta(DeltaLogStore):
    """The real Delta store, failing at the commit: a mid-way failure after the topic exists."""

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        raise LogstoreError("injected failure at the Delta step")


def test_failure_at_delta_step_removes_the_new_pulsar_topic(
    pulsar: PulsarInfo, pulsar_topic: str, tmp_path: Path
) -> None:
    spec = parse_ddl(amoro_ddl(pulsar.service_url, pulsar_topic), "t.sql", ParseOptions())[0]
    topics = PulsarTopicStore(PulsarConfig(admin_url=pulsar.web_url), timeout_s=30)
    failing = FailingDelta(tmp_path, SparkDeltaStore(tmp_path, _no_spark))
    with pytest.raises(LogstoreError, match="injected failure"):
        service.create_tables([spec], tmp_path, Stores(failing, topics))
    assert (
        PulsarAdmin(pulsar.web_url, timeout_s=30).describe_topic(TopicName.parse(pulsar_topic))
        is None
    )
    assert wh.list_tables(tmp_path) == []


def test_a_configured_admin_url_is_used(
    pulsar: PulsarInfo, pulsar_topic: str, tmp_path: Path
) -> None:
    # No local state here: without the configured URL, the admin API would be looked for at
    # http://127.0.0.1:8080.
    env = {
        "LOGSTORE_WAREHOUSE": str(tmp_path),
        "LOGSTORE_STATE_DIR": str(tmp_path / "state"),
        "LOGSTORE_PULSAR_ADMIN_URL": pulsar.web_url,
    }
    result = cli(env, "create-table", "--sql", amoro_ddl(pulsar.service_url, pulsar_topic))
    assert result.exit_code == 0, result.output
    assert PulsarAdmin(pulsar.web_url, timeout_s=30).describe_topic(TopicName.parse(pulsar_topic))
