"""The local HDFS (issue 19): a real NameNode and DataNode from Maven Central jars. What a lease and
Delta's HDFS log store rely on holds there (an exclusive create, a rename that refuses to replace
unless told to), delta-rs writes and reads a Delta table on ``hdfs://`` with no JVM of its own, and
a stop leaves no JVM."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from logstore_cli import processes
from logstore_cli.storage import hdfs_server as server
from logstore_cli.storage.hdfs_server import HdfsServerInfo

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]


def test_exclusive_create_and_rename_hold_on_the_namenode(
    hdfs_server: HdfsServerInfo, hdfs_dir: str
) -> None:
    from hdfs_native import Client

    client = Client(hdfs_server.uri)
    root = hdfs_dir.removeprefix(hdfs_server.uri)
    # Eight racers creating one file: exactly one wins, the others are told it exists.
    wins: list[int] = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        start.wait()
        try:
            with client.create(f"{root}/lease.json") as f:
                f.write(str(i).encode())
        except FileExistsError:
            return
        wins.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    with client.read(f"{root}/lease.json") as f:
        assert f.read() == str(wins[0]).encode()
    with client.create(f"{root}/.tmp") as f:
        f.write(b"new")
    with pytest.raises(FileExistsError):
        client.rename(f"{root}/.tmp", f"{root}/lease.json", overwrite=False)
    client.rename(f"{root}/.tmp", f"{root}/lease.json", overwrite=True)
    with client.read(f"{root}/lease.json") as f:
        assert f.read() == b"new"


def test_delta_rs_writes_and_reads_a_table_on_hdfs(hdfs_dir: str) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    uri = f"{hdfs_dir}/db/t"
    write_deltalake(uri, pa.table({"id": [1, 2]}), mode="append")
    write_deltalake(uri, pa.table({"id": [3]}), mode="append")
    table = DeltaTable(uri)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]


def test_a_restart_keeps_the_data_and_stop_leaves_no_jvm(tmp_path: Path) -> None:
    state = tmp_path / "state"
    info = server.start(state)
    try:
        from hdfs_native import Client

        with Client(info.uri).create("/kept") as f:
            f.write(b"x")
        with pytest.raises(server.HdfsServerError, match="already running"):
            server.start(state)
        assert server.stop(state)
        assert not processes.alive(info.pid) and server.status(state) is None
        again = server.start(state)
        assert again.reused_data
        with Client(again.uri).read("/kept") as f:
            assert f.read() == b"x"
        assert server.stop(state)
        fresh = server.start(state, fresh=True)
        assert not fresh.reused_data
        with pytest.raises(FileNotFoundError):
            Client(fresh.uri).get_file_info("/kept")
    finally:
        server.stop(state)
    assert not server.stop(state)
