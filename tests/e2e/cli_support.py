"""What the status, verify and script-contract e2e tests share: the CLI run in a child process with
its own warehouse and state dir, a keyed two-partition table's DDL, and a ``Writer`` that does an
ingest job's epochs by hand (delta-rs and the log's producer: no Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake

from logstore_cli.catalog.tables import load_table
from logstore_cli.config import KafkaConfig
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from logstore_cli.provision import service
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from tests.deltalog import delta_store, write_table

TIMEOUT_S = 15.0


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGSTORE_WAREHOUSE": str(cwd / "wh"),
           "LOGSTORE_STATE_DIR": str(cwd / "state")}  # fmt: skip
    env.pop("LOGSTORE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def keyed_ddl(name: str, topic: str, bootstrap: str) -> str:
    return (
        f"CREATE TABLE {name} (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
        f"WITH ('log.system' = 'kafka', 'kafka.topic' = '{topic}', "
        f"'kafka.bootstrap.servers' = '{bootstrap}', 'log.system.partitions' = '2')"
    )


class Writer:
    """What the ingest job does for one epoch, by hand: records, a Delta commit, markers."""

    def __init__(self, table: Path, bootstrap: str, topic: str, schema: RowSchema) -> None:
        self.table, self.bootstrap, self.topic, self.schema = table, bootstrap, topic, schema
        self.producer = LogProducer(bootstrap, {}, topic, timeout_s=TIMEOUT_S)

    def records(self, eid: EpochId, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            record = ChangeRecord(RowKind.INSERT, self.schema.key_of(row), row, eid)
            self.producer.send(*encode_change(record, self.schema))
        self.producer.flush()

    def commit(self, eid: EpochId, rows: list[dict[str, Any]]) -> int:
        """Append ``rows`` to Delta as the epoch's commit (its metadata, its transaction id)."""
        with KafkaAdmin(self.bootstrap, timeout_s=TIMEOUT_S) as admin:
            offsets = admin.end_offsets(self.topic)
        data = pa.table({"id": pa.array([r["id"] for r in rows], pa.int64()),
                         "name": pa.array([r["name"] for r in rows], pa.string())})  # fmt: skip
        props = CommitProperties(
            custom_metadata={"userMetadata": commit_metadata(eid, offsets)},
            app_transactions=[Transaction(eid.writer, eid.epoch)],
        )
        write_deltalake(str(self.table), data, mode="append", commit_properties=props)
        return max(int(p.stem) for p in (self.table / "_delta_log").glob("*.json"))

    def markers(self, eid: EpochId, version: int) -> None:
        _, value, headers = encode_marker(CommitMarker(eid, version))
        for partition in range(self.producer.partition_count()):
            self.producer.send(None, value, headers, partition=partition)
        self.producer.flush()

    def epoch(self, eid: EpochId, rows: list[dict[str, Any]]) -> int:
        self.records(eid, rows)
        version = self.commit(eid, rows)
        self.markers(eid, version)
        return version

    def close(self) -> None:
        self.producer.close()


def keyed_table(tmp_path: Path, bootstrap: str, topic: str, name: str = "db.orders") -> Writer:
    """``name`` (``keyed_ddl``) in ``tmp_path/wh`` and its topic, with a writer for its epochs."""
    table = write_table(tmp_path / "wh", keyed_ddl(name, topic, bootstrap))
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
        admin.create_topic(topic, 2, 1, {})
    schema = RowSchema.of(load_table(tmp_path / "wh", name).spec)
    return Writer(table, bootstrap, topic, schema)


def create_tables(warehouse: Path, ddl: str) -> None:
    """What ``logstore create-table`` makes of ``ddl`` (the provisioning service: its checks, its
    Kafka topics), with the Delta tables written without Spark (create-table's own store): for the tests
    that need a table, not a test of create-table, whose CLI starts a Spark driver."""
    topics = KafkaTopicStore(KafkaConfig(timeout_s=TIMEOUT_S))
    try:
        specs = parse_ddl(ddl, "t.sql", ParseOptions())
        service.create_tables(specs, warehouse, service.Stores(delta_store(warehouse), topics))
    finally:
        topics.close()
