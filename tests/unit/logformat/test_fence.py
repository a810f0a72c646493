"""The fence of a takeover in Delta: the fenced transaction version and its decoding, and the
fence commit's metadata, which no reader of epoch metadata takes for an epoch."""

from __future__ import annotations

import pytest

from logstore_cli.ingest.outside import classify, is_epoch_commit, is_fence_commit
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import (
    FENCED_BASE,
    Fence,
    TxnState,
    decode_txn_version,
    fence_metadata,
    fenced_txn_version,
    parse_commit_metadata,
    parse_fence_metadata,
    parse_unfence_metadata,
    unfence_metadata,
)


def test_a_fenced_version_is_told_from_every_epoch_and_decodes_to_the_last_one() -> None:
    assert decode_txn_version(None) == TxnState(None)
    assert decode_txn_version(-1) == TxnState(None)  # an un-fenced writer that committed nothing
    assert decode_txn_version(0) == TxnState(0)
    assert decode_txn_version(FENCED_BASE - 1) == TxnState(FENCED_BASE - 1)
    for last in (None, 0, 1, 41, 10**12):
        version = fenced_txn_version(last)
        assert version >= FENCED_BASE and version < 2**63  # Delta keeps a signed 64-bit long
        assert decode_txn_version(version) == TxnState(last, fenced=True)
        # Delta skips an epoch commit at or below the version: every later epoch of the writer.
        assert (0 if last is None else last + 1) <= version
    assert fenced_txn_version(None) != fenced_txn_version(0)
    with pytest.raises(WireFormatError):
        fenced_txn_version(-1)


def test_fence_metadata_round_trips_and_is_no_epoch() -> None:
    fence = Fence(token=7, by="w-b", fenced="w-a", job="thief")
    text = fence_metadata(fence)
    assert text == '{"logstore":{"fence":{"token":7,"by":"w-b","fenced":"w-a","job":"thief"}}}'
    assert parse_fence_metadata(text) == fence
    assert parse_commit_metadata(text) is None
    assert parse_fence_metadata(fence_metadata(Fence(1, "w-b", "w-a"))) == Fence(1, "w-b", "w-a")
    unfence = unfence_metadata("w-a", 3)
    assert unfence == '{"logstore":{"unfence":{"writer":"w-a","after":3}}}'
    assert parse_commit_metadata(unfence) is None and parse_fence_metadata(unfence) is None
    assert '"after":null' in unfence_metadata("w-a", None)
    assert parse_unfence_metadata(unfence) == ("w-a", 3)
    assert parse_unfence_metadata(unfence_metadata("w-a", None)) == ("w-a", None)
    assert parse_unfence_metadata(text) is None
    assert parse_unfence_metadata('{"logstore":{"unfence":{"writer":"w","after":-1}}}') is None


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        '{"logstore":{"fence":{"token":-1,"by":"b","fenced":"a"}}}',
        '{"logstore":{"fence":{"token":1,"by":"","fenced":"a"}}}',
        '{"logstore":{"fence":{"token":true,"by":"b","fenced":"a"}}}',
        '{"logstore":{"fence":"yes"}}',
        '{"logstore":{"writer":"w","epoch":0,"attempt":"a","offsets":{}}}',
    ],
)
def test_what_is_not_a_fence(text: str | None) -> None:
    assert parse_fence_metadata(text) is None


@pytest.mark.parametrize("bad", [Fence(-1, "b", "a"), Fence(1, "", "a"), Fence(1, "b", "a", "")])
def test_a_fence_that_cannot_be_written_is_refused(bad: Fence) -> None:
    with pytest.raises(WireFormatError):
        fence_metadata(bad)


def test_a_fence_commit_is_neither_an_epoch_nor_an_outside_write() -> None:
    """It is an empty append: Delta adds an empty data file (dataChange true), which would make it
    an outside write to carry into the log if it were not known as a fence."""
    info = {"operation": "WRITE", "userMetadata": fence_metadata(Fence(2, "w-b", "w-a"))}
    add = {"add": {"path": "part-0.parquet", "dataChange": True}}
    assert is_fence_commit(info) and not is_epoch_commit(info)
    assert classify(5, [{"commitInfo": info}, add]) is None
    other = {"operation": "WRITE", "userMetadata": "a user's note"}
    assert classify(5, [{"commitInfo": other}, add]) is not None
