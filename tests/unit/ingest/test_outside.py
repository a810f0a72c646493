"""What counts as a write made outside logstore (``ingest/outside.py``), from a commit's actions."""

from __future__ import annotations

from typing import Any

import pytest

from logstore_cli.ingest.outside import (
    KINDS,
    ORDER,
    OutsideCommit,
    classify,
    describe_all,
    parse_actions,
)
from logstore_cli.logformat.wire import EpochId, RowKind, commit_metadata

INFO = {"commitInfo": {"timestamp": 1_764_101_585_000, "operation": "DELETE",
                       "engineInfo": "Apache-Spark/4.0.1 Delta-Lake/4.0.1"}}  # fmt: skip


def add(data_change: bool = True) -> dict[str, Any]:
    return {"add": {"path": "part-0.parquet", "size": 1, "dataChange": data_change}}


def remove(data_change: bool = True) -> dict[str, Any]:
    return {"remove": {"path": "part-0.parquet", "dataChange": data_change}}


def test_a_delete_in_spark_sql_is_an_outside_write_named_by_version_operation_time_engine() -> None:
    found = classify(7, [INFO, remove(), {"cdc": {"path": "_change_data/c.parquet"}}])
    assert found == OutsideCommit(
        7, "DELETE", 1_764_101_585_000, "Apache-Spark/4.0.1 Delta-Lake/4.0.1"
    )
    assert found.describe() == (
        "version 7 (DELETE at 2025-11-25 20:13:05 UTC by Apache-Spark/4.0.1 Delta-Lake/4.0.1)"
    )
    assert found.to_json()["at"] == "2025-11-25 20:13:05 UTC"


@pytest.mark.parametrize(
    "actions",
    [
        [{"commitInfo": {"operation": "CREATE TABLE"}}, {"metaData": {}}, {"protocol": {}}],
        [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, {"metaData": {}}],
        [{"commitInfo": {"operation": "OPTIMIZE"}}, add(False), remove(False)],  # rewrites only
        [{"commitInfo": {"operation": "VACUUM END"}}],
        [{"commitInfo": {"operation": "WRITE"}}, {"txn": {"appId": "delta-outside", "version": 3}}],
    ],
    ids=["create", "properties", "optimize", "vacuum", "empty-append"],
)
def test_commits_that_change_no_data_are_not_outside_writes(actions: list[dict[str, Any]]) -> None:
    assert classify(3, actions) is None


def test_an_epoch_commit_is_not_an_outside_write_whatever_it_holds() -> None:
    meta = commit_metadata(EpochId("w-1", 4, "a-1"), {0: 10})
    info = {"commitInfo": {"operation": "MERGE", "userMetadata": meta}}
    assert classify(9, [info, add(), remove()]) is None
    # Someone else's metadata, even one that mentions logstore, does not make a commit an epoch.
    other = {"commitInfo": {"operation": "MERGE", "userMetadata": '{"logstore": "mine"}'}}
    assert classify(9, [other, add()]) == OutsideCommit(9, "MERGE", None, None)


def test_an_append_without_commit_info_is_still_an_outside_write() -> None:
    # delta-rs and other writers may leave commitInfo out, or write it last.
    assert classify(2, [add()]) == OutsideCommit(2, None, None, None)
    assert classify(2, [add(), INFO]) is not None
    assert OutsideCommit(2, None, None, None).describe() == "version 2 (an unnamed operation)"


def test_a_commit_file_that_is_not_json_lines_is_an_error_not_a_guess() -> None:
    assert list(parse_actions([b'{"add": {}}\n', b"\n"])) == [{"add": {}}]
    with pytest.raises(ValueError):
        list(parse_actions([b"[1, 2]\n"]))
    with pytest.raises(ValueError):
        list(parse_actions([b"not json\n"]))


def test_the_feed_maps_to_row_kinds_with_removals_first() -> None:
    assert KINDS == {"delete": RowKind.DELETE, "update_preimage": RowKind.UPDATE_BEFORE,
                     "update_postimage": RowKind.UPDATE_AFTER, "insert": RowKind.INSERT}  # fmt: skip
    # An overwrite reports a key it keeps as delete + insert in one version: delete goes first.
    assert sorted(KINDS, key=ORDER.__getitem__) == [
        "delete", "update_preimage", "update_postimage", "insert"
    ]  # fmt: skip


def test_many_commits_are_described_with_how_many_more() -> None:
    commits = [OutsideCommit(v, "WRITE", None, None) for v in range(1, 8)]
    text = describe_all(commits, limit=2)
    assert text == "version 1 (WRITE), version 2 (WRITE) and 5 more"
