"""The consumer engine against the real broker: what a bounded read emits at each level (the pure
decider over the same records is the reference), records it skips or refuses, where reads start,
following, resuming from a checkpoint, records deleted by retention, and failures."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from logstore_cli.errors import BrokerError, LogstoreError, RecordsDeletedError, TopicNotFoundError
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.local_broker import free_port
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.consistency import Emission, Item, Level, decide
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    encode_change,
    encode_marker,
)
from logstore_cli.read import consumer
from logstore_cli.read.consumer import (
    LogReader,
    LogSource,
    ReaderCheckpoint,
    ReadStats,
    SourceConf,
)
from logstore_cli.read.plan import HybridStart, Start

TIMEOUT_S = 15.0
PARTITIONS = 3
SCHEMA = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
# A following read sees a new record within this (generous: the machine is shared).
FOLLOW_S = 30.0

Emitted = list[tuple[int, str, dict[str, Any]]]  # (offset, kind, row) of one partition


class Log:
    """Writes a table's records and remembers each one's partition and offset (the topic is new,
    so a partition's offsets count up from 0)."""

    def __init__(self, bootstrap: str, topic: str, fmt: LogFormat = LogFormat.JSON) -> None:
        self.fmt = fmt  # the values' format (a test may change it between epochs)
        self.producer = LogProducer(bootstrap, {}, topic, timeout_s=TIMEOUT_S)
        self.items: dict[int, list[tuple[int, Item]]] = {p: [] for p in range(PARTITIONS)}
        self.next = dict.fromkeys(range(PARTITIONS), 0)

    def change(
        self, epoch: EpochId, i: int, kind: RowKind = RowKind.INSERT, name: str | None = None
    ) -> int:
        row = {"id": i, "name": name or f"n{i}", "price": Decimal(i) + Decimal("0.25")}
        record = ChangeRecord(kind, {"id": i}, row, epoch)
        key, value, headers = encode_change(record, SCHEMA, self.fmt)
        assert key is not None
        partition = partition_for(key, PARTITIONS)
        self.producer.send(key, value, headers, partition)
        self._took(partition, record)
        return partition

    def marker(self, epoch: EpochId, version: int | None = 1) -> None:
        marker = CommitMarker(epoch, version)
        for partition in range(PARTITIONS):
            self.producer.send(*encode_marker(marker, self.fmt), partition=partition)
            self._took(partition, marker)

    def raw(
        self, partition: int, value: bytes, headers: list[tuple[str, bytes]], key: bytes = b"x"
    ) -> int:
        """A record that is not format 1 (not part of ``items``); returns its offset."""
        self.producer.send(key, value, headers, partition)
        offset = self.next[partition]
        self.next[partition] += 1
        return offset

    def flush(self) -> None:
        ends = self.producer.flush()
        assert all(ends[p] == self.next[p] for p in ends), (ends, self.next)

    def expected(self, level: Level, upto: dict[int, int] | None = None) -> dict[int, Emitted]:
        """What the pure decider emits per partition (for the items below ``upto``)."""
        return {
            p: _rows(decide([(o, i) for o, i in items if upto is None or o < upto[p]], level))
            for p, items in self.items.items()
        }

    def close(self) -> None:
        self.producer.close()

    def _took(self, partition: int, item: Item) -> None:
        self.items[partition].append((self.next[partition], item))
        self.next[partition] += 1


def _rows(emissions: list[Emission]) -> Emitted:
    return [(e.offset, e.kind.value, dict(e.row)) for e in emissions]


def _by_partition(batches: Iterator[list[tuple[int, Emission]]]) -> dict[int, Emitted]:
    found: dict[int, Emitted] = {p: [] for p in range(PARTITIONS)}
    for batch in batches:
        for partition, emission in batch:
            found[partition] += _rows([emission])
    return found


@pytest.fixture
def topic(kafka_bootstrap: str, topic_name: str) -> str:
    with KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S) as admin:
        admin.create_topic(topic_name, PARTITIONS, 1)
    return topic_name


@pytest.fixture
def log_format() -> LogFormat:
    """The values' format; a test parametrized over ``log_format`` runs with each."""
    return LogFormat.JSON


@pytest.fixture
def log(kafka_bootstrap: str, topic: str, log_format: LogFormat) -> Iterator[Log]:
    writer = Log(kafka_bootstrap, topic, log_format)
    try:
        yield writer
    finally:
        writer.close()


@pytest.fixture
def conf(kafka_bootstrap: str, topic: str) -> SourceConf:
    return SourceConf(kafka_bootstrap, {}, topic, TIMEOUT_S)


def _write_epochs(log: Log) -> None:
    """Epoch 0 fails with attempt a1 and commits with a2; epoch 1 updates and deletes; epoch 2
    has no marker (open); a foreign record sits in partition 0."""
    failed, won = EpochId("w-1", 0, "a1"), EpochId("w-1", 0, "a2")
    for i in range(1, 9):
        log.change(failed, i)
    log.raw(0, b"not a logstore record", [("traceparent", b"00-1")])
    for i in range(1, 9):
        log.change(won, i)
    log.marker(won, 3)
    second = EpochId("w-1", 1, "b1")
    log.change(second, 1, RowKind.UPDATE_BEFORE)
    log.change(second, 1, RowKind.UPDATE_AFTER, name="renamed")
    log.change(second, 2, RowKind.DELETE)
    log.marker(second, 4)
    log.change(EpochId("w-1", 2, "c1"), 9)
    log.flush()


def _read_all(
    conf: SourceConf, level: Level, start: Start | HybridStart = Start("earliest")
) -> tuple[dict[int, Emitted], LogReader]:
    with LogReader(conf, SCHEMA, level) as reader:
        found = _by_partition(reader.read(reader.start_offsets(start), reader.end_offsets()))
    return found, reader


@pytest.mark.parametrize("log_format", list(LogFormat))
@pytest.mark.parametrize("level", ["committed", "eventual", "none"])
def test_a_bounded_read_emits_what_the_decider_emits(
    conf: SourceConf, log: Log, level: Level
) -> None:
    _write_epochs(log)
    found, reader = _read_all(conf, level)
    assert found == log.expected(level)

    rows = [row for emitted in found.values() for _, _, row in emitted]
    kinds = [kind for emitted in found.values() for _, kind, _ in emitted]
    ids = {row["id"] for row in rows}
    if level == "committed":
        # The attempt that lost and the open epoch are not shown: each insert once.
        assert kinds.count("+I") == 8 and 9 not in ids
    elif level == "eventual":
        # a1's inserts were shown, then retracted when a2 began; the open epoch is shown.
        assert kinds.count("-D") == 8 + 1 and kinds.count("+I") == 16 + 1 and 9 in ids
    else:
        assert kinds.count("+I") == 17 and kinds.count("-D") == 1
    stats = reader.stats
    assert (stats.records, stats.markers, stats.foreign, stats.malformed) == (20, 6, 1, 0)
    assert stats.emitted == len(rows)
    assert stats.retractions == (8 if level == "eventual" else 0)
    assert (reader.pending() != {}) == (level != "none")


def test_a_topic_holding_both_formats_reads_as_one(conf: SourceConf, log: Log) -> None:
    # Each record names its format (a table whose format changed while its topic was empty
    # of old records, or a topic written before log.format was honoured): a reader takes both.
    _write_epochs(log)
    json_only = _read_all(conf, "eventual")[0]
    log.fmt = LogFormat.DEBEZIUM_JSON
    later = EpochId("w-1", 3, "d1")
    log.change(later, 1, RowKind.DELETE)
    log.change(later, 10)
    log.marker(later, 5)
    log.flush()
    for level in ("committed", "eventual", "none"):
        assert _read_all(conf, level)[0] == log.expected(level)
    mixed = _read_all(conf, "eventual")[0]
    assert {p: rows[: len(json_only[p])] for p, rows in mixed.items()} == json_only
    assert sum(len(rows) for rows in mixed.values()) > sum(len(r) for r in json_only.values())


def test_malformed_records_are_skipped_and_logged_once_per_partition_without_their_value(
    conf: SourceConf, log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    epoch = EpochId("w-1", 0, "a")
    headers = [
        ("logstore.writer", b"w-1"),
        ("logstore.epoch", b"0"),
        ("logstore.attempt", b"a"),
        ("logstore.kind", b"+I"),
        ("logstore.format", b"1"),
    ]
    # The first one's price is no number: the reason would quote the value, which is not logged.
    value = b'{"id":1,"name":"x","price":"SECRET-VALUE"}'
    first = log.raw(1, value, headers, key=b'{"id":1}')
    log.raw(1, b"not json", headers)
    log.change(epoch, 5)
    log.marker(epoch)
    log.flush()
    with caplog.at_level(logging.WARNING, logger="logstore_cli.read.consumer"):
        found, reader = _read_all(conf, "committed")
    assert found == log.expected("committed")
    assert reader.stats.malformed == 2
    lines = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(lines) == 1
    assert f"partition 1 offset {first}" in lines[0] and "SECRET-VALUE" not in caplog.text


def test_a_record_of_a_newer_format_stops_the_read_with_an_upgrade_hint(
    conf: SourceConf, log: Log
) -> None:
    log.change(EpochId("w-1", 0, "a"), 1)
    offset = log.raw(2, b"{}", [("logstore.format", b"2")])
    log.flush()
    with pytest.raises(LogstoreError) as info:
        _read_all(conf, "none")
    assert f"partition 2 offset {offset}" in info.value.message
    assert info.value.hint is not None and "upgrade logstore" in info.value.hint


def test_a_read_from_latest_sees_only_later_records_and_stops_at_its_end(
    conf: SourceConf, log: Log
) -> None:
    before = EpochId("w-1", 0, "a")
    for i in range(1, 5):
        log.change(before, i)
    log.marker(before)
    log.flush()
    with LogReader(conf, SCHEMA, "none") as reader:
        start = reader.start_offsets(Start("latest"))
        assert start == log.next
        later = EpochId("w-1", 1, "b")
        for i in range(10, 14):
            log.change(later, i)
        log.flush()
        end = reader.end_offsets()
        log.change(later, 99)  # after the end: not part of this read
        log.flush()
        found = _by_partition(reader.read(start, end))
    assert sorted(row["id"] for rows in found.values() for _, _, row in rows) == [10, 11, 12, 13]


def _timestamps(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[int]]:
    """Each partition's record timestamps in offset order, read with a plain consumer."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    found: dict[int, list[int]] = {p: [] for p in ends}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, found.values())) < sum(ends.values()):
            assert time.monotonic() < deadline, "the records did not arrive"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found[msg.partition()].append(msg.timestamp()[1])  # type: ignore[index]
    finally:
        consumer.close()
    return found


def test_a_read_from_a_timestamp_starts_at_the_first_record_at_or_after_it(
    kafka_bootstrap: str, conf: SourceConf, log: Log
) -> None:
    epoch = EpochId("w-1", 0, "a")
    for i in range(1, 7):
        log.change(epoch, i)
        log.flush()  # one request per record: the timestamps differ more often
    log.marker(epoch)
    log.flush()
    stamps = _timestamps(kafka_bootstrap, conf.topic, log.next)
    pivot = sorted(t for ts in stamps.values() for t in ts)[len(log.items[0])]
    expected = {
        p: next((o for o, t in enumerate(ts) if t >= pivot), log.next[p])
        for p, ts in stamps.items()
    }
    with LogReader(conf, SCHEMA, "none") as reader:
        assert reader.start_offsets(Start("timestamp", timestamp_ms=pivot)) == expected
        future = max(t for ts in stamps.values() for t in ts) + 60_000
        assert reader.start_offsets(Start("timestamp", timestamp_ms=future)) == log.next
        found = _by_partition(reader.read(expected, reader.end_offsets()))
    assert found == {
        p: [e for e in rows if e[0] >= expected[p]] for p, rows in log.expected("none").items()
    }


@pytest.mark.parametrize("log_format", list(LogFormat))
def test_a_hybrid_start_continues_after_the_snapshot_and_skips_its_epochs(
    conf: SourceConf, log: Log
) -> None:
    first, second = EpochId("w-1", 0, "a"), EpochId("w-1", 1, "b")
    for i in range(1, 7):
        log.change(first, i)
    log.marker(first)
    log.flush()
    after_first = dict(log.next)
    for i in range(7, 13):
        log.change(second, i)
    log.marker(second)
    log.flush()
    # The snapshot of epoch 0 names partitions 0 and 1 only: partition 2 starts at its earliest
    # offset, where epoch 0's records and marker are skipped as already in the snapshot.
    hybrid = HybridStart(1, {0: after_first[0], 1: after_first[1]}, {"w-1": 0})
    with LogReader(conf, SCHEMA, "committed", committed_through=hybrid.committed_through) as r:
        start = r.start_offsets(hybrid)
        assert start == {0: after_first[0], 1: after_first[1], 2: 0}
        found = _by_partition(r.read(start, r.end_offsets()))
    ids = sorted(row["id"] for rows in found.values() for _, _, row in rows)
    assert ids == list(range(7, 13))


@pytest.mark.parametrize("log_format", list(LogFormat))
def test_a_following_read_sees_a_record_written_after_it_started_and_stops_on_request(
    conf: SourceConf, log: Log
) -> None:
    stopped = False
    with LogReader(conf, SCHEMA, "none") as reader:
        batches = reader.read(reader.start_offsets(Start("latest")), None, stop=lambda: stopped)
        assert next(batches) == []  # idle: nothing written yet
        partition = log.change(EpochId("w-1", 0, "a"), 42)
        log.flush()
        got: list[tuple[int, Emission]] = []
        deadline = time.monotonic() + FOLLOW_S
        while not got:
            assert time.monotonic() < deadline, "the new record did not arrive"
            got += next(batches)
        assert [(p, e.row["id"]) for p, e in got] == [(partition, 42)]
        stopped = True
        assert list(batches) == []


def test_a_following_read_reads_partitions_added_to_the_topic(
    kafka_bootstrap: str, conf: SourceConf, log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer, "DISCOVER_EVERY_S", 0.2)
    with LogReader(conf, SCHEMA, "none") as reader:
        batches = reader.read(reader.start_offsets(Start("latest")), None)
        assert next(batches) == []
        with KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S) as admin:
            admin.add_partitions(conf.topic, PARTITIONS + 1)
        record = ChangeRecord(
            RowKind.INSERT,
            {"id": 7},
            {"id": 7, "name": "new", "price": None},
            EpochId("w-1", 0, "a"),
        )
        log.producer.send(*encode_change(record, SCHEMA), partition=PARTITIONS)
        log.producer.flush()
        got: list[tuple[int, Emission]] = []
        deadline = time.monotonic() + FOLLOW_S
        while not got:
            assert time.monotonic() < deadline, "the new partition's record did not arrive"
            got += next(batches)
        assert [(p, e.offset, e.row["id"]) for p, e in got] == [(PARTITIONS, 0, 7)]
        assert reader.positions[PARTITIONS] == 1


def test_a_following_read_of_a_deleted_topic_ends_with_an_error(
    kafka_bootstrap: str, conf: SourceConf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """librdkafka keeps fetching a deleted topic's partitions without an error: the read checks
    the topic's metadata and ends, instead of polling for ever (issue 18, item 11)."""
    monkeypatch.setattr(consumer, "DISCOVER_EVERY_S", 0.2)
    with LogReader(conf, SCHEMA, "none") as reader:
        batches = reader.read(reader.start_offsets(Start("latest")), None)
        assert next(batches) == []
        with KafkaAdmin(kafka_bootstrap, timeout_s=TIMEOUT_S) as admin:
            admin.delete_topic(conf.topic)
        deadline = time.monotonic() + FOLLOW_S
        with pytest.raises(TopicNotFoundError) as caught:
            for _ in batches:
                assert time.monotonic() < deadline, "the read did not notice the deleted topic"
    assert f"Kafka topic '{conf.topic}' was deleted while the read followed it" in str(
        caught.value.message
    )
    assert caught.value.exit_code == 1


def _follow_until(
    reader: LogReader, start: dict[int, int], done: Callable[[dict[int, Emitted]], bool]
) -> dict[int, Emitted]:
    """Follow from ``start`` until ``done(emitted so far)`` and the reader is idle."""
    found: dict[int, Emitted] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + FOLLOW_S
    for batch in reader.read(start, None):
        for partition, emission in batch:
            found[partition] += _rows([emission])
        if not batch and done(found):
            return found
        assert time.monotonic() < deadline, f"the read did not get there: {found}"
    raise AssertionError("a following read ended")


def _ids_in(partitions: set[int], count: int, first: int = 1) -> list[int]:
    """``count`` ids from ``first`` on whose records go to one of ``partitions``."""
    ids: list[int] = []
    i = first
    while len(ids) < count:
        if partition_for(f'{{"id":{i}}}'.encode(), PARTITIONS) in partitions:
            ids.append(i)
        i += 1
    return ids


@pytest.mark.parametrize("log_format", list(LogFormat))
@pytest.mark.parametrize("level", ["committed", "eventual"])
def test_a_read_resumed_from_its_checkpoint_goes_on_without_loss_or_duplicate(
    conf: SourceConf, log: Log, tmp_path: Path, level: Level
) -> None:
    store = ReaderCheckpoint(tmp_path / "read.json", table="db.t", topic=conf.topic, level=level)
    old, open_, later = EpochId("w-1", 0, "a"), EpochId("w-1", 1, "b"), EpochId("w-1", 2, "c")
    for i in range(1, 13):
        log.change(old, i)
    log.marker(old)
    log.flush()
    with LogReader(conf, SCHEMA, level) as reader:
        start = reader.start_offsets(Start("latest"))  # after epoch 0
        # Epoch 1's records go to partitions 0 and 1 (its marker comes after the checkpoint):
        # partition 2 gets nothing while this reader runs.
        for i in _ids_in({0, 1}, 6, first=100):
            log.change(open_, i, RowKind.UPDATE_AFTER)
        log.flush()
        upto = dict(log.next)
        before = _follow_until(reader, start, lambda found: reader.positions == upto)
        store.save(reader.decider)
        assert set(reader.pending()) == {0, 1}  # epoch 1 is open in the saved state

    log.marker(open_)
    for i in _ids_in({2}, 5, first=200) + _ids_in({0, 1}, 5, first=300):
        log.change(later, i)
    log.marker(later)
    log.flush()

    with LogReader(conf, SCHEMA, level, state=store.load()) as resumed:
        # --from latest again: the checkpoint's positions win over it, in partition 2 as well.
        after = _by_partition(
            resumed.read(resumed.start_offsets(Start("latest")), resumed.end_offsets())
        )
    assert [row["id"] for _, _, row in after[2]] == _ids_in({2}, 5, first=200)
    expected = {p: [e for e in rows if e[0] >= start[p]] for p, rows in log.expected(level).items()}
    assert {p: before[p] + after[p] for p in before} == expected


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def test_records_deleted_by_retention_stop_the_read_instead_of_skipping_them(
    kafka_bootstrap: str, conf: SourceConf, log: Log, tmp_path: Path
) -> None:
    epoch = EpochId("w-1", 0, "a")
    for i in range(1, 31):
        log.change(epoch, i)
    log.flush()
    store = ReaderCheckpoint(tmp_path / "r.json", table="db.t", topic=conf.topic, level="none")
    with LogReader(conf, SCHEMA, "none") as reader:
        _follow_until(
            reader, {p: 0 for p in range(PARTITIONS)}, lambda f: sum(map(len, f.values())) == 30
        )
        store.save(reader.decider)
    log.marker(epoch)
    log.flush()
    _delete_records(kafka_bootstrap, conf.topic, 0, log.next[0] - 1)  # all but the marker

    with LogReader(conf, SCHEMA, "committed") as reader:
        with pytest.raises(RecordsDeletedError) as info:
            list(reader.read({p: 0 for p in range(PARTITIONS)}, reader.end_offsets()))
        assert "partition 0" in info.value.message and "retention" in info.value.message
        assert info.value.hint is not None and "--from latest" in info.value.hint
        # From the earliest offset left the read goes on (what --from earliest means).
        start = reader.start_offsets(Start("earliest"))
        assert start[0] == log.next[0] - 1
        assert list(reader.read(start, reader.end_offsets())) != []
    with LogSource(conf, SCHEMA) as source, pytest.raises(RecordsDeletedError):
        list(source.consume_range(0, 0, log.next[0]))
    # The checkpoint's read had passed the deleted records: it goes on (it only reads the marker).
    with LogReader(conf, SCHEMA, "none", state=store.load()) as resumed:
        assert _by_partition(resumed.read({}, resumed.end_offsets())) == {
            p: [] for p in range(PARTITIONS)
        }


def test_consume_range_gives_the_logstore_records_of_one_partition(
    conf: SourceConf, log: Log
) -> None:
    _write_epochs(log)
    with LogSource(conf, SCHEMA) as source:
        assert source.partitions() == list(range(PARTITIONS))
        assert source.watermarks() == {p: (0, log.next[p]) for p in range(PARTITIONS)}
        stats = ReadStats()
        got = list(source.consume_range(0, 2, log.next[0] - 1, stats))
        assert got == [(o, i) for o, i in log.items[0] if 2 <= o < log.next[0] - 1]
        assert stats.foreign == 1 and stats.records + stats.markers == len(got)
        assert list(source.consume_range(1, 5, 5)) == []


def test_a_missing_topic_is_a_clear_error(kafka_bootstrap: str, topic_name: str) -> None:
    conf = SourceConf(kafka_bootstrap, {}, topic_name, 5.0)
    with LogReader(conf, SCHEMA, "none") as reader, pytest.raises(TopicNotFoundError) as info:
        reader.end_offsets()
    assert topic_name in info.value.message


def test_an_unreachable_broker_fails_a_bounded_read_within_its_time_out() -> None:
    conf = SourceConf(f"127.0.0.1:{free_port()}", {}, "t-nowhere", 3.0)
    began = time.monotonic()
    with LogReader(conf, SCHEMA, "none") as reader, pytest.raises(BrokerError) as info:
        reader.start_offsets(Start("earliest"))
    assert time.monotonic() - began < conf.timeout_s + 3.0
    assert "cannot reach Kafka" in info.value.message
