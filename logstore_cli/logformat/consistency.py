"""What a log reader emits, per partition, at each read level (docs/design.md §6.4).

Pure: no I/O; the standard library and ``logstore_cli.errors`` only. Every reader of the log (the Spark job, a plain Kafka consumer, the
verifier) feeds a partition's records and commit markers in offset order to one
``PartitionDecider`` and emits what it returns. The rules, and the edge cases they settle, are
written up in the design's "Decision rules in detail"; in short:

- ``committed``: the records of an epoch ``(W, N)`` are held until its marker, then those of the
  attempt the marker names are emitted in offset order and the rest dropped.
- ``eventual``: records are emitted at once; when an attempt turns out to have failed (a record of
  another attempt of its epoch, a marker naming another attempt, or a marker of a later epoch of
  the same writer), what it emitted is retracted, newest first (the reversed row kind).
- ``none``: every change record is emitted at once, markers are not data.

A writer's epochs are sequential (Spark runs batch ``N+1`` only after batch ``N``'s markers are
flushed), so a real writer has one open epoch at a time, and a marker of epoch ``N`` fails the
writer's open epochs below ``N``; the highest epoch a marker resolved is kept per writer
(``committed_through``) so that repeated markers and late records are recognised. Open epochs are
kept per writer *and* epoch: a record is no proof (anyone may produce one), so a record of another
epoch never closes an open one; only a confirmed marker does.

Markers are not trusted blindly: anyone who can write to the topic can produce one. A reader
that can check them passes ``confirm`` (a marker -> bool, e.g. ``catalog.epochs.EpochConfirmer``,
which asks the Delta log); a marker it refutes is ignored at every level, counted in the stats: it
releases nothing, closes no epoch and does not advance ``committed_through`` (docs/consistency.md
§10, "What a reader trusts"). The decider stays pure: the check is injected.

A decider's ``state()`` is a JSON value that ``restore`` turns back into a decider which continues
exactly as the saved one would have; ``resume_point()`` is the small alternative without records
(an offset to re-read from, plus ``committed_through``).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Literal, NamedTuple, TypeAlias, TypeGuard, cast

from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.logformat.wire import ChangeRecord, CommitMarker, EpochId, RowKind

Level: TypeAlias = Literal["committed", "eventual", "none"]
LEVELS: Final[tuple[Level, ...]] = ("committed", "eventual", "none")
Item: TypeAlias = ChangeRecord | CommitMarker
#: Whether a marker is confirmed (by the Delta log): an unconfirmed one is ignored and counted.
Confirm: TypeAlias = Callable[[CommitMarker], bool]

STATE_FORMAT: Final = 1  # the version of state() and ResumePoint.to_json(); restore refuses others
_STATE_HINT = (
    "The saved reader state is damaged or was written by another logstore version: delete it, and "
    "the reader starts over from its configured start position."
)


class DeciderStateError(LogstoreError):
    """A saved decider state (or resume point) that cannot be restored."""

    def __init__(self, message: str) -> None:
        super().__init__(f"cannot restore the reader's state: {message}", hint=_STATE_HINT)


class Emission(NamedTuple):
    """One change to emit: ``record`` with ``kind``, its reversed kind when it is a retraction.

    ``offset`` is the source record's offset (for a retraction: of the record it retracts).
    A named tuple for the speed of building one per record (see ``ChangeRecord``).
    """

    offset: int
    kind: RowKind
    record: ChangeRecord

    @property
    def retraction(self) -> bool:
        return self.kind is not self.record.kind

    @property
    def key(self) -> Mapping[str, Any] | None:
        return self.record.key

    @property
    def row(self) -> Mapping[str, Any]:
        return self.record.row


@dataclass(frozen=True, slots=True)
class PendingEpoch:
    """An epoch whose records are held (``committed``) or may still be retracted (``eventual``).

    For status and lag reports: the first offset is where a reader without saved state re-reads
    from. An epoch pending long after its writer stopped is a job that died mid-epoch and did not
    run again with its checkpoint (see the design's decision rules).
    """

    writer: str
    epoch: int
    attempts: tuple[str, ...]  # in order of appearance
    records: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a reader without saved records resumes (``PartitionDecider.resume``).

    Re-read the partition from ``offset``; output for offsets below ``position`` was already
    delivered and is not repeated. ``committed_through`` (the highest resolved epoch per writer)
    keeps epochs resolved after ``offset`` from being emitted again. ``offset`` is None when nothing
    was read (start where the reader is configured to start).
    """

    offset: int | None
    position: int | None
    committed_through: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "offset": self.offset,
            "position": self.position,
            "committed_through": dict(self.committed_through),
        }

    @classmethod
    def from_json(cls, data: Any) -> ResumePoint:
        obj = _object(data, "resume point")
        _check_format(obj, "resume point")
        offset = _opt_int(obj, "offset", "resume point")
        position = _opt_int(obj, "position", "resume point")
        if (offset is None) != (position is None) or (
            offset is not None and position is not None and offset > position
        ):
            raise DeciderStateError(
                f"resume point: offset {offset} and position {position} do not fit together"
            )
        return cls(offset, position, _through(obj, "resume point"))


@dataclass(slots=True)
class DeciderStats:
    """What a decider saw and did, for status reports (saved and restored with its state)."""

    records: int = 0  # change records read
    markers: int = 0  # commit markers read
    emitted: int = 0  # emissions returned, retractions included
    retracted: int = 0  # of which retractions
    dropped: int = 0  # records never emitted: failed attempts (committed), late or skipped records
    repeated_markers: int = 0  # markers of an epoch already resolved (no-ops)
    replayed: int = 0  # items at an offset already processed (ignored)
    # Markers ``confirm`` refuted (ignored), and the records of the attempts they named that were
    # held or standing then (they stay unreleased: pending at committed).
    unconfirmed_markers: int = 0
    unconfirmed_records: int = 0


class _Open:
    """The open epoch of one writer: its records of every attempt, in offset order."""

    __slots__ = ("epoch", "records")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.records: list[tuple[int, ChangeRecord]] = []

    def standing(self) -> list[tuple[int, ChangeRecord]]:
        """What an ``eventual`` reader emitted and has not retracted: the trailing run of the
        newest attempt (a switch of attempt retracts everything before it)."""
        if not self.records:
            return []
        current = self.records[-1][1].epoch.attempt
        start = len(self.records)
        while start > 0 and self.records[start - 1][1].epoch.attempt == current:
            start -= 1
        return self.records[start:]


def check_level(level: str) -> Level:
    """``level`` as a read level (a ``Consistency`` value or its text), or a clear error."""
    text = str(level)
    if text not in LEVELS:
        raise InvalidInputError(
            f"unknown consistency level {text!r}", hint=f"use one of: {', '.join(LEVELS)}"
        )
    return text


class PartitionDecider:
    """The read decision for one partition at one level: ``feed`` it every record and marker in
    offset order and emit what it returns.

    ``committed_through`` (writer -> epoch) marks epochs as already resolved before the first item:
    a hybrid read (design §6.5) passes the epochs its Delta snapshot holds, and they are skipped at
    every level. ``confirm`` checks each marker that would resolve an epoch (see the module).
    """

    def __init__(
        self,
        level: str,
        *,
        committed_through: Mapping[str, int] | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        self._level: Level = check_level(level)
        self._confirm = confirm
        self._through: dict[str, int] = dict(committed_through or {})
        # By (writer, epoch): a real writer has one at a time; a forged record may add another.
        self._open: dict[tuple[str, int], _Open] = {}
        self._next: int | None = None  # offsets below were processed
        self._replay_until: int | None = None  # output below this offset was delivered already
        self._resume_from: int | None = None  # a resumed decider's first offset, when it matters
        self.stats = DeciderStats()

    # -- reading ---------------------------------------------------------------------------------

    @property
    def level(self) -> Level:
        return self._level

    def feed(self, offset: int, item: Item) -> list[Emission]:
        """Decide on the item at ``offset``: what to emit now, in order.

        An offset below ``position`` was processed before (a consumer re-delivering records after
        a restore) and is ignored.
        """
        # The common case, once per record: a record of the open epoch of its writer (committed)
        # or of an unresolved one (none), nothing to replay or rebuild. It does what the general
        # path below does, in a fraction of the time.
        if (
            type(item) is ChangeRecord
            and self._resume_from is None
            and self._replay_until is None
            and (self._next is None or offset >= self._next)
            and item.kind is not RowKind.COMMIT
        ):
            if self._level == "committed":
                epoch = item.epoch
                open_ = self._open.get((epoch.writer, epoch.epoch))
                through = self._through.get(epoch.writer)  # _resolved(), inline
                if open_ is not None and (through is None or epoch.epoch > through):
                    self._next = offset + 1
                    self.stats.records += 1
                    open_.records.append((offset, item))
                    return []
            elif self._level == "none" and not self._resolved(item.epoch):
                self._next = offset + 1
                self.stats.records += 1
                self.stats.emitted += 1
                return [_emission(Emission, (offset, item.kind, item))]
        if isinstance(item, ChangeRecord):
            if item.kind is RowKind.COMMIT:
                raise ValueError(f"offset {offset}: a change record cannot have kind COMMIT")
        elif not isinstance(item, CommitMarker):
            raise TypeError(f"offset {offset}: expected a ChangeRecord or a CommitMarker")
        if self._next is not None and offset < self._next:
            self.stats.replayed += 1
            return []
        if self._resume_from is not None and offset > self._resume_from:
            raise DeciderStateError(
                f"it needs the partition from offset {self._resume_from} to rebuild the epochs "
                f"still open, but the first record read is at offset {offset} (were the records "
                "deleted by the topic's retention?)"
            )
        self._resume_from = None
        self._next = offset + 1
        if isinstance(item, CommitMarker):
            self.stats.markers += 1
            out = self._on_marker(item)
        else:
            self.stats.records += 1
            out = self._on_record(offset, item)
        if self._replay_until is not None:
            if offset < self._replay_until:
                return []
            self._replay_until = None
        if out:
            self.stats.emitted += len(out)
            if self._level == "eventual":  # only eventual retracts
                self.stats.retracted += sum(1 for e in out if e.retraction)
        return out

    def _resolved(self, epoch: EpochId) -> bool:
        through = self._through.get(epoch.writer)
        return through is not None and epoch.epoch <= through

    def _on_record(self, offset: int, record: ChangeRecord) -> list[Emission]:
        epoch = record.epoch
        if self._resolved(epoch):
            self.stats.dropped += 1  # late: its epoch is resolved (or in the hybrid snapshot)
            return []
        if self._level == "none":
            return [Emission(offset, record.kind, record)]
        retract: list[tuple[int, ChangeRecord]] = []
        ref = (epoch.writer, epoch.epoch)
        open_ = self._open.get(ref)
        if open_ is None:
            # A record of another epoch of the writer does not close its open one: a record
            # proves nothing (a forged one would drop a real epoch); the next marker decides.
            open_ = self._open[ref] = _Open(epoch.epoch)
        if self._level == "committed":
            open_.records.append((offset, record))
            return []
        records = open_.records
        if records and records[-1][1].epoch.attempt != epoch.attempt:
            retract += open_.standing()  # a new attempt: the one emitted so far failed
        records.append((offset, record))
        return [*_retractions(retract), Emission(offset, record.kind, record)]

    def _on_marker(self, marker: CommitMarker) -> list[Emission]:
        epoch = marker.epoch
        if self._level == "none":
            return []
        if self._resolved(epoch):
            self.stats.repeated_markers += 1
            return []
        if self._confirm is not None and not self._confirm(marker):
            # Forged, or another table's: it must neither release records nor close (or skip) a
            # real writer's epochs. Its attempt's records stay held (committed) or standing.
            self.stats.unconfirmed_markers += 1
            open_ = self._open.get((epoch.writer, epoch.epoch))
            if open_ is not None:
                self.stats.unconfirmed_records += sum(
                    1 for _, r in open_.records if r.epoch.attempt == epoch.attempt
                )
            return []
        self._through[epoch.writer] = epoch.epoch
        # The writer's open epochs below this one can no longer commit: they failed.
        failed: list[tuple[int, ChangeRecord]] = []
        for ref in [r for r in self._open if r[0] == epoch.writer and r[1] < epoch.epoch]:
            failed += self._fail(self._open.pop(ref))
        open_ = self._open.pop((epoch.writer, epoch.epoch), None)
        if open_ is None:
            return _retractions(failed)  # the committed attempt wrote nothing to this partition
        attempt = epoch.attempt
        if self._level == "committed":
            out = [_emission(Emission, (o, r.kind, r)) for o, r in open_.records
                   if r.epoch.attempt == attempt]  # fmt: skip
            self.stats.dropped += len(open_.records) - len(out)
            return out
        ours = [(o, r) for o, r in open_.records if r.epoch.attempt == attempt]
        standing = open_.standing()
        if standing and standing[-1][1].epoch.attempt != epoch.attempt:
            # The committed attempt was retracted (a later attempt followed it): put it back.
            failed += standing
            return [*_retractions(failed), *(Emission(o, r.kind, r) for o, r in ours)]
        kept = {o for o, _ in standing}
        return [*_retractions(failed), *(Emission(o, r.kind, r) for o, r in ours if o not in kept)]

    def _fail(self, open_: _Open) -> list[tuple[int, ChangeRecord]]:
        """An epoch closed that can no longer commit: what ``eventual`` must retract of it."""
        if self._level == "committed":
            self.stats.dropped += len(open_.records)
            return []
        return open_.standing()

    # -- status and resumption -------------------------------------------------------------------

    @property
    def position(self) -> int | None:
        """The offset after the last one processed or delivered (None before the first item)."""
        known = [o for o in (self._next, self._replay_until) if o is not None]
        return max(known) if known else None

    @property
    def committed_through(self) -> dict[str, int]:
        """Per writer, the highest epoch resolved (committed, or given at start)."""
        return dict(self._through)

    def pending(self) -> list[PendingEpoch]:
        """The open epochs, oldest first."""
        result = []
        for (writer, _), open_ in self._open.items():
            attempts = tuple(dict.fromkeys(r.epoch.attempt for _, r in open_.records))
            first, last = open_.records[0][0], open_.records[-1][0]
            result.append(
                PendingEpoch(writer, open_.epoch, attempts, len(open_.records), first, last)
            )
        return sorted(result, key=lambda p: p.first_offset)

    @property
    def resume_offset(self) -> int | None:
        """The smallest offset that must be read again to rebuild the open epochs: the first offset
        of the oldest one, else ``position``."""
        if self._resume_from is not None:
            return self._resume_from  # resumed, and nothing read yet
        firsts = [open_.records[0][0] for open_ in self._open.values()]
        return min(firsts) if firsts else self.position

    def resume_point(self) -> ResumePoint:
        return ResumePoint(self.resume_offset, self.position, self.committed_through)

    @classmethod
    def resume(
        cls, level: str, point: ResumePoint, *, confirm: Confirm | None = None
    ) -> PartitionDecider:
        """A decider that continues from ``point``: feed it the partition from ``point.offset``.

        Its output is exactly what the decider that made ``point`` would have gone on to emit
        (items below ``point.position`` only rebuild the open epochs).
        """
        decider = cls(level, committed_through=point.committed_through, confirm=confirm)
        decider._replay_until = point.position
        if point.offset is not None and point.offset != point.position:
            decider._resume_from = point.offset  # a record of an open epoch: it must be read again
        return decider

    # -- saved state -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON value (``json.dumps`` takes it as is) that ``restore`` continues from."""
        return {
            "format": STATE_FORMAT,
            "level": self._level,
            "next_offset": self._next,
            "replay_until": self._replay_until,
            "resume_from": self._resume_from,
            "committed_through": dict(self._through),
            "open": [
                {
                    "writer": writer,
                    "epoch": open_.epoch,
                    "records": [
                        {
                            "offset": offset,
                            "attempt": record.epoch.attempt,
                            "kind": record.kind.value,
                            "key": None if record.key is None else _to_json(record.key),
                            "row": _to_json(record.row),
                        }
                        for offset, record in open_.records
                    ],
                }
                for (writer, _), open_ in self._open.items()
            ],
            "stats": asdict(self.stats),
        }

    @classmethod
    def restore(cls, snapshot: Any, *, confirm: Confirm | None = None) -> PartitionDecider:
        """The decider ``state()`` saved. Raises ``DeciderStateError`` for a damaged snapshot."""
        obj = _object(snapshot, "state")
        _check_format(obj, "state")
        level = _level(obj)
        decider = cls(level, committed_through=_through(obj, "state"), confirm=confirm)
        decider._next = _opt_int(obj, "next_offset", "state")
        decider._replay_until = _opt_int(obj, "replay_until", "state")
        decider._resume_from = _opt_int(obj, "resume_from", "state")
        opens = obj.get("open")
        if not isinstance(opens, list) or (opens and (level == "none" or decider._next is None)):
            raise DeciderStateError(
                "state.open: expected a list, empty at level none or before the first offset"
            )
        for i, entry in enumerate(opens):
            open_ = _restore_open(entry, f"state.open[{i}]", decider._next)
            writer = open_.records[0][1].epoch.writer
            ref = (writer, open_.epoch)
            if ref in decider._open or decider._resolved(open_.records[0][1].epoch):
                raise DeciderStateError(
                    f"state.open[{i}]: writer {writer!r} epoch {open_.epoch} is open twice or "
                    "already resolved"
                )
            decider._open[ref] = open_
        decider.stats = _restore_stats(obj.get("stats"))
        return decider


# -- helpers ---------------------------------------------------------------------------------------


_emission = tuple.__new__  # Emission(*fields) without the named tuple's own __new__ (2.5x)


def _retractions(records: list[tuple[int, ChangeRecord]]) -> list[Emission]:
    """The retractions of ``records``, newest first."""
    return [Emission(o, r.kind.retraction(), r) for o, r in sorted(records, key=lambda x: -x[0])]


def decide(
    items: Iterable[tuple[int, Item]],
    level: str,
    *,
    committed_through: Mapping[str, int] | None = None,
    confirm: Confirm | None = None,
) -> list[Emission]:
    """Everything a reader of one bounded partition emits at ``level`` (epochs still open at the
    end are held or stay standing, as a streaming reader would leave them)."""
    decider = PartitionDecider(level, committed_through=committed_through, confirm=confirm)
    out: list[Emission] = []
    last: int | None = None
    for offset, item in items:
        if last is not None and offset <= last:
            raise ValueError(f"offsets must increase: offset {offset} after {last}")
        last = offset
        out += decider.feed(offset, item)
    return out


def decide_partitions(
    partitions: Mapping[int, Iterable[tuple[int, Item]]],
    level: str,
    *,
    committed_through: Mapping[str, int] | None = None,
    confirm: Confirm | None = None,
) -> dict[int, list[Emission]]:
    """``decide`` for each partition of a topic: partitions decide alone (design §6.3)."""
    return {
        p: decide(items, level, committed_through=committed_through, confirm=confirm)
        for p, items in partitions.items()
    }


class TopicDecider:
    """One ``PartitionDecider`` per partition of a topic, created on a partition's first item,
    with one state for all of them (``confirm`` is every partition's)."""

    def __init__(
        self,
        level: str,
        *,
        committed_through: Mapping[str, int] | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        self._level = check_level(level)
        self._seed = dict(committed_through or {})
        self._confirm = confirm
        self._partitions: dict[int, PartitionDecider] = {}

    @property
    def level(self) -> Level:
        return self._level

    def partition(self, partition: int) -> PartitionDecider:
        decider = self._partitions.get(partition)
        if decider is None:
            decider = PartitionDecider(
                self._level, committed_through=self._seed, confirm=self._confirm
            )
            self._partitions[partition] = decider
        return decider

    def feed(self, partition: int, offset: int, item: Item) -> list[Emission]:
        return self.partition(partition).feed(offset, item)

    def pending(self) -> dict[int, list[PendingEpoch]]:
        """The open epochs of each partition that has any."""
        found = {p: d.pending() for p, d in sorted(self._partitions.items())}
        return {p: epochs for p, epochs in found.items() if epochs}

    def stats(self) -> DeciderStats:
        """Every partition's stats, added up (what was saved with a restored state included)."""
        total = DeciderStats()
        for decider in self._partitions.values():
            for name, value in asdict(decider.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def resume_points(self) -> dict[int, ResumePoint]:
        return {p: d.resume_point() for p, d in sorted(self._partitions.items())}

    def state(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "level": self._level,
            "committed_through": self._seed,
            "partitions": {str(p): d.state() for p, d in sorted(self._partitions.items())},
        }

    @classmethod
    def restore(cls, snapshot: Any, *, confirm: Confirm | None = None) -> TopicDecider:
        obj = _object(snapshot, "state")
        _check_format(obj, "state")
        level = _level(obj)
        topic = cls(level, committed_through=_through(obj, "state"), confirm=confirm)
        parts = obj.get("partitions")
        if not isinstance(parts, dict):
            raise DeciderStateError("state.partitions: expected an object")
        for name, part in parts.items():
            if not (isinstance(name, str) and name.isdigit()):
                raise DeciderStateError(f"state.partitions: {name!r} is not a partition number")
            decider = PartitionDecider.restore(part, confirm=confirm)
            if decider.level != level:
                raise DeciderStateError(f"state.partitions.{name}: level {decider.level}")
            topic._partitions[int(name)] = decider
        return topic


# -- snapshot validation ---------------------------------------------------------------------------


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DeciderStateError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _check_format(obj: Mapping[str, Any], where: str) -> None:
    if obj.get("format") != STATE_FORMAT:
        raise DeciderStateError(
            f"{where}.format: {obj.get('format')!r}, this logstore reads format {STATE_FORMAT}"
        )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt_int(obj: Mapping[str, Any], name: str, where: str) -> int | None:
    value = obj.get(name)
    if value is not None and not _is_int(value):
        raise DeciderStateError(f"{where}.{name}: expected an integer or null, got {value!r}")
    return value


def _through(obj: Mapping[str, Any], where: str) -> dict[str, int]:
    value = obj.get("committed_through")
    if not isinstance(value, dict) or not all(_is_int(n) for n in value.values()):
        raise DeciderStateError(f"{where}.committed_through: expected an object of integers")
    return dict(value)


def _restore_open(entry: Any, where: str, next_offset: int | None) -> _Open:
    obj = _object(entry, where)
    writer, number, records = obj.get("writer"), obj.get("epoch"), obj.get("records")
    if not isinstance(writer, str) or not _is_int(number):
        raise DeciderStateError(f"{where}: expected a writer (text) and an epoch (integer)")
    if not isinstance(records, list) or not records:
        raise DeciderStateError(f"{where}.records: expected a non-empty list")
    open_ = _Open(number)
    for i, raw in enumerate(records):
        here = f"{where}.records[{i}]"
        rec = _object(raw, here)
        offset, attempt, kind = rec.get("offset"), rec.get("attempt"), rec.get("kind")
        if not _is_int(offset) or not isinstance(attempt, str):
            raise DeciderStateError(f"{here}: expected an offset (integer) and an attempt (text)")
        if (open_.records and offset <= open_.records[-1][0]) or (
            next_offset is not None and offset >= next_offset
        ):
            raise DeciderStateError(f"{here}.offset: {offset} is out of order")
        if kind not in {k.value for k in RowKind} or kind == RowKind.COMMIT.value:
            raise DeciderStateError(f"{here}.kind: {kind!r} is not a row kind (+I -U +U -D)")
        key, row = rec.get("key"), rec.get("row")
        if not (key is None or isinstance(key, dict)) or not isinstance(row, dict):
            raise DeciderStateError(f"{here}: expected key (object or null) and row (object)")
        record = ChangeRecord(
            RowKind(kind),
            None if key is None else _from_json(key, f"{here}.key"),
            _from_json(row, f"{here}.row"),
            EpochId(writer, number, attempt),
        )
        open_.records.append((offset, record))
    return open_


# Stats added since format 1 first shipped: a state saved before them restores them as 0.
_NEWER_STATS: Final = frozenset({"unconfirmed_markers", "unconfirmed_records"})


def _restore_stats(value: Any) -> DeciderStats:
    obj = dict(_object(value, "state.stats"))
    names = [f.name for f in fields(DeciderStats)]
    for name in _NEWER_STATS:
        obj.setdefault(name, 0)
    if set(obj) != set(names) or not all(_is_int(obj[n]) for n in names):
        raise DeciderStateError(f"state.stats: expected the integers {', '.join(names)}")
    return DeciderStats(**obj)


# -- column values in a snapshot -------------------------------------------------------------------
# Decoded rows hold more than JSON has (Decimal, bytes, date, datetime, non-finite floats, maps with
# non-text keys), so the snapshot tags those: {"$decimal": "1.50"}. An object with one key starting
# with "$" is always a tag; a map that would look like one is saved as {"$map": [[k, v], ...]}.


def _to_json(value: Any) -> Any:
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [_to_json(v) for v in value]}
    if isinstance(value, Mapping):
        plain = all(isinstance(k, str) for k in value) and not (
            len(value) == 1 and next(iter(value)).startswith("$")
        )
        if plain:
            return {k: _to_json(v) for k, v in value.items()}
        return {"$map": [[_to_json(k), _to_json(v)] for k, v in value.items()]}
    raise TypeError(
        f"a column value of type {type(value).__name__} cannot be saved in reader state"
    )


_TAGS: Final[dict[str, Any]] = {
    "$float": float,
    "$decimal": Decimal,
    "$bytes": lambda text: base64.b64decode(text.encode("ascii"), validate=True),
    "$datetime": datetime.fromisoformat,
    "$date": date.fromisoformat,
}


def _from_json(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return [_from_json(v, where) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and next(iter(value)).startswith("$"):
        tag, inner = next(iter(value.items()))
        try:
            if tag == "$tuple":
                return tuple(_from_json(v, where) for v in inner)
            if tag == "$map":
                return {_hashable(_from_json(k, where)): _from_json(v, where) for k, v in inner}
            return _TAGS[tag](inner)
        except (KeyError, TypeError, ValueError, ArithmeticError):
            raise DeciderStateError(f"{where}: a damaged value {value!r}") from None
    return {k: _from_json(v, where) for k, v in value.items()}


def _hashable(key: Any) -> Any:
    hash(key)  # a list as a map key is damage; TypeError is reported by the caller
    return key


def _level(obj: Mapping[str, Any]) -> Level:
    """A snapshot's consistency level, checked."""
    level = obj.get("level")
    if level not in LEVELS:
        raise DeciderStateError(f"state.level: {level!r} is not one of {', '.join(LEVELS)}")
    return cast(Level, level)
