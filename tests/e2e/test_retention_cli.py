"""A topic whose retention deleted its beginning, against the real broker, through the CLI: the
oldest hybrid start fails loudly, ``--from snapshot`` starts from a snapshot the log still
continues, and ``vacuum`` keeps the files of the snapshots a hybrid read can still start from.

The test broker checks retention every 5 minutes, so the log start is moved the way retention
moves it for a reader: ``DeleteRecords`` through the admin client. Epochs are committed by hand
(delta-rs, the log's producer: no Spark), each rewriting the table as a compaction would, so that
each snapshot has files the next one removed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import CommitProperties, Transaction, write_deltalake

from logstore_cli.catalog.epochs import epoch_of
from logstore_cli.catalog.tables import load_table
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import EpochId, RowSchema, commit_metadata
from tests.e2e.cli_support import TIMEOUT_S, Writer, run_cli

HOUR_MS = 3_600_000


def _ddl(topic: str, bootstrap: str) -> str:
    return (
        "CREATE TABLE db.t (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
        f"WITH ('log.system' = 'kafka', 'kafka.topic' = '{topic}', "
        f"'kafka.bootstrap.servers' = '{bootstrap}', 'log.system.partitions' = '2', "
        f"'log.topic.retention.ms' = '{HOUR_MS}', "
        "'delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )


def _rewrite_epoch(writer: Writer, eid: EpochId, rows: list[dict[str, Any]]) -> int:
    """An epoch whose Delta commit rewrites the table (removing the files before it)."""
    writer.records(eid, rows)
    with KafkaAdmin(writer.bootstrap, timeout_s=TIMEOUT_S) as admin:
        offsets = admin.end_offsets(writer.topic)
    data = pa.table({"id": pa.array([r["id"] for r in rows], pa.int64()),
                     "name": pa.array([r["name"] for r in rows], pa.string())})  # fmt: skip
    props = CommitProperties(
        custom_metadata={"userMetadata": commit_metadata(eid, offsets)},
        app_transactions=[Transaction(eid.writer, eid.epoch)],
    )
    write_deltalake(str(writer.table), data, mode="overwrite", commit_properties=props)
    version = max(int(p.stem) for p in (writer.table / "_delta_log").glob("*.json"))
    writer.markers(eid, version)
    return version


def _delete_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    """What retention does to a reader: the log of each partition now starts at ``offsets``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as check:
        assert check.start_offsets(topic) == offsets


def _cli_json(cwd: Path, *args: str) -> Any:
    proc = run_cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_retention_trips_the_oldest_hybrid_start_and_vacuum_keeps_what_reads_need(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    created = run_cli("create-table", "--sql", _ddl(topic_name, kafka_bootstrap), "--json",
                      cwd=tmp_path)  # fmt: skip
    assert created.returncode == 0, created.stderr
    [plan] = json.loads(created.stdout)
    [warning] = plan["warnings"]  # an hour of log against Delta's 30 days of snapshots
    assert f"log.topic.retention.ms = {HOUR_MS} (1 hour) is shorter than" in warning
    assert "delta.logRetentionDuration (30 days)" in warning
    assert "warning:" in created.stderr and "read --from snapshot:V" in created.stderr

    table = tmp_path / "wh" / "db" / "t"
    schema = RowSchema.of(load_table(tmp_path / "wh", "db.t").spec)
    writer = Writer(table, kafka_bootstrap, topic_name, schema)
    try:
        versions = [
            _rewrite_epoch(writer, EpochId("w", e, "a"), [{"id": i, "name": f"r{i}"}
                                                          for i in range(e * 4, e * 4 + 4)])
            for e in range(3)
        ]  # fmt: skip
    finally:
        writer.close()
    assert versions == [1, 2, 3]
    offsets = {v: epoch_of(table, v).offsets for v in versions}  # type: ignore[union-attr]

    # Every snapshot is still continued by the log: vacuum would delete two of them.
    refused = run_cli("vacuum", "db.t", "--retain", "0", "--dry-run", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "snapshots a hybrid read can still start from need: versions 1 to 3" in refused.stderr

    # Retention deletes the log up to version 2's offsets: version 1's start is gone.
    _delete_before(kafka_bootstrap, topic_name, offsets[2])
    gone = run_cli("read", "db.t", "--mode", "log", "--from", "snapshot:1", "-o", "jsonl",
                   cwd=tmp_path)  # fmt: skip
    assert gone.returncode == 1, gone.stderr
    assert "Delta version 1" in gone.stderr and "retention deleted" in gone.stderr
    assert "--from snapshot:2" in gone.stderr and "Traceback" not in gone.stderr
    assert gone.stdout == ""  # refused before the snapshot was shown
    newest = run_cli("read", "db.t", "--mode", "log", "--from", "snapshot", "-o", "jsonl",
                     cwd=tmp_path)  # fmt: skip
    assert newest.returncode == 0, newest.stderr
    rows = [json.loads(line) for line in newest.stdout.splitlines()]
    assert sorted(r["row"]["id"] for r in rows if r.get("version") == 3) == [8, 9, 10, 11]
    oldest = run_cli("read", "db.t", "--mode", "log", "--from", "snapshot:2", "-o", "jsonl",
                     cwd=tmp_path)  # fmt: skip
    assert oldest.returncode == 0, oldest.stderr

    # Version 2 is still a start: its files stay (version 1's may go, but the guard refuses the
    # whole vacuum rather than a part of it).
    refused = run_cli("vacuum", "db.t", "--retain", "0", cwd=tmp_path)
    assert refused.returncode == 1
    assert "versions 2 to 3" in refused.stderr
    assert re.search(r"keep them with --retain [12]\b", refused.stderr)  # removed just now
    assert len(list(table.glob("*.parquet"))) == 3

    # Retention moves past version 2's offsets too: only version 3 is a start, the rest may go.
    _delete_before(kafka_bootstrap, topic_name, offsets[3])
    dry = _cli_json(tmp_path, "vacuum", "db.t", "--retain", "0", "--dry-run")
    assert (dry["files"], dry["hybrid_from"], dry["dry_run"]) == (2, [3], True)
    done = _cli_json(tmp_path, "vacuum", "db.t", "--retain", "0")
    assert done["paths"] == dry["paths"] and done["bytes"] > 0
    assert len(list(table.glob("*.parquet"))) == 1
    again = run_cli("read", "db.t", "--mode", "log", "--from", "snapshot", "-o", "jsonl",
                    cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr  # the newest snapshot still reads
    assert again.stdout == newest.stdout

    # alter-table: the same warning for a retention still short, none for an infinite one.
    altered = _cli_json(tmp_path, "alter-table", "db.t", "--set",
                        f"log.topic.retention.ms={2 * HOUR_MS}")  # fmt: skip
    [warning] = altered["warnings"]
    assert f"log.topic.retention.ms = {2 * HOUR_MS} (2 hours) is shorter than" in warning
    forever = _cli_json(tmp_path, "alter-table", "db.t", "--set", "log.topic.retention.ms=-1")
    assert forever["warnings"] == []
