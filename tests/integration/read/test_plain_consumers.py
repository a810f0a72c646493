"""Consumers nobody here wrote, on a debezium-json topic: the guide's Spark Kafka source example
(``from_json``, folded by key) run as printed, in both changelog modes (in ``upsert`` a delete is
a tombstone), equals the Delta table."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.integration.jobs.ingest_support import (
    Change,
    changes,
    create_table,
    ingest_once,
    read_log,
    write_files,
)

pytestmark = pytest.mark.integration

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide.md"
ASSIGNMENT = 'bootstrap, topic = "localhost:9092", "shop_orders_log"'


def guide_example() -> str:
    """The guide's Python block that reads a table's topic with Spark's Kafka source."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    found = [b for b in blocks if 'format("kafka")' in b and "from_json" in b]
    assert len(found) == 1, "the guide shows one Spark Kafka source example"
    assert ASSIGNMENT in found[0]
    return found[0]


def as_orders(change: Change) -> Change:
    """The helpers' changelog in configs/paimon.sql's columns (a timestamp and a decimal too)."""
    row = change.row
    when = datetime(2024, 2, 29, 10, 15, tzinfo=UTC) + timedelta(microseconds=row["qty"] * 1001)
    return Change(change.op, {"id": row["id"], "customer": row["name"], "amount": row["price"],
                              "updated_at": when.isoformat()})  # fmt: skip


@pytest.mark.parametrize("mode", ["all", "upsert"])
def test_the_guide_s_spark_kafka_example_folds_the_topic_to_the_delta_table(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str, mode: str
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, (
        "CREATE TABLE shop.orders (`id` BIGINT, `customer` STRING, `amount` DECIMAL(10, 2), "
        "`updated_at` TIMESTAMP_LTZ(6), PRIMARY KEY (`id`) NOT ENFORCED) WITH ("
        f"'log.system' = 'kafka', 'kafka.bootstrap.servers' = '{kafka_bootstrap}', "
        f"'kafka.topic' = '{topic_name}', 'log.format' = 'debezium-json', "
        f"'log.changelog-mode' = '{mode}', 'log.system.partitions' = '3');"
    ))  # fmt: skip
    log = [as_orders(c) for c in changes(500, keys=70, seed=31)]
    write_files(tmp_path / "in", [log[:250], log[250:]])
    ingest_once(spark, warehouse, "shop.orders", str(tmp_path / "in"),
                source_options={"maxFilesPerTrigger": "1"})  # fmt: skip
    deletes = [r for r in read_log(kafka_bootstrap, topic_name)
               if dict(r.headers)["logstore.kind"] == b"-D"]  # fmt: skip
    assert deletes and all((r.value is None) == (mode == "upsert") for r in deletes)

    code = guide_example().replace(
        ASSIGNMENT, f"bootstrap, topic = {kafka_bootstrap!r}, {topic_name!r}"
    )
    scope: dict[str, Any] = {"spark": spark}
    exec(compile(code, str(GUIDE), "exec"), scope)  # the guide's code, as printed

    def rows(frame: Any) -> dict[int, dict[str, Any]]:
        return {r["id"]: r.asDict() for r in frame.collect()}

    got = rows(scope["orders"])
    want = rows(spark.read.format("delta").load(str(warehouse / "shop" / "orders")))
    assert got == want
    assert len(want) > 10 and all(isinstance(r["amount"], Decimal) for r in want.values())
    assert all(isinstance(r["updated_at"], datetime) for r in want.values())
