"""The commands that run on a remote warehouse, end to end through the CLI on an ``hdfs://``
warehouse of the real HDFS (a MiniDFSCluster started once for the run), configured by
``LOGSTORE_WAREHOUSE`` alone (issue 19): create-table (logstore's own commits), list, describe,
alter-table, drop-table, status, history, completion, the lease; then a table with real epochs
(written locally without Spark, uploaded as it is) on which status, history, verify and read say
what they say for the local copy."""

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
from logstore_cli.storage.hdfs_server import HdfsServerInfo
from tests.e2e.cli_support import keyed_table, run_cli
from tests.e2e.remote_maintenance import (
    check_optimize,
    check_vacuum,
    small_files_table,
    table_with_removed_files,
)
from tests.e2e.remote_reads import check_spark_reads

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]

DDL = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id) NOT ENFORCED) "
    "COMMENT 'orders'"
)
SIBLING = "CREATE TABLE shop.orders2 (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)"


class Lake:
    """The CLI run against ``<hdfs_dir>/wh`` with nothing but the warehouse set."""

    def __init__(self, server: HdfsServerInfo, hdfs_dir: str, cwd: Path) -> None:
        from hdfs_native import Client

        self.uri, self.cwd, self.client = f"{hdfs_dir}/wh", cwd, Client(server.uri)
        self.root = hdfs_dir.removeprefix(server.uri) + "/wh"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
        self.env |= {"LOGSTORE_WAREHOUSE": self.uri, "LOGSTORE_STATE_DIR": str(cwd / "state")}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "logstore_cli", *args], cwd=self.cwd, env=self.env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def ok(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def files(self) -> set[str]:
        """Every file below the warehouse, relative to it ('' when it does not exist)."""
        try:
            found = self.client.list_status(self.root, True)
            return {s.path.removeprefix(self.root + "/") for s in found if not s.isdir}
        except FileNotFoundError:
            return set()

    def put(self, relative: str, data: bytes = b"not logstore's") -> None:
        from hdfs_native import WriteOptions

        with self.client.create(f"{self.root}/{relative}", WriteOptions(create_parent=True)) as f:
            f.write(data)

    def upload(self, local: Path, relative: str) -> int:
        """Every file of the local directory ``local`` to ``relative`` below the warehouse."""
        files = [p for p in sorted(local.rglob("*")) if p.is_file()]
        for path in files:
            self.put(f"{relative}/{path.relative_to(local).as_posix()}", path.read_bytes())
        return len(files)


@pytest.fixture
def lake(hdfs_server: HdfsServerInfo, hdfs_dir: str, tmp_path: Path) -> Lake:
    return Lake(hdfs_server, hdfs_dir, tmp_path)


def test_create_list_describe_alter_status_history_drop(lake: Lake) -> None:
    created = lake.ok("create-table", "--sql", DDL)
    table_uri = f"{lake.uri}/shop/orders"
    assert [(r["table"], r["status"], r["path"]) for r in created] == [
        ("shop.orders", "created", table_uri)
    ]
    assert not (lake.cwd / "wh").exists() and not (lake.cwd / "hdfs:").exists()  # nothing local
    assert lake.files() == {"shop/orders/_delta_log/00000000000000000000.json"}

    listed = lake.ok("list")
    assert [(r["name"], r["path"], r["version"], r["columns"]) for r in listed] == [
        ("shop.orders", table_uri, 0, 2)
    ]
    described = lake.ok("describe", "shop.orders")
    assert described["path"] == table_uri and described["delta"]["version"] == 0
    assert [c["name"] for c in described["columns"]] == ["id", "qty"]

    lake.ok("alter-table", "shop.orders", "--set", "owner=team-a")
    lake.ok("alter-table", "shop.orders", "--add-column", "note STRING COMMENT 'free text'")
    described = lake.ok("describe", "shop.orders")
    assert described["delta"]["version"] == 2 and described["properties"]["owner"] == "team-a"
    assert [c["name"] for c in described["columns"]] == ["id", "qty", "note"]
    # delta-rs reads what logstore committed, from the same URI and no options
    table = DeltaTable(table_uri)
    assert table.version() == 2 and table.metadata().configuration["owner"] == "team-a"
    table.create_checkpoint()  # a log with a checkpoint is read by delta-rs
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
    assert not any(f.startswith("shop/orders/") for f in lake.files())


def test_a_drop_deletes_its_own_path_and_nothing_else(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    lake.ok("create-table", "--sql", SIBLING)
    outside = {"outside.txt", "shop/orders.bak/x", "shop/ordersx", "shop/note.txt"}
    for relative in outside:
        lake.put(relative)
    before = lake.files()
    own = {f for f in before if f.startswith("shop/orders/")}
    assert own and outside <= before
    lake.ok("drop-table", "shop.orders", "--yes")
    assert lake.files() == before - own
    assert [r["name"] for r in lake.ok("list")] == ["shop.orders2"]


@pytest.mark.parametrize(
    "name", ["..", "shop/../orders2", "shop.%2e%2e", "shop.orders%2F..", "../wh.orders2"]
)
def test_a_table_name_that_tries_to_escape_is_refused(lake: Lake, name: str) -> None:
    lake.ok("create-table", "--sql", SIBLING)
    before = lake.files()
    for args in (["drop-table", name, "--yes"], ["describe", name], ["status", name]):
        done = lake.run(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert lake.files() == before


def test_what_needs_spark_exits_2_and_changes_nothing(lake: Lake) -> None:
    lake.ok("create-table", "--sql", DDL)
    before = lake.files()
    widened = lake.run("alter-table", "shop.orders", "--widen-column", "qty BIGINT")
    assert widened.returncode == 2 and "needs Spark" in widened.stderr
    assert lake.files() == before


def test_completion_lists_the_tables_on_hdfs(lake: Lake) -> None:
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


def test_status_history_verify_and_read_on_hdfs_say_what_they_say_for_the_local_copy(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name, name="shop.orders")
    try:
        rows = [{"id": i, "name": f"n{i}"} for i in range(6)]
        writer.epoch(EpochId("w1", 0, "a-0"), rows[:4])
        last = writer.epoch(EpochId("w1", 1, "a-1"), rows[4:])
    finally:
        writer.close()
    assert lake.upload(tmp_path / "wh" / "shop" / "orders", "shop/orders") > 0

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


def test_spark_reads_a_table_on_hdfs(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str, lake: Lake
) -> None:
    """read --engine spark on the table's hdfs:// URI: --as-of, --changes, a Parquet snapshot
    and a hybrid log read to local outputs, as delta-rs and the consumer read it there."""
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name, name="shop.orders")
    try:
        rows = [{"id": i, "name": f"n{i}"} for i in range(6)]
        writer.epoch(EpochId("w1", 0, "a-0"), rows[:4])
        last = writer.epoch(EpochId("w1", 1, "a-1"), rows[4:])
    finally:
        writer.close()
    assert lake.upload(tmp_path / "wh" / "shop" / "orders", "shop/orders") > 0
    before = lake.files()
    out = tmp_path / "out"
    out.mkdir()
    check_spark_reads(lake.run, out, "shop.orders", rows=len(rows), last=last)
    assert lake.files() == before  # a read writes nothing to the warehouse


def test_vacuum_on_hdfs_deletes_the_removed_files_and_nothing_else(
    tmp_path: Path, lake: Lake
) -> None:
    assert lake.upload(table_with_removed_files(tmp_path), "shop/orders") > 0
    lake.put("shop/orders2/part-0.parquet")
    lake.put("shop/ordersx.parquet")
    check_vacuum(lake.run, tmp_path, lake.files)


def test_optimize_on_hdfs_compacts_the_tables_files(tmp_path: Path, lake: Lake) -> None:
    """A second Spark driver beside an ingest is safe here: HDFSLogStore commits by rename."""
    assert lake.upload(small_files_table(tmp_path, 3), "shop/orders") > 0
    check_optimize(lake.run, f"{lake.uri}/shop/orders")
