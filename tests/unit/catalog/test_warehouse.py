"""The warehouse layout: names become paths only inside the warehouse; leftovers are recognised."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.errors import InvalidInputError, TableNotFoundError, WarehouseError
from logstore_cli.logformat.pulsar_form import ordinal
from logstore_cli.names import TableName, parse_table_name


def _commit(path: Path, version: int = 0) -> Path:
    (path / "_delta_log").mkdir(parents=True, exist_ok=True)
    (path / "_delta_log" / f"{version:020d}.json").write_text("{}\n")
    return path


def _leftover(path: Path) -> Path:
    staged = path / "_delta_log" / "_staged_commits"
    staged.mkdir(parents=True)
    (staged / "00000000000000000000.uuid.json").write_text("{}\n")
    return path


@pytest.mark.parametrize(
    "name",
    ["/some/dir.tbl", "`/abs/dir`.t", "`.`.`.`", "db.`a/b`", "db.`..`", "db.`a\\b`", "db.`a\x01`",
     "a.b.c.d", "db.", ".t", "db.`-x`", "db.`x y`"],
)  # fmt: skip
def test_hostile_names_are_input_errors_naming_the_rule(name: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_table_name(name)
    assert info.value.exit_code == 2
    assert "table name" in info.value.message


def test_names_with_one_two_and_three_parts() -> None:
    assert parse_table_name("t") == TableName("default", "t")
    assert parse_table_name("db.t") == TableName("db", "t")
    assert parse_table_name("cat.db.t") == TableName("db", "t", "cat")
    assert parse_table_name("`my-db`.`t_1`") == TableName("my-db", "t_1")


def test_four_parts_are_refused_not_truncated(tmp_path: Path) -> None:
    _commit(tmp_path / "c" / "d")
    with pytest.raises(InvalidInputError, match="has 4 parts"):
        wh.find_table(tmp_path, "a.b.c.d")


def test_table_path_stays_inside_the_warehouse(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    outside = tmp_path / "outside"
    outside.mkdir()
    warehouse.mkdir()
    (warehouse / "db").symlink_to(outside)  # a planted link must not redirect writes
    with pytest.raises(WarehouseError, match="not inside the warehouse"):
        wh.table_path(warehouse, TableName("db", "t"))
    assert wh.table_path(warehouse, TableName("ok", "t")) == warehouse / "ok" / "t"


def test_contained_refuses_the_warehouse_itself_and_escapes(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError):
        wh.contained(tmp_path, tmp_path)
    with pytest.raises(WarehouseError):
        wh.contained(tmp_path, tmp_path / "db" / ".." / "..")
    assert wh.contained(tmp_path, tmp_path / "db" / "t") == tmp_path / "db" / "t"


def test_uncommitted_leftover_is_listed_and_found_only_for_drop(tmp_path: Path) -> None:
    _commit(tmp_path / "db" / "good")
    _leftover(tmp_path / "db" / "half")
    refs = wh.list_tables(tmp_path)
    assert [(r.name, r.committed) for r in refs] == [("db.good", True), ("db.half", False)]
    with pytest.raises(TableNotFoundError, match="no committed Delta version") as info:
        wh.find_table(tmp_path, "db.half")
    assert info.value.hint and "logstore drop-table db.half --yes" in info.value.hint
    assert wh.find_table(tmp_path, "db.half", uncommitted=True).committed is False
    assert wh.is_uncommitted_leftover(tmp_path / "db" / "half")
    assert not wh.is_uncommitted_leftover(tmp_path / "db" / "good")


def test_committed_versions_are_commit_files_or_checkpoints(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    assert not wh.has_committed_version(table)
    (table / "_delta_log" / "_last_checkpoint").write_text("{}")
    assert wh.has_committed_version(table)


def test_list_passes_over_what_is_not_logstore_s(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    _commit(warehouse / "db" / "t")
    _commit(warehouse / "db" / "odd.name")  # not a valid table name: never one of ours
    _commit(tmp_path / "elsewhere" / "x")
    (warehouse / "linked").symlink_to(tmp_path / "elsewhere")  # resolves outside
    assert [r.name for r in wh.list_tables(warehouse)] == ["db.t"]


def test_not_found_suggests_near_names(tmp_path: Path) -> None:
    _commit(tmp_path / "db" / "orders")
    with pytest.raises(TableNotFoundError) as info:
        wh.find_table(tmp_path, "db.order")
    assert info.value.hint == "did you mean 'db.orders'?"


def test_a_table_s_own_files_are_found_at_above_and_below_a_path(tmp_path: Path) -> None:
    # Issue 18 item 4: an ingest source inside a table re-read its old data files.
    warehouse = tmp_path / "wh"
    table = _commit(warehouse / "db" / "t")
    (table / "part-0.parquet").write_bytes(b"PAR1")
    other = _commit(tmp_path / "elsewhere" / "delta")  # a Delta table outside the warehouse
    (other / "year=2024").mkdir()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "link").symlink_to(table)

    def why(path: Path, below: bool = True) -> str | None:
        return wh.table_overlap(path, warehouse, below=below)

    assert why(inputs / "link") is not None and "inside the warehouse" in str(why(inputs / "link"))
    assert "inside the warehouse" in str(why(warehouse))
    assert "inside the warehouse" in str(why(table / "_delta_log"))
    assert "holds the warehouse" in str(why(tmp_path))
    assert "_delta_log" in str(why(other))
    assert "inside the Delta table" in str(why(other / "year=2024"))
    assert "holds the Delta table" in str(why(tmp_path / "elsewhere"))
    assert why(tmp_path / "elsewhere", below=False) is None  # a checkpoint beside a table is fine
    assert "holds the Delta table" in str(why(inputs))  # its link below is followed, as by Spark
    (inputs / "link").unlink()
    (inputs / "a.json").write_text("{}\n")
    assert why(inputs) is None
    assert wh.delta_table_holding(other / "year=2024" / "x.parquet") == other.resolve()


def test_the_search_below_skips_what_spark_skips_and_survives_loops(tmp_path: Path) -> None:
    root = tmp_path / "src"
    _commit(root / "_hidden" / "t")  # Spark reads nothing below a name starting with _ or .
    _commit(root / ".git" / "t")
    (root / "a").mkdir()
    (root / "a" / "loop").symlink_to(root)
    assert wh.delta_table_below(root) is None
    _commit(root / "a" / "b" / "t")
    assert wh.delta_table_below(root) == (root / "a" / "b" / "t")


def test_the_adopted_topic_property_reads_back_and_keeps_kafkas_form() -> None:
    # Kafka's end offsets, byte for byte as before Pulsar could be adopted: keys in partition
    # order (numerically, not as text), no spaces.
    kafka = {10: 0, 2: 1, 0: 2}
    assert wh.adopted_positions_text(kafka) == '{"0":2,"2":1,"10":0}'
    assert wh.adopted_positions({wh.P_ADOPTED_TOPIC: wh.adopted_positions_text(kafka)}) == kafka
    # Pulsar: positions just after the last message id (odd ordinals, far beyond 2**53).
    pulsar = {0: ordinal(7, 41) + 1, 1: 0}
    assert pulsar[0] > 2**53  # JSON's integers are read back whole (not as floats)
    text = wh.adopted_positions_text(pulsar)
    assert text == f'{{"0":{pulsar[0]},"1":0}}'
    assert wh.adopted_positions({wh.P_ADOPTED_TOPIC: text}) == pulsar


@pytest.mark.parametrize(
    "raw", ["", "not json", "[1, 2]", '{"0": "x"}', '{"a": 1}', "null", '{"0": null}']
)
def test_an_unreadable_adopted_topic_property_adopts_nothing(raw: str) -> None:
    assert wh.adopted_positions({wh.P_ADOPTED_TOPIC: raw}) == {}
    assert wh.adopted_positions({}) == {}


def test_negative_adopted_positions_are_left_out() -> None:
    assert wh.adopted_positions({wh.P_ADOPTED_TOPIC: '{"0":-1,"1":3,"-2":4}'}) == {1: 3}
