"""The table commands that need no Spark, end to end through the CLI on an ``s3://`` warehouse of
the real S3 server (issue 19 stage 2a), configured by ``LOGSTORE_WAREHOUSE`` and the standard AWS
variables alone; each test has its own bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from logstore_cli.storage.s3 import S3Settings, make_client
from tests.e2e.remote_maintenance import check_vacuum, table_with_removed_files

pytestmark = pytest.mark.s3

DDL = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id) NOT ENFORCED) "
    "COMMENT 'orders'"
)
SIBLING = "CREATE TABLE shop.orders2 (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)"


class Lake:
    """The CLI run against ``s3://<bucket>/lake/wh`` with nothing but AWS_* and the warehouse."""

    def __init__(self, bucket: str, env: dict[str, str], cwd: Path) -> None:
        self.bucket, self.cwd, self.client = bucket, cwd, make_client(S3Settings.from_env(env))
        self.secret = env["AWS_SECRET_ACCESS_KEY"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGSTORE_", "AWS_"))}
        self.env |= env | {"LOGSTORE_WAREHOUSE": f"s3://{bucket}/lake/wh",
                           "LOGSTORE_STATE_DIR": str(cwd / "state")}  # fmt: skip

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "logstore_cli", *args], cwd=self.cwd, env=self.env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert self.secret not in done.stdout + done.stderr  # never shown, whatever happens
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def ok(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def objects(self) -> set[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return {str(o["Key"]) for page in pages for o in page.get("Contents", ())}

    def put(self, key: str) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=b"not logstore's")


@pytest.fixture
def lake(s3_bucket: str, s3_env: dict[str, str], tmp_path: Path) -> Lake:
    return Lake(s3_bucket, s3_env, tmp_path)


def test_create_list_describe_alter_status_drop(lake: Lake) -> None:
    created = lake.ok("create-table", "--sql", DDL)
    table_uri = f"s3://{lake.bucket}/lake/wh/shop/orders"
    assert [(r["table"], r["status"], r["path"]) for r in created] == [
        ("shop.orders", "created", table_uri)
    ]
    assert not (lake.cwd / "wh").exists() and not (lake.cwd / "s3:").exists()  # nothing local

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
    # delta-rs reads what logstore committed, with the same standard variables
    options = S3Settings.from_env({k: lake.env[k] for k in lake.env if k.startswith("AWS_")})
    table = DeltaTable(table_uri, storage_options=options.delta_rs_options())
    assert table.version() == 2 and table.metadata().configuration["owner"] == "team-a"
    table.create_checkpoint()  # a log with a checkpoint is read by delta-rs, with the same options
    assert lake.ok("describe", "shop.orders")["columns"] == described["columns"]
    assert lake.ok("list")[0]["version"] == 2

    status = lake.ok("status", "shop.orders", "--no-topic")
    assert status["path"] == table_uri and status["delta"]["version"] == 2
    assert status["lease"] is None and status["log"] is None
    shown = lake.run("status", "shop.orders", "--no-topic")
    assert shown.returncode == 0 and "free" in shown.stdout

    dropped = lake.ok("drop-table", "shop.orders", "--yes")
    assert dropped["path"] == table_uri
    assert lake.ok("list") == []
    assert not any(k.startswith("lake/wh/shop/orders/") for k in lake.objects())


def test_a_drop_deletes_its_own_prefix_and_nothing_else(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    lake.ok("create-table", "--sql", SIBLING)
    # (No object at 'lake/wh/shop/orders' itself: the server's posix backend cannot hold a key
    # that is also a directory.)
    outside = {"outside.txt", "lake/wh/shop/orders.bak/x",
               "lake/wh/shop/ordersx", "lake/other/shop/orders/_delta_log/00000000000000000000.json",
               "lake/wh-old/shop/orders/x", "lake/wh/shop/note.txt"}  # fmt: skip
    for key in outside:
        lake.put(key)
    before = lake.objects()
    own = {k for k in before if k.startswith("lake/wh/shop/orders/")}
    assert own and outside <= before

    lake.ok("drop-table", "shop.orders", "--yes")
    assert lake.objects() == before - own
    assert [r["name"] for r in lake.ok("list")] == ["shop.orders2"]
    assert lake.ok("describe", "shop.orders2")["delta"]["version"] == 0


@pytest.mark.parametrize(
    "name", ["..", "shop/../orders2", "shop.%2e%2e", "shop.orders%2F..", "../lake.orders2"]
)
def test_a_table_name_that_tries_to_escape_is_refused(lake: Lake, name: str) -> None:
    lake.ok("create-table", "--sql", SIBLING)
    before = lake.objects()
    for args in (["drop-table", name, "--yes"], ["describe", name], ["status", name]):
        done = lake.run(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert lake.objects() == before


def test_what_needs_spark_exits_2_and_changes_nothing(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    before = lake.objects()
    widened = lake.run("alter-table", "shop.orders", "--widen-column", "qty BIGINT")
    assert widened.returncode == 2 and "needs Spark" in widened.stderr
    assert "issue 19 stage 2b" in widened.stderr
    spark_only = lake.run(
        "create-table", "--sql", "CREATE TABLE shop.dv (id BIGINT) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )  # fmt: skip
    assert spark_only.returncode == 2 and "needs Spark" in spark_only.stderr
    optimized = lake.run("optimize", "shop.orders")  # ingest runs there: test_s3_ingest_cli.py
    assert optimized.returncode == 2
    assert "'optimize' does not run on an s3:// warehouse: it is a second Spark" in optimized.stderr
    assert lake.objects() == before


def test_completion_lists_the_tables_on_s3(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    lake.ok("create-table", "--sql", SIBLING)
    env = lake.env | {"_LOGSTORE_COMPLETE": "complete_bash", "COMP_WORDS": "logstore describe sh",
                      "COMP_CWORD": "2"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "logstore_cli"], cwd=lake.cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "shop.orders" in done.stdout and "shop.orders2" in done.stdout, done.stderr


def test_status_reads_the_lease_and_a_live_writer_stops_drop_and_alter(lake: Lake) -> None:
    from logstore_cli.catalog.storage_lease import acquire_lease
    from logstore_cli.storage import open_storage

    lake.ok("create-table", "--sql", DDL)
    table = open_storage(f"s3://{lake.bucket}/lake/wh").child("shop").child("orders")
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


def test_a_missing_bucket_or_bad_endpoint_is_a_clear_error(lake: Lake) -> None:
    lake.env["LOGSTORE_WAREHOUSE"] = "s3://no-such-bucket-h11/wh"
    missing = lake.run("list")
    assert missing.returncode == 1 and "the bucket does not exist" in missing.stderr
    lake.env["LOGSTORE_WAREHOUSE"] = f"s3://{lake.bucket}/wh"
    lake.env["AWS_ENDPOINT_URL"] = "http://198.51.100.7:9000"  # plain HTTP off loopback
    del lake.env["AWS_ALLOW_HTTP"]
    refused = lake.run("list")
    assert refused.returncode == 2 and "AWS_ALLOW_HTTP" in refused.stderr


def test_vacuum_on_s3_deletes_the_removed_files_and_nothing_else(
    tmp_path: Path, lake: Lake
) -> None:
    table = table_with_removed_files(tmp_path)
    for path in sorted(p for p in table.rglob("*") if p.is_file()):
        key = f"lake/wh/shop/orders/{path.relative_to(table).as_posix()}"
        lake.client.put_object(Bucket=lake.bucket, Key=key, Body=path.read_bytes())
    lake.put("lake/wh/shop/orders2/part-0.parquet")
    lake.put("lake/wh/shop/ordersx.parquet")

    def files() -> set[str]:
        return {k.removeprefix("lake/wh/") for k in lake.objects()}

    check_vacuum(lake.run, tmp_path, files)
