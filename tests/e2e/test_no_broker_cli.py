"""The broker's absence (issue 18, item 9): a table created against the local broker (its address
not stored with it) while that broker is stopped. Delta-only commands work; commands that need
Kafka fail as unreachable (exit 1), naming the address tried — the stopped broker's last one, kept
in its state dir. No broker and no Spark run here: the state dir records a broker on a port nobody
listens on, as ``logstore broker stop`` leaves it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from logstore_cli.errors import EXIT_FAILURE
from logstore_cli.kafka.local_broker import free_port
from tests.deltalog import write_table

TABLE = "db.orders"
DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders_log', 'kafka.bootstrap.servers' = 'x:1',
      'log.system.partitions' = '1');
"""


@dataclass(frozen=True)
class Stopped:
    root: Path
    address: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
        env.update(LOGSTORE_WAREHOUSE=str(self.root / "wh"), LOGSTORE_STATE_DIR=str(self.root / "state"),
                   LOGSTORE_HOME=str(self.root / "home"))  # fmt: skip
        return subprocess.run(
            [sys.executable, "-m", "logstore_cli", *args], cwd=self.root, env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    root = tmp_path_factory.mktemp("nobroker")
    table = write_table(root / "wh", DDL)
    # As create-table stores a table whose address came from the local broker: none stored.
    first = table / "_delta_log" / "00000000000000000000.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        action.get("metaData", {}).get("configuration", {}).pop("kafka.bootstrap.servers", None)
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))
    # What 'broker stop' leaves: the ports of the last start (cluster.json), no broker.json.
    port = free_port()
    broker = root / "state" / "broker"
    broker.mkdir(parents=True, mode=0o700)
    cluster = {"cluster_id": "c", "port": port, "controller_port": free_port(), "sasl_port": None}
    (broker / "cluster.json").write_text(json.dumps(cluster))
    return Stopped(root, f"127.0.0.1:{port}")


def test_describe_without_the_topic_works(stopped: Stopped) -> None:
    result = stopped.run("describe", TABLE, "--no-topic", "--json")
    assert result.returncode == 0, result.stderr
    log = json.loads(result.stdout)["log_store"]
    assert log["topic"] == "orders_log" and log["address"] == stopped.address


def test_alter_table_of_a_delta_property_resolves_the_table(stopped: Stopped) -> None:
    result = stopped.run("alter-table", TABLE, "--set", "delta.logRetentionDuration=interval 9 days",
                         "--dry-run", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "no Kafka broker address is set" not in result.stderr


def test_ingest_prints_its_spark_submit_command(stopped: Stopped) -> None:
    result = stopped.run("ingest", TABLE, "--source", "generate", "--total", "1", "--once",
                         "--print-spark-submit", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert TABLE in json.loads(result.stdout)["command"]


@pytest.mark.parametrize("args", [["read", TABLE, "--mode", "log"], ["verify", TABLE]],
                         ids=["read", "verify"])  # fmt: skip
def test_commands_that_need_kafka_fail_as_unreachable_naming_the_address(
    stopped: Stopped, args: list[str]
) -> None:
    result = stopped.run(*args, "--json", "--kafka-timeout", "1")
    assert result.returncode == EXIT_FAILURE, result.stderr
    assert f"cannot reach Kafka at {stopped.address}" in result.stderr
    assert "Traceback" not in result.stderr
