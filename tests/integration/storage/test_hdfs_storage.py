"""``HdfsStorage`` against the real HDFS (a MiniDFSCluster): the same contract ``LocalStorage`` and
``S3Storage`` meet, racing conditional writes included (threads, and processes each with its own
client), plus what the generation scheme adds: Delta's commits stay plain files, replaced objects
leave one file, a version from before a delete never matches again."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from logstore_cli.errors import WarehouseError
from logstore_cli.storage import delta_rs_location, open_storage
from logstore_cli.storage.hdfs import HdfsStorage, generations_dir
from logstore_cli.storage.hdfs_server import HdfsServerInfo
from tests import storage_contract as contract

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]


@pytest.fixture
def storage(hdfs_dir: str) -> HdfsStorage:
    found = open_storage(f"{hdfs_dir}/warehouse/")
    assert isinstance(found, HdfsStorage)
    return found


def _names(storage: HdfsStorage, path: str) -> list[str]:
    client: Any = storage._client
    return sorted(s.path.rpartition("/")[2] for s in client.list_status(path))


def test_read_write(storage: HdfsStorage) -> None:
    contract.check_read_write(storage)


def test_conditional_writes(storage: HdfsStorage) -> None:
    contract.check_conditional_writes(storage)


def test_listing_and_children(storage: HdfsStorage) -> None:
    contract.check_listing_and_children(storage)


def test_containment(storage: HdfsStorage) -> None:
    contract.check_containment(storage)


def test_racing_put_if_absent_has_one_winner(storage: HdfsStorage) -> None:
    contract.check_put_if_absent_race(storage, trials=10)


def test_racing_replace_has_one_winner(storage: HdfsStorage) -> None:
    contract.check_replace_race(storage, trials=10)


def test_uri_and_delta_rs_location(storage: HdfsStorage, hdfs_dir: str) -> None:
    assert storage.uri == f"{hdfs_dir}/warehouse"
    table = storage.child("db").child("t")
    assert delta_rs_location(table) == (f"{hdfs_dir}/warehouse/db/t", None)


def test_put_if_absent_makes_a_plain_file_and_replaces_keep_one(storage: HdfsStorage) -> None:
    """A Delta commit written with put_if_absent is the plain file delta-rs reads; a replaced
    object (a lease renewed many times) leaves one generation file, no temporary file."""
    version = storage.put_if_absent("d/k", b"0")
    assert version is not None
    assert _names(storage, storage.path + "/d") == ["k"]
    for i in range(1, 6):
        version = storage.replace_if_version("d/k", str(i).encode(), version)
        assert version is not None
    assert _names(storage, storage.path + "/d") == [generations_dir("k")]
    assert _names(storage, f"{storage.path}/d/{generations_dir('k')}") == ["5"]
    assert storage.list("d").files == ("k",)
    blob = storage.read("d/k")
    assert blob is not None and blob.data == b"5"


def test_a_version_from_before_a_delete_never_matches_again(storage: HdfsStorage) -> None:
    old = storage.put_if_absent("k", b"first")
    assert old is not None
    storage.delete("k")
    assert storage.read("k") is None and not storage.exists("k") and storage.list().files == ()
    new = storage.put_if_absent("k", b"second")
    assert new is not None and new != old
    assert storage.replace_if_version("k", b"stale", old) is None
    blob = storage.read("k")
    assert blob is not None and (blob.data, blob.version) == (b"second", new)
    assert storage.replace_if_version("k", b"x", "not-a-version") is None


def test_a_stale_version_that_finds_a_removed_generation_loses(storage: HdfsStorage) -> None:
    """Generations below the current one are removed; a replace holding an old version renames
    into that gap and must still lose (and leave nothing behind)."""
    v0 = storage.put_if_absent("k", b"0")
    assert v0 is not None
    v1 = storage.replace_if_version("k", b"1", v0)
    assert v1 is not None
    v2 = storage.replace_if_version("k", b"2", v1)
    assert v2 is not None
    assert _names(storage, f"{storage.path}/{generations_dir('k')}") == ["2"]
    # Bypass the pre-check to exercise the rename itself with the stale version v0 (gen 1 free).
    installed = storage._install(
        storage.path, "k", 1, lambda: storage._temporary(storage.path, "k", b"stale")
    )
    assert installed is None
    assert _names(storage, f"{storage.path}/{generations_dir('k')}") == ["2"]
    assert _names(storage, storage.path) == [generations_dir("k")]
    blob = storage.read("k")
    assert blob is not None and (blob.data, blob.version) == (b"2", v2)


def _replace_in_process(uri: str, version: str, i: int, start: Any, results: Any) -> None:
    storage = open_storage(uri)
    start.wait()
    try:
        results.put((i, storage.replace_if_version("k", str(i).encode(), version) is not None))
    except BaseException as exc:
        results.put((i, f"error {exc!r}"))


def test_racing_processes_replace_with_one_winner(storage: HdfsStorage) -> None:
    """Racers are processes, each with its own client and connection to the NameNode."""
    n = 4
    mp = multiprocessing.get_context("spawn")
    for _trial in range(2):
        version = storage.write("k", b"start")
        start, results = mp.Barrier(n), mp.Queue()
        procs = [
            mp.Process(target=_replace_in_process, args=(storage.uri, version, i, start, results))
            for i in range(n)
        ]
        for p in procs:
            p.start()
        outcomes = dict(results.get(timeout=120) for _ in range(n))
        for p in procs:
            p.join(timeout=60)
        winners = [i for i, won in outcomes.items() if won is True]
        assert len(winners) == 1 and set(outcomes.values()) <= {True, False}, outcomes
        blob = storage.read("k")
        assert blob is not None and blob.data == str(winners[0]).encode()


def test_delete_all_takes_the_root_and_nothing_beside_it(storage: HdfsStorage) -> None:
    table = storage.child("db").child("t")
    assert isinstance(table, HdfsStorage)
    for i in range(5):
        table.write(f"data/part-{i}", b"x")
    storage.child("db").write("t2/keep", b"1")
    assert table.delete_all() == 5
    assert storage.list("db") == storage.list("db").__class__((), ("t2",))
    assert table.delete_all() == 0
    with pytest.raises(WarehouseError, match="refusing"):
        HdfsStorage(storage._client, storage.host, ()).delete_all()


def test_an_unreachable_namenode_is_a_warehouse_error(hdfs_server: HdfsServerInfo) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    storage = open_storage(f"hdfs://127.0.0.1:{port}/wh")
    with pytest.raises(WarehouseError, match=f"cannot read hdfs://127.0.0.1:{port}/wh/x") as caught:
        storage.read("x")
    assert "NameNode is reachable" in (caught.value.hint or "")


def test_a_version_from_a_table_deleted_and_made_anew_does_not_match(
    storage: HdfsStorage,
) -> None:
    """delete_all (drop-table) removes the generations too, so numbers start over; the version
    also names the file's time, so the same number in the new table is another version."""
    table = storage.child("db").child("t")
    assert isinstance(table, HdfsStorage)
    old = table.put_if_absent("_logstore/lease.json", b"old table")
    assert old is not None
    table.delete_all()
    new = table.put_if_absent("_logstore/lease.json", b"new table")
    assert new is not None and new.split(".")[0] == old.split(".")[0] == "g0" and new != old
    assert table.replace_if_version("_logstore/lease.json", b"stale", old) is None
    blob = table.read("_logstore/lease.json")
    assert blob is not None and (blob.data, blob.version) == (b"new table", new)
