"""A column added to a table in use (issue 22, schema evolution): ``alter-table --add-column``'s
service against the real broker and delta-spark, an ingest before and after it, a following
consumer read started before it, and ``verify``."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli import config as cfg
from logstore_cli.catalog.schema_watch import SchemaChangedError
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.context import Context
from logstore_cli.cli.ingest import build_job
from logstore_cli.ingest import plan
from logstore_cli.jobs import ingest as job_api
from logstore_cli.logformat.wire import RowKind, RowSchema
from logstore_cli.model import ColumnSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from logstore_cli.provision.service import Stores
from logstore_cli.read.consumer import LogSource, SourceConf
from logstore_cli.read.verify import verify_table
from tests import jobrun
from tests.integration.read.test_read_faults import FollowingRead, wait_for

from .ingest_support import Change, changes, create_table, ingest_once, orders_ddl, write_files

TABLE = "shop.orders"


def add_region(spark: SparkSession, warehouse: Path) -> service.AlterResult:
    """``logstore alter-table shop.orders --add-column "region STRING COMMENT 'where'"``."""
    topics = KafkaTopicStore(cfg.KafkaConfig(timeout_s=15))
    try:
        stores = Stores(DeltaLogStore(warehouse, SparkDeltaStore(warehouse, lambda: spark)), topics)
        return service.alter_table(
            load_table(warehouse, TABLE), stores, {}, [], warehouse=warehouse,
            add_columns=[ColumnSpec("region", "string", comment="where")],
        )  # fmt: skip
    finally:
        topics.close()


def with_region(batch: list[Change], start: int) -> list[Change]:
    return [Change(c.op, {**c.row, "region": f"r{start + i}"}) for i, c in enumerate(batch)]


def norm(row: Mapping[str, Any]) -> dict[str, Any]:
    price = row["price"]
    return {
        "id": int(row["id"]), "name": row["name"], "qty": row["qty"],
        "price": None if price is None else str(Decimal(str(price)).quantize(Decimal("0.01"))),
        "region": row.get("region"),
    }  # fmt: skip


def folded(changes_: Iterable[Change]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for c in changes_:
        if c.op in ("-D", "-U"):
            state.pop(c.row["id"], None)
        else:
            state[c.row["id"]] = norm(c.row)
    return state


def delta_rows(path: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    return {int(r["id"]): norm(r) for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist()}


def assert_verify_passes(warehouse: Path, tmp_path: Path) -> None:
    stored = load_table(warehouse, TABLE)
    assert stored.spec.log_store is not None
    log = stored.spec.log_store
    conf = SourceConf(log.address, {}, log.topic, timeout_s=15.0)
    with LogSource(conf, RowSchema.of(stored.spec)) as source:
        verified = verify_table(stored, source)
    assert verified.equal, verified.to_json()
    result = jobrun.cli(tmp_path, warehouse, "verify", TABLE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_column_added_between_ingests_shows_up_in_both_stores_and_in_a_following_read(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=2))
    follower = FollowingRead(load_table(warehouse, TABLE), "committed")
    try:
        before = changes(300, keys=60, seed=5)
        write_files(tmp_path / "in", [before])
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
        follower.wait(lambda e: len(e) == len(before), 60, "the records ingested before")

        result = add_region(spark, warehouse)
        assert [c.name for c in result.added_columns] == ["region"]
        assert [c.name for c in load_table(warehouse, TABLE).spec.columns][-1] == "region"

        # The next job starts on the table with the column: its records and rows carry it.
        after = with_region(changes(200, keys=90, seed=6), 0)
        write_files(tmp_path / "in", [after], start=1)
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
        total = len(before) + len(after)
        follower.wait(lambda e: len(e) == total, 60, "the records ingested after the column")
    finally:
        summary = follower.finish()

    expected = folded([*before, *after])
    rows = delta_rows(warehouse / "shop" / "orders")
    assert rows == expected
    untouched = [k for k in folded(before) if k not in {c.row["id"] for c in after}]
    assert untouched and all(rows[k]["region"] is None for k in untouched)  # old rows: null
    assert any(r["region"] is not None for r in rows.values())

    emitted = follower.emitted
    assert all("region" not in row for _, row, _ in emitted[: len(before)])
    assert all(row["region"] is not None for kind, row, _ in emitted[len(before) :]
               if kind is not RowKind.DELETE)  # fmt: skip
    assert [s.names[-1] for s in follower.sink.schemas] == ["region"]  # told once
    state: dict[int, dict[str, Any]] = {}
    for kind, row, _ in emitted:
        if kind in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
            state.pop(int(row["id"]), None)
        else:
            state[int(row["id"])] = norm(row)
    assert state == expected  # the following read folds to the table with the column
    assert summary.skipped == 0
    assert_verify_passes(warehouse, tmp_path)


def test_a_running_ingest_stops_at_the_next_epoch_and_its_restart_writes_the_column(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=2))
    source = tmp_path / "in"
    first = changes(120, keys=40, seed=7)
    write_files(source, [first])
    ctx = Context(cfg.Config(warehouse=str(warehouse), kafka=cfg.KafkaConfig(timeout_s=15)))
    job = build_job(
        ctx, TABLE, source=str(source), format=None, source_options={}, source_bootstrap=None,
        generate=plan.GenerateSource(1000, 10, None, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=0.5, once=False, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    reports: list[job_api.EpochReport] = []
    lock = threading.Lock()

    def on_epoch(report: job_api.EpochReport) -> None:
        with lock:
            reports.append(report)

    run = job_api.start(spark, job, job_api.acquire_lease(job), on_epoch=on_epoch)
    try:
        wait_for(lambda: sum(r.rows for r in reports) == len(first), 120, "the first epoch")
        result = add_region(spark, warehouse)  # goes past the job's live lease
        assert result.writer_stops
        second = with_region(changes(80, keys=60, seed=8), 100)
        write_files(source, [second], start=1)
        with pytest.raises(SchemaChangedError, match="restart the job to pick up the new column"):
            job_api.wait(run, stop=lambda: False)
    except BaseException:
        if run.query.isActive:
            run.query.stop()
        raise
    assert sum(r.rows for r in reports) == len(first)  # the second file was not written
    assert delta_rows(warehouse / "shop" / "orders") == folded(first)

    ingest_once(spark, warehouse, TABLE, str(source))  # the restart: the file's epoch again
    assert delta_rows(warehouse / "shop" / "orders") == folded([*first, *second])
    assert_verify_passes(warehouse, tmp_path)


def test_the_jobs_merge_with_the_old_columns_works_on_the_table_with_the_new_one(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    """The window SchemaWatch cannot close (a column added while an epoch commits, after its
    check) is Delta's: an epoch's MERGE naming the old columns fills the new one with null on
    insert and keeps it on update."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=1))
    path = str(warehouse / "shop" / "orders")
    add_region(spark, warehouse)
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a', 1, 1.00, 'north')")
    old = ["id", "name", "qty", "price"]
    batch = spark.createDataFrame([(1, "b", 2, Decimal("2.00")), (2, "c", 3, Decimal("3.00"))],
                                  "id BIGINT, name STRING, qty INT, price DECIMAL(10,2)")  # fmt: skip
    values: dict[str, Any] = {c: F.col(f"s.{c}") for c in old}
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(batch.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedUpdate(set=values).whenNotMatchedInsert(values=values).execute()
    )  # fmt: skip
    rows = delta_rows(Path(path))
    assert rows[1]["name"] == "b" and rows[1]["region"] == "north"  # kept
    assert rows[2]["name"] == "c" and rows[2]["region"] is None  # filled with null


def test_a_spark_read_planned_before_a_column_was_added_stops_and_says_so(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    """A Spark query keeps the columns it was planned with: the ``logstore`` data source, reading
    a record written after ``--add-column``, stops the read naming the column (it skipped every
    such record as malformed before), and a read planned after the change gets the column."""
    from logstore_cli.jobs.datasource import LogBatchReader, register, resolve

    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=1))
    before = changes(40, keys=20, seed=9)
    write_files(tmp_path / "in", [before])
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
    options = {"path": TABLE, "warehouse": str(warehouse), "consistency": "none"}
    planned = resolve(options)  # the query's plan, made before the change
    add_region(spark, warehouse)
    after = with_region(changes(30, keys=20, seed=10), 0)
    write_files(tmp_path / "in", [after], start=1)
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))

    reader = LogBatchReader(planned, spark.createDataFrame([], planned.ddl()).schema)
    [partition] = reader.partitions()
    with pytest.raises(Exception, match=r"columns of table shop\.orders changed since this query "
                       r"began \(region string\).*start the query again"):  # fmt: skip
        list(reader.read(partition))

    register(spark)
    given = {k: v for k, v in options.items() if k != "path"}
    rows = spark.read.format("logstore").options(**given).load(TABLE).collect()
    assert len(rows) == len(before) + len(after)
    assert {r["region"] for r in rows[len(before):] if r["_ls_kind"] != "-D"} >= {"r0"}  # fmt: skip
