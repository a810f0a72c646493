"""``logstore ingest`` on an ``hdfs://`` warehouse of the real HDFS (issue 19), end to end through
the CLI with nothing but ``LOGSTORE_WAREHOUSE``: Spark writes the Delta table on ``hdfs://`` (Delta's
``HDFSLogStore``: commits by an atomic rename) and its checkpoint beside it; logstore writes the
lease, the writer id and the carry's state through the HDFS backend; then the stores agree
(``read --mode log --consistent`` folds to ``read --mode file``, ``verify``), ``status`` shows the
epochs (a job run again from its checkpoint on HDFS is the crash test's ``[hdfs]`` case). A
second job with ``--checkpoint hdfs://…`` outside the warehouse keeps Spark's offsets and its
writer id there; one inside the warehouse is refused before Spark starts. The table is a plain Delta table there: delta-rs, and a
Spark session with only Delta's own settings (``plain_spark_read``), read it back.

One test: each Spark job costs 20-40 s, so the set-up is shared (the plain Spark read runs in the
background meanwhile).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from logstore_cli.storage.hdfs_server import HdfsServerInfo
from tests.e2e import plain_spark_read
from tests.e2e.test_hdfs_tables_cli import Lake
from tests.e2e.test_s3_ingest_cli import by_key, engines, folded
from tests.integration.jobs.ingest_support import (
    Change,
    changes,
    fold,
    normalized,
    orders_ddl,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]

TABLE = "shop.orders"


@pytest.fixture
def lake(hdfs_server: HdfsServerInfo, hdfs_dir: str, tmp_path: Path) -> Lake:
    return Lake(hdfs_server, hdfs_dir, tmp_path)


def ingest(lake: Lake, source: str = "in", *args: str) -> list[dict[str, Any]]:
    """``ingest --once`` of the local source directory ``source``, a file an epoch: its epochs."""
    done = lake.run("ingest", TABLE, "--source", str(lake.cwd / source), "--once", "--json",
                    "--source-option", "maxFilesPerTrigger=1", *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "done"
    return [e for e in events if e["event"] == "epoch"]


def read(lake: Lake, *args: str) -> list[dict[str, Any]]:
    done = lake.run("read", TABLE, "--json", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line, parse_float=Decimal) for line in done.stdout.splitlines()]


def test_ingest_on_hdfs_writes_both_stores_exactly_once_with_the_job_state_on_hdfs(
    lake: Lake, kafka_bootstrap: str, topic_name: str
) -> None:
    created = lake.ok("create-table", "--sql", orders_ddl(TABLE, topic_name, kafka_bootstrap,
                                                          partitions=2))  # fmt: skip
    assert [r["status"] for r in created] == ["created"]
    everything = changes(90, keys=20, seed=7)
    write_files(lake.cwd / "in", [everything[:50], everything[50:]])

    epochs = ingest(lake)
    assert [e["epoch"] for e in epochs] == [0, 1]

    # Spark wrote the table and its checkpoint on HDFS, logstore its lease and writer id there;
    # nothing landed on the local disk (no directory made of a URI).
    files = lake.files()
    state = "shop/orders/_logstore"
    assert any(f.startswith(f"{state}/checkpoints/ingest/offsets/") for f in files)
    assert any(f.startswith("shop/orders/_delta_log/") for f in files)
    assert any("logstore-writer.json" in f for f in files)
    assert any("lease.json" in f for f in files)
    assert sorted(p.name for p in lake.cwd.iterdir()) == ["in", "state"]
    # A Spark session a user would build reads the ingest's last version, meanwhile.
    uri = f"{lake.uri}/shop/orders"
    plain = plain_spark_read.start(uri, epochs[-1]["delta_version"], None, lake.env)

    want = {k: normalized(v) for k, v in fold(everything).items()}
    snapshot = read(lake, "--mode", "file")
    assert {line["kind"] for line in snapshot} <= {"+I"} and folded(snapshot) == want
    log = read(lake, "--mode", "log", "--consistent", "--from", "earliest")
    assert len(log) == len(everything) and folded(log) == want
    verified = lake.ok("verify", TABLE)
    assert verified["equal"] is True and verified["delta_version"] == epochs[-1]["delta_version"]
    status = lake.ok("status", TABLE)
    assert [(w["epoch"], w["delta_version"]) for w in status["writers"]] == [
        (1, epochs[-1]["delta_version"])
    ]
    assert status["lease"] is None  # released when the job ended

    # Each change once in the log. (A job run again from its checkpoint on HDFS is the crash
    # test's [hdfs] case: tests/integration/jobs/test_ingest_crash.py.)
    assert len(read(lake, "--mode", "log", "--consistent", "--from", "earliest")) == len(everything)
    # A table Spark wrote on hdfs:// is a plain Delta table to delta-rs and the plain session.
    table = DeltaTable(uri)
    assert table.version() == epochs[-1]["delta_version"]
    # The epochs' MERGEs were delta-rs's (a rename without overwrite on HDFS), not Spark's.
    assert engines(table, [e["delta_version"] for e in epochs]) == {"delta-rs"}
    assert by_key(table.to_pyarrow_table().to_pylist()) == want == by_key(plain.rows())

    # A second job with its checkpoint on HDFS outside the warehouse (--checkpoint hdfs://…): a
    # checkpoint inside the warehouse is refused first (exit 2, before Spark starts).
    refused = lake.run("ingest", TABLE, "--source", str(lake.cwd / "in2"), "--once",
                       "--checkpoint", f"{lake.uri}/shop/cp")  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert f"it is below the warehouse {lake.uri}" in refused.stderr
    more = [Change(c.op, {**c.row, "id": c.row["id"] + 100}) for c in changes(30, keys=8, seed=8)]
    write_files(lake.cwd / "in2", [more])
    elsewhere = f"{lake.root.removesuffix('/wh')}/ckpt/orders"
    second = ingest(lake, "in2", "--checkpoint", f"{lake.uri.removesuffix('/wh')}/ckpt/orders")
    assert [e["epoch"] for e in second] == [0]
    outside = {s.path for s in lake.client.list_status(elsewhere, True) if not s.isdir}
    assert any(p.startswith(f"{elsewhere}/offsets/") for p in outside), outside
    assert f"{elsewhere}/logstore-writer.json" in outside
    assert sorted(p.name for p in lake.cwd.iterdir()) == ["in", "in2", "state"]  # nothing local
    want = {k: normalized(v) for k, v in fold(everything + more).items()}
    assert folded(read(lake, "--mode", "file")) == want
    log = read(lake, "--mode", "log", "--consistent", "--from", "earliest")
    assert len(log) == len(everything) + len(more) and folded(log) == want
    assert lake.ok("verify", TABLE)["equal"] is True
