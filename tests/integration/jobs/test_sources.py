"""``jobs.sources.open_source`` on a real local Spark and the real broker: every source becomes the
normalized change stream of ``ingest/plan.py``, every input record comes out exactly once (good
or quarantined with its reason, raw text and origin), in arrival order.

Each source is read by one available-now query over a data set that holds every case; the
up-front checks need no query at all.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore_cli.cli.ingest import Coerced
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan
from logstore_cli.jobs.ingest import progress_after
from logstore_cli.jobs.sources import IGNORE_UNKNOWN_COLUMNS, SourceRequest, open_source
from logstore_cli.model import ColumnSpec, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

QUERY_TIMEOUT_S = 180
BASE_MTIME = 1_700_000_000  # files get increasing modification times from here

ORDERS = TableSpec(
    database="shop",
    table="orders",
    columns=(
        ColumnSpec("id", "bigint", nullable=False),
        ColumnSpec("qty", "int"),
        ColumnSpec("price", "decimal(5,2)"),
        ColumnSpec("name", "string"),
    ),
    primary_key=("id",),
    using="delta",
    properties={},
    log_store=None,
)
EVENTS = TableSpec(  # no primary key: inserts and updates only
    database="shop",
    table="events",
    columns=(ColumnSpec("id", "bigint"), ColumnSpec("v", "string")),
    primary_key=(),
    using="delta",
    properties={},
    log_store=None,
)
TABLE_COLUMNS = ["id", "qty", "price", "name"]


def _request(
    spec: plan.SourceSpec,
    table: TableSpec = ORDERS,
    *,
    op: str | None = None,
    sequence: str | None = None,
    options: Mapping[str, str] | None = None,
    kafka_bootstrap: str | None = None,
    kafka_client: Mapping[str, str] | None = None,
) -> SourceRequest:
    return SourceRequest(
        spec=spec,
        table=table,
        columns=plan.resolve_columns(table, op, sequence),
        options=dict(options or {}),
        kafka_bootstrap=kafka_bootstrap,
        kafka_client=dict(kafka_client or {}),
    )


def _collect(df: DataFrame, checkpoint: Path) -> list[Row]:
    """Every row of one available-now run of ``df`` (foreachBatch, as the ingest job reads it)."""
    rows: list[Row] = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the available-now run did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    return rows


def _write(path: Path, text: str, age: int) -> Path:
    """A file with modification time BASE_MTIME + age: the file source's order within a batch."""
    path.write_text(text, encoding="utf-8")
    os.utime(path, (BASE_MTIME + age, BASE_MTIME + age))
    return path


def _by_arrival(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: r[plan.ARRIVAL])  # Spark's struct order: field by field


def _check_shape(df: DataFrame, table: TableSpec) -> None:
    assert df.isStreaming
    assert df.columns == [c.name for c in table.columns] + list(plan.META_COLUMNS)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert {c.name: types[c.name] for c in table.columns} == {c.name: c.type for c in table.columns}


@pytest.fixture(scope="module")
def small_splits(spark: SparkSession) -> SparkSession:
    """A session whose file splits are 16 KiB: files of a few hundred lines span several tasks."""
    session = spark.newSession()
    session.conf.set("spark.sql.files.maxPartitionBytes", str(16 * 1024))
    session.conf.set("spark.sql.files.openCostInBytes", "0")
    return session


# -- JSON ---------------------------------------------------------------------------------------

# (line, kind, error fragment): the error fragment is None for a good record.
JSON_A: list[tuple[str, str | None, str | None]] = [
    ('{"id": 1, "qty": 2, "price": 1.5, "name": "a", "op": "+I", "ts_ms": 10}', "+I", None),
    ('{"id": 2, "qty": "abc", "ts_ms": 11}', None, "column 'qty': expected int, got \"abc\""),
    ('{"id": 3, "qty": 3000000000}', None, "column 'qty': expected int, got 3000000000"),
    ('{"id": 4, "price": 12345.678}', None, "column 'price': expected decimal(5,2), got 12345.678"),
    ('{"id": 5, "op": "X"}', None, "unknown op 'X' (valid: +I, -U, +U, -D, c, r, u, d)"),
    ('{"qty": 1, "op": "c"}', None, "missing primary-key column 'id'"),
    ('{"id": null, "qty": 1}', None, "missing primary-key column 'id'"),
    ('{"id": 8, "qty": 2', None, "not valid JSON"),
    ("[1, 2]", None, "not a JSON object"),
    (
        '{"id": 10, "name": {"nested": true}, "qty": 1.5}',
        None,
        "column 'qty': expected int, got 1.5",
    ),
]
JSON_B: list[tuple[str, str | None, str | None]] = [
    ('{"id": 1, "qty": 3, "op": "u", "ts_ms": 20}', "+U", None),
    ('{"id": 2, "op": " -D "}', "-D", None),
    ('{"id": 6, "name": "no op: an upsert"}', None, None),
    ('{"id": 7, "op": "r", "price": 0.5}', "+I", None),
    ('{"id": 9, "op": "-U", "ts_ms": 21}', "-U", None),
    ('{"id": 11, "op": "d"}', "-D", None),
]


def test_json_directory_every_record_once_good_or_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The origin is the path as the user knows it, not Spark's URI (%20, %25).
    source = tmp_path / "in dir+%20 é"
    source.mkdir()
    a = _write(source / "a.json", "\n".join(line for line, _, _ in JSON_A) + "\n\n  \n", age=0)
    # b.json starts with a byte-order mark and ends its lines with CRLF.
    b_text = "\ufeff" + "\r\n".join(line for line, _, _ in JSON_B) + "\r\n"
    b = _write(source / "b.json", b_text, age=10)

    df = open_source(spark, _request(plan.DirectorySource(str(source), None), sequence="ts_ms"))
    _check_shape(df, ORDERS)
    rows = _by_arrival(_collect(df, tmp_path / "checkpoint"))

    expected = [(a, *case) for case in JSON_A] + [(b, *case) for case in JSON_B]
    assert len(rows) == len(expected)  # blank lines are not records; every line is one
    for row, (file, line, kind, error) in zip(rows, expected, strict=True):
        assert row[plan.ORIGIN] == str(file)
        if error is None:
            assert (row[plan.ERROR], row[plan.RAW]) == (None, None), line
            assert row[plan.KIND] == kind
            record = json.loads(line)
            assert row["id"] == record["id"]
            assert row[plan.SEQ] == record.get("ts_ms")
            continue
        assert row[plan.ERROR] is not None and error in row[plan.ERROR], line
        assert row[plan.RAW] == line  # exactly as read, also when it parsed but breaks a rule
    good = {r["id"]: r for r in rows if r[plan.ERROR] is None}
    assert good[7]["price"] == Decimal("0.50") and good[6][plan.SEQ] is None


def test_json_lines_keep_their_order_across_tasks_and_new_files_are_picked_up(
    small_splits: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    lines_per_file = 600  # ~40 KiB a file: three 16 KiB splits
    files = []
    for f, name in enumerate(["z.json", "m.json", "a.json"]):  # names against the time order
        text = "".join(
            json.dumps({"id": f * 10_000 + i, "name": "x" * (i % 50), "qty": i}) + "\n"
            for i in range(lines_per_file)
        )
        files.append(_write(source / name, text, age=f))

    checkpoint = tmp_path / "checkpoint"
    df = open_source(small_splits, _request(plan.DirectorySource(str(source), "json")))
    rows = _by_arrival(_collect(df, checkpoint))

    assert [r["id"] for r in rows] == [
        f * 10_000 + i for f in range(len(files)) for i in range(lines_per_file)
    ]
    assert all(r[plan.ERROR] is None for r in rows)
    for file in files:
        blocks = {r[plan.ARRIVAL]["block"] for r in rows if r[plan.ORIGIN] == str(file)}
        assert len(blocks) >= 2, f"{file.name} was not split across tasks"

    # A file copied in with its old modification time (a month before the others): Spark's
    # default maxFileAge (7 days before the newest file seen) would skip it without a word.
    late = _write(source / "late.json", '{"id": 77}\n{"id": 78}\n', age=-30 * 86_400)
    again = _collect(
        open_source(small_splits, _request(plan.DirectorySource(str(source), "json"))), checkpoint
    )
    assert [(r["id"], r[plan.ORIGIN]) for r in _by_arrival(again)] == [
        (77, str(late)),
        (78, str(late)),
    ]


# -- CSV ----------------------------------------------------------------------------------------

CSV_HEADER = "name,op,qty,id,price,note"  # the table's columns in another order, and one more
# (line, kind, error fragment, raw when it is rendered back)
CSV_A: list[tuple[str, str | None, str | None, str | None]] = [
    ("a,+I,2,1,1.5,n", "+I", None, None),
    ("b,+U,abc,2,1.5,n", None, "column 'qty': expected int, got \"abc\"", None),
    ("c,+I,3,3", None, "wrong number of fields: expected 6 (name, op, qty, id, price, note)", None),
    ("d,+I,3,4,1.5,n,extra", None, "wrong number of fields: expected 6", None),
    ('"x, y",c,5,5,2.25,n', "+I", None, None),
    ("e,+I,6,,1,n", None, "missing primary-key column 'id'", "e,+I,6,,1.00,n"),
    ("f,Z,7,7,1,n", None, "unknown op 'Z'", "f,Z,7,7,1.00,n"),
    ("g,-D,8,8,,n", "-D", None, None),
    ("h,u,9,9,123456.7,n", None, "column 'price': expected decimal(5,2), got \"123456.7\"", None),
    ("j,,11,11,1,n", None, "no op: column 'op' is missing or null", "j,,11,11,1.00,n"),
]
CSV_B: list[tuple[str, str | None, str | None, str | None]] = [
    ("i,d,10,10,9.99,n", "-D", None, None),
]


def test_csv_directory_columns_by_header(small_splits: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "csv"
    source.mkdir()
    a = _write(source / "a.csv", CSV_HEADER + "\n" + "\n".join(c[0] for c in CSV_A) + "\n\n", 0)
    b = _write(source / "b.csv", CSV_HEADER + "\n" + "\n".join(c[0] for c in CSV_B) + "\n", 5)

    df = open_source(
        small_splits,
        _request(
            plan.DirectorySource(str(source), None),
            op="op",  # named: every record needs one
            sequence="qty",  # a table column as the sequence
            options={IGNORE_UNKNOWN_COLUMNS: "true"},  # 'note' is not the table's
        ),
    )
    _check_shape(df, ORDERS)
    rows = _by_arrival(_collect(df, tmp_path / "checkpoint"))

    expected = [(a, *case) for case in CSV_A] + [(b, *case) for case in CSV_B]
    assert len(rows) == len(expected)
    for row, (file, line, kind, error, rendered) in zip(rows, expected, strict=True):
        assert row[plan.ORIGIN] == str(file)
        if error is None:
            assert (row[plan.ERROR], row[plan.RAW], row[plan.KIND]) == (None, None, kind), line
            assert row[plan.SEQ] == row["qty"]
        else:
            assert row[plan.ERROR] is not None and error in row[plan.ERROR], line
            assert row[plan.RAW] == (rendered or line)
    good = {r["id"]: r for r in rows if r[plan.ERROR] is None}
    assert good[5]["name"] == "x, y"
    assert good[1]["price"] == Decimal("1.50") and good[8]["price"] is None


# -- parquet ------------------------------------------------------------------------------------


def test_parquet_directory_narrower_types_widened_rows_in_order(
    small_splits: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "pq"
    source.mkdir()
    n = 2_000
    ops = ["+I", "u", "-D", "X", None]
    ids = [None if i == 7 else i for i in range(n)]
    table = pa.table(
        {
            "ID": pa.array(ids, pa.int32()),  # parquet columns match case-insensitively
            "qty": pa.array([i % 100 for i in range(n)], pa.int8()),
            "price": pa.array([Decimal(i % 100) / 4 for i in range(n)], pa.decimal128(4, 2)),
            "name": pa.array([f"name-{i:05d}" * 3 for i in range(n)], pa.string()),
            "op": pa.array([ops[i % len(ops)] for i in range(n)], pa.string()),
        }
    )
    path = source / "part-0.parquet"
    pq.write_table(table, path, row_group_size=200)  # ~10 row groups: several 16 KiB splits
    os.utime(path, (BASE_MTIME, BASE_MTIME))

    df = open_source(small_splits, _request(plan.DirectorySource(str(source), None)))
    _check_shape(df, ORDERS)
    rows = _by_arrival(_collect(df, tmp_path / "checkpoint"))

    assert len(rows) == n
    assert [r[plan.ARRIVAL]["pos"] for r in rows] == list(range(n))  # the row index
    assert len({r[plan.ARRIVAL]["block"] for r in rows}) >= 2  # split across tasks
    for i, row in enumerate(rows):
        op = ops[i % len(ops)]
        assert row[plan.ORIGIN] == str(path)
        assert (row["qty"], row["price"]) == (i % 100, Decimal(i % 100) / 4)
        if i == 7:
            assert row[plan.ERROR] == "missing primary-key column 'id' (absent or null)"
        elif op == "X":
            assert row[plan.ERROR] is not None and row[plan.ERROR].startswith("unknown op 'X'")
        else:
            assert (row["id"], row[plan.ERROR], row[plan.RAW]) == (i, None, None)
            assert row[plan.KIND] == (plan.OP_VALUES[op].value if op else None)
            continue
        raw = json.loads(row[plan.RAW])  # the row, rendered as JSON with the file's names
        assert raw["qty"] == i % 100 and raw["op"] == op and raw.get("ID") == ids[i]


# -- Kafka --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sent:
    value: bytes | None
    partition: int
    offset: int


def _produce(bootstrap: str, topic: str, values: list[tuple[int, bytes | None]]) -> list[_Sent]:
    """Each value to its partition; the delivery reports say where each one landed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    sent: list[_Sent] = []
    errors: list[KafkaError] = []

    def delivered(value: bytes | None, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            sent.append(_Sent(value, msg.partition(), msg.offset()))

    for partition, value in values:
        producer.produce(
            topic, value=value, partition=partition, on_delivery=partial(delivered, value)
        )
    assert producer.flush(30) == 0
    assert errors == []
    return sent


KAFKA_VALUES: list[tuple[int, bytes | None, str | None, str | None]] = [
    # (partition, value, kind, error fragment)
    (0, b'{"id": 1, "v": "a"}', None, None),
    (1, b'{"id": 2, "op": "-D"}', None, "op '-D' removes a row, which needs a primary key"),
    (0, b'{"id": 3, "op": "+U", "v": "b"}', "+U", None),
    (1, b'{"id": 4, "op": "-U"}', None, "needs a primary key: table shop.events has none"),
    (0, b"not json", None, "not valid JSON"),
    (1, None, None, "the record has no value (a tombstone)"),
    (0, b'{"id": "x"}', None, "column 'id': expected bigint, got \"x\""),
    (1, b"  ", None, "empty value"),
    (0, b'{"id": 5, "op": "c", "v": "7"}', "+I", None),
    # a value that would change on the way in (issue 18 item 10)
    (1, b'{"id": 6, "v": 7}', None, "column 'v': expected a string, got 7"),
    (0, b'{"id": 7, "v": "\xff"}', None, "not valid UTF-8"),
]


def test_kafka_topic_json_values(spark: SparkSession, kafka_bootstrap: str, topic_name: str,
                                 tmp_path: Path) -> None:  # fmt: skip
    sent = _produce(kafka_bootstrap, topic_name, [(p, v) for p, v, _, _ in KAFKA_VALUES])
    where = {s.value: (s.partition, s.offset) for s in sent}

    df = open_source(
        spark,
        _request(
            plan.KafkaSource(topic_name, None),
            EVENTS,
            kafka_bootstrap=kafka_bootstrap,  # the table's brokers: the source names none
            kafka_client={"client.id": "logstore-test", "key.serializer": "ignored.Serializer"},
        ),
    )
    _check_shape(df, EVENTS)
    rows = _collect(df, tmp_path / "checkpoint")

    assert len(rows) == len(KAFKA_VALUES)
    by_position = {(r[plan.ARRIVAL]["partition"], r[plan.ARRIVAL]["offset"]): r for r in rows}
    for _, value, kind, error in KAFKA_VALUES:
        partition, offset = where[value]
        row = by_position[(partition, offset)]
        assert row[plan.ORIGIN] == f"kafka:{topic_name}/{partition}@{offset}"
        if error is None:
            assert (row[plan.ERROR], row[plan.RAW], row[plan.KIND]) == (None, None, kind)
            assert value is not None and row["id"] == json.loads(value)["id"]
        else:
            assert row[plan.ERROR] is not None and error in row[plan.ERROR], value
            assert row[plan.RAW] == (value.decode(errors="replace") if value is not None else None)
    assert {r["id"]: r["v"] for r in rows if r[plan.ERROR] is None} == {1: "a", 3: "b", 5: "7"}


# -- hostile files (issue 18 item 6) -------------------------------------------------------------


@contextlib.contextmanager
def _fifo_watch(fifo: Path) -> Iterator[list[float]]:
    """Opens of ``fifo`` for reading, seen while the block runs. A reader blocks in its open until
    a writer comes; the watcher is that writer (a non-blocking open succeeds only when a reader
    waits), and it closes at once: the reader gets end-of-file, so a test can fail but never hang."""
    seen: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no reader: the normal case
                    continue
                raise
            seen.append(time.monotonic())
            os.close(fd)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=10)


def _parquet_file(path: Path) -> None:
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}), path)


FIFO_CASES = {
    "json": ("data.json", lambda p: p.write_text('{"id": 1, "name": "a"}\n{"id": 2}\n'), {}),
    # multiLine: CSV files Spark cannot split, so a FIFO would be one whole split to open
    "csv multiLine": ("data.csv", lambda p: p.write_text("id,name\n1,a\n2,b\n"),
                      {"header": "true", "multiLine": "true"}),
    "parquet": ("data.parquet", _parquet_file, {}),
}  # fmt: skip


@pytest.mark.parametrize(("name", "write", "options"), FIFO_CASES.values(), ids=FIFO_CASES.keys())
def test_a_fifo_in_the_source_is_never_opened(
    spark: SparkSession,
    tmp_path: Path,
    name: str,
    write: Callable[[Path], None],
    options: dict[str, str],
) -> None:
    # The sample before the stream opened it and waited for a writer for ever (issue 18 item 6).
    source = tmp_path / "src"
    source.mkdir()
    write(source / name)
    fifo = source / f"a-pipe{Path(name).suffix}"  # first by name: the first file sampled
    os.mkfifo(fifo)
    with _fifo_watch(fifo) as opened:
        df = open_source(spark, _request(plan.DirectorySource(str(source), None), options=options))
        rows = _collect(df, tmp_path / "checkpoint")  # Spark's own listing sees the FIFO too
    assert opened == [], "the FIFO was opened"
    assert sorted(r["id"] for r in rows) == [1, 2]
    assert {r[plan.ORIGIN] for r in rows} == {str(source / name)}


def test_deeply_nested_json_in_the_sample_is_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Python's json parser raised RecursionError on the sample: `internal error` (issue 18 item 6).
    depth = 20_000  # beyond Python's recursion limit and Jackson's nesting limit (1000)
    nested = "[" * depth + "]" * depth
    lines = [
        '{"id": 1, "name": "a"}',
        '{"id": 2, "name": ' + nested + "}",
        nested,
        '{"id": 3, "qty": {"a": ' + "{" * 3000 + "}" * 3000 + "}}",
        '{"id": 4, "name": "d"}',
    ]
    source = tmp_path / "src"
    source.mkdir()
    _write(source / "a.json", "\n".join(lines) + "\n", age=0)
    df = open_source(spark, _request(plan.DirectorySource(str(source), None)))
    rows = _by_arrival(_collect(df, tmp_path / "checkpoint"))
    assert [r["id"] for r in rows if r[plan.ERROR] is None] == [1, 4]
    bad = [r for r in rows if r[plan.ERROR] is not None]
    assert [r[plan.RAW] for r in bad] == lines[1:4]  # each kept whole for the quarantine
    assert all(r[plan.ERROR] for r in bad)


# -- up-front checks ----------------------------------------------------------------------------


def _json_dir(root: Path, name: str, *records: dict[str, Any]) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "part.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory


def _refused(spark: SparkSession, request: SourceRequest) -> str:
    with pytest.raises(InvalidInputError) as caught:
        open_source(spark, request)
    assert caught.value.exit_code == 2
    return f"{caught.value.message}\n{caught.value.hint or ''}"


def test_a_missing_or_unusable_source_path_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    missing = tmp_path / "~" / "$HOME"  # taken literally: neither is expanded
    message = _refused(spark, _request(plan.DirectorySource(str(missing), None)))
    assert f"the source directory {missing} does not exist" in message

    a_file = tmp_path / "data.json"
    a_file.write_text('{"id": 1}\n')
    message = _refused(spark, _request(plan.DirectorySource(str(a_file), None)))
    assert f"the source {a_file} is not a directory" in message

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden.json").write_text("{}\n")  # hidden files are not data
    message = _refused(spark, _request(plan.DirectorySource(str(empty), None)))
    assert "has no files yet" in message and "--format" in message
    # With --format an empty directory is fine: files are picked up as they arrive.
    df = open_source(spark, _request(plan.DirectorySource(str(empty), "csv")))
    _check_shape(df, ORDERS)

    message = _refused(
        spark,
        _request(plan.DirectorySource(str(empty), "json"), options={"mode": "FAILFAST"}),
    )
    assert "--source-option mode" in message
    message = _refused(
        spark,
        _request(plan.DirectorySource(str(empty), "json"), options={"multiLine": "true"}),
    )
    assert "JSON Lines" in message and "multiLine" in message


def test_a_delta_table_s_own_directory_is_refused_on_any_file_system(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Issue 18 item 4, for the job API and remote URIs (the CLI checks local paths earlier).
    table = _json_dir(tmp_path, "table", {"id": 1})
    (table / "_delta_log").mkdir()
    (table / "year=2024").mkdir()
    (table / "year=2024" / "a.json").write_text('{"id": 1}\n')
    message = _refused(spark, _request(plan.DirectorySource(table.as_uri(), "json")))
    assert "holds a table's own files: it holds a _delta_log" in message
    message = _refused(spark, _request(plan.DirectorySource(str(table / "year=2024"), None)))
    assert "it is inside the Delta table file:" in message and str(table) in message


def test_glob_characters_in_paths_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    """Spark 4.0.1 would read files more than once (SPARK-58518): refused before it can."""
    globbed = tmp_path / "in [1]"
    globbed.mkdir()
    (globbed / "a.json").write_text('{"id": 1}\n')
    message = _refused(spark, _request(plan.DirectorySource(str(globbed), None)))
    assert "contains [ ]" in message and "SPARK-58518" in message

    named = tmp_path / "named"
    named.mkdir()
    (named / "a{1}.json").write_text('{"id": 1}\n')
    (named / "b.json").write_text('{"id": 2}\n')
    message = _refused(spark, _request(plan.DirectorySource(str(named), None)))
    assert "a{1}.json" in message and "b.json" not in message and "rename them" in message


def test_source_columns_are_checked_against_the_table(spark: SparkSession, tmp_path: Path) -> None:
    unknown = _json_dir(tmp_path, "unknown", {"id": 1, "quantity": 2}, {"id": 2, "Name": "x"})
    message = _refused(spark, _request(plan.DirectorySource(str(unknown), None)))
    assert "quantity, Name" in message and "id, qty, price, name" in message
    assert "case included" in message  # 'Name' differs from 'name' only in case
    assert IGNORE_UNKNOWN_COLUMNS in message
    df = open_source(
        spark,
        _request(
            plan.DirectorySource(str(unknown), None), options={IGNORE_UNKNOWN_COLUMNS: "true"}
        ),
    )
    _check_shape(df, ORDERS)

    no_op = _json_dir(tmp_path, "no-op", {"id": 1, "qty": 2})
    message = _refused(spark, _request(plan.DirectorySource(str(no_op), None), op="change"))
    assert "--op-column 'change' is not a column of the source" in message
    assert "its columns: id, qty" in message

    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    (csv_dir / "a.csv").write_text("id,qty,colour\n1,2,red\n")
    message = _refused(spark, _request(plan.DirectorySource(str(csv_dir), None)))
    assert "colour" in message and "the header of a.csv" in message
    message = _refused(spark, _request(plan.DirectorySource(str(csv_dir), None), op="op_type"))
    assert "colour" in message  # unknown columns come first: they may be the misspelt op column

    headers = tmp_path / "headers"
    headers.mkdir()
    (headers / "a.csv").write_text("id,qty\n1,2\n")
    (headers / "b.csv").write_text("qty,id\n3,4\n")
    message = _refused(spark, _request(plan.DirectorySource(str(headers), None)))
    assert "different headers" in message and "a.csv" in message and "b.csv" in message

    no_key = tmp_path / "no-key"
    no_key.mkdir()
    (no_key / "a.csv").write_text("qty,name\n1,x\n")
    message = _refused(spark, _request(plan.DirectorySource(str(no_key), None)))
    assert "no primary-key column 'id'" in message


def test_parquet_types_must_fit_the_table(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "pq"
    source.mkdir()
    pq.write_table(
        pa.table({"id": pa.array([1], pa.int64()), "qty": pa.array([2**40], pa.int64())}),
        source / "a.parquet",
    )
    message = _refused(spark, _request(plan.DirectorySource(str(source), None)))
    assert "column 'qty' of the source has type bigint" in message and "table's int" in message

    op_parquet = tmp_path / "pq-op"
    op_parquet.mkdir()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), op_parquet / "a.parquet")
    message = _refused(spark, _request(plan.DirectorySource(str(op_parquet), None), op="change"))
    assert "--op-column 'change' is not a column of the source" in message


def test_kafka_needs_brokers(spark: SparkSession) -> None:
    message = _refused(spark, _request(plan.KafkaSource("orders", None)))
    assert "no Kafka brokers" in message and "--source-bootstrap" in message


def test_generate_is_delegated(spark: SparkSession) -> None:
    spec = plan.GenerateSource(rate=10, keys=5, total=20, update_ratio=0.5, delete_ratio=0.1)
    df = open_source(spark, _request(spec))
    _check_shape(df, ORDERS)


# -- coercions (issue 18 item 10) ---------------------------------------------------------------

PRICES = TableSpec(
    database="shop",
    table="prices",
    columns=(
        ColumnSpec("id", "bigint", nullable=False),
        ColumnSpec("name", "string"),
        ColumnSpec("price", "decimal(10,2)"),
    ),
    primary_key=("id",),
    using="delta",
    properties={},
    log_store=None,
)
# (line as bytes, rule or None, error fragment by default, the stored (id, name, price) with
# every coercion accepted, or None when the record is quarantined either way)
COERCED: list[tuple[bytes, str | None, str | None, tuple[int, str | None, str | None] | None]] = [
    (b'{"id": 1, "name": "ok", "price": 1.50}', None, None, (1, "ok", "1.50")),
    (b'{"id": 2, "name": "bad\xff"}', "invalid-utf8", "not valid UTF-8", (2, "bad\ufffd", None)),
    (b'{"id": 3, "name": "\\ud800x"}', "lone-surrogate", "without its pair", (3, "?x", None)),
    (b'{"id": 4, "price": 1.005}', "decimal-round",
     "column 'price': decimal(10,2) holds 2 decimal places, got 1.005 (it would be stored as 1.01",
     (4, None, "1.01")),
    (b'{"id": 5, "name": NaN}', "number-to-string",
     "column 'name': expected a string, got \"NaN\"", (5, "NaN", None)),
    (b'{"id": 6, "name": true}', "bool-to-string",
     "column 'name': expected a string, got true", (6, "true", None)),
    (b'{"id": 20, "id": 21}', "duplicate-key", "a field given more than once, of 'id'", (21, None, None)),
    (b'{"id": 7, "name": {"a": 1}}', "json-to-string",
     "column 'name': expected a string, got {\"a\":1}", (7, '{"a":1}', None)),
    (b'{"id": 8, "name": 42}', "number-to-string", "got 42", (8, "42", None)),
    # Never accepted: a number in quotes into BIGINT, a decimal that rounds past its digits.
    (b'{"id": "41"}', None, "column 'id': expected bigint, got \"41\"", None),
    (b'{"id": 10, "price": 99999999.995}', None,
     "column 'price': expected decimal(10,2), got 99999999.995", None),
    # Not coercions: a surrogate pair, an escaped backslash before "ud800", trailing zeros.
    (b'{"id": 11, "name": "\\ud83d\\ude00 \\\\ud800", "price": 2.500}', None, None,
     (11, "\U0001f600 \\ud800", "2.50")),
]  # fmt: skip


def _collect_with_metrics(df: DataFrame, checkpoint: Path) -> tuple[list[Row], dict[str, int]]:
    """Like ``_collect``, with the accepted coercions the query observed, summed per rule."""
    rows: list[Row] = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.persist().collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the available-now run did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    counts: dict[str, int] = {}
    for progress in query.recentProgress:
        metrics = progress.observedMetrics.get(plan.COERCION_METRICS)
        for rule, n in (metrics.asDict() if metrics is not None else {}).items():
            counts[rule] = counts.get(rule, 0) + int(n)
    # The CLI reads the reports as JSON, only those after the last it took: the same counts.
    reports = progress_after(query, None)
    ids = [int(p["batchId"]) for p in reports]
    assert ids == [p.batchId for p in query.recentProgress] and ids
    assert progress_after(query, ids[-1]) == [] and progress_after(query, ids[0] - 1) == reports
    coerced = Coerced()
    coerced.take(reports)
    assert coerced.totals == {rule: n for rule, n in counts.items() if n}
    return rows, counts


def test_values_that_would_change_are_quarantined_or_accepted_and_counted(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_bytes(b"\n".join(line for line, *_ in COERCED) + b"\n")
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    (csv_dir / "a.csv").write_text("id,price\n1,1.005\n2,1.5\n", encoding="utf-8")

    def request(path: Path, coerce: frozenset[str]) -> SourceRequest:
        return replace(_request(plan.DirectorySource(str(path), None), PRICES), coerce=coerce)

    # By default each one is quarantined with its reason, the rest stored as before.
    rows, counts = _collect_with_metrics(
        open_source(spark, request(source, frozenset())), tmp_path / "c1"
    )
    assert counts == {}
    assert len(rows) == len(COERCED)
    by_line = {r[plan.RAW]: r for r in rows if r[plan.ERROR] is not None}
    good = {r["id"]: r for r in rows if r[plan.ERROR] is None}
    for line, _, error, stored in COERCED:
        if error is None:
            assert stored is not None
            row = good[stored[0]]
            assert (row["name"], row["price"]) == (stored[1], Decimal(stored[2])), line
            continue
        row = by_line[line.decode("utf-8", errors="replace")]
        assert error in row[plan.ERROR], (line, row[plan.ERROR])

    # Every rule accepted: the changed value is stored, and counted per rule.
    rows, counts = _collect_with_metrics(
        open_source(spark, request(source, frozenset(plan.COERCIONS))), tmp_path / "c2"
    )
    assert counts == {
        "invalid-utf8": 1, "lone-surrogate": 1, "decimal-round": 1, "number-to-string": 2,
        "bool-to-string": 1, "json-to-string": 1, "duplicate-key": 1,
    }  # fmt: skip
    stored_rows = {
        (r["id"], r["name"], None if r["price"] is None else str(r["price"]))
        for r in rows
        if r[plan.ERROR] is None
    }
    assert stored_rows == {s for _, _, _, s in COERCED if s is not None}
    assert len(rows) - len(stored_rows) == 2  # "41" and the decimal past its digits

    # One rule accepted: only that one is stored and counted.
    rows, counts = _collect_with_metrics(
        open_source(spark, request(source, frozenset({"bool-to-string"}))), tmp_path / "c3"
    )
    assert counts == {"bool-to-string": 1}
    assert {r["id"] for r in rows if r[plan.ERROR] is None} == {1, 6, 11}

    # CSV: the decimal rounding too.
    rows, counts = _collect_with_metrics(
        open_source(spark, request(csv_dir, frozenset())), tmp_path / "c4"
    )
    errors = {r["id"] if r["id"] is not None else 0: r[plan.ERROR] for r in rows}
    assert errors[2] is None and "got 1.005 (it would be stored as 1.01" in str(errors.get(1))
