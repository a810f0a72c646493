"""``LocalStorage``: the storage contract on a local directory, and symlinks that would lead out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logstore_cli.errors import InvalidInputError, WarehouseError
from logstore_cli.storage import delta_rs_location, open_storage
from logstore_cli.storage.local import LocalStorage
from tests import storage_contract as contract


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "wh")


def test_read_write(storage: LocalStorage) -> None:
    contract.check_read_write(storage)


def test_conditional_writes(storage: LocalStorage) -> None:
    contract.check_conditional_writes(storage)


def test_listing_and_children(storage: LocalStorage) -> None:
    contract.check_listing_and_children(storage)


def test_containment(storage: LocalStorage) -> None:
    contract.check_containment(storage)


def test_racing_put_if_absent_has_one_winner(storage: LocalStorage) -> None:
    contract.check_put_if_absent_race(storage)


def test_racing_replace_has_one_winner(storage: LocalStorage) -> None:
    contract.check_replace_race(storage)


def test_a_symlinked_directory_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "wh"
    (root / "db").mkdir(parents=True)
    os.symlink(outside, root / "db" / "t")
    storage = LocalStorage(root)
    for write in (
        lambda: storage.write("db/t/x", b"x"),
        lambda: storage.put_if_absent("db/t/x", b"x"),
        lambda: storage.delete("db/t/x"),
    ):
        with pytest.raises(WarehouseError, match="not inside"):
            write()
    assert list(outside.iterdir()) == []


def test_a_symlinked_object_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    root = tmp_path / "wh"
    root.mkdir()
    os.symlink(secret, root / "lease.json")
    with pytest.raises(WarehouseError, match="symlink"):
        LocalStorage(root).read("lease.json")


def test_writes_leave_no_temporary_files_or_locks_in_listings(storage: LocalStorage) -> None:
    storage.write("d/a", b"1")
    v = storage.put_if_absent("d/b", b"2")
    assert v is not None
    assert storage.replace_if_version("d/b", b"3", v) is not None
    assert storage.list("d").files == ("a", "b")
    assert [
        p.name for p in (storage.root / "d").iterdir() if p.name.startswith(".logstore-tmp")
    ] == []


def test_open_storage_picks_the_backend(tmp_path: Path) -> None:
    local = open_storage(str(tmp_path))
    assert isinstance(local, LocalStorage) and local.root == tmp_path
    assert isinstance(open_storage(f"file://{tmp_path}"), LocalStorage)
    hdfs = open_storage("hdfs://nn:8020/wh/")  # no connection until the first operation
    assert type(hdfs).__name__ == "HdfsStorage" and hdfs.uri == "hdfs://nn:8020/wh"
    assert hdfs.child("db/t").uri == "hdfs://nn:8020/wh/db/t"
    assert delta_rs_location(hdfs.child("db/t")) == ("hdfs://nn:8020/wh/db/t", None)
    with pytest.raises(InvalidInputError):
        hdfs.child("../x")


def test_reads_and_listings_do_not_follow_a_link_out_of_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    root = tmp_path / "wh"
    root.mkdir()
    os.symlink(outside, root / "db")
    storage = LocalStorage(root)
    for operation in (
        lambda: storage.read("db/secret"),
        lambda: storage.exists("db/secret"),
        lambda: storage.list("db"),
    ):
        with pytest.raises(WarehouseError, match="not inside"):
            operation()
