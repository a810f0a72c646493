"""Outside writes found in a hand-written Delta log (``catalog/outside.py``): which are not carried
yet, the scan's limit and cache, and a running job's follower that reads only new commit files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.outside import (
    Follower,
    carried_through,
    only_maintenance_since,
    scan,
    uncarried,
)
from logstore_cli.errors import LogstoreError
from logstore_cli.ingest.outside import OUTSIDE_WRITER
from logstore_cli.logformat.wire import EpochId, commit_metadata
from tests.deltalog import write_table

DDL = """CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 't_log', 'kafka.bootstrap.servers' = 'b:9092');"""


class Log:
    def __init__(self, tmp: Path) -> None:
        self.path = write_table(tmp, DDL)

    def write(self, *actions: dict[str, Any]) -> int:
        log = self.path / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json")) + 1
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
        return version

    def outside(self, operation: str = "DELETE") -> int:
        return self.write(
            {"commitInfo": {"timestamp": 0, "operation": operation}},
            {"remove": {"path": "p.parquet", "dataChange": True}},
        )

    def epoch(self, writer: str = "w-1", epoch: int = 0) -> int:
        meta = commit_metadata(EpochId(writer, epoch, "a-1"), {0: 1})
        return self.write(
            {"commitInfo": {"timestamp": 0, "operation": "MERGE", "userMetadata": meta}},
            {"add": {"path": f"e{epoch}.parquet", "size": 1, "partitionValues": {},
                     "modificationTime": 0, "dataChange": True}},
            {"txn": {"appId": writer, "version": epoch}},
        )  # fmt: skip

    def carry(self, through: int) -> int:
        meta = commit_metadata(EpochId(OUTSIDE_WRITER, through, "a-c"), {0: 1})
        return self.write(
            {"commitInfo": {"timestamp": 0, "operation": "WRITE", "userMetadata": meta}},
            {"txn": {"appId": OUTSIDE_WRITER, "version": through}},
        )


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path)


def test_only_writes_after_the_carried_through_version_are_uncarried(log: Log) -> None:
    log.epoch(epoch=0)
    first = log.outside("DELETE")
    log.write({"commitInfo": {"operation": "SET TBLPROPERTIES"}})  # no data: not an outside write
    assert carried_through(log.path) == -1
    assert [c.version for c in uncarried(log.path).commits] == [first]

    log.carry(first)
    assert carried_through(log.path) == first
    assert uncarried(log.path).commits == ()
    later = log.outside("MERGE")
    found = uncarried(log.path)
    assert [(c.version, c.operation) for c in found.commits] == [(later, "MERGE")]
    assert found.after == first and found.checked_through == later


def test_the_limit_reads_the_newest_commits_and_says_how_many_it_left(log: Log) -> None:
    old = log.outside()
    for n in range(4):
        log.epoch(epoch=n)
    new = log.outside()
    found = scan(log.path, -1, limit=3)
    assert [c.version for c in found.commits] == [new] and old not in [
        c.version for c in found.commits
    ]
    assert found.unchecked == 4  # versions 0 (create), 1 (the old write), 2 and 3 (epochs)


def test_the_cache_reads_each_commit_file_once(log: Log) -> None:
    version = log.outside()
    cache: dict[int, Any] = {}
    scan(log.path, -1, cache=cache)
    (log.path / "_delta_log" / f"{version:020d}.json").write_text("garbage\n")  # not read again
    assert [c.version for c in scan(log.path, -1, cache=cache).commits] == [version]
    with pytest.raises(LogstoreError, match="cannot read Delta commit"):
        scan(log.path, -1)


def test_a_follower_reads_only_the_commit_files_that_are_new(log: Log) -> None:
    log.epoch(epoch=0)
    before = log.outside()
    follower = Follower(log.path)
    assert [c.version for c in follower.new().commits] == [before]
    assert follower.new().commits == ()
    (log.path / "_delta_log" / f"{before:020d}.json").write_text("garbage\n")  # never re-read
    log.epoch(epoch=1)
    after = log.outside("UPDATE")
    found = follower.new()
    assert [(c.version, c.operation) for c in found.commits] == [(after, "UPDATE")]
    assert found.checked_through == after == follower.seen


def test_a_follower_starts_after_the_point_its_job_kept_unless_that_point_is_stale(
    log: Log,
) -> None:
    old = log.outside()
    log.epoch(epoch=0)
    known = log.epoch(epoch=1)  # an earlier run found everything up to here carried
    new = log.outside("MERGE")
    assert [c.version for c in Follower(log.path).new().commits] == [old, new]
    assert [c.version for c in Follower(log.path, known=known).new().commits] == [new]
    # A point past the newest version belongs to another table that had this path: ignored.
    assert [c.version for c in Follower(log.path, known=new + 5).new().commits] == [old, new]


def test_only_maintenance_since_tells_a_compaction_from_a_data_change(tmp_path: Path) -> None:
    log = Log(tmp_path)
    compaction = log.write(
        {"commitInfo": {"timestamp": 0, "operation": "OPTIMIZE"}},
        {"remove": {"path": "a.parquet", "dataChange": False}},
        {"add": {"path": "b.parquet", "dataChange": False}},
    )
    assert only_maintenance_since(log.path, compaction - 1)
    assert not only_maintenance_since(log.path, compaction)  # nothing since: no race to explain
    assert not only_maintenance_since(log.path, -1)  # what the commit read is not known
    log.epoch()  # an epoch commit changes data (a MERGE's adds and removes)
    log.write({"commitInfo": {"operation": "WRITE"}}, {"add": {"path": "c.parquet"}})
    assert not only_maintenance_since(log.path, compaction - 1)
    (log.path / "_delta_log").rename(tmp_path / "gone")  # the table's log removed under it
    assert not only_maintenance_since(log.path, 0)
