"""``logstore ingest`` on an ``s3://`` warehouse of the real S3 server (issue 19), end to end through
the CLI with nothing but ``LOGSTORE_WAREHOUSE`` and the standard AWS variables: ``create-table``
there, an ingest of local JSON files whose Spark writes the Delta table on ``s3a://`` and its
checkpoint beside it, the writer lease, writer id and quarantine written through the seam; then
the stores agree (``read --mode log --consistent`` folds to ``read --mode file``, ``verify``),
``status`` shows the epochs, ``optimize`` holds the writer lease (refused while a live holder
has it; takes an expired one over, fencing its writer) and compacts, a second ingest with updates
and deletes after it (the job run again from its checkpoint on S3) is exactly once.
The table is a plain Delta table there: delta-rs with the AWS options a user would write, and a
Spark session with only Delta's own settings and plain ``fs.s3a.*`` ones (``plain_spark_read``),
read it back.

One test: each Spark job costs 20-40 s, so the set-up is shared (the plain Spark read runs in the
background meanwhile; optimize is one more Spark job, between the two ingests it is checked with).
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.e2e import plain_spark_read
from tests.e2e.test_s3_tables_cli import Lake
from tests.integration.jobs.ingest_support import (
    Change,
    changes,
    fold,
    normalized,
    orders_ddl,
    write_files,
)

pytestmark = pytest.mark.s3  # (integration too, as every test outside tests/unit)

TABLE = "shop.orders"
PREFIX = "lake/wh/shop/orders"
State = dict[int, dict[str, Any]]


@pytest.fixture
def lake(s3_bucket: str, s3_env: dict[str, str], tmp_path: Path) -> Lake:
    return Lake(s3_bucket, s3_env, tmp_path)


def ingest(lake: Lake, *args: str) -> list[dict[str, Any]]:
    """``ingest --once`` of the local source directory ``in``: its epoch events."""
    done = lake.run("ingest", TABLE, "--source", str(lake.cwd / "in"), "--once", "--json", *args)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "done"
    return [e for e in events if e["event"] == "epoch"]


def log_rows(lake: Lake) -> list[dict[str, Any]]:
    done = lake.run("read", TABLE, "--mode", "log", "--consistent", "--from", "earliest",
                    "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line, parse_float=Decimal) for line in done.stdout.splitlines()]


def folded(lines: list[dict[str, Any]]) -> State:
    state: State = {}
    for line in lines:
        key = int(line["row"]["id"])
        if line["kind"] in ("-U", "-D"):
            assert key in state, f"{line} removes a row the read never showed"
            del state[key]
        else:
            state[key] = normalized(line["row"])
    return state


def file_rows(lake: Lake) -> State:
    """``read --mode file``: the snapshot by delta-rs with the storage options, folded."""
    done = lake.run("read", TABLE, "--mode", "file", "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line, parse_float=Decimal) for line in done.stdout.splitlines()]
    assert {line["kind"] for line in lines} <= {"+I"}
    return folded(lines)


def expected(log: list[Change]) -> State:
    return {k: normalized(v) for k, v in fold(log).items()}


def test_ingest_on_s3_writes_both_stores_exactly_once_with_the_job_state_on_s3(
    lake: Lake, kafka_bootstrap: str, topic_name: str
) -> None:
    ddl = orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=2)
    created = lake.ok("create-table", "--sql", ddl)
    assert [r["status"] for r in created] == ["created"]

    # The printed job carries the s3a settings, never the key (Lake.run checks every output).
    printed = lake.run("ingest", TABLE, "--source", "in", "--print-spark-submit")
    assert printed.returncode == 0, printed.stderr
    assert "spark.hadoop.fs.s3a.endpoint=" in printed.stdout
    assert "hadoop-aws-3.4.1.jar" in printed.stdout

    # A --checkpoint on S3 inside a table's files is refused before anything runs (exit 2).
    lake.put("elsewhere/t/_delta_log/00000000000000000000.json")
    for inside, why in [
        (f"s3://{lake.bucket}/lake/wh/shop/x", "below the warehouse"),
        (f"s3a://{lake.bucket}/elsewhere/t/cp", "elsewhere/t holds a _delta_log"),
        (f"s3://{lake.bucket}", "is a bucket's root"),
    ]:
        refused = lake.run("ingest", TABLE, "--source", "in", "--checkpoint", inside)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr

    everything = changes(130, keys=25, seed=5)
    log, more = everything[:90], everything[90:]
    write_files(lake.cwd / "in", [log[:50], log[50:]])
    # The first ingest's epochs by Spark's MERGE (a file per shuffle partition: optimize below
    # has files to compact), the second's by delta-rs (the default): one table, both engines.
    first = ingest(lake, "--source-option", "maxFilesPerTrigger=1", "--delta-engine", "spark")
    assert [e["epoch"] for e in first] == [0, 1]
    assert sum(e["quarantined"] for e in first) == 0

    # Spark wrote the table and its checkpoint on S3, logstore its lease and writer id there;
    # nothing landed on the local disk (no directory made of a URI).
    objects = lake.objects()
    state = f"{PREFIX}/_logstore"
    assert f"{state}/lease.json" in objects
    assert f"{state}/checkpoints/ingest/logstore-writer.json" in objects
    assert any(k.startswith(f"{state}/checkpoints/ingest/offsets/") for k in objects)
    assert f"{state}/checkpoints/ingest/logstore-outside.json" in objects  # the carry's state
    assert any(k.startswith(f"{PREFIX}/_delta_log/") for k in objects)
    assert sorted(p.name for p in lake.cwd.iterdir()) == ["in", "state"]
    writer_file = _read_object(lake, f"{state}/checkpoints/ingest/logstore-writer.json")
    writer = json.loads(writer_file)["writer"]
    # A Spark session a user would build reads the first ingest's last version, meanwhile.
    s3 = {"endpoint": lake.env["AWS_ENDPOINT_URL"], "region": lake.env["AWS_REGION"]}
    uri = f"s3a://{lake.bucket}/{PREFIX}"
    plain = plain_spark_read.start(uri, first[-1]["delta_version"], s3, lake.env)

    assert file_rows(lake) == expected(log)
    assert folded(log_rows(lake)) == expected(log)
    verified = lake.ok("verify", TABLE)
    assert verified["equal"] is True and verified["delta_version"] == first[-1]["delta_version"]
    status = lake.ok("status", TABLE)
    assert [(w["writer"], w["epoch"], w["delta_version"]) for w in status["writers"]] == [
        (writer, 1, first[-1]["delta_version"])
    ]
    assert status["lease"] is None  # released (a conditional overwrite) when the job ended

    check_optimize_holds_the_lease(lake, writer, expected(log))

    # Updates and deletes of live keys, and one malformed record: quarantined on S3.
    write_files(lake.cwd / "in", [more], start=2)
    bad = lake.cwd / "in" / "part-00003.json"
    bad.write_text('{"id": 999, "name": "x", "qty": "not a number", "op": "+I"}\n', "utf-8")
    second = ingest(lake)  # both new files in one epoch
    assert [e["epoch"] for e in second] == [2]
    assert sum(e["quarantined"] for e in second) == 1
    quarantine = [k for k in lake.objects() if k.startswith(f"{state}/quarantine/ingest/")]
    assert quarantine == [f"{state}/quarantine/ingest/{writer}-epoch-{2:020d}.jsonl"]
    body = _read_object(lake, quarantine[0])
    [record] = [json.loads(line) for line in body.decode().splitlines()]
    assert record["writer"] == writer and record["epoch"] == 2 and "999" in record["raw"]
    status = lake.ok("status", TABLE)
    assert status["quarantined"] == {"total": 1, "jobs": {"ingest": 1}}
    assert status["writers"][0]["epoch"] == 2

    # Each change once in each store. (A job run again from its checkpoint on S3 is the crash
    # test's [s3] case: tests/integration/jobs/test_ingest_crash.py.)
    lines = log_rows(lake)
    assert len(lines) == len(everything)  # each change once in the log: no duplicate
    assert folded(lines) == file_rows(lake) == expected(everything)
    verified = lake.ok("verify", TABLE)
    assert verified["equal"] is True and verified["delta_version"] == second[-1]["delta_version"]
    # A table written by Spark on s3a:// is a plain Delta table to delta-rs on s3:// with the
    # options a user writes (not logstore's), and to the plain Spark session on s3a://.
    table = DeltaTable(f"s3://{lake.bucket}/{PREFIX}", storage_options=lake_options(lake))
    assert table.version() == second[-1]["delta_version"]
    # Spark's MERGE committed the first ingest's epochs, delta-rs's (put if absent) the second's.
    assert engines(table, [e["delta_version"] for e in first]) == {"spark"}
    assert engines(table, [e["delta_version"] for e in second]) == {"delta-rs"}
    assert by_key(table.to_pyarrow_table().to_pylist()) == expected(everything)
    assert by_key(plain.rows()) == expected(log)


def engines(table: DeltaTable, versions: list[int]) -> set[str]:
    """Which engines wrote those commits of ``table``: "delta-rs", "spark", else their engineInfo."""
    history = {int(c["version"]): str(c.get("engineInfo", "")) for c in table.history()}
    named = {"delta-rs": "delta-rs", "Apache-Spark/": "spark"}
    return {
        next((n for p, n in named.items() if history[v].startswith(p)), history[v])
        for v in versions
    }


def check_optimize_holds_the_lease(lake: Lake, writer: str, want: State) -> None:
    """``optimize`` on S3 takes the table's writer lease, as ingest does: refused while a live
    holder has it (exit 1, the holder named, nothing changed); then, the lease left expired with
    ``writer`` in it (an ingest paused past its TTL), it takes it over, fences ``writer`` in
    Delta, compacts the table's files into one and releases the lease (the test's caller then
    ingests again: the same writer takes the lease back and commits)."""
    from logstore_cli.catalog import epochs
    from logstore_cli.catalog.storage_lease import acquire_lease, read_lease_on
    from logstore_cli.storage import open_storage

    table = open_storage(lake.uri).child("shop").child("orders")
    held = acquire_lease(table, "ingest", 60, table=TABLE)
    before, lease = lake.objects(), read_lease_on(table)
    refused = lake.run("optimize", TABLE)
    assert refused.returncode == 1, refused.stderr
    assert f"{TABLE} was not compacted: job 'ingest'" in refused.stderr
    assert "nothing was changed" in refused.stderr and "again once that job" in refused.stderr
    assert lake.objects() == before and read_lease_on(table) == lease
    held.release()

    stale = acquire_lease(table, "ingest", 1, table=TABLE, clock=lambda: time.time() - 100)
    stale.set_writer(writer)  # never released: its holder "paused"
    uri, options = f"s3://{lake.bucket}/{PREFIX}", lake_options(lake)
    files = len(DeltaTable(uri, storage_options=options).file_uris())
    assert files >= 2, files  # something to compact
    done = lake.ok("optimize", TABLE)
    assert (done["files_removed"], done["files_added"]) == (files, 1), done
    assert len(done["fenced"]) == 1 and done["fenced"][0] < done["delta_version"], done
    assert epochs.writer_txn(table, writer).fenced
    compacted = DeltaTable(uri, storage_options=options)
    assert compacted.version() == done["delta_version"] and len(compacted.file_uris()) == 1
    assert file_rows(lake) == want
    assert lake.ok("status", TABLE)["lease"] is None  # released


def lake_options(lake: Lake) -> dict[str, str]:
    """delta-rs's storage options as a user writes them (not logstore's)."""
    keys = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    return {k: lake.env[k] for k in keys} | {"AWS_ALLOW_HTTP": "true"}


def by_key(rows: list[dict[str, Any]]) -> State:
    state = {int(r["id"]): normalized(r) for r in rows}
    assert len(state) == len(rows), "a key appears twice in the Delta table"
    return state


def _read_object(lake: Lake, key: str) -> bytes:
    return bytes(lake.client.get_object(Bucket=lake.bucket, Key=key)["Body"].read())
