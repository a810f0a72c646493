"""A column widened on a table in use (issue 22, schema evolution: Delta 4.0's type widening):
``alter-table --widen-column "qty BIGINT"``'s service against the real broker and delta-spark, an
ingest before and after it with a value only the wider type holds, a following consumer read
started before it, and ``verify``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from logstore_cli import config as cfg
from logstore_cli.catalog.snapshot import snapshot_batches
from logstore_cli.catalog.tables import load_table
from logstore_cli.logformat.wire import RowKind
from logstore_cli.model import ColumnSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from logstore_cli.provision.service import Stores
from tests.integration.read.test_read_faults import FollowingRead

from .ingest_support import Change, changes, create_table, ingest_once, orders_ddl, write_files
from .test_add_column import TABLE, assert_verify_passes, folded, norm

BIG = 5_000_000_000  # more than an INT holds


def widen_qty(spark: SparkSession, warehouse: Path) -> service.AlterResult:
    """``logstore alter-table shop.orders --widen-column "qty BIGINT"``."""
    topics = KafkaTopicStore(cfg.KafkaConfig(timeout_s=15))
    try:
        stores = Stores(DeltaLogStore(warehouse, SparkDeltaStore(warehouse, lambda: spark)), topics)
        return service.alter_table(
            load_table(warehouse, TABLE), stores, {}, [], warehouse=warehouse,
            widen_columns=[ColumnSpec("qty", "bigint")],
        )  # fmt: skip
    finally:
        topics.close()


def delta_rows(path: Path) -> dict[int, dict[str, Any]]:
    """The table's rows by id (logstore's delta-rs read: delta-rs alone refuses typeWidening)."""
    return {int(r["id"]): norm(r) for batch in snapshot_batches(path) for r in batch}


def test_a_column_widened_between_ingests_holds_a_wide_value_in_both_stores(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap, partitions=2))
    follower = FollowingRead(load_table(warehouse, TABLE), "committed")
    try:
        before = changes(200, keys=50, seed=11)
        write_files(tmp_path / "in", [before])
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
        follower.wait(lambda e: len(e) == len(before), 60, "the records ingested before")

        result = widen_qty(spark, warehouse)
        assert [(c.name, c.type) for c in result.widened_columns] == [("qty", "bigint")]
        qty = {c.name: c.type for c in load_table(warehouse, TABLE).spec.columns}["qty"]
        assert qty == "bigint"

        # The next job starts on the widened table: a value only BIGINT holds goes to both.
        after = [Change("+I", {"id": 1000, "name": "big", "qty": BIG, "price": "1.00"})]
        write_files(tmp_path / "in", [after], start=1)
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
        total = len(before) + len(after)
        follower.wait(lambda e: len(e) == total, 60, "the record ingested after the widening")
    finally:
        summary = follower.finish()

    expected = folded([*before, *after])
    rows = delta_rows(warehouse / "shop" / "orders")
    assert rows == expected and rows[1000]["qty"] == BIG
    state: dict[int, dict[str, Any]] = {}
    for kind, row, _ in follower.emitted:
        if kind in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
            state.pop(int(row["id"]), None)
        else:
            state[int(row["id"])] = norm(row)
    assert state == expected  # the read started on INT re-read the schema for the wide value
    assert summary.skipped == 0
    assert_verify_passes(warehouse, tmp_path)
