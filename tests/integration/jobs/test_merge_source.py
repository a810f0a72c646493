"""The MERGE's source of an epoch (``DeltaCommitter.merge_source``): each key's latest change, the
ranking skipped when every key occurs once, the good records counted in the same look."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.jobs.ingest import DeltaCommitter, SparkBatch
from logstore_cli.logformat.wire import EpochId

from .ingest_support import orders_ddl

SCHEMA = (
    "id BIGINT, name STRING, qty INT, price DECIMAL(10,2), _ls_kind STRING, _ls_seq BIGINT, "
    "_ls_arrival STRUCT<file: STRING, line: BIGINT>, _ls_error STRING, _ls_raw STRING, "
    "_ls_origin STRING"
)


def _batch(spark: SparkSession, rows: list[tuple[int, str, str | None]]) -> SparkBatch:
    """Records ``(id, name, kind)`` in arrival order; a name of ``"bad"`` is a malformed one."""
    data: list[tuple[Any, ...]] = [
        (key, name, 1, None, kind, None, ("f", line),
         "broken" if name == "bad" else None, "raw" if name == "bad" else None, "f")
        for line, (key, name, kind) in enumerate(rows)
    ]  # fmt: skip
    return SparkBatch(spark.createDataFrame(data, SCHEMA), ["file", "line"])


def _committer(tmp_path: Path, mode: str = "all") -> DeltaCommitter:
    extra = {"log.changelog-mode": mode} if mode != "all" else None
    ddl = orders_ddl("shop.orders", "t", "127.0.0.1:9", partitions=1, extra=extra)
    return DeltaCommitter(parse_ddl(ddl, "t.sql", ParseOptions())[0], tmp_path / "t")


def _ranked(frame: DataFrame) -> bool:
    return "Window" in frame._jdf.queryExecution().optimizedPlan().toString()


def _rows(frame: DataFrame) -> dict[int, tuple[str, str | None]]:
    got = [(r["id"], r["name"], r["_ls_kind"]) for r in frame.collect()]
    assert len({k for k, _, _ in got}) == len(got), "a key twice in the MERGE's source"
    return {k: (n, kind) for k, n, kind in got}


@pytest.mark.parametrize("mode", ["all", "upsert"])
def test_unique_keys_skip_the_ranking_and_keep_every_change(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    batch = _batch(spark, [(1, "a", "+I"), (2, "b", "+U"), (3, "bad", None), (4, "d", "-D")])
    source = _committer(tmp_path, mode).merge_source(batch).frame
    assert not _ranked(source)
    assert source.columns == ["id", "name", "qty", "price", "_ls_kind"]
    assert _rows(source) == {1: ("a", "+I"), 2: ("b", "+U"), 4: ("d", "-D")}
    assert batch.good_rows == 3  # the malformed record is not counted


def test_a_key_changed_twice_is_ranked_and_its_latest_change_wins(
    spark: SparkSession, tmp_path: Path
) -> None:
    batch = _batch(spark, [(1, "old", "+I"), (2, "b", "+I"), (1, "gone", "-U"), (1, "new", "+U")])
    source = _committer(tmp_path).merge_source(batch).frame
    assert _ranked(source)
    assert _rows(source) == {1: ("new", "+U"), 2: ("b", "+I")}
    assert batch.good_rows == 4


def test_an_upsert_changelog_ignores_update_before_when_it_checks_the_keys(
    spark: SparkSession, tmp_path: Path
) -> None:
    # -U/+U of one key: the -U is not the table's, so every kept key occurs once
    batch = _batch(spark, [(1, "gone", "-U"), (1, "new", "+U"), (2, "b", "+I")])
    source = _committer(tmp_path, "upsert").merge_source(batch).frame
    assert not _ranked(source)
    assert _rows(source) == {1: ("new", "+U"), 2: ("b", "+I")}
    assert batch.good_rows == 3  # the -U is a good record (the log's count), not the table's


def test_the_epochs_key_range_bounds_the_merge_so_delta_skips_the_files_outside_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    for start in range(0, 400, 100):  # four files: ids 0-99, 100-199, 200-299, 300-399
        spark.range(start, start + 100).selectExpr(
            "id", "'old' AS name", "1 AS qty", "CAST(1 AS DECIMAL(10,2)) AS price"
        ).coalesce(1).write.format("delta").mode("append").save(str(path))
    committer = _committer(tmp_path)
    batch = _batch(spark, [(120, "new", "+U"), (150, "bad", None), (180, "x", "-D")])
    source = committer.merge_source(batch)
    assert source.bounds == [("id", 120, 180)]  # the malformed record's key is not the epoch's
    # The file of ids 300-399 (version 3's) is gone from the disk, not from the table: the MERGE
    # only succeeds if Delta skips it, as no key of the epoch can be in it.
    added = [
        json.loads(line)["add"]["path"]
        for line in (path / "_delta_log" / f"{3:020d}.json").read_text().splitlines()
        if line.startswith('{"add"')
    ]
    assert len(added) == 1
    (path / added[0]).unlink()
    version = committer.commit(batch, EpochId("w-test", 0, "a-1"), {})
    assert version == 4
    rows = spark.read.format("delta").load(str(path)).where("id < 300").collect()
    state = {r["id"]: r["name"] for r in rows}
    assert len(state) == 299 and state[120] == "new" and 180 not in state and state[0] == "old"
