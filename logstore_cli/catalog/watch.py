"""How fast a table is being written, from its Delta commits: what ``status --watch`` shows as
rows/s and log records/s. Pure: the commits come from ``status.CommitCache``.

Each ingest epoch is one Delta commit whose ``commitInfo`` says when (``timestamp``), how many rows
it wrote (``operationMetrics``: a MERGE's ``numSourceRows``, the epoch's changes after a key's
last change won; an append's ``numOutputRows``) and, in its epoch metadata, the topic's end offsets
after the epoch's records: the records the log gained since the previous epoch commit are the
difference (the previous epoch's commit markers included). Commits without epoch metadata (a
``create-table``, an ``OPTIMIZE``) are not ingest and are left out.

The rate over a window of ``window_s`` seconds back from ``now`` is what the commits of the window
wrote, divided by the time from the last commit before the window (the start of what they wrote)
to ``now``: steady at a steady ingest whatever the refresh interval, and falling to 0 when commits
stop, instead of holding the last value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logstore_cli.catalog.epochs import commit_rows
from logstore_cli.catalog.status import commit_time
from logstore_cli.errors import LogstoreError
from logstore_cli.logformat.wire import EpochId, LogPosition, parse_commit_metadata

Parser = Callable[[int, Mapping[str, Any]], "tuple[EpochId, dict[int, LogPosition]] | None"]
DEFAULT_WINDOW_S = 10.0
# A commit before the window this much older than the first one in it starts no rate: it is from
# an earlier run, and the idle time since would count as ingest time. Slow epochs (a loaded
# machine, big micro-batches) are minutes apart, hence minutes.
STALE_S = 600.0


@dataclass(frozen=True)
class CommitSample:
    """One epoch commit: when, the rows it wrote to Delta, the records the log gained since the
    previous epoch commit (None: unknown, e.g. the first one or no log store)."""

    version: int
    at: float  # seconds since the epoch
    rows: int | None
    log_records: int | None


@dataclass(frozen=True)
class Rates:
    rows_per_s: float | None  # None: not enough commits yet to tell
    log_records_per_s: float | None


def samples(
    commits: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    since: float | None = None,
    parse: Parser | None = None,
) -> list[CommitSample]:
    """The epoch commits among ``(version, commitInfo)`` pairs (any order), oldest first. With
    ``since``, only those after it and the newest one at or before it (all that ``rates`` over a
    window starting at ``since`` needs). ``parse`` reads a commit's epoch metadata (default:
    ``parse_commit_metadata``; ``status.CommitCache.epoch`` parses each commit once)."""
    read = parse or _parse
    found: list[tuple[int, float, int | None, Mapping[int, LogPosition]]] = []
    for version, info in sorted(commits, key=lambda c: -c[0]):
        try:
            parsed = read(version, info)
        except LogstoreError:
            continue  # reported by the status itself
        at = commit_time(info)
        if parsed is None or at is None:
            continue
        found.append((version, at, commit_rows(info), parsed[1]))
        if since is not None and at <= since:
            break
    out: list[CommitSample] = []
    previous: Mapping[int, int] | None = None
    for version, at, rows, positions in reversed(found):
        records = None
        # Kafka offsets count records; Pulsar message ids are not dense: no count from them.
        offsets = {p: o for p, o in positions.items() if isinstance(o, int)}
        if len(offsets) < len(positions):
            offsets = {}
        if previous is not None and offsets and set(offsets) == set(previous):
            records = sum(offsets[p] - previous[p] for p in offsets)
            records = records if records >= 0 else None  # the topic was created again
        out.append(CommitSample(version, at, rows, records))
        previous = offsets
    return out


def _parse(version: int, info: Mapping[str, Any]) -> tuple[EpochId, dict[int, LogPosition]] | None:
    raw = info.get("userMetadata")
    return parse_commit_metadata(raw if isinstance(raw, str) else None)


def rates(found: Sequence[CommitSample], now: float, window_s: float = DEFAULT_WINDOW_S) -> Rates:
    """Rows/s and log records/s over the ``window_s`` seconds before ``now`` (see the module)."""
    ordered = sorted(found, key=lambda s: (s.at, s.version))
    start = now - window_s
    recent = [s for s in ordered if s.at > start]
    if not recent:
        return Rates(0.0, 0.0) if ordered else Rates(None, None)
    before = [s for s in ordered if s.at <= start]
    anchor = before[-1].at if before else None
    if anchor is None or recent[0].at - anchor > max(STALE_S, window_s):
        # No commit marks where the first one's rows began: rate from the second one on.
        anchor, recent = recent[0].at, recent[1:]
        if not recent:
            return Rates(None, None)
    span = max(now - anchor, 1e-3)
    return Rates(
        _per_s([s.rows for s in recent], span), _per_s([s.log_records for s in recent], span)
    )


def _per_s(counts: Sequence[int | None], span: float) -> float | None:
    if any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None) / span
