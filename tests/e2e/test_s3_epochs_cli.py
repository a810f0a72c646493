"""A table with real ingest epochs on an ``s3://`` warehouse (issue 19 stage 2b): a local ingest
(Spark, the real broker) writes two epochs, the table directory is uploaded to the real S3 server
as it is (a Delta table's paths are relative), and ``status``, ``history``, ``verify`` and ``read
--mode log`` (the consumer engine, a hybrid read included) and ``read --mode file`` (delta-rs) on the
S3 warehouse say what they say for the local copy; then again after a write made outside logstore and a Delta checkpoint (read by
delta-rs with the storage options)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from logstore_cli.logformat.wire import EpochId
from tests.e2e.cli_support import create_tables, keyed_table, run_cli
from tests.e2e.remote_reads import check_spark_reads
from tests.e2e.test_s3_tables_cli import Lake
from tests.integration.jobs.ingest_support import changes, orders_ddl, write_files

pytestmark = pytest.mark.s3  # (integration too, as every test outside tests/unit)

TABLE = "shop.orders"
PREFIX = "lake/wh/shop/orders"


@pytest.fixture
def lake(s3_bucket: str, s3_env: dict[str, str], tmp_path: Path) -> Lake:
    return Lake(s3_bucket, s3_env, tmp_path)


def upload(lake: Lake, table: Path) -> int:
    """Every file of the local table directory to ``PREFIX``, at the same relative key."""
    files = [p for p in sorted(table.rglob("*")) if p.is_file()]
    for path in files:
        key = f"{PREFIX}/{path.relative_to(table).as_posix()}"
        lake.client.put_object(Bucket=lake.bucket, Key=key, Body=path.read_bytes())
    return len(files)


def local(tmp: Path, *args: str) -> Any:
    done = run_cli(*args, "--json", cwd=tmp)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def remote(lake: Lake, *args: str) -> Any:
    done = lake.run(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def same_status(tmp: Path, lake: Lake) -> dict[str, Any]:
    code, here = local(tmp, "status", TABLE)
    assert code == 0
    code, there = remote(lake, "status", TABLE)
    assert code == 0
    assert here.pop("path") == str(tmp / "wh" / "shop" / "orders")
    assert there.pop("path") == f"s3://{lake.bucket}/{PREFIX}"
    assert there == here
    return dict(here)


def same_history(tmp: Path, lake: Lake) -> dict[str, Any]:
    code, here = local(tmp, "history", TABLE, "--limit", "50")
    assert code == 0
    assert remote(lake, "history", TABLE, "--limit", "50") == (0, here)
    return dict(here)


def same_verify(tmp: Path, lake: Lake) -> tuple[int, dict[str, Any]]:
    code, here = local(tmp, "verify", TABLE)
    there_code, there = remote(lake, "verify", TABLE)
    here.pop("seconds"), there.pop("seconds")
    assert (there_code, there) == (code, here)
    return code, dict(here)


def same_read(tmp: Path, lake: Lake, *args: str) -> list[dict[str, Any]]:
    here = run_cli("read", TABLE, "--mode", "log", "--json", *args, cwd=tmp)
    assert here.returncode == 0, here.stderr
    there = lake.run("read", TABLE, "--mode", "log", "--json", *args)
    assert there.returncode == 0, there.stderr
    lines = [json.loads(line) for line in here.stdout.splitlines()]
    assert by_partition([json.loads(line) for line in there.stdout.splitlines()]) == by_partition(
        lines
    )
    return lines


def by_partition(
    lines: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """A log read's lines as what it promises: the snapshot's rows (a hybrid read's, first, in
    their order), then each partition's records in offset order. Across partitions the consumer
    hands records over as the brokers' fetches return them, in no set order (CI saw partition 1's
    epoch 0 printed before partition 0's in one run, after it in the other)."""
    snapshot = [line for line in lines if "partition" not in line]
    assert lines[: len(snapshot)] == snapshot, "a snapshot row after a log record"
    partitions: dict[int, list[dict[str, Any]]] = {}
    for line in lines[len(snapshot) :]:
        partitions.setdefault(line["partition"], []).append(line)
    for records in partitions.values():
        offsets = [r["offset"] for r in records]
        assert offsets == sorted(offsets), "a partition's records out of offset order"
    return snapshot, partitions


def same_file_read(tmp: Path, lake: Lake, *args: str) -> list[dict[str, Any]]:
    here = run_cli("read", TABLE, "--mode", "file", "--json", *args, cwd=tmp)
    assert here.returncode == 0, here.stderr
    there = lake.run("read", TABLE, "--mode", "file", "--json", *args)
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout
    return [json.loads(line) for line in here.stdout.splitlines()]


def test_status_history_verify_and_read_on_s3_say_what_they_say_for_the_local_copy(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    create_tables(tmp_path / "wh", orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=2))
    log = changes(120, keys=30, seed=11)
    write_files(tmp_path / "in", [log[:70], log[70:]])
    ingest = run_cli("ingest", TABLE, "--source", "in", "--once", "--json",
                     "--source-option", "maxFilesPerTrigger=1", cwd=tmp_path)  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    events = [json.loads(line) for line in ingest.stdout.splitlines()]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1]
    table = tmp_path / "wh" / "shop" / "orders"
    assert upload(lake, table) > 0

    status = same_status(tmp_path, lake)
    assert status["delta"]["version"] == epochs[1]["delta_version"]
    assert [(w["epoch"], w["delta_version"]) for w in status["writers"]] == [
        (1, epochs[1]["delta_version"])
    ]
    assert status["last_commit"]["offsets"] == epochs[1]["offsets"]
    assert status["log"]["end_offsets_read"] is True and status["outside"]["uncarried"] == []
    history = same_history(tmp_path, lake)
    assert [c["kind"] for c in history["commits"][:2]] == ["epoch", "epoch"]
    assert [c["epoch"] for c in history["commits"][:2]] == [1, 0]
    code, verified = same_verify(tmp_path, lake)
    assert code == 0 and verified["equal"] is True
    assert verified["delta_version"] == epochs[1]["delta_version"]
    changes_read = same_read(tmp_path, lake)
    assert len(changes_read) == len(log)  # every change of the two committed epochs
    rows = verified["delta"]["rows"]
    assert len(same_read(tmp_path, lake, "--from", "snapshot")) == rows
    # --mode file through delta-rs with the storage options: the snapshot, a version, the
    # changes, the same rows as the local copy's; a Delta output written locally from S3.
    assert len(same_file_read(tmp_path, lake)) == rows
    assert same_file_read(tmp_path, lake, "--as-of", "1")
    assert len(same_file_read(tmp_path, lake, "--changes")) >= rows
    assert same_file_read(tmp_path, lake, "--changes", "--as-of", "2")
    # A time: the commits' times on S3 are their objects' (as Delta takes them); one after the
    # newest commit is refused as Delta refuses it, naming that commit.
    late = lake.run("read", TABLE, "--mode", "file", "--json", "--as-of", "2999-01-01")
    assert late.returncode == 2 and "after the table's newest commit" in late.stderr
    assert f"version {epochs[1]['delta_version']})" in late.stderr
    copied = lake.run("read", TABLE, "--mode", "file", "-o", f"delta:{tmp_path / 'copy'}")
    assert copied.returncode == 0, copied.stderr
    assert DeltaTable(str(tmp_path / "copy")).to_pyarrow_table().num_rows == rows

    # A write made outside logstore (a DELETE of one data file), then a checkpoint: the log's
    # state now comes from a Parquet checkpoint, read by delta-rs with the storage options.

    dt = DeltaTable(str(table))
    victim = dt.file_uris()[0].rsplit("/", 1)[-1]
    deleted = dt.version() + 1
    actions = [
        {"commitInfo": {"timestamp": 1_764_000_000_000, "operation": "DELETE"}},
        {"remove": {"path": victim, "dataChange": True, "deletionTimestamp": 1_764_000_000_000}},
    ]
    (table / "_delta_log" / f"{deleted:020d}.json").write_text(
        "".join(json.dumps(a) + "\n" for a in actions)
    )
    DeltaTable(str(table)).create_checkpoint()
    assert list((table / "_delta_log").glob("*.checkpoint.parquet"))
    upload(lake, table)

    status = same_status(tmp_path, lake)
    assert status["delta"]["version"] == deleted
    assert [c["version"] for c in status["outside"]["uncarried"]] == [deleted]
    history = same_history(tmp_path, lake)
    assert history["commits"][0]["kind"] == "outside" and history["commits"][0]["carried"] is False
    code, verified = same_verify(tmp_path, lake)
    assert code == 1 and verified["equal"] is False
    assert [c["version"] for c in verified["outside"]] == [deleted]
    # the newest epoch's snapshot (before the outside write), read by delta-rs from the checkpoint
    assert len(same_read(tmp_path, lake, "--from", "snapshot")) == rows


def test_spark_reads_a_table_on_s3(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    """read --engine spark on the table's s3a:// URI (the session's S3A settings those of ingest):
    --as-of, --changes, a Parquet snapshot and a hybrid log read to local outputs, as delta-rs
    and the consumer read it there."""
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name, name=TABLE)
    try:
        rows = [{"id": i, "name": f"n{i}"} for i in range(6)]
        writer.epoch(EpochId("w1", 0, "a-0"), rows[:4])
        last = writer.epoch(EpochId("w1", 1, "a-1"), rows[4:])
    finally:
        writer.close()
    assert upload(lake, tmp_path / "wh" / "shop" / "orders") > 0
    before = lake.objects()
    out = tmp_path / "out"
    out.mkdir()
    check_spark_reads(lake.run, out, TABLE, rows=len(rows), last=last)
    assert lake.objects() == before  # a read writes nothing to the warehouse
