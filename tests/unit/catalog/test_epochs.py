"""``EpochConfirmer``: a commit marker is confirmed only by the Delta commit at its version holding
the same writer, epoch and attempt; commit files are read once each, and a version not committed
yet is asked again later (docs/consistency.md §10, "What a reader trusts")."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog.epochs import (
    EpochConfirmer,
    committed_version,
    epoch_of,
    fenced_pending,
    writer_txn,
)
from logstore_cli.logformat.consistency import PendingEpoch
from logstore_cli.logformat.wire import (
    CommitMarker,
    EpochId,
    Fence,
    TxnState,
    fence_metadata,
    fenced_txn_version,
)
from tests.deltalog import write_table
from tests.unit.catalog.test_status import DDL, commit, epoch_commit

pytestmark = pytest.mark.unit


def marker(writer: str, epoch: int, attempt: str, version: int | None) -> CommitMarker:
    return CommitMarker(EpochId(writer, epoch, attempt), version)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_table(tmp_path, DDL)


def test_only_the_commit_at_the_markers_version_with_the_same_epoch_confirms_it(
    table: Path,
) -> None:
    v1 = epoch_commit(table, "w1", 0, "a0", {0: 1})
    v2 = commit(table, {"operation": "DELETE"})  # someone else's commit: no epoch
    confirm = EpochConfirmer(table)
    assert confirm(marker("w1", 0, "a0", v1))
    assert not confirm(marker("w1", 0, "other-attempt", v1))
    assert not confirm(marker("w1", 5, "a0", v1))  # a later epoch of the real writer
    assert not confirm(marker("intruder", 0, "a0", v1))
    assert not confirm(marker("w1", 0, "a0", v2))
    assert not confirm(marker("w1", 0, "a0", 0))  # create-table's commit
    # Each version's commit file was read once, however often markers named it.
    assert confirm.checked == 3


def test_a_version_not_committed_yet_is_asked_again_when_a_marker_names_it_later(
    table: Path,
) -> None:
    confirm = EpochConfirmer(table)
    assert not confirm(marker("w1", 0, "a0", 1))  # forged ahead of the table, or not there yet
    assert not confirm(marker("w1", 0, "a0", 10**9))
    assert epoch_commit(table, "w1", 0, "a0", {0: 1}) == 1
    assert confirm(marker("w1", 0, "a0", 1))


def test_log_only_markers_name_nothing_delta_could_confirm_and_are_trusted(table: Path) -> None:
    assert EpochConfirmer(table)(marker("w1", 3, "a3", None))


def test_a_version_whose_commit_file_log_cleanup_removed_is_confirmed_by_the_transaction_id(
    table: Path,
) -> None:
    from deltalake import DeltaTable

    v1 = epoch_commit(table, "w1", 0, "a0", {0: 1})
    v2 = epoch_commit(table, "w1", 1, "a1", {0: 2})
    DeltaTable(str(table)).create_checkpoint()  # at v2: it holds w1's transaction version 1
    (table / "_delta_log" / f"{v1:020d}.json").unlink()
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    confirm = EpochConfirmer(table)
    assert confirm(marker("w1", 0, "a0", v1))  # writer and epoch confirmed, not the attempt
    assert not confirm(marker("w1", 7, "a0", v1))  # beyond what the writer committed
    assert not confirm(marker("intruder", 0, "x", v1))
    assert confirm(marker("w1", 1, "a1", v2))


def test_a_fenced_transaction_version_is_decoded_and_its_pending_epochs_named(table: Path) -> None:
    """A takeover's fence sets the writer's transaction version at or above ``FENCED_BASE``: the
    epoch look-ups decode it (never an epoch), and the writer's held epochs after its last commit
    are the fenced ones; another writer's stay open."""
    epoch_commit(table, "w1", 0, "a0", {0: 1})
    assert (committed_version(table, "w1"), writer_txn(table, "w1")) == (0, TxnState(0))
    fence = {"txn": {"appId": "w1", "version": fenced_txn_version(0), "lastUpdated": 1}}
    meta = fence_metadata(Fence(2, "w2", "w1", "thief"))
    version = commit(table, {"operation": "WRITE", "userMetadata": meta}, fence)
    assert writer_txn(table, "w1") == TxnState(0, fenced=True)
    assert committed_version(table, "w1") == 0  # the fence is no epoch
    assert epoch_of(table, version) is None
    held = [
        PendingEpoch("w1", 1, ("a1",), 3, 10, 12),  # after its last commit: fenced
        PendingEpoch("w3", 4, ("a4",), 1, 13, 13),  # another writer's epoch in flight
    ]
    assert fenced_pending(table, held) == held[:1]
    assert fenced_pending(table / "gone", held) == []  # no Delta table to ask: none named
