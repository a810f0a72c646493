"""The write protocol of an ingest job, as plain Python: read this to learn how an epoch is written.

An ingest job writes each micro-batch (an *epoch* ``N`` of writer ``W``, run as attempt ``A``) to two
stores: the Kafka log and the Delta table (docs/consistency.md §3). The steps, in this order:

0. at start-up, before anything is produced: re-publish the commit markers of the table's latest
   epoch commit, whichever writer made it (a job killed between its Delta commit and its markers
   would otherwise leave that epoch unreleased for ever if no job of its own ever runs again);
1. check the lease (the table's one writer); quarantine the epoch's malformed records;
2. if Delta already records ``(W, N)`` as committed (an earlier attempt committed and then died),
   write nothing: re-publish the markers of the attempt that committed, and stop there;
3. produce the epoch's changes to the log, flushed, and learn the topic's end offsets;
4. check the lease again, with a margin, right before the commit (a job that lost its table to
   another writer while it produced must not commit), then commit to Delta with ``(W, N, A)`` and
   the end offsets: **the commit point**;
5. publish a commit marker ``(W, N, A, version)`` to every partition, flushed.

A commit that loses the race to a compaction run beside the job (commits that change no data) is
made again against the new snapshot, same attempt (``CompactionConflict``); any other conflict ends
the job. Every ``compact_every`` committed epochs, after the markers, the job compacts the table's
small files itself (a commit without data and without epoch metadata).

Before the first epoch (in ``start``) and before every epoch after it, writes to the Delta table
that are not logstore epochs (*outside writes*: a user's ``DELETE`` in Spark SQL) are carried into
the log (``_carry``): their changes from the Change Data Feed as an epoch of the reserved writer
``OUTSIDE_WRITER``, numbered by the newest Delta version checked, through the same steps 3-5 (the
Delta commit of a carry holds no data: it records the carry, with the transaction id of
``OUTSIDE_WRITER``). See ``ingest/outside.py``.

The stores are *ports*: ``LogSink``, ``TableCommitter``, ``Quarantine``, ``LeaseGuard`` and
``OutsideWrites``. The
Spark job (``jobs/ingest.py``) implements them over a Spark DataFrame and the tests over lists
(``tests/unit/ingest/test_epoch.py``); the protocol never sees the batch (type ``B``): it hands it to
the ports. No I/O here, no pyspark, no Kafka client.

Crash points (``before-log``, ``after-log``, ``after-commit``, ``after-markers``, and
``carry-after-log``, ``carry-after-commit`` of a carry) are where a
test-only hook may kill the process; they are named here so that the protocol says where a crash
can land, and docs/consistency.md §6 says what each one leaves behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from logstore_cli.errors import LogstoreError
from logstore_cli.ingest.outside import OUTSIDE_WRITER, OutsideCommit
from logstore_cli.logformat.wire import CommitMarker, EpochId, LogPosition

EPOCH_CRASH_POINTS = ("before-log", "after-log", "after-commit", "after-markers")
COMMIT_RETRIES = 5  # commits lost in a row to compactions before the epoch fails
CARRY_CRASH_POINTS = ("carry-after-log", "carry-after-commit")  # only with outside writes to carry
CRASH_POINTS = EPOCH_CRASH_POINTS + CARRY_CRASH_POINTS
# Where a test may only hold the job (a kill there leaves what ``after-log`` leaves): between the
# lease check and the Delta commit, the gap the takeover's fence closes (docs/consistency.md §6).
PAUSE_POINTS = ("before-commit",)

B = TypeVar("B")
B_contra = TypeVar("B_contra", contravariant=True)
B_co = TypeVar("B_co", covariant=True)


# -- what the ports answer -----------------------------------------------------------------------


@dataclass(frozen=True)
class Produced:
    """An epoch's records in the log: every delivery confirmed (acks=all, flushed)."""

    rows: int  # good records of the epoch (including kinds the changelog mode leaves out)
    records: int  # change records produced
    # per partition, where the epoch's records end: Kafka's end offset after them, or the last
    # Pulsar message id (``LogPosition``)
    offsets: Mapping[int, LogPosition]


@dataclass(frozen=True)
class Committed:
    """An epoch commit the Delta log records: which attempt committed, as which version, and the
    topic's end positions it recorded (``LogPosition``)."""

    epoch: EpochId
    version: int
    offsets: Mapping[int, LogPosition]


@dataclass(frozen=True)
class Compacted:
    """A compaction of the table's small files: files removed and added, the commit's version
    (None when there was nothing to compact)."""

    files_removed: int
    files_added: int
    version: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "files_removed": self.files_removed,
            "files_added": self.files_added,
            "delta_version": self.version,
        }


class CompactionConflict(LogstoreError):
    """An epoch's Delta commit lost the race to commits that changed no data (a compaction: an
    OPTIMIZE run beside the job): nothing was committed, and committing the epoch again against
    the new snapshot is safe (Delta's transaction id still makes it exactly once)."""


class CompactionFailed(LogstoreError):
    """The job's own compaction did not commit (another program committed first); the table is
    unchanged and the next compaction tries again."""


@dataclass(frozen=True)
class OutsidePending:
    """Outside writes not carried yet: ``commits`` (oldest first) to carry, ``skipped`` ones the
    user chose to leave out of the log (``--skip-outside-through``), and ``through``, the newest
    Delta version checked: the carry's epoch number."""

    commits: tuple[OutsideCommit, ...]
    through: int
    skipped: tuple[OutsideCommit, ...] = ()


# -- the ports -------------------------------------------------------------------------------------


class LogSink(Protocol[B_contra]):
    def produce(self, batch: B_contra, eid: EpochId) -> Produced:
        """Send every change of ``batch`` with ``eid``'s headers, keyed, in each key's order; flush
        and wait for every delivery; return where each partition's records end after them (Kafka:
        the end offset; Pulsar: the last message id)."""
        ...

    def publish_markers(self, marker: CommitMarker) -> None:
        """Send ``marker`` to every partition of the topic and flush."""
        ...


class TableCommitter(Protocol[B_contra]):
    def committed(self, writer: str, epoch: int) -> Committed | None:
        """The commit of ``(writer, epoch)`` if Delta records it (its txnVersion for the writer is at
        or past ``epoch``); an error when Delta records it but the commit is gone."""
        ...

    def latest(self) -> Committed | None:
        """The table's newest epoch commit, whichever writer made it."""
        ...

    def commit(self, batch: B_contra, eid: EpochId, offsets: Mapping[int, LogPosition]) -> int:
        """Commit ``batch`` idempotently as ``(eid.writer, eid.epoch)`` with ``eid`` and ``offsets``
        in the commit metadata; the version it committed as."""
        ...

    def count(self, batch: B_contra) -> int:
        """The good records of ``batch`` (when no log counted them)."""
        ...

    def mark(self, eid: EpochId, offsets: Mapping[int, LogPosition]) -> int:
        """Commit no data, idempotently, as ``(eid.writer, eid.epoch)`` with ``eid`` and
        ``offsets`` in the commit metadata (a carry's commit); the version it committed as."""
        ...

    def compact(self) -> Compacted:
        """Rewrite the table's small files into fewer (a commit that changes no data, without
        epoch metadata); raises CompactionFailed when it could not (another program's commit won
        the race): the table is as it was."""
        ...


class OutsideWrites(Protocol[B_co]):
    def pending(self) -> OutsidePending | None:
        """The outside writes committed since the last call (the first: since the carried-through
        version); None when there are none."""
        ...

    def changes(self, pending: OutsidePending) -> B_co:
        """The changes of ``pending.commits`` as a batch for the log, in Delta's order; raises
        (OutsideWriteError) when one of them cannot be read (no Change Data Feed)."""
        ...


class Quarantine(Protocol[B_contra]):
    def write(self, batch: B_contra, writer: str, epoch: int) -> int:
        """Keep the malformed records of ``batch`` (a retry of the epoch rewrites the same file);
        how many there were."""
        ...


class LeaseGuard(Protocol):
    def check(self, min_remaining_s: float = 0.0) -> None:
        """Raise (LeaseLostError) unless the table's lease is still ours with more than
        ``min_remaining_s`` seconds left."""
        ...


class SchemaGuard(Protocol):
    def check(self) -> None:
        """Raise unless the table still has the columns the job writes (a column added since the
        job started: it stops, to be started again with them)."""
        ...


def _no_crash(point: str, epoch: int) -> None:
    return None


@dataclass(frozen=True)
class CarryReport:
    """What one carry of outside writes did; the CLI renders it."""

    commits: tuple[OutsideCommit, ...]
    skipped: tuple[OutsideCommit, ...]
    through: int  # the newest Delta version checked: the carry's epoch number
    attempt: str
    log_records: int
    delta_version: int  # the carry's own (empty) commit

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "carried",
            "writer": OUTSIDE_WRITER,
            "epoch": self.through,
            "attempt": self.attempt,
            "commits": [c.to_json() for c in self.commits],
            "skipped": [c.to_json() for c in self.skipped],
            "log_records": self.log_records,
            "delta_version": self.delta_version,
        }


# -- what an epoch did -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochReport:
    """What one epoch did; the CLI renders it (and prints it as a JSON line with --json)."""

    writer: str
    epoch: int
    attempt: str
    rows: int  # good records read
    log_records: int  # change records produced
    quarantined: int
    delta_version: int | None
    offsets: dict[int, LogPosition]  # the topic's end positions after the epoch's records
    republished: bool  # already committed by an earlier attempt: only its markers were sent
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)  # seconds: read, log, delta, markers
    commit_retries: int = 0  # commits lost to a concurrent compaction and made again
    compacted: Compacted | None = None  # the job's own compaction after this epoch
    compaction_failed: str | None = None  # why that compaction did not commit

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "epoch",
            "writer": self.writer,
            "epoch": self.epoch,
            "attempt": self.attempt,
            "rows": self.rows,
            "log_records": self.log_records,
            "quarantined": self.quarantined,
            "delta_version": self.delta_version,
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
            "republished": self.republished,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "phases": {name: round(t, 3) for name, t in self.phases.items()},
            "commit_retries": self.commit_retries,
            "compacted": self.compacted.to_json() if self.compacted else None,
            "compaction_failed": self.compaction_failed,
        }


# -- the protocol ----------------------------------------------------------------------------------


class EpochProtocol(Generic[B]):
    """Writer ``writer``'s protocol over its ports. ``log`` is None when the job writes no log
    (``--emit file``), ``table`` None when it writes no Delta (``--emit log``).

    ``commit_margin_s``: the lease must have more than this left at the commit (a pause longer
    than the margin is the gap a lease without fencing leaves). ``new_attempt`` makes attempt ids:
    a new one for every execution of an epoch. ``outside`` finds the table's outside writes (None:
    none are carried; a job that writes one store only never carries), ``on_carry`` hears of each
    carry. ``schema`` (None: not checked) stops the job at an epoch's start, before it writes
    anything, when the table's columns are no longer the job's.
    """

    def __init__(
        self,
        writer: str,
        *,
        log: LogSink[B] | None,
        table: TableCommitter[B] | None,
        quarantine: Quarantine[B],
        lease: LeaseGuard,
        commit_margin_s: float,
        new_attempt: Callable[[], str],
        crash_point: Callable[[str, int], None] = _no_crash,
        clock: Callable[[], float] = time.monotonic,
        outside: OutsideWrites[B] | None = None,
        on_carry: Callable[[CarryReport], None] = lambda report: None,
        compact_every: int = 0,
        commit_retries: int = COMMIT_RETRIES,
        schema: SchemaGuard | None = None,
    ) -> None:
        if log is None and table is None:
            raise ValueError("an ingest job writes the log, the table or both")
        self.writer = writer
        self.log = log
        self.table = table
        self.quarantine = quarantine
        self.lease = lease
        self.commit_margin_s = commit_margin_s
        self.new_attempt = new_attempt
        self.crash_point = crash_point
        self.clock = clock
        self.outside = outside if log is not None and table is not None else None
        self.on_carry = on_carry
        self.compact_every = compact_every if table is not None else 0
        self.commit_retries = commit_retries
        self.schema = schema
        self._since_compaction = 0
        self._last_attempt: str | None = None
        self._started = False

    def start(self) -> Committed | None:
        """Step 0, the start-up rule: re-publish the markers of the table's latest epoch commit,
        whichever writer made it, before this job produces anything; then carry the outside
        writes not carried yet. Returns that commit."""
        self._started = True
        if self.log is None or self.table is None:
            return None  # no markers to repair: nothing committed with markers, or no commits
        latest = self.table.latest()
        if latest is not None:
            self.log.publish_markers(CommitMarker(latest.epoch, latest.version))
        self._carry()
        return latest

    def run(self, epoch: int, batch: B) -> EpochReport:
        """Steps 1-5 for epoch ``epoch`` (Spark's batch id) of ``batch``."""
        if not self._started:
            raise LogstoreError("an epoch ran before the job's start-up step (EpochProtocol.start)")
        started = mark = self.clock()
        phases: dict[str, float] = {}

        def phase(name: str) -> None:
            nonlocal mark
            now = self.clock()
            phases[name] = phases.get(name, 0.0) + now - mark
            mark = now

        self.lease.check()
        if self.schema is not None:
            self.schema.check()  # before anything of the epoch is written: it runs again
        self._carry()  # outside writes committed since the last epoch go first, in Delta's order
        eid = EpochId(self.writer, epoch, self._attempt())
        quarantined = self.quarantine.write(batch, self.writer, epoch)
        if self.table is not None:
            done = self.table.committed(self.writer, epoch)
            if done is not None:
                if done.epoch.writer != self.writer or done.epoch.epoch != epoch:
                    raise LogstoreError(
                        f"asked for the commit of epoch {epoch} of writer {self.writer}, the "
                        f"table answered epoch {done.epoch.epoch} of writer {done.epoch.writer}"
                    )
                self._publish(CommitMarker(done.epoch, done.version))
                return EpochReport(
                    self.writer, epoch, done.epoch.attempt, 0, 0, quarantined, done.version,
                    dict(done.offsets), True, self.clock() - started,
                )  # fmt: skip
        phase("read")
        self.crash_point("before-log", epoch)
        produced = self.log.produce(batch, eid) if self.log is not None else None
        phase("log")
        self.crash_point("after-log", epoch)
        offsets = dict(produced.offsets) if produced is not None else {}
        version = None
        retries = 0
        rows = produced.rows if produced is not None else 0
        if self.table is not None:
            version, retries = self._commit(self.table, batch, eid, offsets)
            if produced is None:
                rows = self.table.count(batch)
            phase("delta")
        self.crash_point("after-commit", epoch)
        self._publish(CommitMarker(eid, version))
        phase("markers")
        self.crash_point("after-markers", epoch)
        compacted, failed = self._compact()
        if compacted is not None or failed is not None:
            phase("compaction")
        return EpochReport(
            self.writer, epoch, eid.attempt, rows, produced.records if produced else 0,
            quarantined, version, offsets, False, self.clock() - started, phases, retries,
            compacted, failed,
        )  # fmt: skip

    def _commit(
        self, table: TableCommitter[B], batch: B, eid: EpochId, offsets: Mapping[int, LogPosition]
    ) -> tuple[int, int]:
        """Step 4: the lease checked, then the commit; a commit lost to a compaction is made
        again (same attempt: its records are in the log), up to ``commit_retries`` times.
        The version and the number of retries."""
        retries = 0
        while True:
            self.lease.check(self.commit_margin_s)
            self.crash_point("before-commit", eid.epoch)
            try:
                return table.commit(batch, eid, offsets), retries
            except CompactionConflict:
                if retries >= self.commit_retries:
                    raise
                retries += 1

    def _compact(self) -> tuple[Compacted | None, str | None]:
        """Every ``compact_every`` epochs this job committed, after the markers (between
        epochs: the job is the table's one writer, so only another program can race it)."""
        if not self.compact_every or self.table is None:
            return None, None
        self._since_compaction += 1
        if self._since_compaction < self.compact_every:
            return None, None
        self._since_compaction = 0
        self.lease.check()
        try:
            return self.table.compact(), None
        except CompactionFailed as exc:
            return None, exc.message

    def _carry(self) -> CarryReport | None:
        """Carry the outside writes committed since the last look into the log, as epoch
        ``through`` of ``OUTSIDE_WRITER``: produce their changes, check the lease, record the carry
        in Delta (a commit without data: Delta's transaction id for ``OUTSIDE_WRITER`` becomes
        ``through``, so no job carries them again), publish its markers. A crash before the Delta
        commit leaves records no marker releases (the next job carries them again, as a new
        attempt); after it, the start-up rule publishes the markers (the carry is then the table's
        latest epoch commit)."""
        if self.outside is None:
            return None
        assert self.log is not None and self.table is not None
        pending = self.outside.pending()
        if pending is None:
            return None
        carry = EpochId(OUTSIDE_WRITER, pending.through, self._attempt())
        changes = self.outside.changes(pending)
        produced = self.log.produce(changes, carry)
        self.crash_point("carry-after-log", carry.epoch)
        self.lease.check(self.commit_margin_s)
        carried_as = self.table.mark(carry, produced.offsets)
        self.crash_point("carry-after-commit", carry.epoch)
        self._publish(CommitMarker(carry, carried_as))
        report = CarryReport(
            pending.commits, pending.skipped, pending.through, carry.attempt, produced.records,
            carried_as,
        )  # fmt: skip
        self.on_carry(report)
        return report

    def _attempt(self) -> str:
        """A new attempt id: a retry of an epoch with an old attempt's id would let a reader
        release the failed attempt's records with the retry's marker."""
        attempt = self.new_attempt()
        if attempt == self._last_attempt:
            raise LogstoreError(f"the attempt id {attempt} was made twice")
        self._last_attempt = attempt
        return attempt

    def _publish(self, marker: CommitMarker) -> None:
        if self.log is not None:
            self.log.publish_markers(marker)
