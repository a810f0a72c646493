"""The generate source on a real Spark: a streaming DataFrame in the normalized change-stream
shape whose records are exactly ``generate.records``, under Trigger.AvailableNow (``--once``),
capped micro-batches, a paced processing-time trigger, and a restart from the checkpoint."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from logstore_cli.errors import EXIT_INVALID_INPUT, InvalidInputError
from logstore_cli.ingest import generate, plan
from logstore_cli.logformat.values import encode_value
from logstore_cli.model import ColumnSpec, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

DEADLINE_S = 180

ORDERS = TableSpec(
    None,
    "orders",
    (
        ColumnSpec("id", "bigint", False),
        ColumnSpec("name", "string"),
        ColumnSpec("amount", "decimal(10,2)"),
        ColumnSpec("placed", "timestamp"),
        ColumnSpec("weight", "float"),
        ColumnSpec("tags", "array<string>"),
        ColumnSpec("attrs", "map<string,int>"),
        ColumnSpec("address", "struct<city:string,since:date>"),
        ColumnSpec("payload", "binary"),
        ColumnSpec("local", "timestamp_ntz"),
    ),
    ("id",),
    None,
    {},
    None,
)
EVENTS = TableSpec(
    None, "events", (ColumnSpec("at", "timestamp"), ColumnSpec("n", "int")), (), None, {}, None
)


@dataclass(frozen=True)
class Request:
    """The fields of jobs.sources.SourceRequest the generate source reads."""

    spec: plan.GenerateSource
    table: TableSpec
    options: Mapping[str, str] = field(default_factory=dict)
    columns: plan.Columns = field(default_factory=lambda: plan.Columns(None, False, None))
    kafka_bootstrap: str | None = None
    kafka_client: Mapping[str, str] = field(default_factory=dict)


def source(*, total: int | None, rate: int = 1000, keys: int = 300) -> plan.GenerateSource:
    return plan.GenerateSource(rate, keys, total, update_ratio=0.5, delete_ratio=0.1, seed=42)


Record = tuple[int, int, str, tuple[str, ...]]  # change, index, kind, encoded values


def expected(src: plan.GenerateSource, table: TableSpec, start: int, end: int) -> list[Record]:
    types = [c.type for c in table.columns]
    return [
        (change, index, kind, tuple(encode_value(v, t) for v, t in zip(values, types, strict=True)))
        for change, index, kind, values in generate.flat_records(src, table, start, end)
    ]


def as_record(row: Row, table: TableSpec) -> Record:
    """A collected row as (arrival, kind, values) with every value as logformat encodes it: the
    comparison is exact for decimals, floats, timestamps (Spark's are naive local times), maps."""
    values = tuple(encode_value(row[c.name], c.type) for c in table.columns)
    arrival = row[plan.ARRIVAL]
    return arrival["change"], arrival["record"], row[plan.KIND], values


@dataclass
class Batches:
    """What foreachBatch saw, per batch id (a retried batch replaces its earlier attempt)."""

    table: TableSpec
    seen: dict[int, list[Row]] = field(default_factory=dict)
    partitions: dict[int, int] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        with self.arrived:
            self.seen[batch_id] = rows
            self.partitions[batch_id] = df.rdd.getNumPartitions()
            self.arrived.notify_all()

    def changes(self) -> int:
        with self.arrived:
            return sum(
                1 for rows in self.seen.values() for r in rows if r[plan.ARRIVAL]["record"] == 0
            )

    def records(self) -> list[Record]:
        with self.arrived:
            rows = [r for batch in self.seen.values() for r in batch]
        return sorted(as_record(r, self.table) for r in rows)

    def batch_changes(self) -> list[set[int]]:
        with self.arrived:
            return [{r[plan.ARRIVAL]["change"] for r in self.seen[b]} for b in sorted(self.seen)]

    def wait_for(self, condition: Callable[[], bool], query: StreamingQuery, what: str) -> None:
        """Wait until ``condition`` holds after a batch arrived; fail on a query error or after
        the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            if time.monotonic() > deadline:
                query.stop()
                raise AssertionError(f"timed out waiting for {what}")
            with self.arrived:
                self.arrived.wait(timeout=0.5)  # woken by the next batch


def start(
    stream: DataFrame, batches: Batches, checkpoint: Path, trigger: Mapping[str, Any]
) -> StreamingQuery:
    return (
        stream.writeStream.foreachBatch(batches)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def test_the_stream_has_the_tables_columns_then_the_meta_columns(spark: SparkSession) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    stream = generate_stream(spark, Request(source(total=10), ORDERS), once=True)
    assert stream.isStreaming
    assert stream.columns == [c.name for c in ORDERS.columns] + list(plan.META_COLUMNS)
    types = dict(stream.dtypes)
    assert [types[c.name] for c in ORDERS.columns] == [c.type for c in ORDERS.columns]
    assert types[plan.ARRIVAL] == "struct<change:bigint,record:int>"
    assert types[plan.KIND] == types[plan.ORIGIN] == "string"


def test_once_under_available_now_gives_exactly_total_changes(
    spark: SparkSession, tmp_path: Path
) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    src = source(total=5000)
    batches = Batches(ORDERS)
    stream = generate_stream(spark, Request(src, ORDERS), once=True)
    query = start(stream, batches, tmp_path / "checkpoint", {"availableNow": True})
    assert query.awaitTermination(DEADLINE_S), "availableNow did not end"
    assert query.exception() is None
    # Spark 4.0.1 asks a Python source for its latest offset once under availableNow: one epoch.
    assert list(batches.seen) == [0]
    assert batches.partitions[0] == 2  # 5000 changes in ranges of at least 2000
    assert batches.records() == expected(src, ORDERS, 0, 5000)
    rows = batches.seen[0]
    assert {r[plan.ORIGIN] for r in rows} == {"generate"}
    assert all(r[plan.SEQ] is None and r[plan.ERROR] is None and r[plan.RAW] is None for r in rows)
    # Run again on the same checkpoint: nothing is left, nothing is repeated.
    again = Batches(ORDERS)
    query = start(stream, again, tmp_path / "checkpoint", {"availableNow": True})
    assert query.awaitTermination(DEADLINE_S)
    assert again.records() == []


def test_capped_batches_run_in_several_epochs_until_total(
    spark: SparkSession, tmp_path: Path
) -> None:
    from logstore_cli.jobs.generate_source import ONCE_TRIGGER, finish_once, generate_stream

    src = source(total=5000)
    batches = Batches(ORDERS)
    request = Request(src, ORDERS, options={"maxChangesPerBatch": "1500"})
    query = start(
        generate_stream(spark, request, once=True), batches, tmp_path / "cp", ONCE_TRIGGER
    )
    finish_once(query)
    assert query.exception() is None
    sizes = [len(changes) for changes in batches.batch_changes()]
    assert sizes == [1500, 1500, 1500, 500]
    assert batches.records() == expected(src, ORDERS, 0, 5000)


def test_a_restart_resumes_at_the_checkpoint_without_repeating_or_skipping(
    spark: SparkSession, tmp_path: Path
) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    src = source(total=6000, rate=1000)
    trigger = {"processingTime": "0.5 seconds"}
    # One collector for both runs: a batch the stop interrupted runs again under its id.
    batches = Batches(ORDERS)
    query = start(generate_stream(spark, Request(src, ORDERS)), batches, tmp_path / "cp", trigger)
    batches.wait_for(lambda: len(batches.seen) >= 2, query, "two micro-batches")
    query.stop()
    before = set(batches.seen)
    assert 0 < batches.changes() < 6000

    query = start(generate_stream(spark, Request(src, ORDERS)), batches, tmp_path / "cp", trigger)
    batches.wait_for(lambda: batches.changes() >= 6000, query, "every change")
    query.stop()
    assert set(batches.seen) > before
    ranges = batches.batch_changes()
    assert all(ranges), "an empty micro-batch: a batch ended before it started"
    for earlier, later in itertools.pairwise(ranges):
        assert min(later) == max(earlier) + 1  # contiguous: nothing repeated, nothing skipped
    assert batches.records() == expected(src, ORDERS, 0, 6000)


def test_a_failed_batch_runs_again_with_the_same_records(
    spark: SparkSession, tmp_path: Path
) -> None:
    from logstore_cli.jobs.generate_source import ONCE_TRIGGER, finish_once, generate_stream

    src = source(total=4000)
    request = Request(src, ORDERS, options={"maxChangesPerBatch": "1000"})
    batches = Batches(ORDERS)
    failed: list[list[Record]] = []

    def fail_batch_1(df: DataFrame, batch_id: int) -> None:
        if batch_id == 1:
            failed.append(sorted(as_record(r, ORDERS) for r in df.collect()))
            raise RuntimeError("the epoch failed")
        batches(df, batch_id)

    query = (
        generate_stream(spark, request, once=True)
        .writeStream.foreachBatch(fail_batch_1)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(**ONCE_TRIGGER)
        .start()
    )
    with pytest.raises(Exception, match="the epoch failed"):
        query.awaitTermination(DEADLINE_S)
    assert list(batches.seen) == [0] and len(failed) == 1
    # Restarted, Spark runs batch 1 again from its offset log: the same changes, regenerated.
    query = start(
        generate_stream(spark, request, once=True), batches, tmp_path / "cp", ONCE_TRIGGER
    )
    finish_once(query)
    assert sorted(batches.seen) == [0, 1, 2, 3]
    assert sorted(as_record(r, ORDERS) for r in batches.seen[1]) == failed[0]
    assert batches.records() == expected(src, ORDERS, 0, 4000)


def test_a_paced_stream_offers_rate_changes_per_second(spark: SparkSession, tmp_path: Path) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    src = source(total=1200, rate=400)
    batches = Batches(ORDERS)
    started = time.monotonic()
    query = start(
        generate_stream(spark, Request(src, ORDERS)), batches, tmp_path / "cp",
        {"processingTime": "0.2 seconds"},
    )  # fmt: skip
    batches.wait_for(lambda: batches.changes() >= 1200, query, "1200 changes")
    took = time.monotonic() - started
    query.stop()
    sizes = [len(changes) for changes in batches.batch_changes()]
    # 400 at once, then 400 a second: 1200 changes cannot all be there before 2 seconds.
    assert len(sizes) >= 2 and sizes[0] < 1200 and all(sizes), sizes
    assert took >= 2.0
    assert batches.records() == expected(src, ORDERS, 0, 1200)


def test_a_table_without_a_key_streams_inserts(spark: SparkSession, tmp_path: Path) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    src = source(total=3000, keys=5)
    batches = Batches(EVENTS)
    query = start(
        generate_stream(spark, Request(src, EVENTS), once=True), batches, tmp_path / "cp",
        {"availableNow": True},
    )  # fmt: skip
    assert query.awaitTermination(DEADLINE_S)
    records = batches.records()
    assert {kind for _, _, kind, _ in records} == {"+I"}
    assert records == expected(src, EVENTS, 0, 3000)


@pytest.mark.parametrize(
    ("request_", "once", "fragment"),
    [
        (Request(source(total=None), ORDERS), True, "--once with --source generate needs --total"),
        (Request(source(total=10), ORDERS, options={"maxFilesPerTrigger": "1"}), False,
         "'maxFilesPerTrigger' is not an option of the generate source"),
        (Request(source(total=10), ORDERS, options={"maxChangesPerBatch": "0"}), False,
         "maxChangesPerBatch='0'"),
    ],
)  # fmt: skip
def test_bad_requests_are_refused_before_a_query_starts(
    spark: SparkSession, request_: Request, once: bool, fragment: str
) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    with pytest.raises(InvalidInputError) as caught:
        generate_stream(spark, request_, once=once)
    assert caught.value.exit_code == EXIT_INVALID_INPUT
    assert fragment in caught.value.message


def test_once_is_read_from_the_request_when_not_given(spark: SparkSession) -> None:
    from logstore_cli.jobs.generate_source import generate_stream

    @dataclass(frozen=True)
    class OnceRequest(Request):
        once: bool = True

    with pytest.raises(InvalidInputError, match="needs --total"):
        generate_stream(spark, OnceRequest(source(total=None), ORDERS))
