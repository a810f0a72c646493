"""The read levels over a real topic (docs/design.md §6.4, docs/consistency.md §10), read by the
consumer engine (``read.consumer.LogReader``) and by ``logstore read``'s run of it
(``read.service.read_with_consumer``).

The history, written straight to the topic with the documented headers: epoch 0 committed; epoch
1's attempt A produced and failed (no marker, an orphan); its retry A' produced and committed;
epoch 2 committed. Per partition, what each level must emit is stated from that history alone:

- ``committed``: epoch 0, A', epoch 2 — never A;
- ``none``: every record, A's included;
- ``eventual``: A's records at once, then, at the first record of A' in the partition, their
  retractions newest first with the reversed kinds, then A' and epoch 2.

A read stopped anywhere in that history and restored from its ``ReaderCheckpoint`` goes on with
exactly what one uninterrupted read emits.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.tables import load_table
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.logformat.consistency import LEVELS, Emission, Level
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.logformat.wire import EpochId, RowKind, RowSchema, encode_key
from logstore_cli.model import TableSpec
from logstore_cli.read import plan
from logstore_cli.read.consumer import LogReader, ReaderCheckpoint, SourceConf
from logstore_cli.read.service import ReadSummary, build_request, read_with_consumer
from tests.deltalog import write_epoch_commit, write_table
from tests.integration.jobs.ingest_support import orders_ddl
from tests.integration.read.log_support import LogWriter, create_topic, end_offsets

PARTITIONS = 2
WRITER = "w-0123456789abcdef"
E0 = EpochId(WRITER, 0, "a-000000000000")
A = EpochId(WRITER, 1, "a-aaaaaaaaaaaa")  # fails: no marker
A2 = EpochId(WRITER, 1, "a-bbbbbbbbbbbb")  # the retry that commits
E2 = EpochId(WRITER, 2, "a-222222222222")

Change = tuple[RowKind, dict[str, Any]]
# What a test compares: offset, kind, attempt, the row's id and name, retraction or not.
Out = tuple[int, str, str, int, str, bool]


def _row(i: int, tag: str) -> dict[str, Any]:
    return {"id": i, "name": f"{tag}{i}", "qty": i * 3, "price": Decimal(i) + Decimal("0.25")}


def _update(i: int, old: str, new: str) -> list[Change]:
    return [(RowKind.UPDATE_BEFORE, _row(i, old)), (RowKind.UPDATE_AFTER, _row(i, new))]


HISTORY: list[tuple[EpochId, list[Change], bool]] = [  # (attempt, its changes, committed)
    (E0, [(RowKind.INSERT, _row(i, "e0-")) for i in range(8)], True),
    (A, [*_update(0, "e0-", "A-"), *_update(1, "e0-", "A-"), *_update(2, "e0-", "A-"),
         (RowKind.INSERT, _row(10, "A-")), (RowKind.INSERT, _row(11, "A-")),
         (RowKind.DELETE, _row(7, "e0-"))], False),
    (A2, [*_update(0, "e0-", "B-"), *_update(1, "e0-", "B-"), *_update(2, "e0-", "B-"),
          (RowKind.INSERT, _row(12, "B-")), (RowKind.INSERT, _row(13, "B-")),
          (RowKind.DELETE, _row(6, "e0-"))], True),
    (E2, [*_update(3, "e0-", "e2-"), (RowKind.INSERT, _row(20, "e2-"))], True),
]  # fmt: skip


def _spec(topic: str, bootstrap: str) -> TableSpec:
    ddl = orders_ddl("shop.orders", topic, bootstrap, partitions=PARTITIONS)
    return parse_ddl(ddl, "t.sql", ParseOptions())[0]


def _partition(schema: RowSchema, row: Mapping[str, Any]) -> int:
    key = encode_key(schema.key_of(row), schema)
    assert key is not None
    return partition_for(key, PARTITIONS)


def _expected(schema: RowSchema, level: Level) -> dict[int, list[tuple[str, str, int, str, bool]]]:
    """Per partition, what ``level`` emits of the whole HISTORY, as (kind, attempt, id, name,
    retraction) in order."""
    out: dict[int, list[tuple[str, str, int, str, bool]]] = defaultdict(list)
    standing: dict[int, list[Change]] = {}  # A's records that eventual showed, per partition
    for epoch, changes, committed in HISTORY:
        by_partition: dict[int, list[Change]] = defaultdict(list)
        for kind, row in changes:
            by_partition[_partition(schema, row)].append((kind, row))
        for p, mine in by_partition.items():
            if level == "eventual" and epoch == A2 and p in standing:
                out[p] += [(k.retraction().value, A.attempt, r["id"], r["name"], True)
                           for k, r in reversed(standing.pop(p))]  # fmt: skip
            if level == "committed" and not committed:
                continue
            out[p] += [(k.value, epoch.attempt, r["id"], r["name"], False) for k, r in mine]
            if epoch == A:
                standing[p] = mine
    return dict(out)


def _strip(emitted: Mapping[int, list[Out]]) -> dict[int, list[tuple[str, str, int, str, bool]]]:
    return {p: [o[1:] for o in outs] for p, outs in emitted.items() if outs}


def _fold(emitted: Mapping[int, list[Out]]) -> dict[int, str]:
    state: dict[int, str] = {}
    for outs in emitted.values():
        for _, kind, _, key, name, _ in outs:
            if kind in ("-U", "-D"):
                assert state.pop(key) is not None
            else:
                state[key] = name
    return state


def _truth() -> dict[int, str]:
    """The table's rows after the committed attempts (what Delta holds)."""
    state: dict[int, str] = {}
    for _, changes, committed in HISTORY:
        for kind, row in changes if committed else ():
            if kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE):
                del state[row["id"]]
            else:
                state[row["id"]] = row["name"]
    return state


def _out(partition: int, e: Emission) -> tuple[int, Out]:
    r = e.record
    return partition, (e.offset, e.kind.value, r.epoch.attempt, r.row["id"], r.row["name"],
                       e.retraction)  # fmt: skip


@dataclass(frozen=True)
class Topic:
    spec: TableSpec
    conf: SourceConf
    steps: list[dict[int, int]]  # end offsets before anything, then after each record batch/marker

    @property
    def schema(self) -> RowSchema:
        return RowSchema.of(self.spec)


def _write(log: LogWriter, step: int) -> Iterator[None]:
    """Write HISTORY[step]: its records, then (when it commits) its markers; yields after each."""
    epoch, changes, committed = HISTORY[step]
    log.changes(epoch, changes)
    yield
    if committed:
        log.marker(epoch, delta_version=step + 1)
        yield


@pytest.fixture(scope="module")
def topic(kafka_bootstrap: str) -> Topic:
    """A topic holding the whole HISTORY, with the end offsets after each write."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    create_topic(kafka_bootstrap, name, PARTITIONS)
    spec = _spec(name, kafka_bootstrap)
    schema = RowSchema.of(spec)
    for attempt in (A, A2):  # the scenario needs both attempts in every partition
        _, changes, _ = next(h for h in HISTORY if h[0] == attempt)
        assert {_partition(schema, row) for _, row in changes} == set(range(PARTITIONS))
    with LogWriter(kafka_bootstrap, name, schema) as log:
        steps = [dict(log.ends)]
        for step in range(len(HISTORY)):
            for _ in _write(log, step):
                steps.append(dict(log.ends))
    assert steps[-1] == end_offsets(kafka_bootstrap, name)
    return Topic(spec, SourceConf(kafka_bootstrap, {}, name, 15.0), steps)


def _read(reader: LogReader, start: Mapping[int, int] | None,
          end: Mapping[int, int]) -> dict[int, list[Out]]:  # fmt: skip
    emitted: dict[int, list[Out]] = defaultdict(list)
    begin = start if start is not None else reader.start_offsets(plan.Start("earliest"))
    for batch in reader.read(begin, end):
        for partition, emission in batch:
            p, out = _out(partition, emission)
            emitted[p].append(out)
    return dict(emitted)


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_emits_what_the_protocol_says(topic: Topic, level: Level) -> None:
    schema = topic.schema
    with LogReader(topic.conf, schema, level) as reader:
        emitted = _read(reader, None, topic.steps[-1])
        assert reader.pending() == {}
        assert reader.stats.records == sum(len(c) for _, c, _ in HISTORY)
        assert reader.stats.markers == PARTITIONS * sum(1 for *_, c in HISTORY if c)
    assert _strip(emitted) == _expected(schema, level)
    attempts = {o[2] for outs in emitted.values() for o in outs}
    assert (A.attempt in attempts) is (level != "committed")
    if level != "none":
        assert _fold(emitted) == _truth()


def test_eventual_shows_the_orphan_at_once_and_committed_holds_it(topic: Topic) -> None:
    after_a = topic.steps[3]  # E0's records and markers, A's records: A' not written yet
    orphan = set(range(PARTITIONS))
    with LogReader(topic.conf, topic.schema, "eventual") as reader:
        eventual = _read(reader, None, after_a)
        pending = reader.pending()
    assert {o[2] for outs in eventual.values() for o in outs} == {E0.attempt, A.attempt}
    assert not any(o[5] for outs in eventual.values() for o in outs)  # nothing retracted yet
    assert set(pending) == orphan and all(e[0].attempts == (A.attempt,) for e in pending.values())

    with LogReader(topic.conf, topic.schema, "committed") as reader:
        committed = _read(reader, None, after_a)
        pending = reader.pending()
    assert {o[2] for outs in committed.values() for o in outs} == {E0.attempt}
    assert set(pending) == orphan
    assert sum(e[0].records for e in pending.values()) == len(HISTORY[1][1])

    # Folding eventual's whole output gives committed's state: the retractions undo A exactly.
    with LogReader(topic.conf, topic.schema, "eventual") as reader:
        whole = _read(reader, None, topic.steps[-1])
    with LogReader(topic.conf, topic.schema, "committed") as reader:
        assert _fold(whole) == _fold(_read(reader, None, topic.steps[-1])) == _truth()


def _cuts(steps: list[dict[int, int]]) -> list[dict[int, int]]:
    """Every step's end offsets and the offsets halfway between two steps."""
    cuts = []
    for before, after in pairwise(steps):
        cuts.append({p: (before.get(p, 0) + o) // 2 for p, o in after.items()})
        cuts.append(after)
    return cuts


@pytest.mark.parametrize("level", LEVELS)
def test_a_read_restored_from_its_checkpoint_goes_on_as_if_never_stopped(
    topic: Topic, level: Level, tmp_path: Path
) -> None:
    with LogReader(topic.conf, topic.schema, level) as reader:
        whole = _read(reader, None, topic.steps[-1])
    for i, cut in enumerate(_cuts(topic.steps)):
        store = ReaderCheckpoint(tmp_path / f"cut-{i}.json", table="shop.orders",
                                 topic=topic.conf.topic, level=level)  # fmt: skip
        with LogReader(topic.conf, topic.schema, level) as first:
            before = _read(first, None, cut)
            store.save(first.decider)
        with LogReader(topic.conf, topic.schema, level, state=store.load()) as second:
            # Where to start is the checkpoint's business: a start of 'latest' must not matter.
            after = _read(second, second.start_offsets(plan.Start("latest")), topic.steps[-1])
        joined = {p: before.get(p, []) + after.get(p, []) for p in range(PARTITIONS)}
        assert {p: o for p, o in joined.items() if o} == whole, (level, cut, store.path.read_text())


# -- read_with_consumer: logstore read's own run ----------------------------------------------------


def _delta_commits(table: Path) -> None:
    """The Delta commits ``_write``'s markers name: version ``step + 1`` holds HISTORY[step]'s
    epoch when it committed (another operation when it did not)."""
    for step, (epoch, _, committed) in enumerate(HISTORY):
        write_epoch_commit(table, step + 1, epoch if committed else None)


class Collect:
    """An in-memory Sink."""

    def __init__(self) -> None:
        self.changes: list[tuple[RowKind, dict[str, Any], dict[str, Any]]] = []
        self.flushed = 0

    def change(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        self.changes.append((kind, dict(row), dict(meta)))

    def flush(self) -> None:
        self.flushed = len(self.changes)

    def by_partition(self) -> dict[int, list[Out]]:
        assert self.flushed == len(self.changes)  # everything handed out was flushed
        out: dict[int, list[Out]] = defaultdict(list)
        for kind, row, meta in self.changes:
            out[meta["partition"]].append((meta["offset"], kind.value, "?", row["id"],
                                           row["name"], meta.get("retraction", False)))  # fmt: skip
        return dict(out)


def test_logstore_reads_resumed_from_a_checkpoint_equal_one_read(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    path = write_table(warehouse, orders_ddl("shop.orders", topic_name, kafka_bootstrap,
                                             partitions=PARTITIONS))  # fmt: skip
    _delta_commits(path)  # `logstore read` releases only what the Delta log confirms
    create_topic(kafka_bootstrap, topic_name, PARTITIONS)
    stored = load_table(warehouse, "shop.orders")
    schema = RowSchema.of(stored.spec)

    def run(level: Level, checkpoint: Path | None) -> tuple[Collect, ReadSummary]:
        req = build_request(
            stored, mode="log", engine="consumer", output=plan.OutputSpec("jsonl"),
            consistent=False, consistency=level, changelog="all-kinds", start="earliest",
            follow=False, limit=None, checkpoint=None if checkpoint is None else str(checkpoint),
            as_of=None, changes=False, bootstrap=None, client_properties={}, timeout_s=15.0,
        )  # fmt: skip
        sink = Collect()
        return sink, read_with_consumer(req, sink)

    checkpoints = {level: tmp_path / f"{level}.json" for level in LEVELS}
    first: dict[str, Collect] = {}
    with LogWriter(kafka_bootstrap, topic_name, schema) as log:
        for step in (0, 1):  # E0 committed, A produced: the orphan
            for _ in _write(log, step):
                pass
        for level in LEVELS:
            first[level], summary = run(level, checkpoints[level])
            assert summary.pending_epochs == (0 if level == "none" else PARTITIONS)
        for step in range(2, len(HISTORY)):  # A' commits, then epoch 2
            for _ in _write(log, step):
                pass

    for level in LEVELS:
        second, summary = run(level, checkpoints[level])
        whole, once = run(level, None)
        joined = defaultdict(list, first[level].by_partition())
        for p, outs in second.by_partition().items():
            joined[p] += outs
        assert dict(joined) == whole.by_partition(), level
        expected = _expected(schema, level)
        assert {p: [(o[1], o[3], o[4], o[5]) for o in outs]
                for p, outs in whole.by_partition().items()} == {
            p: [(o[0], o[2], o[3], o[4]) for o in outs] for p, outs in expected.items()
        }  # fmt: skip
        retracted = len(HISTORY[1][1]) if level == "eventual" else 0
        assert once.retractions == retracted and summary.pending_epochs == 0
        assert once.rows == len(whole.changes) and once.markers == PARTITIONS * 3
        if level != "none":
            assert _fold(whole.by_partition()) == _truth()
