"""The ``logstore`` data source on a real Spark and broker: log records written straight to a
table's topic (``LogProducer`` + the wire format, no ingest run), read back with
``spark.read`` / ``spark.readStream`` ``.format("logstore")``.

The expected rows are derived by hand from the scenario and the read rules of docs/design.md §6.4:
``committed`` holds an epoch without a marker and drops a failed attempt, ``eventual`` retracts a
failed attempt's records newest first, ``none`` shows every change record.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from logstore_cli.catalog.epochs import epoch_commits
from logstore_cli.jobs.datasource import META_COLUMNS, register
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from tests.integration.jobs.ingest_support import COLUMNS, create_table, orders_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

DEADLINE_S = 120
NAME = "db.orders"
SCHEMA = RowSchema(
    (("id", "bigint"), ("name", "string"), ("qty", "int"), ("price", "decimal(10,2)")), ("id",)
)
assert ", ".join(f"{n} {t}" for n, t in SCHEMA.columns).upper() == COLUMNS.upper()
W = "w-1"


@dataclass(frozen=True)
class Written:
    """A change record as written: where it landed and what it holds."""

    partition: int
    offset: int
    kind: RowKind
    row: Mapping[str, Any]
    epoch: EpochId


Out = tuple[str, int, str | None, int, int, str, int]  # kind, id, name, partition, offset, W, N


def emit(r: Written) -> Out:
    return (r.kind.value, r.row["id"], r.row.get("name"), r.partition, r.offset, r.epoch.writer,
            r.epoch.epoch)  # fmt: skip


def retract(r: Written) -> Out:
    return (r.kind.retraction().value, *emit(r)[1:])


class Log:
    """Writes to a new topic's chosen partitions and knows each record's offset (from 0)."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, fmt: LogFormat = LogFormat.JSON
    ) -> None:
        self.fmt = fmt
        self.producer = LogProducer(bootstrap, {}, topic, timeout_s=15)
        self.next = [0] * partitions

    def change(self, partition: int, kind: RowKind, row: Mapping[str, Any], epoch: EpochId,
               schema: RowSchema = SCHEMA) -> Written:  # fmt: skip
        key = {k: row[k] for k in schema.primary_key} or None
        record = ChangeRecord(kind, key, row, epoch)
        self.producer.send(*encode_change(record, schema, self.fmt), partition)
        written = Written(partition, self.next[partition], kind, row, epoch)
        self.next[partition] += 1
        return written

    def marker(self, epoch: EpochId, version: int | None = None) -> None:
        for partition in range(len(self.next)):
            self.producer.send(*encode_marker(CommitMarker(epoch, version), self.fmt), partition)
            self.next[partition] += 1

    def flush(self) -> None:
        ends = self.producer.flush()
        assert all(ends[p] == self.next[p] for p in ends), (ends, self.next)

    def close(self) -> None:
        self.producer.close()


@dataclass
class Table:
    warehouse: Path
    topic: str
    log: Log
    w: dict[str, Written] = field(default_factory=dict)  # the scenario's records, by label
    versions: dict[int, int] = field(default_factory=dict)  # epoch -> its Delta version

    def options(self, **extra: str) -> dict[str, str]:
        return {"warehouse": str(self.warehouse), **extra}


def row(id_: int, name: str) -> dict[str, Any]:
    return {"id": id_, "name": name, "qty": id_ * 10, "price": Decimal("1.50")}


@pytest.fixture
def log_format() -> LogFormat:
    """The log's format; a test parametrized over ``log_format`` runs with each."""
    return LogFormat.JSON


@pytest.fixture
def table(spark: SparkSession, kafka_bootstrap: str, tmp_path: Path, topic_name: str,
          log_format: LogFormat) -> Iterator[Table]:  # fmt: skip
    register(spark)
    warehouse = tmp_path / "warehouse"
    extra = {"log-store.data-format": log_format.value}
    create_table(spark, warehouse, orders_ddl(NAME, topic_name, kafka_bootstrap, partitions=2,
                                              extra=extra))  # fmt: skip
    log = Log(kafka_bootstrap, topic_name, 2, log_format)
    try:
        yield Table(warehouse, topic_name, log)
    finally:
        log.close()


def commit_epoch(spark: SparkSession, t: Table, epoch: EpochId, offsets: dict[int, int]) -> int:
    """A Delta commit of ``epoch`` with the commit metadata an ingest writes (the log's end
    offsets after the epoch's records); its version."""
    path = t.warehouse / "db" / "orders"
    delta = spark.read.format("delta").load(str(path))
    rows = [row(1, f"epoch {epoch.epoch}")]
    spark.createDataFrame(rows, delta.schema).write.format("delta").mode("append").option(
        "userMetadata", commit_metadata(epoch, offsets)
    ).save(str(path))
    commit = next(epoch_commits(path))
    assert commit.epoch == epoch
    return commit.version


def scenario(spark: SparkSession, t: Table) -> None:
    """Epoch 0 committed (attempt a; a stray record of attempt b comes after the records Delta's
    commit counted), epoch 1 committed by its second attempt y after attempt x failed, epoch 2
    open: its only marker is forged (Delta does not confirm it). ``t.versions`` has the Delta
    versions of epochs 0 and 1."""
    e0a, e0b = EpochId(W, 0, "a"), EpochId(W, 0, "b")
    e1x, e1y, e2z = EpochId(W, 1, "x"), EpochId(W, 1, "y"), EpochId(W, 2, "z")
    log, w = t.log, t.w
    w["one"] = log.change(0, RowKind.INSERT, row(1, "one"), e0a)
    w["two"] = log.change(1, RowKind.INSERT, row(2, "two"), e0a)
    t.versions[0] = commit_epoch(spark, t, e0a, {0: 1, 1: 1})
    w["stray"] = log.change(0, RowKind.INSERT, row(1, "one"), e0b)
    log.marker(e0a, t.versions[0])
    w["x-"] = log.change(0, RowKind.UPDATE_BEFORE, row(1, "one"), e1x)
    w["x+"] = log.change(0, RowKind.UPDATE_AFTER, row(1, "uno"), e1x)
    w["y-"] = log.change(0, RowKind.UPDATE_BEFORE, row(1, "one"), e1y)
    w["y+"] = log.change(0, RowKind.UPDATE_AFTER, row(1, "eins"), e1y)
    w["del"] = log.change(1, RowKind.DELETE, {"id": 2}, e1y)
    t.versions[1] = commit_epoch(spark, t, e1y, {0: w["y+"].offset + 1, 1: w["del"].offset + 1})
    log.marker(e1y, t.versions[1])
    w["open"] = log.change(0, RowKind.INSERT, row(3, "three"), e2z)
    log.marker(e2z, t.versions[1])  # forged: every read level ignores it (issue 18)
    log.flush()


def outputs(frame: DataFrame) -> dict[int, list[Out]]:
    """The rows by partition, each partition's in the order read."""
    found: dict[int, list[Out]] = {}
    cols = ["_ls_kind", "id", "name", "_ls_partition", "_ls_offset", "_ls_writer", "_ls_epoch"]
    for r in frame.select(*cols).collect():
        found.setdefault(r["_ls_partition"], []).append(tuple(r))
    return found


def read(spark: SparkSession, t: Table, **options: str) -> dict[int, list[Out]]:
    return outputs(spark.read.format("logstore").options(**t.options(**options)).load(NAME))


# -- batch ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_format", list(LogFormat))
def test_batch_read_at_each_level(spark: SparkSession, table: Table) -> None:
    scenario(spark, table)
    w = table.w
    committed = read(spark, table, consistency="committed")
    assert committed == {
        # stray, x dropped; epoch 2 held: its marker is forged (before: released)
        0: [emit(w["one"]), emit(w["y-"]), emit(w["y+"])],
        1: [emit(w["two"]), emit(w["del"])],
    }
    eventual = read(spark, table, consistency="eventual")
    assert eventual == {
        0: [
            emit(w["one"]),
            retract(w["one"]), emit(w["stray"]),  # attempt b follows a: a failed, so far
            retract(w["stray"]), emit(w["one"]),  # the marker names a: b retracted, a again
            emit(w["x-"]), emit(w["x+"]),
            retract(w["x+"]), retract(w["x-"]), emit(w["y-"]), emit(w["y+"]),  # newest first
            emit(w["open"]),  # standing: no marker yet
        ],
        1: [emit(w["two"]), emit(w["del"])],
    }  # fmt: skip
    none = read(spark, table, consistency="none")
    assert none == {
        0: [emit(w[k]) for k in ("one", "stray", "x-", "x+", "y-", "y+", "open")],
        1: [emit(w["two"]), emit(w["del"])],
    }
    # The table's own level (log-store.enabled without a guarantee: none), and "consistent"
    # strengthening it to committed.
    assert read(spark, table) == none
    assert read(spark, table, consistent="true") == committed


def test_schema_values_and_metadata_columns(spark: SparkSession, table: Table) -> None:
    scenario(spark, table)
    frame = spark.read.format("logstore").options(**table.options()).load(NAME)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        *SCHEMA.columns,
        *META_COLUMNS,
    ]
    rows = frame.where("_ls_partition = 1").collect()
    assert [r.asDict() for r in rows] == [
        {**row(2, "two"), "_ls_kind": "+I", "_ls_partition": 1, "_ls_offset": 0,
         "_ls_writer": W, "_ls_epoch": 0},
        # A -D carries the key: the other columns are null.
        {"id": 2, "name": None, "qty": None, "price": None, "_ls_kind": "-D",
         "_ls_partition": 1, "_ls_offset": 2, "_ls_writer": W, "_ls_epoch": 1},
    ]  # fmt: skip


WIDE = (
    ("id", "bigint"), ("amount", "decimal(12,3)"), ("at", "timestamp"), ("local", "timestamp_ntz"),
    ("day", "date"), ("payload", "binary"), ("weight", "float"), ("ratio", "double"),
    ("flag", "boolean"), ("small", "tinyint"), ("tags", "array<string>"),
    ("attrs", "map<string,int>"), ("address", "struct<city:string,since:date>"),
)  # fmt: skip


def test_every_type_reads_back_as_written(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path, topic_name: str
) -> None:
    register(spark)
    warehouse = tmp_path / "warehouse"
    cols = ", ".join(f"{n} {t}" for n, t in WIDE)
    create_table(spark, warehouse, (
        f"CREATE TABLE db.wide ({cols}, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'log-store.enabled'='true', 'log-store.topic'='{topic_name}', "
        f"'log-store.address'='{kafka_bootstrap}')"
    ))  # fmt: skip
    schema = RowSchema(WIDE, ("id",))
    plus2 = timezone(timedelta(hours=2))
    values: list[dict[str, Any]] = [
        {"id": 1, "amount": Decimal("-12.345"), "at": datetime(2024, 2, 29, 12, 15, 0, 500, plus2),
         "local": datetime(2024, 2, 29, 10, 15, 0, 500_000), "day": date(1999, 12, 31),
         "payload": b"\x00\xff", "weight": 0.1, "ratio": float("inf"), "flag": True, "small": -128,
         "tags": ["a", None], "attrs": {"k": 1, "z": None},
         "address": {"city": "Zoë", "since": date(2020, 1, 1)}},
        {"id": 2, **{n: None for n, _ in WIDE[1:]}},
    ]  # fmt: skip
    log = Log(kafka_bootstrap, topic_name, 1)
    try:
        for value in values:
            log.change(0, RowKind.INSERT, value, EpochId(W, 0, "a"), schema)
        log.flush()
    finally:
        log.close()
    frame = spark.read.format("logstore").option("warehouse", str(warehouse)).load("db.wide")
    got = frame.drop(*(n for n, _ in META_COLUMNS)).toArrow().to_pylist()  # UTC-aware timestamps
    first = {**values[0], "at": values[0]["at"].astimezone(UTC),
             "weight": pytest.approx(0.1, rel=1e-7), "attrs": [("k", 1), ("z", None)]}  # fmt: skip
    assert got == [first, values[1]]
    # Spark's own view of the instant: 10:15:00.0005 UTC.
    micros = frame.where("id = 1").selectExpr("unix_micros(at)").first()
    assert micros is not None and micros[0] == 1_709_201_700_000_500


def test_from_snapshot_skips_what_the_snapshot_holds(
    spark: SparkSession, table: Table, kafka_bootstrap: str
) -> None:
    scenario(spark, table)
    w = table.w
    # Delta version V: epoch 0 committed by attempt a, after its records (before the stray one).
    version = table.versions[0]
    committed = read(spark, table, consistency="committed", **{"from": f"snapshot:{version}"})
    assert committed == {0: [emit(w["y-"]), emit(w["y+"])], 1: [emit(w["del"])]}
    # Epoch 0 is skipped at every level: the stray record of attempt b is not shown even by none.
    none = read(spark, table, consistency="none", **{"from": f"snapshot:{version}"})
    assert none == {
        0: [emit(w[k]) for k in ("x-", "x+", "y-", "y+", "open")],
        1: [emit(w["del"])],
    }
    with pytest.raises(Exception, match=r"is not an ingest epoch's commit.*from=snapshot"):
        read(spark, table, **{"from": f"snapshot:{version - 1}"})
    # Retention deletes partition 0 past the offset the snapshot continues from (DeleteRecords,
    # as retention does): the start is refused before anything is read, not read from later on.
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    [at] = [c for c in epoch_commits(table.warehouse / "db" / "orders") if c.version == version]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records(
        [TopicPartition(table.topic, 0, at.offsets[0] + 1)]
    ).values():
        future.result(timeout=30)
    with pytest.raises(Exception, match=rf"version {version}, continues the log at offsets the "
                       r"topic's retention deleted: partition 0 offset .*from="):  # fmt: skip
        read(spark, table, **{"from": f"snapshot:{version}"})


def test_append_only_keeps_inserts_and_is_refused_with_eventual(
    spark: SparkSession, table: Table
) -> None:
    scenario(spark, table)
    w = table.w
    got = read(spark, table, consistency="committed", changelogMode="append-only")
    assert got == {0: [emit(w["one"])], 1: [emit(w["two"])]}
    with pytest.raises(Exception, match=r'changelogMode "append-only" cannot be combined with the '
                       r'eventual read level.*hint: .*consistency "committed"'):  # fmt: skip
        read(spark, table, consistency="eventual", changelogMode="append-only")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"consistensy": "committed"},
         r"there is no option 'consistensy' \(hint: did you mean \"consistency\"\? the options "
         r"are: consistency, consistent, changelogMode, from, warehouse, bootstrap, kafkaTimeout"),
        ({"consistency": "strong"},
         r"option \"consistency\" is 'strong': valid values are committed, eventual, none"),
        ({"changelogMode": "upsert"},
         r"option \"changelogMode\" is 'upsert': valid values are all-kinds, append-only"),
        ({"from": "yesterday"}, r"option \"from\" is 'yesterday': valid values are earliest, "),
        ({"kafkaTimeout": "0"}, r"option \"kafkaTimeout\" is '0': valid values are a number"),
        ({"consistent": "yes"}, r"option \"consistent\" is 'yes': valid values are true, false"),
        ({"consistent": "true", "consistency": "none"},
         r"options \"consistent\" and \"consistency\" cannot be combined"),
    ],
)  # fmt: skip
def test_a_bad_option_is_a_clear_error(
    spark: SparkSession, table: Table, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=r'format\("logstore"\): ' + message) as caught:
        spark.read.format("logstore").options(**table.options(**options)).load(NAME)
    # The message, not a traceback from inside the source, is what a user reads.
    assert "resolve(" not in str(caught.value)


def test_an_unknown_table_names_the_warehouse(spark: SparkSession, table: Table) -> None:
    where = re.escape(str(table.warehouse))
    with pytest.raises(Exception, match=rf"format\(\"logstore\"\): table 'db\.nope' not found in "
                       rf"warehouse {where} \(hint: "):  # fmt: skip
        spark.read.format("logstore").options(**table.options()).load("db.nope")
    with pytest.raises(Exception, match=r"format\(\"logstore\"\): no table given \(hint: name "):
        spark.read.format("logstore").options(**table.options()).load()


# -- stream -----------------------------------------------------------------------------------------


class Collected:
    """What foreachBatch saw, per batch id, in order."""

    def __init__(self, fail_first_nonempty: bool = False) -> None:
        self.batches: list[tuple[int, list[Out]]] = []
        self.lock = threading.Lock()
        self.fail = fail_first_nonempty

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        rows = [out for part in sorted(outputs(frame).items()) for out in part[1]]
        with self.lock:
            self.batches.append((batch_id, rows))
        if rows and self.fail:
            self.fail = False
            raise RuntimeError("the sink fails once")

    def rows(self) -> list[Out]:
        with self.lock:
            return [r for _, batch in self.batches for r in batch]


def start(spark: SparkSession, t: Table, checkpoint: Path, sink: Collected,
          trigger: dict[str, Any], **options: str) -> StreamingQuery:  # fmt: skip
    frame = spark.readStream.format("logstore").options(**t.options(**options)).load(NAME)
    writer = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return writer.trigger(**trigger).start()


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("log_format", list(LogFormat))
def test_committed_stream_emits_an_epoch_once_its_marker_comes_in_a_later_batch(
    spark: SparkSession, table: Table, tmp_path: Path
) -> None:
    log, w = table.log, table.w
    e0, e1, e2 = EpochId(W, 0, "a"), EpochId(W, 1, "a"), EpochId(W, 2, "a")
    w["a"] = log.change(0, RowKind.INSERT, row(1, "a"), e0)
    log.marker(e0, commit_epoch(spark, table, e0, {0: 1, 1: 0}))  # markers follow Delta's commit
    w["b"] = log.change(1, RowKind.INSERT, row(2, "b"), e1)  # epoch 1: no marker yet
    log.flush()
    checkpoint = tmp_path / "checkpoint"
    sink = Collected()
    query = start(spark, table, checkpoint, sink, {"processingTime": "0.2 seconds"},
                  consistency="committed", **{"from": "earliest"})  # fmt: skip
    try:
        wait_for("epoch 0", lambda: emit(w["a"]) in sink.rows())
        seen = len(sink.batches)
        assert sink.rows() == [emit(w["a"])]  # epoch 1's record was read, and is held
        log.marker(e1, commit_epoch(spark, table, e1, {0: 2, 1: 1}))
        log.flush()
        wait_for("epoch 1", lambda: emit(w["b"]) in sink.rows())
        later = [i for i, (_, rows) in enumerate(sink.batches) if emit(w["b"]) in rows]
        assert later[0] >= seen  # a batch after the one that read its record
        # foreachBatch is at least once: a stop between the sink's call and Spark's commit log
        # entry replays that batch at the restart below. Wait for the commit first.
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    # More, then a restart from the checkpoint: only what is new, nothing lost or repeated.
    w["c"] = log.change(1, RowKind.INSERT, row(3, "c"), e2)
    log.flush()
    restarted = Collected()
    again = start(spark, table, checkpoint, restarted, {"availableNow": True},
                  consistency="committed")  # fmt: skip
    again.awaitTermination(DEADLINE_S)
    assert again.exception() is None
    assert restarted.rows() == []  # epoch 2 has no marker: held
    log.marker(e2, commit_epoch(spark, table, e2, {0: 3, 1: 2}))
    log.flush()
    third = Collected()
    last = start(spark, table, checkpoint, third, {"availableNow": True}, consistency="committed")
    last.awaitTermination(DEADLINE_S)
    assert last.exception() is None
    assert third.rows() == [emit(w["c"])]
    assert sink.rows() + restarted.rows() + third.rows() == [emit(w[k]) for k in "abc"]


def test_a_replayed_first_batch_reads_from_where_it_first_started(
    spark: SparkSession, table: Table, tmp_path: Path
) -> None:
    scenario(spark, table)
    w = table.w
    checkpoint = tmp_path / "checkpoint"
    failing = Collected(fail_first_nonempty=True)
    query = start(spark, table, checkpoint, failing, {"availableNow": True},
                  consistency="eventual", **{"from": "snapshot"})  # fmt: skip
    with pytest.raises(Exception, match="the sink fails once"):
        query.awaitTermination(DEADLINE_S)
    # After the snapshot of epoch 1: epoch 2's record, standing (its forged marker ignored).
    first = [emit(w["open"])]
    assert failing.rows() == first
    # A newer snapshot: "from": "snapshot" now means epoch 2's, which would skip that record. The
    # restart replays the failed first batch (its prefetched rows are gone: readBetweenOffsets
    # reads them again) from where that batch started, not from where the source would start now.
    commit_epoch(
        spark, table, EpochId(W, 2, "z"), {0: w["open"].offset + 1, 1: w["del"].offset + 1}
    )
    replay = Collected()
    again = start(spark, table, checkpoint, replay, {"availableNow": True},
                  consistency="eventual", **{"from": "snapshot"})  # fmt: skip
    again.awaitTermination(DEADLINE_S)
    assert again.exception() is None
    assert replay.batches[0] == failing.batches[-1]  # the same batch id, the same rows
    assert replay.rows() == first
