"""Reading a Pulsar table's log (issue 23, design §7.1): ``read --mode log`` at every level,
hybrid, follow and checkpoints, and ``verify``, on the real standalone.

One Spark run (module fixture ``ingested``: Amoro's Pulsar DDL, three epochs of inserts, updates
and deletes) serves the reads of a Spark-written log; a second table's log is written by hand with
the raw producer (no Spark): attempt a1's records without a marker, then attempt a2's with its
markers and the Delta commit that confirms them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import StoredTable, load_table
from logstore_cli.errors import InvalidInputError, RecordsDeletedError, TopicNotFoundError
from logstore_cli.logformat.pulsar_form import position_text, to_pulsar
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from logstore_cli.pulsar.admin import PulsarAdmin, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from logstore_cli.pulsar.producer import PulsarLogProducer
from logstore_cli.read import plan
from logstore_cli.read.consumer import SourceConf
from logstore_cli.read.pulsar_source import PulsarLogSource
from logstore_cli.read.service import ReadRequest, ReadSummary, build_request, read_with_consumer
from tests.deltalog import write_epoch_commit, write_table
from tests.integration.jobs.ingest_support import (
    COLUMNS,
    ListSink,
    changes,
    delta_state,
    fold_changes,
    write_files,
)
from tests.integration.pulsar.test_pulsar_ingest import TABLE, create_pulsar_table, ingest
from tests.jobrun import cli

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

Emitted = list[tuple[RowKind, dict[str, Any], dict[str, Any]]]


def request(
    stored: StoredTable, pulsar: PulsarInfo, level: str, *, start: str = "earliest", **kw: Any
) -> ReadRequest:
    """``read TABLE --mode log --consistency LEVEL --from START -o jsonl``, as the CLI builds it."""
    args: dict[str, Any] = {
        "mode": "log", "engine": "auto", "output": plan.OutputSpec("jsonl"),
        "consistent": False, "consistency": level, "changelog": "all-kinds", "start": start,
        "follow": False, "limit": None, "checkpoint": None, "as_of": None, "changes": False,
        "bootstrap": None, "client_properties": {}, "timeout_s": 30.0,
    }  # fmt: skip
    args.update(kw)
    req = build_request(stored, **args)
    return dataclasses.replace(req, admin_url=pulsar.web_url)


def read(req: ReadRequest, **kw: Any) -> tuple[Emitted, ReadSummary]:
    sink = ListSink()
    summary = read_with_consumer(req, sink, **kw)
    return sink.changes, summary


@dataclass(frozen=True)
class Ingested:
    base: Path
    warehouse: Path
    stored: StoredTable
    path: Path
    topic: TopicName
    versions: list[int]  # the epoch commits' Delta versions, oldest first


@pytest.fixture(scope="module")
def ingested(spark: Any, pulsar: PulsarInfo, tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    base = tmp_path_factory.mktemp("pulsar-read")
    warehouse = base / "warehouse"
    topic = create_pulsar_table(spark, pulsar, warehouse)
    log = changes(450, keys=40, seed=31)
    write_files(base / "in", [log[:150], log[150:300], log[300:]])
    reports = ingest(spark, pulsar, warehouse, base / "in")
    assert len(reports) == 3
    stored = load_table(warehouse, TABLE)
    assert isinstance(stored, StoredTable)
    path = Path(stored.ref.path)
    versions = sorted(c.version for c in epochs.epoch_commits(path))
    return Ingested(base, warehouse, stored, path, topic, versions)


def test_a_committed_read_folds_to_the_delta_table(ingested: Ingested, pulsar: PulsarInfo) -> None:
    emitted, summary = read(request(ingested.stored, pulsar, "committed"))
    assert emitted and fold_changes(emitted) == delta_state(ingested.path)
    assert summary.retractions == 0 and summary.markers > 0 and summary.pending_epochs == 0
    # each partition's changes in message-id order, shown as Pulsar ids
    for partition in {m["partition"] for _, _, m in emitted}:
        ids = [m["offset"] for _, _, m in emitted if m["partition"] == partition]
        assert all(isinstance(i, str) and i.count(":") == 2 for i in ids)
        parsed = [tuple(int(x) for x in i.split(":")) for i in ids]
        assert parsed == sorted(parsed) and len(set(parsed)) == len(parsed)
    assert all(isinstance(o, str) for o in summary.end_offsets.values())


def test_eventual_equals_committed_and_none_emits_every_record(
    ingested: Ingested, pulsar: PulsarInfo
) -> None:
    committed, _ = read(request(ingested.stored, pulsar, "committed"))
    eventual, summary = read(request(ingested.stored, pulsar, "eventual"))
    none, none_summary = read(request(ingested.stored, pulsar, "none"))
    assert eventual == committed and summary.retractions == 0
    assert len(none) == none_summary.records == summary.records  # every change record, once
    assert sorted(map(repr, none)) == sorted(map(repr, committed))


def test_a_hybrid_read_is_the_snapshot_then_the_log_after_it(
    ingested: Ingested, pulsar: PulsarInfo
) -> None:
    first = ingested.versions[0]
    emitted, summary = read(
        request(ingested.stored, pulsar, "committed", start=f"snapshot:{first}")
    )
    assert summary.snapshot_version == first and summary.snapshot_rows > 0
    snapshot = [c for c in emitted if "version" in c[2]]
    assert len(snapshot) == summary.snapshot_rows
    assert fold_changes(emitted) == delta_state(ingested.path)
    # the log part holds only the epochs after the snapshot's
    at = epochs.epoch_of(ingested.path, first)
    assert at is not None
    log_part = [m for _, _, m in emitted if "epoch" in m]
    assert log_part and min(m["epoch"] for m in log_part) == at.epoch.epoch + 1
    # the newest snapshot: nothing after it
    emitted, summary = read(request(ingested.stored, pulsar, "committed", start="snapshot"))
    assert summary.snapshot_version == ingested.versions[-1]
    assert summary.rows == summary.snapshot_rows
    assert fold_changes(emitted) == delta_state(ingested.path)


def test_a_checkpointed_read_reads_nothing_twice(
    ingested: Ingested, pulsar: PulsarInfo, tmp_path: Path
) -> None:
    whole, _ = read(request(ingested.stored, pulsar, "none"))
    checkpoint = tmp_path / "cp.json"
    first, _ = read(request(ingested.stored, pulsar, "none", checkpoint=str(checkpoint)))
    # the same records in each partition's order (how partitions interleave is the read's timing)
    assert _by_partition(first) == _by_partition(whole)
    saved = json.loads(checkpoint.read_text())
    assert saved["topic"] == ingested.stored.spec.log_store.topic  # type: ignore[union-attr]
    again, _ = read(request(ingested.stored, pulsar, "none", checkpoint=str(checkpoint)))
    assert again == []  # nothing new since


def _by_partition(emitted: list[Any]) -> dict[int, list[Any]]:
    parts: dict[int, list[Any]] = {}
    for change in emitted:
        parts.setdefault(change[2]["partition"], []).append(change)
    return parts


def test_a_following_read_stops_at_its_limit(ingested: Ingested, pulsar: PulsarInfo) -> None:
    emitted, summary = read(request(ingested.stored, pulsar, "committed", follow=True, limit=25))
    assert summary.limited and len(emitted) == 25


def test_verify_finds_the_log_equal_to_delta(ingested: Ingested, pulsar: PulsarInfo) -> None:
    proc = cli(ingested.base, ingested.warehouse, "verify", TABLE, "--json",
               "--pulsar-admin-url", pulsar.web_url)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["equal"] is True and data["delta_version"] == ingested.versions[-1]
    assert "Traceback" not in proc.stderr


def test_the_cli_reads_the_log_as_jsonl(ingested: Ingested, pulsar: PulsarInfo) -> None:
    proc = cli(ingested.base, ingested.warehouse, "read", TABLE, "--mode", "log", "--from",
               "earliest", "-o", "jsonl", "--pulsar-admin-url", pulsar.web_url)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    state: dict[int, dict[str, Any]] = {}
    for line in lines:
        row = line["row"]
        if line["kind"] in ("-D", "-U"):
            state.pop(int(row["id"]), None)
        else:
            state[int(row["id"])] = row
    assert set(state) == set(delta_state(ingested.path))
    assert "Traceback" not in proc.stderr


def test_the_spark_engine_reads_what_the_consumer_engine_reads(
    spark: Any, ingested: Ingested, pulsar: PulsarInfo
) -> None:
    """``read --engine spark`` on a Pulsar table: the ``logstore`` data source's bounded read
    (``committed``, and hybrid from the first snapshot) gives the consumer engine's lines, message
    ids included; a following read (a stream) gives them too and stops when asked; ``--mode file``
    reads the Delta table as delta-rs does."""
    from logstore_cli.cli.read import JsonLines
    from logstore_cli.jobs import read as read_job
    from logstore_cli.read.delta_rs import read_with_delta_rs

    def lines(req: ReadRequest, stop: Any = lambda: False) -> list[str]:
        buffer = io.StringIO()
        sink = JsonLines(req.schema, buffer)
        if req.engine == "spark":
            read_job.run(spark, req, sink, stop=stop)
        elif req.engine == "delta-rs":
            read_with_delta_rs(req, sink)
        else:
            read_with_consumer(req, sink)
        return buffer.getvalue().splitlines()

    def by_partition(found: list[str]) -> list[str]:
        # the consumer engine interleaves partitions; Spark emits one after another
        return sorted(found, key=lambda x: json.loads(x).get("partition", -1))

    stored = ingested.stored
    consumer = lines(request(stored, pulsar, "committed"))
    spark_lines = lines(request(stored, pulsar, "committed", engine="spark"))
    assert consumer and spark_lines == by_partition(consumer)
    assert all(json.loads(x)["offset"].count(":") == 2 for x in spark_lines)  # Pulsar ids

    first = f"snapshot:{ingested.versions[0]}"
    hybrid = lines(request(stored, pulsar, "committed", start=first, engine="spark"))
    hybrid_consumer = lines(request(stored, pulsar, "committed", start=first))
    snapshot = [x for x in hybrid if '"partition"' not in x]
    assert snapshot and sorted(snapshot) == sorted(
        x for x in hybrid_consumer if '"partition"' not in x
    )
    assert [x for x in hybrid if '"partition"' in x] == by_partition(
        [x for x in hybrid_consumer if '"partition"' in x]
    )

    file_args: dict[str, Any] = {"mode": "file", "consistency": None, "start": None}
    in_spark = lines(request(stored, pulsar, "committed", engine="spark", **file_args))
    assert in_spark and sorted(in_spark) == sorted(
        lines(request(stored, pulsar, "committed", **file_args))
    )

    # A following read from the earliest message: every line, then it stops when asked (the
    # deadline only ends a read that would never get there; the assertion says what was missing).
    follow = request(stored, pulsar, "committed", engine="spark", follow=True)
    deadline = time.monotonic() + 180
    buffer = io.StringIO()

    def stop() -> bool:
        return buffer.getvalue().count("\n") >= len(consumer) or time.monotonic() > deadline

    read_job.run(spark, follow, JsonLines(follow.schema, buffer), stop=stop)
    assert by_partition(buffer.getvalue().splitlines()) == by_partition(consumer)


# -- a log written by hand: a failed attempt, then its retry ----------------------------------------

HAND_TABLE = "shop.hand"


@dataclass(frozen=True)
class Hand:
    stored: StoredTable
    topic: TopicName
    a1: list[int]
    a2: list[int]


def _hand_ddl(pulsar: PulsarInfo, topic: str) -> str:
    return f"""CREATE TABLE {HAND_TABLE} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH (
      'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
      'log-store.address' = '{pulsar.service_url}', 'log-store.topic' = '{topic}',
      'log.system.partitions' = '2')"""


@pytest.fixture
def hand(pulsar: PulsarInfo, tmp_path: Path) -> Hand:
    """Attempt a1 of epoch 1 writes keys 1-6 and fails (no marker); attempt a2 writes keys 1-4,
    its markers to both partitions, and Delta commits it as version 1."""
    name = TopicName.parse(f"t-hand-{uuid.uuid4().hex[:12]}")
    PulsarAdmin(pulsar.web_url).create_topic(name, 2, retention_minutes=-1, retention_mb=-1)
    path = write_table(tmp_path / "wh", _hand_ddl(pulsar, str(name)))
    stored = load_table(tmp_path / "wh", HAND_TABLE)
    assert isinstance(stored, StoredTable)
    schema = RowSchema.of(stored.spec)

    def row(i: int, attempt: str) -> dict[str, Any]:
        return {"id": i, "name": f"{attempt}-{i}", "qty": i, "price": None}

    for attempt, keys, commit in (("a1", range(1, 7), False), ("a2", range(1, 5), True)):
        epoch = EpochId("w1", 1, attempt)
        with PulsarLogProducer(pulsar.service_url, name, 2, f"hand-{attempt}") as producer:
            for i in keys:
                change = ChangeRecord(RowKind.INSERT, {"id": i}, row(i, attempt), epoch)
                key, payload, props = to_pulsar(*encode_change(change, schema))
                producer.send(key, payload, props)
            producer.flush()
            if commit:
                write_epoch_commit(path, 1, epoch)
                for partition in range(2):
                    _, payload, props = to_pulsar(*encode_marker(CommitMarker(epoch, 1)))
                    producer.send_marker(partition, payload, props)
                producer.flush()
    return Hand(stored, name, list(range(1, 7)), list(range(1, 5)))


def test_committed_shows_only_the_attempt_delta_committed(hand: Hand, pulsar: PulsarInfo) -> None:
    emitted, summary = read(request(hand.stored, pulsar, "committed"))
    assert sorted(int(r["id"]) for _, r, _ in emitted) == hand.a2
    assert all(r["name"].startswith("a2-") for _, r, _ in emitted)
    assert summary.retractions == 0 and summary.markers == 2


def test_eventual_retracts_the_failed_attempts_records(hand: Hand, pulsar: PulsarInfo) -> None:
    emitted, summary = read(request(hand.stored, pulsar, "eventual"))
    retracted = [r for _, r, m in emitted if m.get("retraction")]
    assert sorted(int(r["id"]) for r in retracted) == hand.a1
    assert all(r["name"].startswith("a1-") for r in retracted)
    assert summary.retractions == len(hand.a1)
    folded = fold_changes(emitted)
    assert sorted(folded) == hand.a2 and all(r["name"].startswith("a2-") for r in folded.values())


def test_none_emits_both_attempts(hand: Hand, pulsar: PulsarInfo) -> None:
    emitted, _ = read(request(hand.stored, pulsar, "none"))
    assert len(emitted) == len(hand.a1) + len(hand.a2)


def test_a_following_read_sees_what_comes_later_and_stops(hand: Hand, pulsar: PulsarInfo) -> None:
    sink = ListSink()
    stop = threading.Event()
    req = request(hand.stored, pulsar, "committed", follow=True)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            read_with_consumer(req, sink, stop=stop.is_set)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    def seen(key: int) -> bool:
        return any(int(r["id"]) == key for _, r, _ in sink.changes)

    def wait_for(key: int) -> None:
        deadline = time.monotonic() + 60
        while not seen(key) and not errors:
            assert time.monotonic() < deadline, f"the following read never showed key {key}"
            time.sleep(0.05)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(hand.a2[-1])  # what the log held: a2's rows
        schema = RowSchema.of(hand.stored.spec)
        epoch = EpochId("w1", 2, "b1")
        write_epoch_commit(Path(hand.stored.ref.path), 2, epoch)
        late = {"id": 9, "name": "late", "qty": 9, "price": None}
        with PulsarLogProducer(pulsar.service_url, hand.topic, 2, "hand-b1") as producer:
            change = ChangeRecord(RowKind.INSERT, {"id": 9}, late, epoch)
            producer.send(*to_pulsar(*encode_change(change, schema)))
            for partition in range(2):
                _, payload, props = to_pulsar(*encode_marker(CommitMarker(epoch, 2)))
                producer.send_marker(partition, payload, props)
            producer.flush()
        wait_for(9)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive() and not errors, errors
    assert sorted(int(r["id"]) for _, r, _ in sink.changes) == [*hand.a2, 9]


def _write_epoch(hand: Hand, pulsar: PulsarInfo, epoch: EpochId, version: int, key: int) -> None:
    """One more epoch by hand: key ``key``'s insert, Delta commit ``version``, the markers."""
    schema = RowSchema.of(hand.stored.spec)
    write_epoch_commit(Path(hand.stored.ref.path), version, epoch)
    late = {"id": key, "name": "late", "qty": key, "price": None}
    with PulsarLogProducer(pulsar.service_url, hand.topic, 2, f"hand-{epoch.attempt}") as producer:
        change = ChangeRecord(RowKind.INSERT, {"id": key}, late, epoch)
        producer.send(*to_pulsar(*encode_change(change, schema)))
        for partition in range(2):
            _, payload, props = to_pulsar(*encode_marker(CommitMarker(epoch, version)))
            producer.send_marker(partition, payload, props)
        producer.flush()


def test_a_second_checkpointed_read_gives_exactly_what_came_since(
    hand: Hand, pulsar: PulsarInfo, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path / "cp.json")
    first, _ = read(request(hand.stored, pulsar, "committed", checkpoint=checkpoint))
    assert sorted(int(r["id"]) for _, r, _ in first) == hand.a2
    _write_epoch(hand, pulsar, EpochId("w1", 2, "c1"), 2, 11)
    second, summary = read(request(hand.stored, pulsar, "committed", checkpoint=checkpoint))
    assert [int(r["id"]) for _, r, _ in second] == [11]
    assert summary.markers == 2  # epoch 2's, not epoch 1's again
    third, _ = read(request(hand.stored, pulsar, "committed", checkpoint=checkpoint))
    assert third == []


def test_a_hybrid_read_of_a_hand_written_log_goes_on_after_the_recorded_ids(
    hand: Hand, pulsar: PulsarInfo
) -> None:
    # Delta version 1 records where epoch 1 ended in each partition (its last record's id)
    path = Path(hand.stored.ref.path)
    source_conf = SourceConf(pulsar.service_url, {}, str(hand.topic), 30.0, system="pulsar",
                             admin_url=pulsar.web_url)  # fmt: skip
    with PulsarLogSource(source_conf) as source:
        ends = {p: position_text(high - 1) for p, (_, high) in source.watermarks().items()}
    epoch = EpochId("w1", 1, "a2")
    info = {"timestamp": 1, "operation": "MERGE", "userMetadata": commit_metadata(epoch, ends)}
    (path / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")
    _write_epoch(hand, pulsar, EpochId("w1", 2, "c1"), 2, 12)
    emitted, summary = read(request(hand.stored, pulsar, "committed", start="snapshot:1"))
    assert summary.snapshot_version == 1 and summary.snapshot_rows == 0  # no data files by hand
    assert [int(r["id"]) for _, r, _ in emitted] == [12]


def test_a_read_from_a_time_starts_at_the_first_message_published_since(
    hand: Hand, pulsar: PulsarInfo
) -> None:
    future, _ = read(request(hand.stored, pulsar, "none", start=f"timestamp:{2**41}"))
    assert future == []  # nothing published that late: every partition starts at its end
    since = int(time.time() * 1000)
    _write_epoch(hand, pulsar, EpochId("w1", 2, "d1"), 2, 13)
    emitted, _ = read(request(hand.stored, pulsar, "none", start=f"timestamp:{since}"))
    assert [int(r["id"]) for _, r, _ in emitted] == [13]


def test_a_following_read_reads_a_new_partition_and_ends_when_the_topic_is_deleted(
    hand: Hand, pulsar: PulsarInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pulsar as client_lib

    from logstore_cli.read import pulsar_source

    monkeypatch.setattr(pulsar_source, "DISCOVER_EVERY_S", 0.2)  # how often it looks
    sink = ListSink()
    stop = threading.Event()
    errors: list[BaseException] = []
    req = request(hand.stored, pulsar, "none", follow=True)

    def run() -> None:
        try:
            read_with_consumer(req, sink, stop=stop.is_set)
        except BaseException as exc:  # asserted below
            errors.append(exc)

    def wait_until(done: Any, what: str) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_until(lambda: len(sink.changes) == len(hand.a1) + len(hand.a2) or errors, "a1+a2")
        admin = PulsarAdmin(pulsar.web_url)
        admin.add_partitions(hand.topic, 3)
        schema = RowSchema.of(hand.stored.spec)
        row = {"id": 21, "name": "new", "qty": 1, "price": None}
        change = ChangeRecord(RowKind.INSERT, {"id": 21}, row, EpochId("w1", 3, "e1"))
        key, payload, props = to_pulsar(*encode_change(change, schema))
        client = client_lib.Client(pulsar.service_url)
        try:
            producer = client.create_producer(hand.topic.partition(2), batching_enabled=False)
            producer.send(payload, properties=props, partition_key=key)
        finally:
            client.close()
        wait_until(lambda: any(m["partition"] == 2 for _, _, m in sink.changes) or errors,
                   "the new partition's record")  # fmt: skip
        admin.delete_topic(hand.topic)
        wait_until(lambda: errors or not thread.is_alive(), "the end of the read")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert [int(r["id"]) for _, r, m in sink.changes if m["partition"] == 2] == [21]
    assert len(errors) == 1 and isinstance(errors[0], TopicNotFoundError), errors
    assert "was deleted while the read followed it" in errors[0].message


def test_a_missing_topic_is_a_clear_error(pulsar: PulsarInfo, tmp_path: Path) -> None:
    write_table(tmp_path / "wh", _hand_ddl(pulsar, f"t-never-{uuid.uuid4().hex[:12]}"))
    stored = load_table(tmp_path / "wh", HAND_TABLE)
    assert isinstance(stored, StoredTable)
    with pytest.raises(TopicNotFoundError) as info:
        read(request(stored, pulsar, "committed"))
    assert "does not exist" in info.value.message and "t-never-" in info.value.message


def test_the_cli_names_a_missing_topic_without_a_traceback(
    pulsar: PulsarInfo, tmp_path: Path
) -> None:
    write_table(tmp_path / "wh", _hand_ddl(pulsar, f"t-never-{uuid.uuid4().hex[:12]}"))
    proc = cli(tmp_path, tmp_path / "wh", "read", HAND_TABLE, "--mode", "log", "-o", "jsonl",
               "--pulsar-admin-url", pulsar.web_url)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_the_cli_says_where_pulsar_is_not_answering(hand: Hand, tmp_path: Path) -> None:
    proc = cli(tmp_path, Path(hand.stored.ref.path).parents[1], "read", HAND_TABLE, "--mode",
               "log", "-o", "jsonl", "--pulsar-admin-url", "http://127.0.0.1:9")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "http://127.0.0.1:9" in proc.stderr and "unreachable" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_start_before_the_first_message_held_is_refused(hand: Hand, pulsar: PulsarInfo) -> None:
    source_conf = SourceConf(pulsar.service_url, {}, str(hand.topic), 30.0, system="pulsar",
                             admin_url=pulsar.web_url)  # fmt: skip
    with PulsarLogSource(source_conf) as source:
        marks = source.watermarks()
        partition, (low, high) = next((p, m) for p, m in marks.items() if m[1] > 0)
        assert 0 < low < high
        with pytest.raises(RecordsDeletedError):
            source.check_start(partition, low - 1, (low, high))
        with pytest.raises(InvalidInputError):
            source.check_start(partition, high + 2, (low, high))
        source.check_start(partition, 0, (low, high))  # the start of a partition read empty
        items = list(source.consume_range(partition, low, high))
        assert items and all(low <= at < high for at, _ in items)
