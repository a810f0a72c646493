"""``logstore read --mode file`` through both engines on one Spark-written table (inserts, an
UPDATE, a DELETE and a MERGE, so the Change Data Feed holds all four change types): the delta-rs
engine prints the Spark engine's JSON lines and writes the same Parquet and Delta rows."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.read import JsonLines
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.jobs import read as read_job
from logstore_cli.logformat.wire import RowKind
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.read import delta_rs, plan
from logstore_cli.read.fold import ArrowRows
from logstore_cli.read.service import ReadRequest, build_request

TABLE = "shop.items"
DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, name STRING, qty INT, price DECIMAL(10,2), "
    "at TIMESTAMP, day DATE, ok BOOLEAN, score DOUBLE, tags ARRAY<STRING>, "
    "attrs MAP<STRING, INT>, PRIMARY KEY (id) NOT ENFORCED)"
)
ROW = (
    "({i}, 'n{i}é', {i} * 3, CAST({i} * 1.25 AS DECIMAL(10,2)), "
    "TIMESTAMP '2026-11-21 10:30:00.123456' + make_interval(0, 0, 0, 0, {i}, 0, 0), "
    "DATE '2026-11-21' + {i}, {i} % 2 = 0, {i} / 3.0, array('a', CAST({i} AS STRING)), "
    "map('k', {i}))"
)


@pytest.fixture(scope="module")
def warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Version 0 created as create-table creates it, then 1-2 inserts, 3 update, 4 delete,
    5 merge (updates and inserts)."""
    root = tmp_path_factory.mktemp("file-engines") / "wh"
    spec = parse_ddl(DDL, "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = root / "shop" / "items"
    SparkDeltaStore(root, lambda: spark).create(path, spec, props)
    target = f"delta.`{path}`"
    values = ", ".join(ROW.format(i=i) for i in range(1, 41))
    spark.sql(f"INSERT INTO {target} VALUES {values}")
    values = ", ".join(ROW.format(i=i) for i in range(41, 61))
    spark.sql(f"INSERT INTO {target} VALUES {values}, (61, NULL, NULL, NULL, NULL, NULL, NULL, "
              "NULL, NULL, NULL)")  # fmt: skip
    spark.sql(f"UPDATE {target} SET name = 'updated', qty = qty + 1 WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM {target} WHERE id BETWEEN 20 AND 24")
    spark.sql(
        f"MERGE INTO {target} t USING (SELECT id, id * 10 AS q FROM range(55, 70)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET qty = s.q "
        "WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (s.id, CAST(s.q AS INT))"
    )
    yield root


def _request(warehouse: Path, engine: str, **given: Any) -> ReadRequest:
    args: dict[str, Any] = {
        "mode": "file", "engine": engine, "output": plan.OutputSpec("jsonl"), "consistent": False,
        "consistency": None, "changelog": "all-kinds", "start": None, "follow": False,
        "limit": None, "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
        "client_properties": {}, "timeout_s": 5.0,
    }  # fmt: skip
    args.update(given)
    return build_request(load_table(warehouse, TABLE), **args)


def _both(spark: SparkSession, warehouse: Path, **given: Any) -> tuple[list[str], list[str]]:
    """The JSON lines of the Spark engine and of the delta-rs engine for the same flags."""
    req = _request(warehouse, "spark", **given)
    out = io.StringIO()
    read_job.run(spark, req, JsonLines(req.schema, out), stop=lambda: False)
    mine = _request(warehouse, "auto", **given)
    assert mine.engine == "delta-rs"
    ours = io.StringIO()
    delta_rs.read_with_delta_rs(mine, JsonLines(mine.schema, ours))
    return out.getvalue().splitlines(), ours.getvalue().splitlines()


def test_both_engines_print_the_same_lines(spark: SparkSession, warehouse: Path) -> None:
    feed, ours = _both(spark, warehouse, changes=True)
    assert ours == feed  # the same order too: version, key, pre-image before post-image
    assert {'"kind":"+I"', '"kind":"-U"', '"kind":"+U"', '"kind":"-D"'} <= {
        line[: len('"kind":"+I"') + 1][1:] for line in feed
    }
    assert '"price":null' in "".join(ours) and "é" in "".join(ours)
    snapshots: list[dict[str, Any]] = [{}, {"as_of": "2"}, {"as_of": "0"}]
    for given in snapshots:
        spark_lines, ours = _both(spark, warehouse, **given)
        assert sorted(ours) == sorted(spark_lines), given  # a snapshot's order is the files'
    feeds: list[dict[str, Any]] = [{"changes": True, "as_of": "3"}, {"changes": True, "limit": 50}]
    for given in feeds:
        spark_lines, ours = _both(spark, warehouse, **given)
        assert ours == spark_lines, given


def test_a_time_resolves_to_the_version_spark_reads(spark: SparkSession, warehouse: Path) -> None:
    from datetime import UTC, datetime

    times = delta_rs.commit_times(warehouse / "shop" / "items")
    between = datetime.fromtimestamp((times[3] + 1) / 1000, UTC).isoformat()
    spark_lines, ours = _both(spark, warehouse, as_of=between)
    assert sorted(_without_version(ours)) == sorted(spark_lines)
    assert {'"version":3}' in x for x in ours} == {True}
    spark_lines, ours = _both(spark, warehouse, as_of=between, changes=True)
    assert ours == spark_lines and '"version":4}' in ours[0]


def _without_version(lines: list[str]) -> list[str]:
    return [x.rsplit(',"version":', 1)[0] + "}" for x in lines]


def _canonical(table: pa.Table, req: ReadRequest) -> list[str]:
    """Rows of an output as the JSON lines would print them, in order, whatever the file's types."""
    arrow = ArrowRows(req.schema)
    lines = plan.ChangeLines(req.schema)
    names = req.schema.names
    return [
        lines.line(RowKind(r["_ls_kind"]), arrow({n: r[n] for n in names}),
                   {"version": r["_ls_version"]} if "_ls_version" in r else {})
        for r in table.to_pylist()
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_both_engines_write_the_same_rows(
    spark: SparkSession, warehouse: Path, tmp_path: Path, kind: str
) -> None:
    for given in ({"changes": True}, {"as_of": "3"}):
        tables = []
        for engine in ("spark", "delta-rs"):
            target = tmp_path / f"{engine}-{len(given)}-{'changes' in given}"
            req = _request(warehouse, engine, output=plan.OutputSpec(kind, str(target)), **given)  # type: ignore[arg-type]
            if engine == "spark":
                summary = read_job.run(spark, req, None, stop=lambda: False)
            else:
                summary = delta_rs.read_with_delta_rs(req, None)
            table = (pq.read_table(target) if kind == "parquet"
                     else DeltaTable(str(target)).to_pyarrow_table())  # fmt: skip
            assert summary.rows == table.num_rows
            tables.append((table.schema.names, sorted(_canonical(table, req))))
        assert tables[0] == tables[1], given


def test_deletion_vectors_spark_wrote_are_applied(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("file-engines-dv") / "wh"
    spec = parse_ddl(DDL.replace(TABLE, "shop.dv"), "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = root / "shop" / "dv"
    SparkDeltaStore(root, lambda: spark).create(
        path, spec, {**props, "delta.enableDeletionVectors": "true"}
    )
    target = f"delta.`{path}`"
    spark.sql(f"INSERT INTO {target} VALUES {', '.join(ROW.format(i=i) for i in range(1, 101))}")
    spark.sql(f"DELETE FROM {target} WHERE id % 3 = 0")
    spark.sql(f"UPDATE {target} SET name = 'updated' WHERE id % 5 = 0")
    history = spark.sql(f"DESCRIBE HISTORY {target}").collect()
    metrics = {r["version"]: r["operationMetrics"] for r in history}
    assert int(metrics[2].get("numDeletionVectorsAdded", "0")) > 0  # Spark did write one

    def lines(engine: str, **given: Any) -> list[str]:
        args: dict[str, Any] = {
            "mode": "file", "engine": engine, "output": plan.OutputSpec("jsonl"),
            "consistent": False, "consistency": None, "changelog": "all-kinds", "start": None,
            "follow": False, "limit": None, "checkpoint": None, "as_of": None, "changes": False,
            "bootstrap": None, "client_properties": {}, "timeout_s": 5.0, **given,
        }  # fmt: skip
        req = build_request(load_table(root, "shop.dv"), **args)
        out = io.StringIO()
        if engine == "spark":
            read_job.run(spark, req, JsonLines(req.schema, out), stop=lambda: False)
        else:
            delta_rs.read_with_delta_rs(req, JsonLines(req.schema, out))
        return out.getvalue().splitlines()

    snapshot = lines("delta-rs")
    assert len(snapshot) == 100 - 33
    assert sorted(snapshot) == sorted(lines("spark"))
    assert lines("delta-rs", changes=True) == lines("spark", changes=True)


def test_in_commit_timestamps_resolve_a_time_as_spark_does(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With ``delta.enableInCommitTimestamps`` Delta times a commit by its commitInfo, not its
    file: the files' times are set far off here, so only the in-commit times give Spark's
    versions."""
    import json
    import os
    from datetime import UTC, datetime

    root = tmp_path_factory.mktemp("file-engines-ict") / "wh"
    spec = parse_ddl(DDL.replace(TABLE, "shop.ict"), "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = root / "shop" / "ict"
    SparkDeltaStore(root, lambda: spark).create(
        path, spec, {**props, "delta.enableInCommitTimestamps": "true"}
    )
    for first in (1, 11, 21):
        rows = ", ".join(ROW.format(i=i) for i in range(first, first + 10))
        spark.sql(f"INSERT INTO delta.`{path}` VALUES {rows}")
    log = path / "_delta_log"
    stamps = {}
    for version in range(4):
        commit = log / f"{version:020d}.json"
        stamps[version] = json.loads(commit.read_text().splitlines()[0])["commitInfo"][
            "inCommitTimestamp"
        ]
        os.utime(commit, (946_684_800 + version, 946_684_800 + version))  # 2000-01-01
    between = datetime.fromtimestamp((stamps[2] + stamps[3]) / 2000, UTC).isoformat()
    table = load_table(root, "shop.ict")

    def lines(engine: str, **given: Any) -> list[str]:
        args: dict[str, Any] = {
            "mode": "file", "engine": engine, "output": plan.OutputSpec("jsonl"),
            "consistent": False, "consistency": None, "changelog": "all-kinds", "start": None,
            "follow": False, "limit": None, "checkpoint": None, "as_of": between,
            "changes": False, "bootstrap": None, "client_properties": {}, "timeout_s": 5.0,
            **given,
        }  # fmt: skip
        req = build_request(table, **args)
        out = io.StringIO()
        if engine == "spark":
            read_job.run(spark, req, JsonLines(req.schema, out), stop=lambda: False)
        else:
            delta_rs.read_with_delta_rs(req, JsonLines(req.schema, out))
        return out.getvalue().splitlines()

    ours = lines("delta-rs")
    assert len(ours) == 20 and {'"version":2}' in x for x in ours} == {True}
    assert sorted(_without_version(ours)) == sorted(lines("spark"))
    feed = lines("delta-rs", changes=True)
    assert feed == lines("spark", changes=True) and len(feed) == 10  # version 3's inserts
