"""``EpochConfirmer``: a commit marker is confirmed only by the Delta commit at its version holding
the same writer, epoch and attempt; commit files are read once each, and a version not committed
yet is asked again later (docs/consistency.md §10, "What a reader trusts")."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog.epochs import EpochConfirmer
from logstore_cli.logformat.wire import CommitMarker, EpochId
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
