"""The Spark engine of ``logstore read`` (jobs/read.py) against the real broker and delta-spark,
checked line for line against the consumer engine, which shares the decision logic but not the
code that reads Kafka, Delta or builds rows."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from logstore_cli import config as cfg
from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.context import Context
from logstore_cli.cli.ingest import build_job
from logstore_cli.cli.read import JsonLines
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan as ingest_plan
from logstore_cli.jobs import ingest as job_api
from logstore_cli.jobs import read as read_job
from logstore_cli.read import plan
from logstore_cli.read.service import ReadRequest, build_request, read_with_consumer

from .ingest_support import changes, create_table, delta_state, orders_ddl, write_files

TABLE = "shop.orders"


@pytest.fixture(scope="module")
def ingested(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A table with three epochs of inserts, updates and deletes, ingested once for the module."""
    root = tmp_path_factory.mktemp("read-job")
    warehouse = root / "warehouse"
    topic = f"read-job-{time.monotonic_ns()}"
    create_table(spark, warehouse, orders_ddl(TABLE, topic, kafka_bootstrap, partitions=3))
    log = changes(1_500, keys=120, seed=7)
    third = len(log) // 3
    write_files(root / "in", [log[:third], log[third : 2 * third], log[2 * third :]])
    ctx = Context(cfg.Config(warehouse=str(warehouse), kafka=cfg.KafkaConfig(timeout_s=15)))
    job = build_job(
        ctx, TABLE, source=str(root / "in"), format=None,
        source_options={"maxFilesPerTrigger": "1"}, source_bootstrap=None,
        generate=ingest_plan.GenerateSource(1000, 10, None, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=1.0, once=True, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    lease = job_api.acquire_lease(job)
    job_api.wait(job_api.start(spark, job, lease, on_epoch=lambda _: None), stop=lambda: False)
    yield warehouse


def _request(warehouse: Path, **given: Any) -> ReadRequest:
    args: dict[str, Any] = {
        "mode": "log", "engine": "auto", "output": plan.OutputSpec("jsonl"), "consistent": False,
        "consistency": "committed", "changelog": "all-kinds", "start": None, "follow": False,
        "limit": None, "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
        "client_properties": {}, "timeout_s": 15.0,
    }  # fmt: skip
    args.update(given)
    return build_request(load_table(warehouse, TABLE), **args)


def _spark_lines(spark: SparkSession, req: ReadRequest) -> list[str]:
    buffer = io.StringIO()
    read_job.run(spark, req, JsonLines(req.schema, buffer), stop=lambda: False)
    return buffer.getvalue().splitlines()


def _consumer_lines(req: ReadRequest) -> list[str]:
    buffer = io.StringIO()
    read_with_consumer(req, JsonLines(req.schema, buffer))
    return buffer.getvalue().splitlines()


def _by_partition(lines: list[str]) -> list[str]:
    """Lines grouped by partition, each partition's in the order read: the consumer engine
    interleaves partitions as records arrive, Spark emits them one partition after another."""
    return sorted(lines, key=lambda x: json.loads(x).get("partition", -1))


def _fold(lines: list[str]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for line in lines:
        change = json.loads(line)
        key = change["row"]["id"]
        if change["kind"] in ("+I", "+U"):
            state[key] = change["row"]
        else:
            state.pop(key, None)
    return state


def _delta(warehouse: Path, version: int | None = None) -> dict[int, dict[str, Any]]:
    """The Delta table as the JSON rows the reads print (delta-rs, independent of both engines)."""
    path = warehouse / "shop" / "orders"
    if version is None:
        return {k: _json_row(v) for k, v in delta_state(path).items()}
    rows = DeltaTable(str(path), version=version).to_pyarrow_table().to_pylist()
    return {r["id"]: _json_row(r) for r in rows}


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (float(v) if k == "price" and v is not None else v) for k, v in row.items()}


def _parsed(state: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {k: _json_row(v) for k, v in state.items()}


def test_a_bounded_log_read_gives_the_consumer_engines_lines_and_folds_to_delta(
    spark: SparkSession, ingested: Path
) -> None:
    for level in ("committed", "none"):
        req = _request(ingested, engine="spark", consistency=level)
        lines = _spark_lines(spark, req)
        consumer = _consumer_lines(_request(ingested, engine="consumer", consistency=level))
        assert lines == _by_partition(consumer)
    assert len(lines) == 1_500
    committed = _spark_lines(spark, _request(ingested, engine="spark"))
    assert _parsed(_fold(committed)) == _delta(ingested)
    inserts = _spark_lines(spark, _request(ingested, engine="spark", changelog="append-only"))
    assert inserts and {json.loads(x)["kind"] for x in inserts} == {"+I"}


def test_a_hybrid_read_from_a_middle_snapshot_folds_to_the_full_read(
    spark: SparkSession, ingested: Path
) -> None:
    commits = sorted(epochs.epoch_commits(ingested / "shop" / "orders"), key=lambda c: c.version)
    assert len(commits) == 3
    middle = commits[1]
    req = _request(ingested, engine="spark", start=f"snapshot:{middle.version}")
    lines = _spark_lines(spark, req)
    snapshot = [json.loads(x) for x in lines if "partition" not in json.loads(x)]
    log = [json.loads(x) for x in lines if "partition" in json.loads(x)]
    assert {s["kind"] for s in snapshot} == {"+I"}
    assert {s["version"] for s in snapshot} == {middle.version}
    assert len(snapshot) == len(_delta(ingested, middle.version))
    assert log and all(c["epoch"] > middle.epoch.epoch for c in log)  # nothing V already holds
    assert _parsed(_fold(lines)) == _delta(ingested)
    consumer = _consumer_lines(
        _request(ingested, engine="consumer", start=f"snapshot:{middle.version}")
    )
    assert _fold(consumer) == _fold(lines)
    log_lines = [x for x in lines if '"partition"' in x]
    assert _by_partition([x for x in consumer if '"partition"' in x]) == log_lines


def test_file_reads_snapshot_time_travel_and_change_feed(
    spark: SparkSession, ingested: Path
) -> None:
    snapshot = _spark_lines(spark, _request(ingested, mode="file", consistency=None))
    assert _parsed(_fold(snapshot)) == _delta(ingested)
    first = _spark_lines(spark, _request(ingested, mode="file", consistency=None, as_of="1"))
    assert _parsed(_fold(first)) == _delta(ingested, 1)
    feed = _spark_lines(spark, _request(ingested, mode="file", consistency=None, changes=True))
    kinds = {json.loads(x)["kind"] for x in feed}
    assert kinds == {"+I", "-U", "+U", "-D"}
    assert _parsed(_fold(feed)) == _delta(ingested)
    versions = [json.loads(x)["version"] for x in feed]
    assert versions == sorted(versions)
    with pytest.raises(InvalidInputError, match="Delta cannot read that version"):
        _spark_lines(spark, _request(ingested, mode="file", consistency=None, as_of="99"))


def test_a_read_to_a_path_writes_parquet_and_never_overwrites(
    spark: SparkSession, ingested: Path, tmp_path: Path
) -> None:
    target = tmp_path / "log.parquet"
    req = _request(ingested, output=plan.OutputSpec("parquet", str(target)))
    assert req.engine == "spark"
    summary = read_job.run(spark, req, None, stop=lambda: False)
    table = pq.read_table(target)
    assert summary.rows == table.num_rows == len(_consumer_lines(_request(ingested)))
    assert {"id", "_ls_kind", "_ls_partition", "_ls_offset", "_ls_epoch"} <= set(table.schema.names)
    before = sorted(p.name for p in target.iterdir())
    with pytest.raises(InvalidInputError, match="already exists"):
        read_job.run(spark, req, None, stop=lambda: False)
    assert sorted(p.name for p in target.iterdir()) == before


def test_a_following_spark_read_shows_what_a_bounded_read_shows_and_stops_when_asked(
    spark: SparkSession, ingested: Path, tmp_path: Path
) -> None:
    expected = _by_partition(_consumer_lines(_request(ingested, consistency="eventual")))
    req = _request(
        ingested, engine="spark", consistency="eventual", follow=True, start="earliest",
        checkpoint=str(tmp_path / "ck"),
    )  # fmt: skip
    buffer = io.StringIO()
    stop = threading.Event()
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(
            read_job.run(spark, req, JsonLines(req.schema, buffer), stop=stop.is_set)
        )
    )
    worker.start()
    deadline = time.monotonic() + 120
    while buffer.getvalue().count("\n") < len(expected) and time.monotonic() < deadline:
        worker.join(0.2)
    stop.set()
    worker.join(60)
    assert not worker.is_alive()
    assert _by_partition(buffer.getvalue().splitlines()) == expected
    assert result and result[0].rows == len(expected)
    assert (tmp_path / "ck" / "offsets").is_dir()  # the stream's progress, for the next run
