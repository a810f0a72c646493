"""The Delta log read through the storage seam (issue 19 stage 2b): a table read as a ``Storage``
rooted at it answers exactly as the same table read as a local ``Path``, every key read stays below
the table's own ``_delta_log``, and a local path never loads a storage client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from logstore_cli.catalog import delta_log, epochs
from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.epochs import (
    EpochConfirmer,
    commit_versions,
    committed_version,
    epoch_commits,
    find_epoch_commit,
    latest_epoch_commit,
)
from logstore_cli.catalog.history import read_history
from logstore_cli.catalog.outside import Follower, uncarried
from logstore_cli.catalog.snapshot import snapshot_batches
from logstore_cli.catalog.status import count_quarantined, count_quarantined_on, table_status
from logstore_cli.errors import InvalidInputError, LogstoreError, WarehouseError
from logstore_cli.logformat.wire import CommitMarker, EpochId
from logstore_cli.names import TableName
from logstore_cli.storage.base import Blob, Listing, Storage
from logstore_cli.storage.local import LocalStorage
from tests.deltalog import write_table
from tests.unit.catalog.test_status import DDL, commit, epoch_commit

WAREHOUSE = "wh"
DELETE = {"operation": "DELETE"}
REMOVED = {"remove": {"path": "a.parquet", "dataChange": True}}


class Recording:
    """A ``Storage`` that records the full key (from the warehouse's root) of every call."""

    def __init__(self, inner: Storage, prefix: str, keys: list[str]) -> None:
        self._inner, self._prefix, self.keys = inner, prefix, keys

    @property
    def uri(self) -> str:
        return self._inner.uri

    def _full(self, key: str) -> str:
        full = "/".join(p for p in (self._prefix, key) if p)
        self.keys.append(full)
        return full

    def child(self, key: str) -> Storage:
        return Recording(self._inner.child(key), self._full(key), self.keys)

    def read(self, key: str) -> Blob | None:
        self._full(key)
        return self._inner.read(key)

    def write(self, key: str, data: bytes) -> str:
        raise AssertionError(f"a reader wrote {key}")

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        raise AssertionError(f"a reader wrote {key}")

    def replace_if_version(self, key: str, data: bytes, version: str) -> str | None:
        raise AssertionError(f"a reader wrote {key}")

    def delete(self, key: str) -> None:
        raise AssertionError(f"a reader deleted {key}")

    def exists(self, key: str) -> bool:
        self._full(key)
        return self._inner.exists(key)

    def list(self, key: str = "") -> Listing:
        self._full(key)
        return self._inner.list(key)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A table with two writers' epochs, a write outside logstore and a carried one."""
    path = write_table(tmp_path / WAREHOUSE, DDL)
    epoch_commit(path, "w-1", 0, "a0", {0: 3, 1: 2})
    commit(path, DELETE, REMOVED)  # carried below
    epoch_commit(path, "delta-outside", 2, "c2", {0: 4, 1: 2})  # the carry
    epoch_commit(path, "w-2", 0, "b0", {0: 6, 1: 2, 2: 1})
    commit(path, DELETE, REMOVED)  # not carried yet
    epoch_commit(path, "w-1", 1, "a1", {0: 8, 1: 3, 2: 1})
    return path


def on_storage(path: Path) -> Storage:
    return wh.table_storage(LocalStorage(path.parents[1]), TableName("db", "orders"))


def test_every_reader_answers_on_a_storage_as_on_the_local_path(table: Path) -> None:
    stored = on_storage(table)
    assert commit_versions(stored) == commit_versions(table) == [6, 5, 4, 3, 2, 1, 0]
    assert list(epoch_commits(stored)) == list(epoch_commits(table))
    assert [c.epoch for c in epoch_commits(stored)] == [
        EpochId("w-1", 1, "a1"), EpochId("w-2", 0, "b0"), EpochId("delta-outside", 2, "c2"),
        EpochId("w-1", 0, "a0"),
    ]  # fmt: skip
    assert latest_epoch_commit(stored) == latest_epoch_commit(table)
    assert find_epoch_commit(stored, "w-1", 0) == find_epoch_commit(table, "w-1", 0) is not None
    assert committed_version(stored, "w-1") == committed_version(table, "w-1") == 1
    assert uncarried(stored) == uncarried(table)
    assert [c.version for c in uncarried(stored).commits] == [5]
    assert read_history(stored, "db.orders").to_json() == read_history(table, "db.orders").to_json()
    follower = Follower(stored)
    assert [c.version for c in follower.new().commits] == [5]
    epoch_commit(table, "w-1", 2, "a2", {0: 9})
    commit(table, DELETE, REMOVED)
    assert [c.version for c in follower.new().commits] == [8]  # the new commit files only
    assert list(snapshot_batches(stored)) == list(snapshot_batches(table)) == []


def test_the_epoch_confirmer_reads_the_commit_a_marker_names_through_the_storage(
    table: Path,
) -> None:
    confirm = EpochConfirmer(on_storage(table))
    assert confirm(CommitMarker(EpochId("w-1", 1, "a1"), 6))
    assert not confirm(CommitMarker(EpochId("w-1", 1, "forged"), 6))
    assert not confirm(CommitMarker(EpochId("w-1", 2, "a2"), 7))  # not committed (yet)
    epoch_commit(table, "w-1", 2, "a2", {0: 9})
    assert confirm(CommitMarker(EpochId("w-1", 2, "a2"), 7))


def test_status_on_a_storage_shows_what_it_shows_for_the_local_path(table: Path) -> None:
    (table / "_logstore" / "quarantine" / "cdc").mkdir(parents=True)
    (table / "_logstore" / "quarantine" / "cdc" / "x-epoch-1.jsonl").write_text('{"a":1}\n\n{}\n')
    local = table_status(wh.TableRef("db", "orders", table), None, now=1.0)
    stored = table_status(wh.StoredTable("db", "orders", on_storage(table)), None, now=1.0)
    expected = local.to_json()
    assert stored.to_json() == expected  # the path is the root's URI: the same directory here
    assert [(w["writer"], w["epoch"]) for w in expected["writers"]] == [
        ("w-1", 1), ("w-2", 0), ("delta-outside", 2)
    ]  # fmt: skip
    assert [c["version"] for c in expected["outside"]["uncarried"]] == [5]
    assert expected["quarantined"] == {"total": 2, "jobs": {"cdc": 2}}
    assert count_quarantined_on(on_storage(table)) == count_quarantined(table)


def test_every_key_a_reader_reads_lies_below_the_tables_delta_log(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # delta-rs (the transaction ids) reads the table by its URI, not through the recorder
    monkeypatch.setattr(epochs, "delta_rs_args", lambda _: (str(table), None))
    keys: list[str] = []
    warehouse = Recording(LocalStorage(table.parents[1]), "", keys)
    stored = wh.table_storage(warehouse, TableName("db", "orders"))
    keys.clear()  # the two child() calls that root the table
    list(epoch_commits(stored))
    read_history(stored, "db.orders")
    uncarried(stored)
    EpochConfirmer(stored)(CommitMarker(EpochId("w-1", 1, "a1"), 6))
    Follower(stored).new()
    assert keys and all(k.startswith("db/orders/_delta_log") for k in keys), keys
    assert all(".." not in k.split("/") for k in keys)


@pytest.mark.parametrize("name", ["..", ".", "a/b", "%2e%2e", "a\\b", ""])
def test_a_table_location_outside_the_warehouse_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises((InvalidInputError, LogstoreError)):
        wh.table_storage(LocalStorage(tmp_path), TableName("db", name))


def test_a_delta_log_linked_outside_the_warehouse_is_not_read_through_the_storage(
    table: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    (table / "_delta_log").rename(outside)
    os.symlink(outside, table / "_delta_log")
    with pytest.raises(WarehouseError, match="not inside"):
        delta_log.open_commit(on_storage(table), 0)


def test_log_names_that_are_no_commit_file_are_passed_over(table: Path) -> None:
    (table / "_delta_log" / "00000000000000000007.json.tmp").write_text("{}")
    (table / "_delta_log" / "7.json").write_text("{}")
    assert commit_versions(on_storage(table))[0] == 6
    assert delta_log.where(on_storage(table), 7).endswith(
        "/db/orders/_delta_log/" + "0" * 19 + "7.json"
    )


def test_a_local_table_is_read_without_loading_a_storage_client(table: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from logstore_cli.catalog import epochs, history, outside\n"
        f"t = Path({str(table)!r})\n"
        "assert list(epochs.epoch_commits(t)) and epochs.committed_version(t, 'w-1') == 1\n"
        "history.read_history(t, 'db.orders'); outside.uncarried(t)\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_on_s3_the_log_keys_are_below_the_tables_prefix_and_a_bad_name_builds_none() -> None:
    from logstore_cli.storage.s3 import S3Storage

    warehouse = S3Storage(None, "bucket", ("lake", "wh"))
    table = wh.table_storage(warehouse, TableName("db", "orders"))
    assert isinstance(table, S3Storage)
    name = f"{delta_log.LOG_DIR}/{delta_log.commit_name(7)}"
    assert table.key(name) == "lake/wh/db/orders/_delta_log/00000000000000000007.json"
    assert delta_log.where(table, 7) == "s3://bucket/lake/wh/db/orders/" + name
    assert delta_log.where(table) == "s3://bucket/lake/wh/db/orders"
    for bad in ("..", "orders/../x", "%2e%2e", ""):
        with pytest.raises((InvalidInputError, LogstoreError)):
            wh.table_storage(warehouse, TableName("db", bad))
        with pytest.raises((InvalidInputError, LogstoreError)):
            table.key(f"{delta_log.LOG_DIR}/{bad}")


def test_after_log_cleanup_the_storage_confirms_by_the_checkpoints_transaction_ids(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    path = write_table(tmp_path / WAREHOUSE, DDL)
    v1 = epoch_commit(path, "w-1", 0, "a0", {0: 1})
    v2 = epoch_commit(path, "w-1", 1, "a1", {0: 2})
    DeltaTable(str(path)).create_checkpoint()  # at v2: w-1's transaction version 1
    for gone in (0, v1):
        (path / "_delta_log" / delta_log.commit_name(gone)).unlink()
    confirm = EpochConfirmer(on_storage(path))
    assert confirm(CommitMarker(EpochId("w-1", 0, "a0"), v1))  # by the txn: writer and epoch
    assert not confirm(CommitMarker(EpochId("w-1", 7, "a0"), v1))
    assert not confirm(CommitMarker(EpochId("intruder", 0, "x"), v1))
    assert confirm(CommitMarker(EpochId("w-1", 1, "a1"), v2))
    assert committed_version(on_storage(path), "w-1") == 1
