"""``logstore vacuum``'s guard: the files a hybrid read can still need are kept, a retention shorter
than the table's is refused, both unless forced; on a real Delta table written without Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from logstore_cli.catalog.epochs import EpochCommit
from logstore_cli.catalog.vacuum import HOUR_MS, VacuumGuard, check_vacuum, vacuum
from logstore_cli.errors import LogstoreError
from logstore_cli.logformat.wire import EpochId, commit_metadata
from tests.deltalog import write_table

NOW = 1_000 * HOUR_MS
WEEK_MS = 7 * 24 * HOUR_MS


def _commit(version: int) -> EpochCommit:
    return EpochCommit(EpochId("w", version, "a"), version, {0: version}, None)


def test_a_retention_shorter_than_the_tables_is_refused_unless_forced() -> None:
    guard = VacuumGuard(24, WEEK_MS, frozenset())
    with pytest.raises(LogstoreError) as err:
        check_vacuum(guard, now_ms=NOW, force=False)
    assert err.value.exit_code == 1
    assert "--retain 24 is shorter than the table's delta.deletedFileRetentionDuration" in str(
        err.value
    )
    assert "--retain 168 or more" in (err.value.hint or "")
    check_vacuum(guard, now_ms=NOW, force=True)
    check_vacuum(VacuumGuard(168, WEEK_MS, frozenset()), now_ms=NOW, force=False)


def test_files_a_usable_snapshot_needs_are_kept_and_the_retain_that_keeps_them_named() -> None:
    removed = {"a.parquet": NOW - 30 * HOUR_MS, "b.parquet": NOW - 2 * HOUR_MS}
    usable = [_commit(9), _commit(7)]
    guard = VacuumGuard(0, 0, frozenset({"a.parquet", "old.parquet"}), usable, removed)
    with pytest.raises(LogstoreError) as err:
        check_vacuum(guard, now_ms=NOW, force=False)
    assert "would delete 1 data file(s)" in str(err.value)
    assert "versions 7 to 9" in str(err.value)
    assert "--retain 31" in (err.value.hint or "")  # a.parquet was removed 30 hours ago
    check_vacuum(guard, now_ms=NOW, force=True)
    # Only files no usable snapshot needs: allowed; no usable snapshot at all: nothing to keep.
    check_vacuum(VacuumGuard(0, 0, frozenset({"old.parquet"}), usable, removed), now_ms=NOW,
                 force=False)  # fmt: skip
    check_vacuum(VacuumGuard(0, 0, frozenset({"a.parquet"}), (), {}), now_ms=NOW, force=False)


DDL = (
    "CREATE TABLE db.t (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
    "WITH ('log.system' = 'kafka', 'kafka.topic' = 't', 'kafka.bootstrap.servers' = '127.0.0.1:9', "
    "'delta.deletedFileRetentionDuration' = 'interval 0 hours')"
)


def _epoch(table: Path, epoch: int, end_offset: int, ids: list[int]) -> None:
    """An epoch commit that rewrites the table (as a compaction would): it removes the files of the
    snapshots before it."""
    data = pa.table(
        {"id": pa.array(ids, pa.int64()), "name": pa.array([None] * len(ids), pa.string())}
    )
    meta = commit_metadata(EpochId("w", epoch, "a"), {0: end_offset})
    write_deltalake(str(table), data, mode="overwrite",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": meta}))  # fmt: skip


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = write_table(tmp_path / "wh", DDL)
    for epoch, (end, ids) in enumerate([(5, [1]), (10, [2]), (15, [3])]):
        _epoch(path, epoch, end, ids)  # versions 1, 2, 3: each snapshot its own file
    return path


def test_vacuum_keeps_the_files_of_the_snapshots_the_log_still_continues(table: Path) -> None:
    with pytest.raises(LogstoreError, match="versions 1 to 3"):
        vacuum(table, "db.t", retain_hours=None, dry_run=True, force=False, log_start={0: 0})
    with pytest.raises(LogstoreError, match="versions 2 to 3"):  # offsets 0-6 deleted: not 1
        vacuum(table, "db.t", retain_hours=0, dry_run=False, force=False, log_start={0: 7})
    assert len(list(table.glob("*.parquet"))) == 3  # refused: nothing deleted
    # Only the newest snapshot still continues the log: the other two snapshots' files may go.
    dry = vacuum(table, "db.t", retain_hours=0, dry_run=True, force=False, log_start={0: 12})
    assert len(dry.files) == 2 and dry.bytes > 0 and dry.hybrid_from == [3]
    assert len(list(table.glob("*.parquet"))) == 3  # a dry run deletes nothing
    done = vacuum(table, "db.t", retain_hours=0, dry_run=False, force=False, log_start={0: 12})
    assert done.files == dry.files
    assert len(list(table.glob("*.parquet"))) == 1


def test_a_table_without_a_log_store_is_vacuumed_with_deltas_check_only(table: Path) -> None:
    done = vacuum(table, "db.t", retain_hours=0, dry_run=False, force=False, log_start=None)
    assert len(done.files) == 2 and done.hybrid_from is None
    forced = vacuum(table, "db.t", retain_hours=0, dry_run=True, force=True, log_start={0: 0})
    assert forced.files == []  # nothing left to delete
