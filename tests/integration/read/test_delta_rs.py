"""The delta-rs engine of ``logstore read --mode file`` (read/delta_rs.py) on tables written with
delta-rs, no JVM: snapshots, time travel by version and by time, the Change Data Feed in Delta's
order, ``--limit``, Parquet and Delta outputs, and the errors of a version the table does not have.
The same reads through the Spark engine are compared in tests/integration/jobs/test_read_file_engines.py.
"""

from __future__ import annotations

import io
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.read import JsonLines
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.read import delta_rs, plan
from logstore_cli.read.service import ReadRequest, build_request
from tests.deltalog import delta_store, write_table

TABLE = "shop.orders"
DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), "
    "PRIMARY KEY (id) NOT ENFORCED) WITH ('delta.enableChangeDataFeed' = 'true')"
)
# Commit times set on the log files (Delta's commit time): version v at BASE + v * STEP.
BASE_MS = 1_790_000_000_000
STEP_MS = 60_000


def _rows(ids: range, name: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "name": [f"{name}{i}" for i in ids],
            "price": pa.array(
                [None if i % 7 == 0 else Decimal(i * 25) for i in ids], pa.decimal128(10, 2)
            ),
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Versions: 0 create, 1 insert 1..20, 2 insert 21..30, 3 update id<=5, 4 delete id 10..12."""
    root = tmp_path_factory.mktemp("delta-rs") / "wh"
    path = write_table(root, DDL)
    write_deltalake(str(path), _rows(range(1, 21), "a"), mode="append")
    write_deltalake(str(path), _rows(range(21, 31), "b"), mode="append")
    DeltaTable(str(path)).update(updates={"name": "'renamed'"}, predicate="id <= 5")
    DeltaTable(str(path)).delete("id >= 10 AND id <= 12")
    for version in range(5):
        at = (BASE_MS + version * STEP_MS) / 1000
        os.utime(path / "_delta_log" / f"{version:020d}.json", (at, at))
    return root


def _request(warehouse: Path, table: str = TABLE, **given: Any) -> ReadRequest:
    args: dict[str, Any] = {
        "mode": "file", "engine": "auto", "output": plan.OutputSpec("jsonl"), "consistent": False,
        "consistency": None, "changelog": "all-kinds", "start": None, "follow": False,
        "limit": None, "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
        "client_properties": {}, "timeout_s": 5.0,
    }  # fmt: skip
    args.update(given)
    req = build_request(load_table(warehouse, table), **args)
    assert req.engine == "delta-rs"
    return req


def _lines(req: ReadRequest) -> list[dict[str, Any]]:
    buffer = io.StringIO()
    delta_rs.read_with_delta_rs(req, JsonLines(req.schema, buffer))
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def _ids(lines: list[dict[str, Any]]) -> list[int]:
    return sorted(x["row"]["id"] for x in lines)


def test_a_snapshot_is_the_table_at_its_version(warehouse: Path) -> None:
    latest = _lines(_request(warehouse))
    assert {x["kind"] for x in latest} == {"+I"} and {x["version"] for x in latest} == {4}
    assert _ids(latest) == [i for i in range(1, 31) if not 10 <= i <= 12]
    row = {x["row"]["id"]: x["row"] for x in latest}
    assert row[1] == {"id": 1, "name": "renamed", "price": 25.0}
    assert row[14] == {"id": 14, "name": "a14", "price": None}
    at_2 = _lines(_request(warehouse, as_of="2"))
    assert _ids(at_2) == list(range(1, 31)) and {x["version"] for x in at_2} == {2}
    assert _lines(_request(warehouse, as_of="0")) == []


def test_a_time_is_the_latest_version_committed_at_or_before_it(warehouse: Path) -> None:
    at = _iso
    for ms, version in [(BASE_MS + 2 * STEP_MS, 2), (BASE_MS + 2 * STEP_MS + 1, 2),
                        (BASE_MS + 3 * STEP_MS - 1, 2), (BASE_MS + 4 * STEP_MS, 4)]:  # fmt: skip
        assert {x["version"] for x in _lines(_request(warehouse, as_of=at(ms)))} == {version}, ms
    # a change feed starts at the first version committed at or after the time
    feed = _lines(_request(warehouse, as_of=at(BASE_MS + 2 * STEP_MS + 1), changes=True))
    assert {x["version"] for x in feed} == {3, 4}


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def test_the_change_feed_is_in_version_key_and_image_order(warehouse: Path) -> None:
    feed = _lines(_request(warehouse, changes=True))
    order = [(x["version"], x["row"]["id"], x["kind"]) for x in feed]
    assert [o[0] for o in order] == sorted(o[0] for o in order)
    assert order[:3] == [(1, 1, "+I"), (1, 2, "+I"), (1, 3, "+I")]
    updates = [o for o in order if o[0] == 3]
    assert updates == [(3, i, kind) for i in range(1, 6) for kind in ("-U", "+U")]
    assert [o for o in order if o[0] == 4] == [(4, i, "-D") for i in (10, 11, 12)]
    assert {x["kind"] for x in feed} == {"+I", "-U", "+U", "-D"}
    from_3 = _lines(_request(warehouse, changes=True, as_of="3"))
    assert from_3 == [x for x in feed if x["version"] >= 3]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"as_of": "9"}, "version 9 is after the table's newest version 4"),
        ({"as_of": "9", "changes": True}, "version 9 is after the table's newest version 4"),
        ({"as_of": "2020-01-01"}, "before the table's earliest commit"),
        ({"as_of": "2099-01-01T00:00:00Z"}, "after the table's newest commit"),
        ({"as_of": "2099-01-01T00:00:00Z", "changes": True}, "after the table's newest commit"),
    ],
)
def test_a_version_or_time_the_table_does_not_have_is_invalid_input(
    warehouse: Path, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message) as err:
        _lines(_request(warehouse, **given))
    assert err.value.exit_code == 2 and err.value.hint


def test_a_change_feed_of_a_table_without_one_says_so(warehouse: Path) -> None:
    spec = parse_ddl("CREATE TABLE shop.plain (id BIGINT NOT NULL)", "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = warehouse / "shop" / "plain"
    delta_store(warehouse).create(path, spec, {k: v for k, v in props.items() if k != wh.CDF})
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64())}), mode="append")
    with pytest.raises(InvalidInputError, match="no Change Data Feed for version 0"):
        _lines(_request(warehouse, "shop.plain", changes=True))
    assert _ids(_lines(_request(warehouse, "shop.plain"))) == [1, 2]


def test_limit_stops_reading(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[tuple[int, int]] = []
    changes_of = delta_rs._changes_of

    def counted(table: Any, req: ReadRequest, first: int, last: int) -> Any:
        read.append((first, last))
        return changes_of(table, req, first, last)

    monkeypatch.setattr(delta_rs, "_changes_of", counted)
    feed = _lines(_request(warehouse, changes=True))
    assert read == [(0, 0), (1, 2), (3, 4)]  # windows that grow while their changes are few
    read.clear()
    first = _lines(_request(warehouse, changes=True, limit=22))
    assert first == feed[:22] and read == [(0, 0), (1, 2)]  # versions 3 and 4 are never read
    summary = delta_rs.read_with_delta_rs(
        _request(warehouse, limit=3), JsonLines(_request(warehouse).schema, io.StringIO())
    )
    assert summary.rows == 3 and summary.limited


def test_a_window_shrinks_to_one_version_when_its_changes_are_many(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[tuple[int, int]] = []
    changes_of = delta_rs._changes_of

    def counted(table: Any, req: ReadRequest, first: int, last: int) -> Any:
        read.append((first, last))
        return changes_of(table, req, first, last)

    monkeypatch.setattr(delta_rs, "_changes_of", counted)
    monkeypatch.setattr(delta_rs, "_WINDOW_ROWS", 8)
    feed = _lines(_request(warehouse, changes=True))
    assert read == [(0, 0), (1, 2), (3, 3), (4, 4)]  # 30 changes in 1-2: back to one version
    monkeypatch.setattr(delta_rs, "_WINDOW_ROWS", 65_536)
    assert feed == _lines(_request(warehouse, changes=True))  # the same feed either way


def test_parquet_is_written_batch_by_batch_as_spark_lays_it_out(
    warehouse: Path, tmp_path: Path
) -> None:
    target = tmp_path / "feed.parquet"
    req = _request(warehouse, changes=True, output=plan.OutputSpec("parquet", str(target)))
    summary = delta_rs.read_with_delta_rs(req, None)
    table = pq.read_table(target)
    assert table.schema.names == ["id", "name", "price", "_ls_kind", "_ls_version"]
    feed = _lines(_request(warehouse, changes=True))
    assert summary.rows == table.num_rows == len(feed)
    assert [(r["id"], r["_ls_kind"], r["_ls_version"]) for r in table.to_pylist()] == [
        (x["row"]["id"], x["kind"], x["version"]) for x in feed
    ]
    assert sorted(p.name for p in target.iterdir())[0] == "_SUCCESS"
    with pytest.raises(InvalidInputError, match="already exists"):
        delta_rs.read_with_delta_rs(req, None)


def test_a_large_snapshot_streams_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "wh"
    path = write_table(root, "CREATE TABLE shop.big (id BIGINT NOT NULL, name STRING)")
    big = pa.table({"id": pa.array(range(20_000), pa.int64()), "name": ["x"] * 20_000})
    write_deltalake(str(path), big, mode="append")
    target = tmp_path / "big.parquet"
    req = _request(root, "shop.big", output=plan.OutputSpec("parquet", str(target)))
    assert delta_rs.read_with_delta_rs(req, None).rows == 20_000
    (part,) = target.glob("*.parquet")
    assert pq.ParquetFile(part).num_row_groups == 1  # under one row group's rows
    monkeypatch.setattr(delta_rs, "_ROW_GROUP_ROWS", 8192)
    target = tmp_path / "big-again.parquet"
    req = _request(root, "shop.big", output=plan.OutputSpec("parquet", str(target)))
    assert delta_rs.read_with_delta_rs(req, None).rows == 20_000
    (part,) = target.glob("*.parquet")
    groups = [pq.ParquetFile(part).metadata.row_group(i).num_rows for i in range(3)]
    assert groups == [8192, 8192, 20_000 - 2 * 8192]  # written as the batches come
    assert sorted(pq.read_table(target).column("id").to_pylist()) == list(range(20_000))


def test_a_delta_output_is_a_new_table_of_the_rows(warehouse: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy"
    req = _request(warehouse, as_of="2", output=plan.OutputSpec("delta", str(target)), limit=25)
    summary = delta_rs.read_with_delta_rs(req, None)
    copy = DeltaTable(str(target)).to_pyarrow_table()
    assert summary.rows == copy.num_rows == 25 and summary.limited
    assert copy.schema.names == ["id", "name", "price", "_ls_kind"]
    assert set(copy.column("_ls_kind").to_pylist()) == {"+I"}
    with pytest.raises(InvalidInputError, match="already exists"):
        delta_rs.read_with_delta_rs(req, None)


def test_a_failed_write_leaves_nothing_and_says_why(
    warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changes_of = delta_rs._changes_of

    def failing(table: Any, req: ReadRequest, first: int, last: int) -> Any:
        if first <= 3 <= last:
            raise LogstoreError("the disk went away")
        return changes_of(table, req, first, last)

    monkeypatch.setattr(delta_rs, "_changes_of", failing)
    kinds: tuple[plan.OutputKind, ...] = ("parquet", "delta")
    for kind in kinds:
        target = tmp_path / f"out-{kind}"
        req = _request(warehouse, changes=True, output=plan.OutputSpec(kind, str(target)))
        with pytest.raises(LogstoreError, match="the disk went away"):
            delta_rs.read_with_delta_rs(req, None)
        assert not target.exists(), kind


def test_a_stop_ends_a_read_and_a_stopped_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "wh"
    path = write_table(root, "CREATE TABLE shop.big (id BIGINT NOT NULL)")
    write_deltalake(str(path), pa.table({"id": pa.array(range(30_000), pa.int64())}), mode="append")
    asked = 0

    def stop_at_the_third_batch() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    req = _request(root, "shop.big")
    buffer = io.StringIO()
    summary = delta_rs.read_with_delta_rs(
        req, JsonLines(req.schema, buffer), stop=stop_at_the_third_batch
    )
    assert summary.rows == len(buffer.getvalue().splitlines()) == 2 * 8192
    assert not summary.limited
    kinds: tuple[plan.OutputKind, ...] = ("parquet", "delta")
    for kind in kinds:
        asked = 0
        target = tmp_path / f"out-{kind}"
        req = _request(root, "shop.big", output=plan.OutputSpec(kind, str(target)))
        with pytest.raises(KeyboardInterrupt) as stopped:
            delta_rs.read_with_delta_rs(req, None, stop=stop_at_the_third_batch)
        assert f"nothing was written to {target}" in "".join(stopped.value.__notes__)
        assert not target.exists(), kind


def test_a_table_with_deletion_vectors_is_read_by_delta_rs_own_scan(tmp_path: Path) -> None:
    """pyarrow datasets refuse the reader feature: the engine scans with DataFusion instead."""
    root = tmp_path / "wh"
    path = write_table(root, "CREATE TABLE shop.dv (id BIGINT NOT NULL, name STRING)")
    DeltaTable(str(path)).alter.set_table_properties({"delta.enableDeletionVectors": "true"})
    assert "deletionVectors" in (DeltaTable(str(path)).protocol().reader_features or [])
    rows = pa.table({"id": pa.array(range(20_000), pa.int64()), "name": ["x"] * 20_000})
    write_deltalake(str(path), rows, mode="append")
    DeltaTable(str(path)).delete("id % 2 = 1")
    lines = _lines(_request(root, "shop.dv"))
    assert _ids(lines) == list(range(0, 20_000, 2)) and {x["version"] for x in lines} == {3}
    assert lines[0]["row"]["name"] == "x"
    target = tmp_path / "dv.parquet"
    req = _request(root, "shop.dv", as_of="2", output=plan.OutputSpec("parquet", str(target)))
    assert delta_rs.read_with_delta_rs(req, None).rows == 20_000
    assert pq.read_table(target).schema.field("name").type == pa.string()
    copy = tmp_path / "dv-copy"  # the DataFusion scan in the read-ahead thread delta-rs pulls
    req = _request(root, "shop.dv", output=plan.OutputSpec("delta", str(copy)))
    assert delta_rs.read_with_delta_rs(req, None).rows == 10_000
    assert sorted(DeltaTable(str(copy)).to_pyarrow_table().column("id").to_pylist()) == list(
        range(0, 20_000, 2)
    )


def test_changes_older_than_the_log_keeps_are_invalid_input(
    warehouse: Path, tmp_path: Path
) -> None:
    import shutil

    root = tmp_path / "wh"
    shutil.copytree(warehouse / "shop" / "orders", root / "shop" / "orders")
    log = root / "shop" / "orders" / "_delta_log"
    DeltaTable(str(log.parent)).create_checkpoint()
    for version in (0, 1, 2):  # what a log cleanup after the checkpoint removes
        (log / f"{version:020d}.json").unlink()
    for given in ({}, {"as_of": "2"}):
        with pytest.raises(InvalidInputError, match="keeps commits from version 3 on") as err:
            _lines(_request(root, changes=True, **given))
        assert "--as-of 3" in (err.value.hint or "")
    kept = _lines(_request(root, changes=True, as_of="3"))
    assert {x["version"] for x in kept} == {3, 4}


def test_the_terminal_table_shows_the_rows_and_their_version(warehouse: Path) -> None:
    from rich.console import Console

    from logstore_cli.cli.read import TerminalTable

    req = _request(warehouse, changes=True, as_of="3", output=plan.OutputSpec("table"))
    screen = io.StringIO()
    sink = TerminalTable(req.schema, Console(file=screen, width=120), follow=False, cap=6)
    summary = delta_rs.read_with_delta_rs(req, sink)
    sink.render("shop.orders (Delta changes as of 3)")
    assert summary.rows == 13 and len(sink.rows) == 6 and sink.dropped == 7
    text = screen.getvalue()
    assert "renamed" in text and "-U" in text and "+U" in text and "v3" in text
