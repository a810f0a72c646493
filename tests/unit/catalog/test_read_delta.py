"""read_delta reads a small table's JSON log itself (no delta-rs import: issue 20's start-up) and
gives what delta-rs gives; logs that are more than JSON commits are left to delta-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from logstore_cli.catalog import warehouse as wh
from logstore_cli.errors import LogstoreError
from tests.deltalog import write_table

WIDE = (
    "CREATE TABLE shop.wide (id BIGINT NOT NULL COMMENT 'the id', amount DECIMAL(12,2), "
    "tags ARRAY<STRING>, attrs MAP<STRING, INT>, s STRUCT<x: INT, y: ARRAY<DOUBLE>>, "
    "seen TIMESTAMP_NTZ, d DATE, PRIMARY KEY (id)) PARTITIONED BY (d) COMMENT 'a table' "
    "TBLPROPERTIES ('log-store.enabled' = 'false', 'some.key' = 'v')"
)
KEYED = "CREATE TABLE shop.items (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id))"


def _by_delta_rs(path: Path, monkeypatch: pytest.MonkeyPatch) -> wh.DeltaState:
    with monkeypatch.context() as m:
        m.setattr(wh, "_read_json_log", lambda _path: None)
        return wh.read_delta(path)


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def test_a_new_table_read_from_its_json_log_as_delta_rs_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_table(tmp_path / "wh", WIDE)
    ours = wh._read_json_log(path)
    assert ours is not None  # the JSON path was taken: the comparison below is not vacuous
    assert ours == wh.read_delta(path) == _by_delta_rs(path, monkeypatch)
    assert ours.partition_columns == ("d",) and ours.description == "a table"


def test_appends_overwrites_and_property_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files added and removed, and the last metadata, as delta-rs's snapshot has them."""
    path = write_table(tmp_path / "wh", KEYED)
    write_deltalake(str(path), _rows([1, 2]), mode="append")
    write_deltalake(str(path), _rows([3]), mode="append")
    write_deltalake(str(path), _rows([4, 5]), mode="overwrite")
    write_deltalake(str(path), _rows([6]), mode="append")
    DeltaTable(str(path)).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 7 days"}
    )
    ours = wh._read_json_log(path)
    assert ours is not None
    assert ours == _by_delta_rs(path, monkeypatch)
    assert (ours.version, ours.num_files) == (5, 2)
    assert ours.properties["delta.logRetentionDuration"] == "interval 7 days"


def test_a_checkpoint_leaves_the_log_to_delta_rs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_table(tmp_path / "wh", KEYED)
    write_deltalake(str(path), _rows([1]), mode="append")
    DeltaTable(str(path)).create_checkpoint()
    assert wh._read_json_log(path) is None
    assert wh.read_delta(path) == _by_delta_rs(path, monkeypatch)
    assert wh.read_delta(path).num_files == 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda log: (log / "00000000000000000000.json").write_text('{"commitInfo": {}}\n'),
        lambda log: (log / "00000000000000000000.json").write_text("{not json\n"),
        lambda log: (log / "00000000000000000002.json").write_text("{}\n"),  # a gap at 1
    ],
    ids=["no metadata", "not JSON", "a missing version"],
)
def test_a_log_not_as_expected_gets_delta_rs_and_its_error(tmp_path: Path, damage: object) -> None:
    path = write_table(tmp_path / "wh", KEYED)
    damage(path / "_delta_log")  # type: ignore[operator]
    assert wh._read_json_log(path) is None
    with pytest.raises(LogstoreError, match="cannot read the Delta table"):
        wh.read_delta(path)
