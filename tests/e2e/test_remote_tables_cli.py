"""The commands that run on a remote warehouse, end to end through the CLI, one suite for both
(``remote_root``): an ``s3://`` warehouse of the real S3 server configured by ``LOGSTORE_WAREHOUSE``
and the standard AWS variables alone, each test with its own bucket, and an ``hdfs://`` warehouse
of the real HDFS (a MiniDFSCluster started once for the run) configured by ``LOGSTORE_WAREHOUSE``
alone (issue 19): create-table (logstore's own commits), list, describe, alter-table, drop-table,
status, history, completion, the lease, what needs Spark, vacuum; on S3 a table with a Kafka log;
on HDFS optimize, and a table with real epochs (written locally without Spark, uploaded as it is)
on which status, history, verify and read (the Spark engine's too) say what they say for the local
copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from logstore_cli.logformat.wire import EpochId
from logstore_cli.storage.s3 import S3Settings
from tests.e2e.cli_support import keyed_table, run_cli
from tests.e2e.remote_lake import RemoteLake as Lake
from tests.e2e.remote_maintenance import (
    check_optimize,
    check_vacuum,
    small_files_table,
    table_with_removed_files,
)
from tests.e2e.remote_reads import check_spark_reads
from tests.plugins.storage_servers import HDFS_CASE, REMOTE, S3_CASE

# remote_root: a fresh root on the parameter's server (tests/plugins/storage_servers.py)
both = pytest.mark.parametrize("remote_root", REMOTE, indirect=True)
s3_only = pytest.mark.parametrize("remote_root", [S3_CASE], indirect=True)
hdfs_only = pytest.mark.parametrize("remote_root", [HDFS_CASE], indirect=True)

DDL = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id) NOT ENFORCED) "
    "COMMENT 'orders'"
)
SIBLING = "CREATE TABLE shop.orders2 (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)"
WH = "lake/wh"  # the warehouse, below the backend's root (a bucket, a directory)


@pytest.fixture
def lake(remote_root: str, tmp_path: Path, request: pytest.FixtureRequest) -> Lake:
    if remote_root.startswith("s3://"):
        return Lake(remote_root, tmp_path, warehouse=WH, aws=request.getfixturevalue("s3_env"))
    namenode: str = request.getfixturevalue("hdfs_server").uri
    return Lake(remote_root, tmp_path, warehouse=WH, namenode=namenode)


@both
def test_create_list_describe_alter_status_history_drop(lake: Lake) -> None:
    created = lake.ok("create-table", "--sql", DDL)
    table_uri = f"{lake.uri}/shop/orders"
    assert [(r["table"], r["status"], r["path"]) for r in created] == [
        ("shop.orders", "created", table_uri)
    ]
    assert not (lake.cwd / "wh").exists() and not (lake.cwd / "lake").exists()  # nothing local
    assert not (lake.cwd / f"{lake.backend}:").exists()
    assert lake.files() == {f"{WH}/shop/orders/_delta_log/00000000000000000000.json"}

    listed = lake.ok("list")
    assert [(r["name"], r["path"], r["version"], r["columns"]) for r in listed] == [
        ("shop.orders", table_uri, 0, 2)
    ]
    described = lake.ok("describe", "shop.orders")
    assert described["path"] == table_uri and described["delta"]["version"] == 0
    assert [c["name"] for c in described["columns"]] == ["id", "qty"]
    assert described["primary_key"] == ["id"] and described["log_store"] is None

    lake.ok("alter-table", "shop.orders", "--set", "owner=team-a")
    lake.ok("alter-table", "shop.orders", "--add-column", "note STRING COMMENT 'free text'")
    described = lake.ok("describe", "shop.orders")
    assert described["delta"]["version"] == 2 and described["properties"]["owner"] == "team-a"
    assert [c["name"] for c in described["columns"]] == ["id", "qty", "note"]
    # delta-rs reads what logstore committed: on S3 with the same standard variables, on HDFS
    # from the same URI and no options
    if lake.backend == "s3":
        options = S3Settings.from_env({k: v for k, v in lake.env.items() if k.startswith("AWS_")})
        table = DeltaTable(table_uri, storage_options=options.delta_rs_options())
    else:
        table = DeltaTable(table_uri)
    assert table.version() == 2 and table.metadata().configuration["owner"] == "team-a"
    table.create_checkpoint()  # a log with a checkpoint is read by delta-rs, with the same options
    assert lake.ok("describe", "shop.orders")["columns"] == described["columns"]
    assert lake.ok("list")[0]["version"] == 2

    status = lake.ok("status", "shop.orders", "--no-topic")
    assert status["path"] == table_uri and status["delta"]["version"] == 2
    assert status["lease"] is None and status["log"] is None
    shown = lake.run("status", "shop.orders", "--no-topic")
    assert shown.returncode == 0 and "free" in shown.stdout
    history = lake.ok("history", "shop.orders")
    assert [c["version"] for c in history["commits"]][:3] == [2, 1, 0]

    dropped = lake.ok("drop-table", "shop.orders", "--yes")
    assert dropped["path"] == table_uri
    assert lake.ok("list") == []
    assert not any(f.startswith(f"{WH}/shop/orders/") for f in lake.files())


@both
def test_a_drop_deletes_its_own_prefix_and_nothing_else(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    lake.ok("create-table", "--sql", SIBLING)
    # (No object at 'lake/wh/shop/orders' itself: the S3 server's posix backend cannot hold a key
    # that is also a directory.)
    outside = {"outside.txt", f"{WH}/outside.txt", f"{WH}/shop/orders.bak/x", f"{WH}/shop/ordersx",
               "lake/other/shop/orders/_delta_log/00000000000000000000.json",
               "lake/wh-old/shop/orders/x", f"{WH}/shop/note.txt"}  # fmt: skip
    for key in outside:
        lake.put(key)
    before = lake.files()
    own = {k for k in before if k.startswith(f"{WH}/shop/orders/")}
    assert own and outside <= before

    lake.ok("drop-table", "shop.orders", "--yes")
    assert lake.files() == before - own
    assert [r["name"] for r in lake.ok("list")] == ["shop.orders2"]
    assert lake.ok("describe", "shop.orders2")["delta"]["version"] == 0


@both
@pytest.mark.parametrize(
    "name",
    [
        "..",
        "shop/../orders2",
        "shop.%2e%2e",
        "shop.orders%2F..",
        "../lake.orders2",
        "../wh.orders2",
    ],
)
def test_a_table_name_that_tries_to_escape_is_refused(lake: Lake, name: str) -> None:
    lake.ok("create-table", "--sql", SIBLING)
    before = lake.files()
    for args in (["drop-table", name, "--yes"], ["describe", name], ["status", name]):
        done = lake.run(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert lake.files() == before


@both
def test_what_needs_spark_exits_2_and_changes_nothing(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    before = lake.files()
    widened = lake.run("alter-table", "shop.orders", "--widen-column", "qty BIGINT")
    assert widened.returncode == 2 and "needs Spark" in widened.stderr
    assert "issue 19 stage 2b" in widened.stderr
    spark_only = lake.run(
        "create-table", "--sql", "CREATE TABLE shop.dv (id BIGINT) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )  # fmt: skip
    assert spark_only.returncode == 2 and "needs Spark" in spark_only.stderr
    # optimize runs on both: test_optimize_on_hdfs_compacts_the_tables_files, and on S3 under the
    # writer lease test_s3_ingest_cli.py (check_optimize_holds_the_lease)
    assert lake.files() == before


@both
def test_completion_lists_the_tables(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    lake.ok("create-table", "--sql", SIBLING)
    env = lake.env | {"_LOGSTORE_COMPLETE": "complete_bash", "COMP_WORDS": "logstore describe sh",
                      "COMP_CWORD": "2"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "logstore_cli"], cwd=lake.cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "shop.orders" in done.stdout and "shop.orders2" in done.stdout, done.stderr


@both
def test_status_reads_the_lease_and_a_live_writer_stops_drop_and_alter(lake: Lake) -> None:
    from logstore_cli.catalog.storage_lease import acquire_lease
    from logstore_cli.storage import open_storage

    lake.ok("create-table", "--sql", DDL)
    table = open_storage(lake.uri).child("shop").child("orders")
    with acquire_lease(table, "ingest-probe", 120.0, table="shop.orders"):
        lease = lake.ok("status", "shop.orders", "--no-topic")["lease"]
        assert lease["job"] == "ingest-probe" and lease["pid"] == os.getpid()
        assert not lease["expired"] and lease["holder_running"] is True
        for args in (["drop-table", "shop.orders", "--yes"],
                     ["alter-table", "shop.orders", "--set", "owner=b"]):  # fmt: skip
            refused = lake.run(*args)
            assert refused.returncode == 1 and "is being written by" in refused.stderr, args
        assert lake.ok("describe", "shop.orders")["delta"]["version"] == 0
    assert lake.ok("status", "shop.orders", "--no-topic")["lease"] is None  # released
    lake.ok("drop-table", "shop.orders", "--yes")
    assert lake.ok("list") == []


@s3_only
def test_a_table_with_a_kafka_log_on_s3(lake: Lake, kafka_bootstrap: str, topic_name: str) -> None:
    from logstore_cli.kafka.admin import KafkaAdmin

    ddl = (
        "CREATE TABLE shop.events (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) WITH "
        f"('log.system' = 'kafka', 'kafka.topic' = '{topic_name}', "
        f"'kafka.bootstrap.servers' = '{kafka_bootstrap}', 'log.system.partitions' = '2')"
    )
    created = lake.ok("create-table", "--sql", ddl)
    assert created[0]["topic"]["name"] == topic_name and created[0]["status"] == "created"
    described = lake.ok("describe", "shop.events")
    assert described["topic"]["exists"] and len(described["topic"]["partitions"]) == 2
    # a second table may not take the topic: the owners are read from the S3 warehouse
    taken = lake.run("create-table", "--sql", ddl.replace("shop.events", "shop.copy"))
    assert taken.returncode != 0 and "shop.events" in taken.stderr
    lake.ok("alter-table", "shop.events", "--set", "log.system.partitions=3")
    assert len(lake.ok("describe", "shop.events")["topic"]["partitions"]) == 3
    status = lake.ok("status", "shop.events")
    assert status["log"]["topic"] == topic_name
    lake.ok("drop-table", "shop.events", "--yes", "--delete-topic")
    with KafkaAdmin(kafka_bootstrap, timeout_s=15.0) as admin:
        assert admin.describe_topic(topic_name) is None


@s3_only
def test_a_missing_bucket_or_bad_endpoint_is_a_clear_error(lake: Lake) -> None:
    lake.env["LOGSTORE_WAREHOUSE"] = "s3://no-such-bucket-h11/wh"
    missing = lake.run("list")
    assert missing.returncode == 1 and "the bucket does not exist" in missing.stderr
    lake.env["LOGSTORE_WAREHOUSE"] = f"s3://{lake.bucket}/wh"
    lake.env["AWS_ENDPOINT_URL"] = "http://198.51.100.7:9000"  # plain HTTP off loopback
    del lake.env["AWS_ALLOW_HTTP"]
    refused = lake.run("list")
    assert refused.returncode == 2 and "AWS_ALLOW_HTTP" in refused.stderr


@hdfs_only
def test_an_unreachable_namenode_or_a_bad_uri_is_a_clear_error(lake: Lake) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    lake.env["LOGSTORE_WAREHOUSE"] = f"hdfs://127.0.0.1:{port}/wh"
    down = lake.run("list")
    assert down.returncode == 1 and f"hdfs://127.0.0.1:{port}/wh" in down.stderr, down.stderr
    assert "NameNode is reachable" in down.stderr
    lake.env["LOGSTORE_WAREHOUSE"] = "hdfs://nn:99999/wh"
    bad = lake.run("list")
    assert bad.returncode == 2 and "hdfs://namenode:port/path" in bad.stderr, bad.stderr


def _both(tmp: Path, lake: Lake, *args: str) -> tuple[Any, Any]:
    here = run_cli(*args, "--json", cwd=tmp)
    there = lake.run(*args, "--json")
    assert "Traceback" not in here.stderr, here.stderr
    assert there.returncode == here.returncode, (here.stderr, there.stderr)
    return (here.returncode, here.stdout), (there.returncode, there.stdout)


def _uploaded_epochs(
    tmp: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> tuple[list[dict[str, Any]], int]:
    """A keyed table with two epochs written locally without Spark, uploaded as it is to the
    lake's shop.orders: its rows and the Delta version of its last epoch."""
    writer = keyed_table(tmp, kafka_bootstrap, topic_name, name="shop.orders")
    try:
        rows: list[dict[str, Any]] = [{"id": i, "name": f"n{i}"} for i in range(6)]
        writer.epoch(EpochId("w1", 0, "a-0"), rows[:4])
        last = writer.epoch(EpochId("w1", 1, "a-1"), rows[4:])
    finally:
        writer.close()
    assert lake.upload(tmp / "wh" / "shop" / "orders", f"{WH}/shop/orders") > 0
    return rows, last


@hdfs_only
def test_status_history_verify_and_read_say_what_they_say_for_the_local_copy(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    rows, last = _uploaded_epochs(tmp_path, kafka_bootstrap, topic_name, lake)

    (_, here), (_, there) = _both(tmp_path, lake, "status", "shop.orders")
    local, remote = json.loads(here), json.loads(there)
    assert local.pop("path") == str(tmp_path / "wh" / "shop" / "orders")
    assert remote.pop("path") == f"{lake.uri}/shop/orders"
    assert remote == local and remote["delta"]["version"] == last
    assert [(w["epoch"], w["delta_version"]) for w in remote["writers"]] == [(1, last)]

    (_, here), (_, there) = _both(tmp_path, lake, "history", "shop.orders")
    assert there == here and [c["epoch"] for c in json.loads(there)["commits"][:2]] == [1, 0]

    (code, here), (_, there) = _both(tmp_path, lake, "verify", "shop.orders")
    local, remote = json.loads(here), json.loads(there)
    local.pop("seconds"), remote.pop("seconds")
    assert code == 0 and remote == local and remote["equal"] is True

    for args in (["--mode", "log"], ["--mode", "log", "--from", "snapshot"], ["--mode", "file"]):
        (code, here), (_, there) = _both(tmp_path, lake, "read", "shop.orders", *args)
        assert code == 0 and there == here, args
        assert len(here.splitlines()) == len(rows), args


@hdfs_only
def test_spark_reads_a_table_on_hdfs(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    """read --engine spark on the table's hdfs:// URI: --as-of, --changes, a Parquet snapshot
    and a hybrid log read to local outputs, as delta-rs and the consumer read it there."""
    rows, last = _uploaded_epochs(tmp_path, kafka_bootstrap, topic_name, lake)
    before = lake.files()
    out = tmp_path / "out"
    out.mkdir()
    check_spark_reads(lake.run, out, "shop.orders", rows=len(rows), last=last)
    assert lake.files() == before  # a read writes nothing to the warehouse


@both
def test_vacuum_deletes_the_removed_files_and_nothing_else(tmp_path: Path, lake: Lake) -> None:
    assert lake.upload(table_with_removed_files(tmp_path), f"{WH}/shop/orders") > 0
    lake.put(f"{WH}/shop/orders2/part-0.parquet")
    lake.put(f"{WH}/shop/ordersx.parquet")

    def files() -> set[str]:  # below the warehouse, relative to it
        return {k.removeprefix(f"{WH}/") for k in lake.files() if k.startswith(f"{WH}/")}

    check_vacuum(lake.run, tmp_path, files)


@hdfs_only
def test_optimize_on_hdfs_compacts_the_tables_files(tmp_path: Path, lake: Lake) -> None:
    """A second Spark driver beside an ingest is safe here: HDFSLogStore commits by rename."""
    assert lake.upload(small_files_table(tmp_path, 3), f"{WH}/shop/orders") > 0
    check_optimize(lake.run, f"{lake.uri}/shop/orders")
