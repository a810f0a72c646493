"""``vacuum`` on a Pulsar table (issue 23): it keeps the files of the snapshots a hybrid read can
still start from, asking Pulsar where each partition's log now starts, in the ordered positions the
commit metadata's message ids become (``read.hybrid.log_start_offsets``).

Epochs are committed by hand (delta-rs, the log's producer: no Spark), each rewriting the table as a
compaction would, so each snapshot has files the next one removed. Retention is what the
topic's ``truncate`` does to it: Pulsar deletes every ledger of a partition but the one it writes
(an ``unload`` before an epoch starts a new one), as retention deletes whole ledgers from the
start. The CLI as a subprocess, against the real standalone.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from logstore_cli.catalog.epochs import epoch_of
from logstore_cli.catalog.tables import load_table
from logstore_cli.logformat.wire import (
    EpochId,
    RowSchema,
)
from logstore_cli.pulsar.admin import PulsarAdmin, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from tests.deltalog import write_table
from tests.integration.pulsar.epochs import watermarks, write_epoch
from tests.jobrun import cli

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

TABLE = "db.t"


def _ddl(pulsar: PulsarInfo, topic: TopicName) -> str:
    return (
        "CREATE TABLE db.t (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('log-store.enabled' = 'true', 'log-store.type' = 'pulsar', "
        f"'log-store.address' = '{pulsar.service_url}', 'log-store.topic' = '{topic}', "
        "'log.system.partitions' = '2', "
        "'delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )


class _Log:
    def __init__(self, pulsar: PulsarInfo, topic: TopicName, table: Path, schema: RowSchema):
        self.pulsar, self.topic, self.table, self.schema = pulsar, topic, table, schema

    def _admin(self, method: str, action: str) -> None:
        """The topic's ``unload`` or ``truncate`` through the admin REST API."""
        url = f"{self.pulsar.web_url}{self.topic.path}/{action}"
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=60):
            pass

    def unload(self) -> None:
        """The partitions' next messages go to new ledgers."""
        self._admin("PUT", "unload")

    def truncate(self) -> None:
        """Retention's effect: every ledger but the one each partition writes is deleted."""
        self._admin("DELETE", "truncate")

    def marks(self) -> dict[int, tuple[int, int]]:
        return watermarks(self.pulsar, self.topic)

    def epoch(self, eid: EpochId, ids: range) -> int:
        """An epoch whose Delta commit rewrites the table (removing the files before it); its
        version. Its commit records each partition's last message, as the ingest job's does."""
        rows = [{"id": i, "name": f"r{i}"} for i in ids]
        data = pa.table({"id": pa.array(list(ids), pa.int64()),
                         "name": pa.array([r["name"] for r in rows], pa.string())})  # fmt: skip
        return write_epoch(self.pulsar, self.topic, self.table, self.schema, eid, rows, data,
                           mode="overwrite")  # fmt: skip


def test_vacuum_keeps_what_a_hybrid_read_from_the_pulsar_log_needs(
    pulsar: PulsarInfo, tmp_path: Path
) -> None:
    topic = TopicName.parse(f"t-vacuum-{uuid.uuid4().hex[:12]}")
    PulsarAdmin(pulsar.web_url).create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    table = write_table(tmp_path / "wh", _ddl(pulsar, topic))
    log = _Log(pulsar, topic, table, RowSchema.of(load_table(tmp_path / "wh", TABLE).spec))

    def run(*args: str) -> Any:
        return cli(tmp_path, tmp_path / "wh", *args, "--pulsar-admin-url", pulsar.web_url)

    def vacuum_json(*args: str) -> Any:
        proc = run("vacuum", TABLE, "--retain", "0", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    # Epoch 1 in each partition's first ledger; epochs 2 and 3 (8 keys each: both partitions
    # get records) in the next.
    v1 = log.epoch(EpochId("w", 1, "a"), range(0, 8))
    log.unload()
    v2 = log.epoch(EpochId("w", 2, "a"), range(8, 16))
    v3 = log.epoch(EpochId("w", 3, "a"), range(16, 24))
    assert [v1, v2, v3] == [1, 2, 3]
    recorded = {v: epoch_of(table, v).offsets for v in (v1, v2, v3)}  # type: ignore[union-attr]

    # Every snapshot is still continued by the log: vacuum would delete files two of them need.
    refused = run("vacuum", TABLE, "--retain", "0", "--dry-run")
    assert refused.returncode == 1, refused.stderr
    assert "snapshots a hybrid read can still start from need: versions 1 to 3" in refused.stderr
    assert "Traceback" not in refused.stderr

    # Retention deletes the first ledgers: version 1's start is gone, version 2's is not.
    log.truncate()
    low = {p: first for p, (first, _) in log.marks().items()}
    assert all(recorded[v1][p] < low[p] <= recorded[v2][p] for p in low), (recorded, low)
    refused = run("vacuum", TABLE, "--retain", "0", "--dry-run")
    assert refused.returncode == 1, refused.stderr
    assert "versions 2 to 3" in refused.stderr
    assert len(list(table.glob("*.parquet"))) == 3

    # Epoch 4 in new ledgers, and retention deletes the rest: only version 4 is a start.
    log.unload()
    v4 = log.epoch(EpochId("w", 4, "a"), range(24, 32))
    before = run("read", TABLE, "--mode", "log", "--from", "snapshot", "-o", "jsonl")
    assert before.returncode == 0, before.stderr
    log.truncate()
    dry = vacuum_json("--dry-run")
    assert (dry["files"], dry["hybrid_from"], dry["dry_run"]) == (3, [v4], True)
    assert len(list(table.glob("*.parquet"))) == 4  # a dry run deletes nothing
    done = vacuum_json()
    assert done["paths"] == dry["paths"] and done["bytes"] > 0
    assert len(list(table.glob("*.parquet"))) == 1

    # The hybrid read from the snapshot the log still continues reads as before the vacuum.
    after = run("read", TABLE, "--mode", "log", "--from", "snapshot", "-o", "jsonl")
    assert after.returncode == 0, after.stderr
    rows = [json.loads(line) for line in after.stdout.splitlines()]
    assert sorted(r["row"]["id"] for r in rows if r.get("version") == v4) == list(range(24, 32))
    assert after.stdout == before.stdout
