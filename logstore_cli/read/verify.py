"""``logstore verify``: the ``committed`` read of the log, folded by key, against the Delta snapshot
of the same epoch (docs/design.md §6.8).

1. ``V``, the newest epoch commit in the Delta log, is read first; then the topic's offsets, so
   the log read covers every record an epoch up to ``V`` wrote, whatever a running writer adds.
2. Each partition is read whole (from its first record, or from where an adopted topic's own
   records ended at adoption: ``logstore.adopted-topic``, Kafka offsets or Pulsar positions)
   through one ``TopicDecider`` at level ``committed``. A commit marker releases its epoch's
   changes, and names the Delta version the epoch committed as: changes of markers naming ``V``
   or an older version are folded; newer ones are not (committed after ``V`` was read); markers
   without a version are log-only epochs (``--emit log``), which Delta does not hold: a note.
3. ``V``'s epoch must have its marker in every partition its commit recorded, and no epoch Delta
   committed may still be held for want of a marker: otherwise its writer crashed between the
   Delta commit and the markers and has not run since, and the result says so (not a difference
   in the data: the next run of an ingest job publishes them).
4. The Delta snapshot at ``V`` is read with delta-rs and folded by key; the two states are
   compared (``fold.compare``).

The log must be whole: a partition whose beginning the topic's retention deleted cannot be folded,
and the result says so. Writes to the Delta table that are not logstore epochs and that no ingest
job has carried into the log yet (``catalog/outside.py``) are named: after ``V`` they make the two
differ by construction (the result's reason: the next ingest carries them); at or before ``V``
they explain the rows that differ (a note).
"""

from __future__ import annotations

import socket
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.catalog.epochs import (
    EpochCommit,
    EpochConfirmer,
    commit_versions,
    epoch_commits,
    fenced_pending,
)
from logstore_cli.catalog.outside import uncarried
from logstore_cli.catalog.tables import StoredTable, StoredTableOn
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.ingest.outside import OutsideCommit, describe_all
from logstore_cli.logformat.consistency import Item, TopicDecider
from logstore_cli.logformat.wire import CommitMarker, RowSchema
from logstore_cli.read.consumer import ReadStats
from logstore_cli.read.fold import EXAMPLES, ArrowRows, Diff, FoldedState, compare

_MARKER_WAIT_STEP_S: Final = 0.2
# Commit files read for outside writes at most (the newest ones): a table that never had a carry
# is checked this far back, not through its whole log.
OUTSIDE_SCAN_LIMIT: Final = 20_000

RowBatches = Callable[[TableLocation, int, list[str]], Iterable[list[dict[str, Any]]]]


class LogRange(Protocol):
    """What verify needs of the topic (``read.consumer.LogSource`` is one)."""

    def partitions(self) -> list[int]: ...

    def watermarks(self) -> dict[int, tuple[int, int]]: ...

    def consume_range(
        self, partition: int, start: int, end: int, stats: ReadStats | None = None
    ) -> Iterator[tuple[int, Item]]: ...


# -- the result ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochRef:
    writer: str
    epoch: int
    attempt: str

    def to_json(self) -> dict[str, Any]:
        return {"writer": self.writer, "epoch": self.epoch, "attempt": self.attempt}


@dataclass
class LogSummary:
    topic: str
    records: int = 0  # change records read
    markers: int = 0  # commit markers read
    skipped: int = 0  # records that are not logstore's (foreign) or break the format (malformed)
    changes: int = 0  # committed changes folded (released by markers naming V or older)
    epochs: int = 0  # epochs folded (their markers name V or an older Delta version)
    # Records no marker released: attempts that never committed (what an eventual read retracts),
    # and records of an epoch that was already resolved.
    dropped: int = 0
    # Markers the Delta log does not confirm (ignored), and the records of the attempts they name
    unconfirmed_markers: int = 0
    unconfirmed_records: int = 0
    partitions: int = 0
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "records": self.records,
            "markers": self.markers,
            "skipped": self.skipped,
            "changes": self.changes,
            "epochs": self.epochs,
            "dropped": self.dropped,
            "unconfirmed": {
                "markers": self.unconfirmed_markers,
                "records": self.unconfirmed_records,
            },
            "partitions": self.partitions,
            "start_offsets": {str(p): o for p, o in sorted(self.start_offsets.items())},
            "end_offsets": {str(p): o for p, o in sorted(self.end_offsets.items())},
        }


@dataclass
class VerifyResult:
    """``equal`` is true when the folded log equals the snapshot. ``reason`` says why the two
    could not be compared (markers not published, the log's beginning deleted, no epoch in Delta
    but committed changes in the log); ``diff`` is None then."""

    table: str
    delta_version: int | None  # V
    latest_version: int  # the Delta table's latest version (V or later)
    epoch: EpochRef | None  # the epoch committed as V
    delta_epochs: int  # epoch commits up to V that wrote the log: what log.epochs should be
    log: LogSummary
    diff: Diff | None = None
    reason: str | None = None
    hint: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    outside: list[OutsideCommit] = field(default_factory=list)  # writes not carried into the log

    @property
    def equal(self) -> bool:
        return self.reason is None and (self.diff is None or self.diff.equal)

    def to_json(self) -> dict[str, Any]:
        def part(name: str) -> dict[str, Any] | None:
            return None if self.diff is None else getattr(self.diff, name).to_json()

        return {
            "table": self.table,
            "equal": self.equal,
            "reason": self.reason,
            "hint": self.hint,
            "delta_version": self.delta_version,
            "latest_version": self.latest_version,
            "epoch": None if self.epoch is None else self.epoch.to_json(),
            "delta": None
            if self.diff is None
            else {"rows": self.diff.delta_rows, "epochs": self.delta_epochs},
            "log": {
                **self.log.to_json(),
                "rows": None if self.diff is None else self.diff.log_rows,
            },
            "missing": part("missing"),
            "extra": part("extra"),
            "different": part("different"),
            "notes": list(self.notes),
            "outside": [c.to_json() for c in self.outside],
            "seconds": round(self.seconds, 3),
        }


# -- reading the log -------------------------------------------------------------------------------


@dataclass
class _Released:
    """What the markers read so far released, by the Delta version they name."""

    kept: int = 0  # changes of markers naming V or older (folded as they come)
    epochs: set[tuple[str, int]] = field(default_factory=set)
    later: set[tuple[str, int]] = field(default_factory=set)  # markers naming a version after V
    log_only: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    # (writer, epoch) -> partition -> attempts its markers named
    markers: dict[tuple[str, int], dict[int, set[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    versions: dict[tuple[str, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    # Markers the Delta log does not confirm (ignored by the decider): (partition, offset, marker)
    unconfirmed: list[tuple[int, int, CommitMarker]] = field(default_factory=list)


class _LogRead:
    """Partitions read through one decider at level ``committed``, each up to an end offset that
    may be moved on (``extend``)."""

    def __init__(
        self, source: LogRange, bound: int | None, schema: RowSchema, table: TableLocation
    ) -> None:
        self.source = source
        self.bound = bound  # V (None: no epoch commit, every versioned marker counts)
        self.state = FoldedState(schema)  # what markers naming V or older released, folded
        # As `logstore read` does: a marker releases only what the Delta log confirms.
        self.decider = TopicDecider("committed", confirm=EpochConfirmer(table))
        self.table = table
        self.released = _Released()
        self.position: dict[int, int] = {}
        self.stats = ReadStats()

    def read(self, partition: int, start: int, end: int) -> None:
        released = self.released
        stats = self.decider.partition(partition).stats
        for offset, item in self.source.consume_range(partition, start, end, self.stats):
            refuted = stats.unconfirmed_markers
            emissions = self.decider.feed(partition, offset, item)
            # At level committed only a marker releases anything: its epoch's records.
            if not isinstance(item, CommitMarker):
                continue
            if stats.unconfirmed_markers != refuted:
                released.unconfirmed.append((partition, offset, item))
                continue
            eid = (item.epoch.writer, item.epoch.epoch)
            released.markers[eid][partition].add(item.epoch.attempt)
            version = item.delta_version
            if version is None:
                released.log_only[eid] += len(emissions)
            elif self.bound is None or version <= self.bound:
                released.versions[eid].add(version)
                released.epochs.add(eid)
                released.kept += len(emissions)
                for emission in emissions:
                    self.state.apply(emission.kind, emission.row)
            else:
                released.later.add(eid)
        self.position[partition] = max(self.position.get(partition, start), end)


def _adopted_offsets(stored: StoredTable | StoredTableOn) -> dict[int, int]:
    """The positions an adopted topic's own records ended at when the table took it over (its
    records before them are not logstore's; ``warehouse.adopted_positions``); empty when the
    topic was not adopted."""
    return wh.adopted_positions(stored.state.properties)


def _read_from(low: int, high: int, adopted: int) -> int:
    """Where a partition holding ``[low, high)`` is read from: the adoption point when it holds
    it (records before it are another producer's, even ones that look like logstore's: a dropped
    table's left in the topic), else its first record (``adopted`` past the end: the topic is no
    longer the one adopted)."""
    return max(low, adopted) if adopted <= high else low


# -- verify ----------------------------------------------------------------------------------------


def verify_table(
    stored: StoredTable | StoredTableOn,
    source: LogRange,
    *,
    examples: int = EXAMPLES,
    snapshot: RowBatches | None = None,
    writer_live: Callable[[], bool] = lambda: False,
    marker_wait_s: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    unknown_start: str | None = None,
    record_at: Callable[[int], str] = lambda offset: f"offset {offset}",
) -> VerifyResult:
    """Compare the table's ``committed`` log with its Delta snapshot at the newest epoch commit.

    ``unknown_start``: the log's positions cannot tell whether retention deleted a partition's
    first records (Pulsar's message ids are not dense): each partition is read from the first
    record held, and this note is added to the result instead of the check.

    ``record_at`` names a record's position in the result's text (Pulsar's: its message id).

    ``snapshot`` reads the Delta rows (``catalog.snapshot.snapshot_batches`` by default);
    ``writer_live`` says whether a writer holds the table's lease now: if so, markers of ``V``
    not in the log yet are waited for, up to ``marker_wait_s``.
    """
    began = clock()
    spec = stored.spec
    if spec.log_store is None:
        raise InvalidInputError(
            f"table {stored.ref.name} has no log store to verify",
            hint="verify compares a table's log with its Delta table; this one writes Delta only",
        )
    path = location(stored)
    schema = RowSchema.of(spec)
    # Step 1: V first, then the log's offsets (see the module's docstring).
    commits = list(epoch_commits(path))
    versions = commit_versions(path)  # newest first
    latest = versions[0] if versions else stored.state.version
    at = commits[0] if commits else None
    bound = None if at is None else at.version
    result = VerifyResult(
        table=stored.ref.name,
        delta_version=bound,
        latest_version=latest,
        epoch=None if at is None else EpochRef(at.epoch.writer, at.epoch.epoch, at.epoch.attempt),
        delta_epochs=sum(1 for c in commits if c.offsets and (bound is None or c.version <= bound)),
        log=LogSummary(spec.log_store.topic),
    )

    def done() -> VerifyResult:
        result.seconds = clock() - began
        return result

    marks = source.watermarks()
    adopted = _adopted_offsets(stored)
    summary = result.log
    summary.partitions = len(marks)
    summary.start_offsets = {p: low for p, (low, _) in marks.items()}
    summary.end_offsets = {p: high for p, (_, high) in marks.items()}
    lost = {p: low for p, (low, _) in sorted(marks.items()) if low > adopted.get(p, 0)}
    if unknown_start is not None:
        lost = {}
        # Retention deletes from a partition's start: one that still holds a record from before
        # the adoption point holds every record of the table's.
        if any(not low < adopted.get(p, 0) for p, (low, _) in marks.items()):
            result.notes.append(unknown_start)
    if lost:
        where = ", ".join(
            f"[{adopted.get(p, 0)}, {low}) of partition {p}" for p, low in lost.items()
        )
        result.reason = (
            f"the log no longer holds offsets {where} (deleted by the topic's retention): verify "
            "needs the whole log"
        )
        result.hint = (
            "a topic whose retention deletes records cannot be verified; give it "
            "log.topic.retention.ms = -1 (alter-table --set) if verify matters for this table"
        )
        return done()
    short = {p: end for p, end in sorted((at.offsets if at else {}).items())
             if p in marks and marks[p][1] < end}  # fmt: skip
    if at is not None and short:
        where = ", ".join(
            f"partition {p} ends at offset {marks[p][1]}, before {end}" for p, end in short.items()
        )
        result.reason = (
            f"the topic holds fewer records than epoch {at.epoch.epoch} of writer "
            f"{at.epoch.writer} (Delta version {at.version}) recorded: {where}; the topic was "
            "deleted and created again, or its records deleted"
        )
        result.hint = (
            "the log cannot be compared with this table any more; drop the table with "
            "--delete-topic and create it again to start over"
        )
        return done()

    # Step 2: the log, partition by partition.
    log_read = _LogRead(source, bound, schema, path)
    for p, (low, high) in sorted(marks.items()):
        log_read.read(p, _read_from(low, high, adopted.get(p, 0)), high)

    # Step 3: V's markers (a live writer's may be on their way), and epochs Delta committed that
    # the log still holds back.
    missing = [] if at is None else _missing_markers(at, log_read)
    if at is not None and missing and writer_live():
        deadline = clock() + marker_wait_s
        while missing and clock() < deadline:
            _extend(source, log_read, missing)
            missing = _missing_markers(at, log_read)
            if missing:
                time.sleep(_MARKER_WAIT_STEP_S)  # polled until the deadline
    committed = {(c.epoch.writer, c.epoch.epoch): c for c in commits}
    _read_notes(result, log_read, committed)

    def finish() -> VerifyResult:
        _unconfirmed_reason(result, log_read, commits, summary.topic, record_at)
        return done()

    if _outside_writes(result, path, bound, versions, stored.ref.name):
        return finish()
    if at is None:
        return _without_epoch(result, log_read.released, finish)
    held = _held_committed_epochs(log_read.decider, committed)
    if missing or held:
        result.reason = _markers_reason(at, missing, held)
        result.hint = (
            "run the ingest job again (same --job/--checkpoint): it publishes the markers of the "
            "table's latest epoch commit before anything else; any ingest of the table does"
        )
        return finish()
    _protocol_notes(result, log_read.released, committed, commits, versions[-1] if versions else 0)

    # Step 4: both sides folded, and compared.
    log_state = log_read.state
    if log_state.stats.absent_removals:
        result.notes.append(
            f"{log_state.stats.absent_removals} committed removals (-U/-D) in the log concern "
            "keys (rows) that were not there (Delta's MERGE ignores them too)"
        )
    delta_state = FoldedState(schema)
    to_python = ArrowRows(schema)
    read_rows = snapshot if snapshot is not None else _snapshot_batches
    for batch in read_rows(path, at.version, list(schema.names)):
        for row in batch:
            delta_state.add(to_python(row))
    if delta_state.duplicate_keys:
        result.notes.append(
            f"the Delta snapshot holds {delta_state.duplicate_keys} keys more than once (counted "
            "as different)"
        )
    result.diff = compare(delta_state, log_state, examples=examples)
    return finish()


def location(stored: StoredTable | StoredTableOn) -> TableLocation:
    """Where the table's Delta log and lease are read: its directory, or its ``Storage``."""
    return stored.ref.storage if isinstance(stored, StoredTableOn) else stored.ref.path


def writer_running(table: TableLocation) -> bool:
    """Whether a job holds the table's lease now: unexpired, and its process not known to have
    exited (a holder on another host is taken to run)."""
    from logstore_cli.catalog.lease import local_holder_dead, read_lease

    try:
        if isinstance(table, Path):
            info = read_lease(table)
        else:
            from logstore_cli.catalog.storage_lease import read_lease_on

            info = read_lease_on(table)
    except LogstoreError:
        return False  # an unreadable lease: no writer can prove it holds the table
    if info is None or info.expired(time.time()):
        return False
    return info.host != socket.gethostname() or not local_holder_dead(info)


def _snapshot_batches(
    path: TableLocation, version: int, columns: list[str]
) -> Iterable[list[dict[str, Any]]]:
    from logstore_cli.catalog.snapshot import snapshot_batches

    return snapshot_batches(path, version, columns)


def _read_notes(
    result: VerifyResult, log_read: _LogRead, committed: Mapping[tuple[str, int], EpochCommit]
) -> None:
    """The log read's counts, and what it skipped or held back."""
    summary, stats, released = result.log, log_read.stats, log_read.released
    summary.records, summary.markers = stats.records, stats.markers
    summary.skipped = stats.foreign + stats.malformed
    summary.end_offsets.update(log_read.position)  # moved on while waiting for markers
    summary.epochs, summary.changes = len(released.epochs), released.kept
    summary.dropped = sum(log_read.decider.partition(p).stats.dropped for p in log_read.position)
    summary.unconfirmed_markers = len(released.unconfirmed)
    summary.unconfirmed_records = log_read.decider.stats().unconfirmed_records
    if stats.foreign:
        result.notes.append(
            f"{stats.foreign} records without logstore headers (another producer's) were skipped"
        )
    if stats.malformed:
        result.notes.append(
            f"{stats.malformed} malformed records (they break wire format 1) were skipped: see the "
            "warning for the first one's partition and offset"
        )
    forged = {(m.epoch.writer, m.epoch.epoch) for _, _, m in released.unconfirmed}
    open_ = [
        e
        for pending in log_read.decider.pending().values()
        for e in pending
        if (e.writer, e.epoch) not in committed and (e.writer, e.epoch) not in forged
    ]
    fenced = fenced_pending(log_read.table, open_) if open_ else []
    if fenced:
        open_ = [e for e in open_ if e not in fenced]
        writers = sorted({e.writer for e in fenced})
        result.notes.append(
            f"{sum(e.records for e in fenced)} records of {len({(e.writer, e.epoch) for e in fenced})}"
            f" fenced epochs (writers {', '.join(writers)}: another job took the table over "
            "before their commit) were not compared; they are never released"
        )
    if open_:
        epochs = {(e.writer, e.epoch) for e in open_}
        result.notes.append(
            f"{sum(e.records for e in open_)} records of {len(epochs)} epochs without a commit "
            "marker (in flight, or an attempt that never committed) were not compared"
        )
    _log_only_note(result, released)


def _outside_writes(
    result: VerifyResult,
    path: TableLocation,
    bound: int | None,
    versions: list[int],
    table: str,
) -> bool:
    """Name the writes not carried into the log; True when some came after ``V`` (the log
    cannot hold them yet: the two cannot be equal, and the reason says why)."""
    found = uncarried(path, limit=OUTSIDE_SCAN_LIMIT, versions=versions)  # listed at step 1
    result.outside = list(found.commits)
    if found.unchecked:
        result.notes.append(
            f"the oldest {found.unchecked} commits not carried were not checked for writes made "
            f"outside logstore (verify reads the newest {OUTSIDE_SCAN_LIMIT})"
        )
    before = [c for c in found.commits if bound is not None and c.version <= bound]
    after = [c for c in found.commits if bound is None or c.version > bound]
    if before:
        result.notes.append(
            f"written outside logstore and never carried into the log: {describe_all(before)} "
            "(the rows they changed differ)"
        )
    if not after:
        return False
    result.reason = (
        f"the Delta table holds writes made outside logstore that the log does not: "
        f"{describe_all(after)}"
    )
    result.hint = (
        f"the next `logstore ingest {table}` carries them into the log (from Delta's Change "
        "Data Feed) before its first epoch; then verify again"
    )
    return True


def _without_epoch(
    result: VerifyResult, released: _Released, done: Callable[[], VerifyResult]
) -> VerifyResult:
    """No epoch commit in the Delta log: there is nothing to compare with, which is fine as long
    as the log holds no change committed to Delta either."""
    if released.kept:
        versions = sorted({v for vs in released.versions.values() for v in vs})
        result.reason = (
            f"the log holds {released.kept} changes of {len(released.epochs)} epochs whose "
            f"markers name Delta versions {_listed(versions)}, but the Delta log records no "
            "ingest epoch"
        )
        result.hint = (
            "the Delta table was re-created, or its commits were removed, after the log was "
            "written; drop the table with --delete-topic and create it again to start over"
        )
    else:
        result.notes.append("no ingest epoch committed to Delta yet: nothing to verify against")
    return done()


def _missing_markers(at: EpochCommit, log_read: _LogRead) -> list[int]:
    """The partitions ``at``'s commit recorded that hold no marker of its epoch."""
    seen = log_read.released.markers.get((at.epoch.writer, at.epoch.epoch), {})
    return sorted(p for p in at.offsets if p not in seen)


def _extend(source: LogRange, log_read: _LogRead, partitions: list[int]) -> None:
    """Read ``partitions`` on to their end offsets now."""
    marks = source.watermarks()
    for p in partitions:
        high = marks.get(p, (0, 0))[1]
        start = log_read.position.get(p, 0)
        if high > start:
            log_read.read(p, start, high)


def _held_committed_epochs(
    decider: TopicDecider, committed: Mapping[tuple[str, int], EpochCommit]
) -> dict[tuple[str, int], list[int]]:
    """Epochs Delta committed whose records the log still holds back, with their partitions."""
    held: dict[tuple[str, int], list[int]] = defaultdict(list)
    for partition, pending in decider.pending().items():
        for epoch in pending:
            if (epoch.writer, epoch.epoch) in committed:
                held[(epoch.writer, epoch.epoch)].append(partition)
    return dict(held)


def _markers_reason(
    at: EpochCommit, missing: list[int], held: Mapping[tuple[str, int], list[int]]
) -> str:
    parts = []
    if missing:
        parts.append(
            f"epoch {at.epoch.epoch} of writer {at.epoch.writer} committed as Delta version "
            f"{at.version} but its commit markers are not in partitions {_listed(missing)}"
        )
    for (writer, epoch), partitions in sorted(held.items()):
        if (writer, epoch) == (at.epoch.writer, at.epoch.epoch) and missing:
            continue  # said above
        parts.append(
            f"epoch {epoch} of writer {writer} is committed in Delta but its records in "
            f"partitions {_listed(sorted(partitions))} have no commit marker"
        )
    return "; ".join(parts) + ": run the ingest job again (same --job/--checkpoint) to publish them"


def _protocol_notes(
    result: VerifyResult,
    released: _Released,
    committed: Mapping[tuple[str, int], EpochCommit],
    commits: list[EpochCommit],
    oldest: int,
) -> None:
    """What the markers say that Delta does not agree with (notes: the data decides equality).
    ``oldest`` is the oldest version whose commit file the Delta log still holds."""
    if released.later:
        result.notes.append(
            f"{len(released.later)} epochs committed after Delta version {result.delta_version} "
            "(while verify ran) were not compared"
        )
    by_version = {c.version: c for c in commits}
    wrong: list[str] = []
    for eid, versions in sorted(released.versions.items()):
        commit = committed.get(eid)
        for version in sorted(versions):
            owner = by_version.get(version)
            if commit is not None and commit.version == version:
                attempts = {a for p in released.markers[eid].values() for a in p}
                if attempts != {commit.epoch.attempt}:
                    wrong.append(
                        f"markers of epoch {eid[1]} of writer {eid[0]} name attempts "
                        f"{_listed(sorted(attempts))}, Delta committed {commit.epoch.attempt}"
                    )
            elif version >= oldest:
                who = (
                    "no ingest epoch"
                    if owner is None
                    else f"epoch {owner.epoch.epoch} of writer {owner.epoch.writer}"
                )
                wrong.append(
                    f"a marker of epoch {eid[1]} of writer {eid[0]} names Delta version "
                    f"{version}, which holds {who}"
                )
    result.notes += [f"protocol: {w}" for w in wrong]
    without_log = [c.version for c in commits if not c.offsets]
    if without_log:
        result.notes.append(
            f"{len(without_log)} epochs were committed to Delta without writing the log (--emit "
            f"file, or before the log store was on): Delta versions {_listed(sorted(without_log))}"
        )
    if result.latest_version > (result.delta_version or 0):
        result.notes.append(
            f"the Delta table's latest version is {result.latest_version}; versions after "
            f"{result.delta_version} are not ingest epochs (or came while verify ran): compared "
            f"at {result.delta_version}"
        )


def _unconfirmed_reason(
    result: VerifyResult,
    log_read: _LogRead,
    commits: list[EpochCommit],
    topic: str,
    record_at: Callable[[int], str],
) -> None:
    """Markers the Delta log does not confirm make the result unequal, whatever the data says:
    something other than the table's ingest jobs writes to its topic."""
    found = log_read.released.unconfirmed
    if not found:
        return
    by_version = {c.version: c for c in commits}
    examples = []
    for partition, offset, marker in found[:EXAMPLES]:
        eid, version = marker.epoch, marker.delta_version
        owner = by_version.get(version) if version is not None else None
        holds = (
            f"epoch {owner.epoch.epoch} of writer {owner.epoch.writer} attempt "
            f"{owner.epoch.attempt}"
            if owner is not None
            else "no ingest epoch"
        )
        examples.append(
            f"partition {partition} {record_at(offset)}: epoch {eid.epoch} of writer {eid.writer} "
            f"attempt {eid.attempt} as Delta version {version}, which holds {holds}"
        )
    more = f" (and {len(found) - len(examples)} more)" if len(found) > len(examples) else ""
    records = result.log.unconfirmed_records
    reason = (
        f"{len(found)} commit markers in topic {topic} are not confirmed by the Delta log: "
        f"{'; '.join(examples)}{more}. They were ignored ({records} records of the attempts they "
        "name were not folded); something other than this table's ingest jobs wrote them, or "
        "the Delta table was created again after they were written"
    )
    result.reason = reason if result.reason is None else f"{result.reason}; and {reason}"
    result.hint = (
        f"readers ignore these markers at every level; find who can write to topic {topic} and "
        "allow only the ingest job's Kafka principal (ACLs); drop the table with --delete-topic "
        "and create it again for a clean log"
        + ("" if result.hint is None else f". Also: {result.hint}")
    )


def _log_only_note(result: VerifyResult, released: _Released) -> None:
    if released.log_only:
        changes = sum(released.log_only.values())
        result.notes.append(
            f"{len(released.log_only)} log-only epochs (--emit log: markers without a Delta "
            f"version) with {changes} changes are in the log, not in Delta: not compared"
        )


def _listed(values: Iterable[object]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"
