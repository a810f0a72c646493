"""The write protocol (``ingest/epoch.py``) over in-memory stores: every step, its order, the
start-up rule, the lease checks, crashes at every point and restarts as the same or another job,
and the carry of writes made to the table outside logstore into the log.

The fakes keep one event list, so a test can assert the order of the steps across the stores
(a marker is never sent before its commit, the lease is checked right before the commit). A
"crash" is an exception raised at a crash point: the protocol instance is then dropped, as a killed
process would be, and a new one is made over the same stores (what survives a crash: the log and
the table; what does not: the protocol's memory).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.catalog.lease import LeaseLostError
from logstore_cli.errors import LogstoreError, OutsideWriteError
from logstore_cli.ingest.epoch import (
    CARRY_CRASH_POINTS,
    COMMIT_RETRIES,
    CRASH_POINTS,
    EPOCH_CRASH_POINTS,
    PAUSE_POINTS,
    Committed,
    Compacted,
    CompactionConflict,
    CompactionFailed,
    EpochProtocol,
    EpochReport,
    OutsidePending,
    Produced,
)
from logstore_cli.ingest.outside import OUTSIDE_WRITER, OutsideCommit
from logstore_cli.logformat.wire import CommitMarker, EpochId

PARTITIONS = 2


@dataclass(frozen=True)
class Batch:
    """An epoch's input: good rows (key, value) and malformed ones."""

    rows: tuple[tuple[int, str], ...]
    bad: int = 0


@dataclass
class World:
    """What outlives a process: the topic, the Delta log, the quarantine files, and the order
    in which things happened."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    topic: dict[int, list[tuple[str, Any]]] = field(
        default_factory=lambda: {p: [] for p in range(PARTITIONS)}
    )
    commits: list[Committed] = field(default_factory=list)  # version = index + 1 (0: create)
    data: dict[int, str] = field(default_factory=dict)  # the table's rows
    txn: dict[str, int] = field(default_factory=dict)  # Delta's txnAppId -> txnVersion
    quarantined: dict[tuple[str, int], int] = field(default_factory=dict)
    # Writes made to the table outside logstore: (version, rows); versions are shared with commits
    outside: list[tuple[int, dict[int, str]]] = field(default_factory=list)
    version: int = 0  # the table's latest version (0: created)
    compactions_racing: int = 0  # the next commits lose this many races to a compaction
    compaction_raced: bool = False  # the job's next compaction loses to another program

    def outside_write(self, rows: Mapping[int, str]) -> int:
        """Another program changes the table (a Spark SQL UPDATE, say)."""
        self.version += 1
        self.data.update(rows)
        self.outside.append((self.version, dict(rows)))
        return self.version

    def folded_log(self) -> dict[int, str]:
        """What a ``committed`` reader folds from the log: in each partition, a marker releases
        the records of its writer, epoch and attempt that came before it, once per epoch."""
        state: dict[int, str] = {}
        for items in self.topic.values():
            held: dict[tuple[str, int], list[tuple[str, int, str]]] = {}
            done: set[tuple[str, int]] = set()
            for kind, item in items:
                if kind == "record":
                    eid, key, value = item
                    held.setdefault((eid.writer, eid.epoch), []).append((eid.attempt, key, value))
                elif (item.epoch.writer, item.epoch.epoch) not in done:
                    ref = (item.epoch.writer, item.epoch.epoch)
                    done.add(ref)
                    for attempt, key, value in held.pop(ref, []):
                        if attempt == item.epoch.attempt:
                            state[key] = value
        return state

    def ends(self) -> dict[int, int]:
        return {p: len(items) for p, items in self.topic.items()}

    def markers(self) -> list[CommitMarker]:
        return [m for items in self.topic.values() for kind, m in items if kind == "marker"]

    def markers_of(self, eid: EpochId) -> set[tuple[int, int | None]]:
        """(partition, version) of every marker naming ``eid``."""
        return {
            (p, m.delta_version)
            for p, items in self.topic.items()
            for kind, m in items
            if kind == "marker" and m.epoch == eid
        }


class FakeLog:
    def __init__(self, world: World, fail: BaseException | None = None) -> None:
        self.world = world
        self.fail = fail
        self.during_produce: list[Any] = []  # callables run while producing (e.g. a takeover)

    def produce(self, batch: Batch, eid: EpochId) -> Produced:
        self.world.events.append(("produce", eid))
        for action in self.during_produce:
            action()
        if self.fail is not None:
            raise self.fail
        for key, value in batch.rows:
            self.world.topic[key % PARTITIONS].append(("record", (eid, key, value)))
        return Produced(len(batch.rows), len(batch.rows), self.world.ends())

    def publish_markers(self, marker: CommitMarker) -> None:
        self.world.events.append(("markers", marker))
        for p in range(PARTITIONS):
            self.world.topic[p].append(("marker", marker))


class FakeTable:
    """Delta as the protocol relies on it: idempotent per (txnAppId, txnVersion)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def committed(self, writer: str, epoch: int) -> Committed | None:
        self.world.events.append(("committed?", writer, epoch))
        if self.world.txn.get(writer, -1) < epoch:
            return None
        found = [
            c for c in self.world.commits if (c.epoch.writer, c.epoch.epoch) == (writer, epoch)
        ]
        assert found, "the fake's txn and commits disagree"
        return found[0]

    def latest(self) -> Committed | None:
        return self.world.commits[-1] if self.world.commits else None

    def commit(self, batch: Batch, eid: EpochId, offsets: Mapping[int, int]) -> int:
        self.world.events.append(("commit", eid, dict(offsets)))
        if self.world.compactions_racing:
            self.world.compactions_racing -= 1
            self.world.version += 1  # the compaction's commit: no data changed
            raise CompactionConflict("lost the race to a compaction")
        if self.world.txn.get(eid.writer, -1) >= eid.epoch:
            raise LogstoreError("Delta skipped the epoch as already written")
        self.world.txn[eid.writer] = eid.epoch
        self.world.data.update(batch.rows)
        self.world.version += 1
        self.world.commits.append(Committed(eid, self.world.version, dict(offsets)))
        return self.world.version

    def count(self, batch: Batch) -> int:
        return len(batch.rows)

    def mark(self, eid: EpochId, offsets: Mapping[int, int]) -> int:
        self.world.events.append(("mark", eid, dict(offsets)))
        return self.commit(Batch(()), eid, offsets)

    def compact(self) -> Compacted:
        self.world.events.append(("compact",))
        if self.world.compaction_raced:
            self.world.compaction_raced = False
            raise CompactionFailed("lost the race to another program's commit")
        self.world.version += 1
        return Compacted(4, 1, self.world.version)


class FakeOutside:
    """The table's outside writes, as ``DeltaOutsideWrites`` finds them: the first look is after
    Delta's transaction version of ``OUTSIDE_WRITER``, each next one after the last."""

    def __init__(self, world: World, fail: BaseException | None = None) -> None:
        self.world = world
        self.fail = fail
        self.seen: int | None = None

    def pending(self) -> OutsidePending | None:
        after = self.world.txn.get(OUTSIDE_WRITER, -1) if self.seen is None else self.seen
        self.seen = self.world.version
        new = [OutsideCommit(v, "UPDATE", None, None) for v, _ in self.world.outside if v > after]
        return OutsidePending(tuple(new), self.world.version) if new else None

    def changes(self, pending: OutsidePending) -> Batch:
        self.world.events.append(("changes", pending.through))
        if self.fail is not None:
            raise self.fail
        versions = {c.version for c in pending.commits}
        return Batch(tuple(kv for v, rows in self.world.outside if v in versions
                           for kv in rows.items()))  # fmt: skip


class FakeQuarantine:
    def __init__(self, world: World) -> None:
        self.world = world

    def write(self, batch: Batch, writer: str, epoch: int) -> int:
        self.world.events.append(("quarantine", writer, epoch))
        self.world.quarantined[(writer, epoch)] = batch.bad  # a retry rewrites the same file
        return batch.bad


class FakeLease:
    """A lease with ``remaining`` seconds; ``lose()`` is another job taking the table over."""

    def __init__(self, world: World, remaining: float = 60.0) -> None:
        self.world = world
        self.remaining = remaining
        self.lost = False

    def lose(self) -> None:
        self.lost = True

    def check(self, min_remaining_s: float = 0.0) -> None:
        self.world.events.append(("lease", min_remaining_s))
        if self.lost:
            raise LeaseLostError("the lease of table db.t is held by job other")
        if self.remaining <= min_remaining_s:
            raise LeaseLostError("the lease of table db.t is about to expire")


class Crash(BaseException):
    """The process died here (BaseException: nothing in the protocol may catch it)."""


def crash_at(point: str, epoch: int | None = None) -> Any:
    def hook(at: str, n: int) -> None:
        if at == point and (epoch is None or n == epoch):
            raise Crash(f"{at}:{n}")

    return hook


_attempts = (f"a-{i:04d}" for i in itertools.count())


def make(
    world: World,
    writer: str = "w-1",
    *,
    log: bool = True,
    table: bool = True,
    lease: FakeLease | None = None,
    crash: Any = None,
    attempts: Iterator[str] = _attempts,
    margin: float = 20.0,
    start: bool = True,
    outside: FakeOutside | None = None,
    compact_every: int = 0,
) -> tuple[EpochProtocol[Batch], FakeLease]:
    lease = lease or FakeLease(world)
    protocol: EpochProtocol[Batch] = EpochProtocol(
        writer,
        log=FakeLog(world) if log else None,
        table=FakeTable(world) if table else None,
        quarantine=FakeQuarantine(world),
        lease=lease,
        commit_margin_s=margin,
        new_attempt=lambda: next(attempts),
        crash_point=crash or (lambda point, epoch: None),
        clock=itertools.count().__next__,  # a clock that moves on every reading
        outside=outside or FakeOutside(world),
        compact_every=compact_every,
    )
    if start:
        protocol.start()
    return protocol, lease


def batch(*keys: int, value: str = "v", bad: int = 0) -> Batch:
    return Batch(tuple((k, f"{value}{k}") for k in keys), bad)


def assert_consistent(world: World) -> None:
    """The protocol's invariants over what a run left behind: every commit's markers are in every
    partition, naming the attempt that committed and its version; no marker names an attempt Delta
    did not commit (for a writer and epoch it committed); each (writer, epoch) committed once."""
    keys = [(c.epoch.writer, c.epoch.epoch) for c in world.commits]
    assert len(keys) == len(set(keys)), keys
    committed = {(c.epoch.writer, c.epoch.epoch): c for c in world.commits}
    for c in world.commits:
        assert world.markers_of(c.epoch) == {(p, c.version) for p in range(PARTITIONS)}, c
    for m in world.markers():
        c = committed.get((m.epoch.writer, m.epoch.epoch))
        if c is not None:
            assert m.epoch == c.epoch and m.delta_version == c.version, m


def steps(world: World) -> list[str]:
    return [e[0] for e in world.events]


# -- one epoch ---------------------------------------------------------------------------------


def test_an_epoch_runs_its_steps_in_order_and_commits_what_it_produced() -> None:
    world = World()
    protocol, _ = make(world, margin=20.0)
    report = protocol.run(0, batch(1, 2, 3, bad=2))

    assert steps(world) == [
        "lease",
        "quarantine",
        "committed?",
        "produce",
        "lease",
        "commit",
        "markers",
    ]
    assert world.events[0] == ("lease", 0.0)
    assert world.events[4] == ("lease", 20.0)  # right before the commit, with the margin
    produced = world.events[3][1]
    assert produced == EpochId("w-1", 0, report.attempt)
    # The commit names the same attempt and the offsets after the epoch's records.
    assert world.events[5] == ("commit", produced, {0: 1, 1: 2})
    assert world.events[6] == ("markers", CommitMarker(produced, 1))
    assert report == EpochReport(
        "w-1", 0, report.attempt, 3, 3, 2, 1, {0: 1, 1: 2}, False, report.seconds, report.phases
    )
    assert set(report.phases) == {"read", "log", "delta", "markers"}
    assert world.data == {1: "v1", 2: "v2", 3: "v3"}
    assert world.quarantined == {("w-1", 0): 2}
    assert_consistent(world)


def test_consecutive_epochs_carry_their_own_numbers_and_new_attempts() -> None:
    world = World()
    protocol, _ = make(world)
    reports = [protocol.run(n, batch(n)) for n in range(4)]
    assert [c.epoch.epoch for c in world.commits] == [0, 1, 2, 3]
    assert [c.epoch.attempt for c in world.commits] == [r.attempt for r in reports]
    assert len({r.attempt for r in reports}) == 4
    assert [r.delta_version for r in reports] == [1, 2, 3, 4]
    assert world.txn == {"w-1": 3}
    assert_consistent(world)


def test_no_marker_is_sent_before_its_commit() -> None:
    world = World()
    protocol, _ = make(world)
    for n in range(3):
        protocol.run(n, batch(n, n + 10))
    committed_at: dict[EpochId, int] = {}
    for i, event in enumerate(world.events):
        if event[0] == "commit":
            committed_at[event[1]] = i
        if event[0] == "markers":
            eid = event[1].epoch
            assert eid in committed_at and committed_at[eid] < i, (eid, world.events)


def test_a_repeated_attempt_id_is_refused() -> None:
    world = World()
    protocol, _ = make(world, attempts=iter(["a-same", "a-same"]))
    protocol.run(0, batch(1))
    with pytest.raises(LogstoreError, match="made twice"):
        protocol.run(1, batch(2))
    assert len(world.commits) == 1


# -- crashes and restarts --------------------------------------------------------------------


@pytest.mark.parametrize("point", EPOCH_CRASH_POINTS)
def test_a_crash_at_each_point_leaves_what_the_docs_say_and_a_retry_repairs_it(point: str) -> None:
    world = World()
    first, _ = make(world, crash=crash_at(point, 1))
    first.run(0, batch(1, 2))
    with pytest.raises(Crash):
        first.run(1, batch(3, 4))
    killed = (
        [e[1] for e in world.events if e[0] == "produce"][-1] if point != "before-log" else None
    )
    expected = {  # what epoch 1 left: records in the log, a commit, markers (docs/consistency.md §6)
        "before-log": (False, False, False),
        "after-log": (True, False, False),
        "after-commit": (True, True, False),
        "after-markers": (True, True, True),
    }[point]
    has_records = any(
        kind == "record" and item[0].epoch == 1
        for items in world.topic.values()
        for kind, item in items
    )
    has_commit = world.txn["w-1"] == 1
    has_markers = any(m.epoch.epoch == 1 for m in world.markers())
    assert (has_records, has_commit, has_markers) == expected

    # The same job again (same writer): start-up rule, then Spark re-runs epoch 1.
    again, _ = make(world, start=False)
    again.start()
    retry = again.run(1, batch(3, 4))
    assert retry.republished == has_commit
    if has_commit:
        assert retry.attempt == killed.attempt  # the markers name the attempt that committed
        assert retry.rows == 0 and retry.log_records == 0
    else:
        assert retry.attempt != (killed.attempt if killed else None)
    assert world.data == {1: "v1", 2: "v2", 3: "v3", 4: "v4"}
    assert [c.epoch.epoch for c in world.commits] == [0, 1]
    assert_consistent(world)


def test_a_job_killed_after_its_commit_is_repaired_by_a_different_job_at_start_up() -> None:
    """The start-up rule: W1 commits epoch 0 and dies before its markers; W1 never runs again,
    W2 starts on the table. W2 must publish W1's markers before producing anything, or W1's
    committed epoch stays unreleased for every committed reader."""
    world = World()
    w1, _ = make(world, "w-1", crash=crash_at("after-commit"))
    with pytest.raises(Crash):
        w1.run(0, batch(1, 2))
    committed = world.commits[0]
    assert world.markers_of(committed.epoch) == set()

    world.events.clear()
    w2, _ = make(world, "w-2", start=False)
    assert w2.start() == committed
    assert world.markers_of(committed.epoch) == {(p, committed.version) for p in range(PARTITIONS)}
    w2.run(0, batch(3))
    assert steps(world).index("markers") < steps(world).index("produce")  # before W2's records
    assert_consistent(world)


def test_an_already_committed_epoch_republishes_when_the_start_up_rule_cannot() -> None:
    """W1 commits epoch 5 and dies before its markers; a file-only job W2 (``--emit file``: it
    publishes no markers) then commits an epoch of its own, so the table's latest epoch commit is
    W2's; W1 restarts: its start-up rule re-publishes W2's commit, so only the re-run of epoch 5
    (already committed) can publish W1's markers."""
    world = World()
    w1, _ = make(world, "w-1", crash=crash_at("after-commit", 5))
    for n in range(5):
        w1.run(n, batch(n))
    with pytest.raises(Crash):
        w1.run(5, batch(50))
    lost = world.commits[-1]
    w2, _ = make(world, "w-2", log=False)
    w2.run(0, batch(7))
    assert world.markers_of(lost.epoch) == set()

    w1_again, _ = make(world, "w-1", start=False)
    w1_again.start()
    assert world.markers_of(lost.epoch) == set()  # the start-up rule published W2's commit
    report = w1_again.run(5, batch(50))
    assert report.republished and report.attempt == lost.epoch.attempt
    assert report.delta_version == lost.version and report.offsets == lost.offsets
    assert "produce" not in steps(world)[-3:] and steps(world)[-1] == "markers"
    assert_consistent(world)


def test_start_up_publishes_nothing_on_a_table_without_epochs_or_without_both_stores() -> None:
    world = World()
    protocol, _ = make(world, start=False)
    assert protocol.start() is None and world.events == []
    protocol.run(0, batch(1))
    world.events.clear()
    for stores in ({"log": False}, {"table": False}):
        assert make(world, "w-2", start=False, **stores)[0].start() is None
    assert world.events == []


# -- the lease ---------------------------------------------------------------------------------


def test_a_lease_lost_while_producing_stops_the_epoch_before_its_commit() -> None:
    world = World()
    protocol, lease = make(world)
    log = protocol.log
    assert isinstance(log, FakeLog)
    log.during_produce.append(lease.lose)  # another job takes the table over meanwhile
    with pytest.raises(LeaseLostError):
        protocol.run(0, batch(1, 2))
    assert world.commits == [] and world.markers() == [] and world.data == {}
    assert steps(world)[-1] == "lease"


def test_a_lease_lost_before_the_epoch_produces_nothing() -> None:
    world = World()
    protocol, lease = make(world)
    lease.lose()
    with pytest.raises(LeaseLostError):
        protocol.run(0, batch(1))
    assert steps(world) == ["lease"]
    assert all(items == [] for items in world.topic.values())


def test_a_lease_about_to_expire_does_not_commit() -> None:
    world = World()
    protocol, _ = make(world, lease=FakeLease(world, remaining=10.0), margin=20.0)
    with pytest.raises(LeaseLostError, match="about to expire"):
        protocol.run(0, batch(1))
    assert world.commits == []
    assert make(World(), lease=None, margin=5.0)[0].run(0, batch(1)).delta_version == 1


# -- emit modes --------------------------------------------------------------------------------


def test_log_only_markers_carry_no_version_and_nothing_touches_delta() -> None:
    world = World()
    protocol, _ = make(world, table=False)
    report = protocol.run(0, batch(1, 2))
    assert steps(world) == ["lease", "quarantine", "produce", "markers"]
    assert report.delta_version is None and world.commits == []
    assert world.markers() == [CommitMarker(EpochId("w-1", 0, report.attempt), None)] * PARTITIONS


def test_file_only_commits_with_no_offsets_and_counts_the_rows() -> None:
    world = World()
    protocol, _ = make(world, log=False)
    report = protocol.run(0, batch(1, 2, 3))
    assert steps(world) == ["lease", "quarantine", "committed?", "lease", "commit"]
    assert report.rows == 3 and report.log_records == 0 and report.offsets == {}
    assert world.commits[0].offsets == {} and world.markers() == []


def test_no_epoch_runs_before_the_start_up_step() -> None:
    world = World()
    protocol, _ = make(world, start=False)
    with pytest.raises(LogstoreError, match="before the job's start-up step"):
        protocol.run(0, batch(1))
    assert world.events == []


def test_a_protocol_needs_a_store() -> None:
    with pytest.raises(ValueError, match="the log, the table or both"):
        make(World(), log=False, table=False)


def test_a_log_failure_commits_nothing() -> None:
    world = World()
    protocol, _ = make(world)
    log = protocol.log
    assert isinstance(log, FakeLog)
    log.fail = LogstoreError("cannot reach Kafka")
    with pytest.raises(LogstoreError, match="cannot reach Kafka"):
        protocol.run(0, batch(1))
    assert world.commits == [] and world.markers() == []


# -- any history of crashes ends consistent -----------------------------------------------------

_run_step = st.tuples(
    st.sampled_from(["w-1", "w-2", "outside"]),  # which job runs next, or an outside write
    st.one_of(st.none(), st.sampled_from(CRASH_POINTS)),  # where (if) it dies
    st.integers(min_value=1, max_value=3),  # epochs it tries to run
)


@given(st.lists(_run_step, min_size=1, max_size=6))
def test_any_history_of_crashes_and_restarts_ends_consistent(runs: list[Any]) -> None:
    """Jobs W1 and W2 take turns on one table (each with its own checkpoint: a job's next epoch
    is the one after its last committed epoch, as Spark's checkpoint gives it); each run may die at
    any crash point. After a last clean run of each job, every commit has its markers, every
    epoch's rows are in the table, and no (writer, epoch) was committed twice."""
    world = World()
    next_epoch = {"w-1": 0, "w-2": 0}
    attempts = (f"a-{i}" for i in itertools.count())

    def rows_of(writer: str, n: int) -> Batch:
        base = 1000 if writer == "w-2" else 0
        return batch(base + n, base + n + 500, value=f"{writer}/{n}:")

    def run(writer: str, crash: Any, count: int) -> None:
        protocol, _ = make(world, writer, crash=crash, attempts=attempts)
        for _ in range(count):
            n = next_epoch[writer]
            protocol.run(n, rows_of(writer, n))  # raises Crash: Spark re-runs n next time
            next_epoch[writer] = n + 1

    for writer, point, count in runs:
        if writer == "outside":  # another program updates keys the jobs write too
            world.outside_write({k: f"outside@{world.version}" for k in range(count, 600, 97)})
            continue
        with contextlib.suppress(Crash):
            run(writer, None if point is None else crash_at(point), count)
    for writer in ("w-1", "w-2"):
        run(writer, None, 1)
    assert_consistent(world)
    expected: dict[int, str] = {}
    history = [(c.version, rows_of(c.epoch.writer, c.epoch.epoch).rows)
               for c in world.commits if c.epoch.writer != OUTSIDE_WRITER]  # fmt: skip
    history += [(v, tuple(rows.items())) for v, rows in world.outside]
    for _, rows in sorted(history):
        expected.update(rows)
    assert world.data == expected
    assert world.folded_log() == world.data  # every outside write reached the log, in order
    for writer in ("w-1", "w-2"):
        epochs = sorted(c.epoch.epoch for c in world.commits if c.epoch.writer == writer)
        assert epochs == list(range(next_epoch[writer]))


# -- writes made outside logstore --------------------------------------------------------------


def test_an_outside_write_is_carried_into_the_log_before_the_next_epoch() -> None:
    world = World()
    protocol, _ = make(world)
    protocol.run(0, batch(1, 2))
    version = world.outside_write({2: "deleted-by-gdpr", 5: "inserted-by-spark-sql"})
    world.events.clear()
    protocol.run(1, batch(3))

    assert steps(world) == [
        "lease", "changes", "produce", "lease", "mark", "commit", "markers",  # the carry first
        "quarantine", "committed?", "produce", "lease", "commit", "markers",  # then the epoch
    ]  # fmt: skip
    carry = world.events[2][1]
    assert carry.writer == OUTSIDE_WRITER and carry.epoch == version
    assert world.events[3] == ("lease", 20.0)  # the carry is committed with the lease's margin
    assert world.txn[OUTSIDE_WRITER] == version  # Delta records how far writes are carried
    assert world.folded_log() == world.data == {
        1: "v1", 2: "deleted-by-gdpr", 3: "v3", 5: "inserted-by-spark-sql"
    }  # fmt: skip
    assert_consistent(world)

    world.events.clear()
    protocol.run(2, batch(4))  # nothing new: no second carry
    assert "mark" not in steps(world)


def test_writes_made_before_a_job_starts_are_carried_at_start_up() -> None:
    world = World()
    first, _ = make(world)
    first.run(0, batch(1))
    world.outside_write({1: "changed"})
    world.outside_write({7: "added"})
    carried: list[Any] = []
    again, _ = make(world, start=False)
    again.on_carry = carried.append
    again.start()
    assert [c.version for c in carried[0].commits] == [2, 3]
    assert carried[0].through == 3 and carried[0].log_records == 2
    assert world.folded_log() == world.data == {1: "changed", 7: "added"}
    assert_consistent(world)


@pytest.mark.parametrize("point", CARRY_CRASH_POINTS)
def test_a_crash_while_carrying_is_repaired_by_the_next_start(point: str) -> None:
    world = World()
    first, _ = make(world)
    first.run(0, batch(1, 2))
    world.outside_write({2: "outside"})
    dying, _ = make(world, crash=crash_at(point), start=False)
    with pytest.raises(Crash):
        dying.start()
    committed = OUTSIDE_WRITER in world.txn
    assert committed == (point == "carry-after-commit")
    assert world.folded_log() == {1: "v1", 2: "v2"}  # nothing released without its marker

    again, _ = make(world, start=False)
    again.start()
    again.run(1, batch(3))
    carries = [c for c in world.commits if c.epoch.writer == OUTSIDE_WRITER]
    assert len(carries) == 1  # carried once: a committed carry is not carried again
    assert world.folded_log() == world.data == {1: "v1", 2: "outside", 3: "v3"}
    assert_consistent(world)


def test_an_outside_write_that_cannot_be_read_stops_the_job_before_anything_is_written() -> None:
    world = World()
    first, _ = make(world)
    first.run(0, batch(1))
    world.outside_write({1: "no-change-data-feed"})
    world.events.clear()
    refusal = OutsideWriteError("no Change Data Feed for version 2")
    protocol, _ = make(world, outside=FakeOutside(world, fail=refusal), start=False)
    with pytest.raises(OutsideWriteError):
        protocol.start()
    assert "produce" not in steps(world) and "mark" not in steps(world)
    assert OUTSIDE_WRITER not in world.txn


def test_a_carry_is_not_committed_once_the_lease_is_lost() -> None:
    world = World()
    protocol, lease = make(world)
    protocol.run(0, batch(1))
    world.outside_write({1: "outside"})
    log = protocol.log
    assert isinstance(log, FakeLog)
    log.during_produce.append(lease.lose)
    with pytest.raises(LeaseLostError):
        protocol.run(1, batch(2))
    assert OUTSIDE_WRITER not in world.txn and "mark" not in steps(world)


def test_a_job_that_writes_one_store_carries_nothing() -> None:
    world = World()
    protocol, _ = make(world, log=False)
    world.outside_write({1: "outside"})
    protocol.run(0, batch(2))
    assert "changes" not in steps(world)


# -- compaction beside and inside the job ---------------------------------------------------------


def test_a_commit_lost_to_a_compaction_is_made_again_with_the_same_attempt() -> None:
    world = World()
    protocol, _ = make(world)
    world.compactions_racing = 2
    report = protocol.run(0, batch(1, 2))
    commits = [e for e in world.events if e[0] == "commit"]
    assert len(commits) == 3 and len({e[1] for e in commits}) == 1  # one attempt, three tries
    # each try is preceded by its own lease check with the margin
    assert [e for e in world.events if e[0] in ("lease", "commit")][-6:] == [
        ("lease", 20.0), commits[0], ("lease", 20.0), commits[1], ("lease", 20.0), commits[2],
    ]  # fmt: skip
    assert report.commit_retries == 2 and report.delta_version == world.version
    assert world.data == {1: "v1", 2: "v2"}
    assert_consistent(world)
    assert world.folded_log() == world.data


def test_commits_lost_to_compactions_without_end_fail_the_epoch_unmarked() -> None:
    world = World()
    protocol, _ = make(world)
    world.compactions_racing = COMMIT_RETRIES + 1
    with pytest.raises(CompactionConflict):
        protocol.run(0, batch(1))
    assert world.commits == [] and world.markers() == []
    # the next run of the epoch (a restart) commits it: nothing lost, nothing twice
    protocol.run(0, batch(1))
    assert world.data == {1: "v1"} and len(world.commits) == 1
    assert_consistent(world)


def test_the_job_compacts_after_every_n_committed_epochs_after_the_markers() -> None:
    world = World()
    protocol, _ = make(world, compact_every=3)
    reports = [protocol.run(n, batch(n)) for n in range(7)]
    assert [r.epoch for r in reports if r.compacted is not None] == [2, 5]
    after = steps(world)[steps(world).index("compact") - 2 :][:3]
    assert after == ["markers", "lease", "compact"]  # between epochs, lease checked
    assert reports[2].compacted == Compacted(4, 1, reports[2].delta_version + 1)
    assert "compaction" in reports[2].phases and "compaction" not in reports[1].phases
    assert_consistent(world)


def test_a_compaction_lost_to_another_program_is_skipped_and_tried_again_next_time() -> None:
    world = World()
    protocol, _ = make(world, compact_every=1)
    world.compaction_raced = True
    first, second = protocol.run(0, batch(1)), protocol.run(1, batch(2))
    assert first.compacted is None and first.compaction_failed is not None
    assert "lost the race" in first.compaction_failed
    assert second.compacted is not None and second.compaction_failed is None
    assert world.data == {1: "v1", 2: "v2"}


def test_no_compaction_by_default_or_without_a_table() -> None:
    world = World()
    protocol, _ = make(world)
    protocol.run(0, batch(1))
    log_only, _ = make(world, "w-2", table=False, compact_every=1)
    log_only.run(0, batch(2))
    assert "compact" not in steps(world)


class ColumnsChanged(LogstoreError):
    pass


@dataclass
class FakeSchema:
    world: World
    changed_at: int | None = None  # the check number from which the table has another schema
    checks: int = 0

    def check(self) -> None:
        self.world.events.append(("schema",))
        self.checks += 1
        if self.changed_at is not None and self.checks >= self.changed_at:
            raise ColumnsChanged("table db.t gained column(s) region: restart the job")


def test_a_changed_schema_stops_the_job_before_the_epoch_writes_anything_and_it_runs_again() -> (
    None
):
    world = World()
    lease = FakeLease(world)
    guard = FakeSchema(world, changed_at=2)
    protocol, _ = make(world, lease=lease, start=False)
    protocol.schema = guard
    protocol.start()
    protocol.run(0, batch(1))
    before = (world.ends(), list(world.commits), dict(world.quarantined))
    world.events.clear()
    with pytest.raises(ColumnsChanged, match="restart the job"):
        protocol.run(1, batch(2))
    assert steps(world) == ["lease", "schema"]  # nothing produced, committed or quarantined
    assert (world.ends(), list(world.commits), dict(world.quarantined)) == before
    # The restarted job (the table's columns are its own now) runs the epoch again.
    again, _ = make(world, lease=lease)
    again.run(1, batch(2))
    assert world.folded_log() == world.data == {1: "v1", 2: "v2"}
    assert_consistent(world)


def test_the_pause_point_before_the_commit_is_between_the_last_lease_check_and_the_commit() -> None:
    """``before-commit`` (a pause-only point: ``PAUSE_POINTS``) is where a job paused after its
    last lease check would commit after a takeover: the gap the fence in Delta closes."""
    world = World()

    def hook(point: str, epoch: int) -> None:
        world.events.append(("point", point))

    protocol, _ = make(world, crash=hook)
    protocol.run(0, batch(1))
    names = [e[0] if e[0] != "point" else e[1] for e in world.events]
    at = names.index("before-commit")
    assert names[at - 1] == "lease" and world.events[at - 1] == ("lease", 20.0)
    assert names.index("after-log") < at < names.index("after-commit")
    assert "before-commit" in PAUSE_POINTS and "before-commit" not in CRASH_POINTS
