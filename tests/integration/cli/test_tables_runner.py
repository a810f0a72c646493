"""Table commands through Typer's runner, in-process, on tables made by the real stores (no JVM:
create-table's Delta store needs none for these tables)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logstore_cli.cli.app import app
from logstore_cli.config import KafkaConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import InvalidInputError, TableNotFoundError, TopicInUseError
from logstore_cli.provision import service
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from logstore_cli.provision.service import Stores
from tests.deltalog import delta_store

runner = CliRunner()


@pytest.fixture
def warehouse(
    kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> Iterator[tuple[Path, str, dict[str, str]]]:
    ddl = (
        f"CREATE TABLE IF NOT EXISTS crm.contacts (id BIGINT, email STRING, "
        f"PRIMARY KEY (id) NOT ENFORCED) WITH ('log.system' = 'kafka', "
        f"'kafka.topic' = '{topic_name}', 'log.system.partitions' = '2')"
    )
    topics = KafkaTopicStore(KafkaConfig(timeout_s=15))
    specs = parse_ddl(ddl, "t.sql", options=ParseOptions(default_bootstrap_servers=kafka_bootstrap))
    service.create_tables(
        specs,
        tmp_path,
        Stores(delta_store(tmp_path), topics),
    )
    topics.close()
    env = {
        "LOGSTORE_WAREHOUSE": str(tmp_path),
        "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "LOGSTORE_STATE_DIR": str(tmp_path / "state"),
    }
    yield tmp_path, ddl, env


def test_describe_and_list(warehouse: tuple[Path, str, dict[str, str]], topic_name: str) -> None:
    _, _, env = warehouse
    result = runner.invoke(app, ["describe", "crm.contacts", "--json"], env=env)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["topic"]["name"] == topic_name
    assert [p["end_offset"] for p in d["topic"]["partitions"]] == [0, 0]

    human = runner.invoke(app, ["describe", "crm.contacts"], env=env)
    assert human.exit_code == 0
    assert "crm.contacts" in human.stdout and "end offset" in human.stdout

    listed = runner.invoke(app, ["list", "--json"], env=env)
    assert [r["name"] for r in json.loads(listed.stdout)] == ["crm.contacts"]


def test_create_again_is_a_noop_without_spark(
    warehouse: tuple[Path, str, dict[str, str]], topic_name: str
) -> None:
    _, ddl, env = warehouse
    # the DDL says IF NOT EXISTS and the table is identical: nothing to do, so no JVM is needed
    result = runner.invoke(app, ["create-table", "--sql", ddl, "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["status"] == "exists"
    other = ddl.replace("crm.contacts", "crm.other").replace(topic_name, f"{topic_name}-other")
    dry = runner.invoke(app, ["create-table", "--sql", other, "--dry-run", "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)[0]["status"] == "planned"
    # the same topic for a second table is refused, even in a dry run
    shared = runner.invoke(
        app, ["create-table", "--sql", ddl.replace("crm.contacts", "crm.other"), "--dry-run"],
        env=env,
    )  # fmt: skip
    assert isinstance(shared.exception, TopicInUseError)


def test_errors_surface_as_domain_errors(warehouse: tuple[Path, str, dict[str, str]]) -> None:
    _, _, env = warehouse
    missing = runner.invoke(app, ["describe", "crm.contact"], env=env)
    assert isinstance(missing.exception, TableNotFoundError)
    assert missing.exception.hint == "did you mean 'crm.contacts'?"
    refused = runner.invoke(app, ["drop-table", "crm.contacts"], env=env, input="")
    assert isinstance(refused.exception, InvalidInputError)
    assert "--yes" in (refused.exception.hint or "")


def test_drop(warehouse: tuple[Path, str, dict[str, str]]) -> None:
    path, _, env = warehouse
    result = runner.invoke(app, ["drop-table", "crm.contacts", "--yes", "--delete-topic"], env=env)
    assert result.exit_code == 0, result.output
    assert not (path / "crm" / "contacts").exists()
