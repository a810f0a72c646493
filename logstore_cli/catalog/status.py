"""``logstore status``: where a table's writers are, read from the table itself and its topic.

Everything but the topic's end offsets comes from the table's own files, without a JVM (a local
directory, or a prefix on object storage read through the storage seam): the Delta log's commits (their ``commitInfo.userMetadata``, the epoch metadata of design §7), the writer lease
(``catalog.lease``) and the quarantine files. Kafka is reached only through a ``TopicReader``
handed in by the caller; when it cannot be asked, the rest is still reported.

**The log's tail.** For each partition the last epoch commit (the newest Delta commit with epoch
metadata, whichever writer made it) records ``committed_offset``: the partition's end offset right
after that epoch's records, before its commit marker. ``after_commit`` is the end offset now minus
that: every record written to the partition since. Right after a clean commit that is 1, the
epoch's marker; 0 when the job stopped between the Delta commit and its markers (the next run
re-publishes them), more when a restarted job re-published them, plus the records of epochs not
committed (yet): the epoch in flight, or an attempt that failed. The records are not read, so the
numbers cost one offsets request however long the tail is. On Pulsar the positions are message
ids (the end is each partition's last message) and ids are not dense: the broker counts the
messages after the commit's id from its ledgers (``LogTailReader``, ``pulsar.admin.entries_after``).

**Outside writes.** Commits that change the table's data and are not logstore epochs (a user's
``DELETE`` in Spark SQL) and that no ingest job has carried into the log yet are listed
(``catalog/outside.py``): the log does not hold them until the next ingest carries them.

Commits are read from the Delta log's JSON commit files, as far back as the log keeps them
(``history_from``; Delta removes commits older than its log retention, 30 days by default, after a
checkpoint), so a writer whose last commit is older than that is not listed.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.catalog.epochs import commit_info, commit_versions
from logstore_cli.catalog.lease import LeaseInfo, local_holder_dead, local_time, read_lease
from logstore_cli.catalog.outside import uncarried
from logstore_cli.catalog.tables import TopicReader, spec_from_delta, topic_status
from logstore_cli.errors import LogstoreError, TopicNotFoundError
from logstore_cli.ingest.outside import OutsideCommit
from logstore_cli.ingest.plan import STATE_DIR
from logstore_cli.logformat.wire import EpochId, LogPosition, parse_commit_metadata
from logstore_cli.model import LogStoreSpec

if TYPE_CHECKING:
    from logstore_cli.storage.base import Storage

QUARANTINE_DIR = "quarantine"
QUARANTINE_SUFFIX = ".jsonl"
OUTSIDE_SCAN_LIMIT = 5_000  # commit files a status reads for outside writes at most (the newest)


@dataclass(frozen=True)
class LeaseStatus:
    """The table's ingest lease as read now, and whether its holder still runs."""

    info: LeaseInfo
    now: float
    holder_running: bool | None  # None: the holder is on another host, so this one cannot tell

    @property
    def expired(self) -> bool:
        return self.info.expired(self.now)

    @property
    def expires_in_s(self) -> float:
        return round(self.info.expires_at - self.now, 1)

    def to_json(self) -> dict[str, Any]:
        i = self.info
        return {
            "job": i.job,
            "host": i.host,
            "pid": i.pid,
            "acquired_at": local_time(i.acquired_at),
            "expires_at": local_time(i.expires_at),
            "expires_in_s": self.expires_in_s,  # negative once expired
            "expired": self.expired,
            "holder_running": self.holder_running,
            "writer": i.writer,  # None until the job read it from its checkpoint
            "fence": i.fence,  # the fencing token: one more at every acquisition
        }


@dataclass(frozen=True)
class WriterStatus:
    """A Delta commit of an ingest epoch: the writer's epoch and attempt, and the end offsets."""

    writer: str
    epoch: int
    attempt: str
    delta_version: int
    committed_at: float | None  # seconds since the epoch (the commit's timestamp)
    offsets: Mapping[int, LogPosition] = field(default_factory=dict)

    def to_json(self, *, offsets: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "writer": self.writer,
            "epoch": self.epoch,
            "attempt": self.attempt,
            "delta_version": self.delta_version,
            "committed_at": None if self.committed_at is None else local_time(self.committed_at),
        }
        if offsets:
            out["offsets"] = {str(p): o for p, o in sorted(self.offsets.items())}
        return out


@dataclass(frozen=True)
class PartitionTail:
    """A log partition's end against the position the last epoch commit names.

    On Kafka both are offsets (the end offset: the next one to be written). On Pulsar both are
    message ids ("<ledger>:<entry>:<batch>": the end is the partition's last message) and the
    messages after the commit are counted by the broker (``messages_after``): ids are not dense.
    """

    partition: int
    end_offset: LogPosition | None  # None: the log was not asked, or could not be
    # None: the last epoch commit does not name this partition
    committed_offset: LogPosition | None
    messages_after: int | None = None  # Pulsar's count; Kafka's is the offsets' difference

    @property
    def after_commit(self) -> int | None:
        if self.messages_after is not None:
            return self.messages_after
        if not isinstance(self.end_offset, int) or not isinstance(self.committed_offset, int):
            return None
        return self.end_offset - self.committed_offset

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "end_offset": self.end_offset,
            "committed_offset": self.committed_offset,
            "after_commit": self.after_commit,
        }


@dataclass(frozen=True)
class LogStatus:
    """The table's topic against the last epoch commit; ``error`` when Kafka could not tell."""

    topic: str | None  # None: the log store's settings could not be resolved
    partitions: tuple[PartitionTail, ...]
    asked: bool  # whether Kafka was asked for end offsets (and answered)
    error: str | None = None
    system: str = "kafka"  # the log system: what the positions are (offsets, message ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "system": self.system,
            "end_offsets_read": self.asked,
            "partitions": [p.to_json() for p in self.partitions],
            "error": self.error,
        }


@dataclass(frozen=True)
class TableStatus:
    """What 'status' reports on a table: Delta version, lease, epochs, the log's tail."""

    name: str
    path: Path | str  # a local directory, or the table's URI on object storage
    delta_version: int
    history_from: int | None  # the oldest version whose commit the Delta log still holds
    lease: LeaseStatus | None
    lease_error: str | None
    writers: tuple[WriterStatus, ...]  # each writer's last epoch commit, newest first
    log: LogStatus | None  # None: the table has no log store
    quarantined: Mapping[str, int]  # job -> records
    warnings: tuple[str, ...] = ()
    outside: tuple[OutsideCommit, ...] = ()  # writes not carried into the log yet, oldest first
    outside_unchecked: int = 0  # commits not carried that were not read (beyond the limit)

    @property
    def last_commit(self) -> WriterStatus | None:
        return self.writers[0] if self.writers else None

    def to_json(self) -> dict[str, Any]:
        lease: dict[str, Any] | None
        if self.lease_error is not None:
            lease = {"error": self.lease_error}
        else:
            lease = self.lease.to_json() if self.lease else None
        last = self.last_commit
        return {
            "name": self.name,
            "path": str(self.path),
            "delta": {"version": self.delta_version, "history_from": self.history_from},
            "lease": lease,
            "writers": [w.to_json() for w in self.writers],
            "last_commit": last.to_json(offsets=True) if last else None,
            "log": self.log.to_json() if self.log else None,
            "quarantined": {
                "total": sum(self.quarantined.values()),
                "jobs": dict(sorted(self.quarantined.items())),
            },
            "outside": {
                "uncarried": [c.to_json() for c in self.outside],
                "unchecked": self.outside_unchecked,
            },
            "warnings": list(self.warnings),
        }


class CommitCache:
    """The ``commitInfo`` of each Delta commit, read from its file once: a status refreshed in a
    loop (``status --watch``) reads only the commits that are new since its last refresh. Only
    what a status uses is kept (not ``operationParameters``, which holds whole MERGE predicates)."""

    KEEP = ("timestamp", "inCommitTimestamp", "operation", "operationMetrics", "userMetadata")

    def __init__(self) -> None:
        self.outside: dict[int, OutsideCommit | None] = {}  # catalog.outside's, per version
        self._infos: dict[int, dict[str, Any] | None] = {}
        self._epochs: dict[int, tuple[EpochId, dict[int, LogPosition]] | LogstoreError | None] = {}

    def epoch(
        self, version: int, info: Mapping[str, Any]
    ) -> tuple[EpochId, dict[int, LogPosition]] | None:
        """The commit's epoch metadata (``parse_commit_metadata``), parsed once per version;
        raises its LogstoreError when the metadata is logstore's but malformed."""
        if version not in self._epochs:
            raw = info.get("userMetadata")
            try:
                self._epochs[version] = parse_commit_metadata(raw if isinstance(raw, str) else None)
            except LogstoreError as exc:
                self._epochs[version] = exc
        found = self._epochs[version]
        if isinstance(found, LogstoreError):
            raise found
        return found

    def commits(self, table: TableLocation, up_to: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(version, commitInfo)`` of the Delta log's JSON commits up to ``up_to``, newest first
        (``catalog.epochs`` reads the files; not delta-rs' history, which replays the log again)."""
        versions = commit_versions(table)
        present = set(versions)
        for gone in [v for v in self._infos if v not in present]:  # removed by log retention
            del self._infos[gone]
            self._epochs.pop(gone, None)
        for version in versions:
            if version > up_to:
                continue  # committed after the snapshot this status describes
            if version not in self._infos:
                info = commit_info(table, version)
                self._infos[version] = (
                    None if info is None else {k: info[k] for k in self.KEEP if k in info}
                )
            found = self._infos[version]
            if found is not None:
                yield version, found

    def cached(self) -> list[tuple[int, dict[str, Any]]]:
        """What ``commits`` has read so far, newest first."""
        return sorted(
            ((v, i) for v, i in self._infos.items() if i is not None), key=lambda c: -c[0]
        )


def table_status(
    ref: wh.TableRef | wh.StoredTable,
    topics: TopicReader | None,
    *,
    default_bootstrap: str | None = None,
    now: float | None = None,
    host: str | None = None,
    holder_dead: Callable[[LeaseInfo], bool] = local_holder_dead,
    commits: CommitCache | None = None,
) -> TableStatus:
    """The status of the committed table ``ref`` (a local directory, or a table on any
    ``Storage``: the same reads through the seam); with ``topics``, its topic's end offsets too.

    ``now``, ``host`` and ``holder_dead`` default to the clock, this host's name and the process
    check of ``catalog.lease`` (tests pass fakes); ``commits`` keeps the commits read across
    calls (a fresh one reads them all)."""
    location: TableLocation
    shown: Path | str
    if isinstance(ref, wh.StoredTable):
        from logstore_cli.catalog.storage_lease import read_lease_on

        location, shown = ref.storage, ref.storage.uri
        state = wh.read_delta_on(ref.storage)
        read_current_lease = partial(read_lease_on, ref.storage)
    else:
        location, shown = ref.path, ref.path
        state = wh.read_delta(ref.path)
        read_current_lease = partial(read_lease, ref.path)
    now = time.time() if now is None else now
    warnings: list[str] = []

    lease, lease_error = _lease_status(read_current_lease, now, host, holder_dead, warnings)

    if isinstance(location, Path):
        quarantined = count_quarantined(location, warnings)
    else:
        quarantined = count_quarantined_on(location, warnings)
    writers: dict[str, WriterStatus] = {}
    oldest = None
    cache = commits or CommitCache()
    for version, info_action in cache.commits(location, state.version):
        oldest = version
        try:
            parsed = cache.epoch(version, info_action)
        except LogstoreError as exc:
            warnings.append(f"Delta version {version}: {exc.message}")
            continue
        if parsed is None:
            continue
        epoch, offsets = parsed
        if epoch.writer not in writers:  # newest first: the first one seen is the writer's last
            writers[epoch.writer] = WriterStatus(
                epoch.writer, epoch.epoch, epoch.attempt, version, commit_time(info_action),
                offsets,
            )  # fmt: skip
    ordered = tuple(sorted(writers.values(), key=lambda w: -w.delta_version))

    log = None
    try:
        log_store = spec_from_delta(ref, state, default_bootstrap).log_store
    except LogstoreError as exc:
        log = LogStatus(None, (), asked=False, error=f"the table's log store: {exc.message}")
    else:
        if log_store is not None:
            committed = ordered[0].offsets if ordered else {}
            if log_store.system == "pulsar":
                log = _pulsar_log_status(log_store, committed, topics)
            else:
                log = _log_status(log_store, committed, topics)
    if log is not None and log.error:
        warnings.append(f"log: {log.error}")
    outside: tuple[OutsideCommit, ...] = ()
    unchecked = 0
    if log is not None and log.topic is not None:  # without a log, nothing is carried anywhere
        try:
            found = uncarried(
                location, up_to=state.version, limit=OUTSIDE_SCAN_LIMIT, cache=cache.outside
            )
            outside, unchecked = found.commits, found.unchecked
        except LogstoreError as exc:
            warnings.append(f"outside writes: {exc.message}")

    return TableStatus(
        name=ref.name,
        path=shown,
        delta_version=state.version,
        history_from=oldest,
        lease=lease,
        lease_error=lease_error,
        writers=ordered,
        log=log,
        quarantined=quarantined,
        warnings=tuple(warnings),
        outside=outside,
        outside_unchecked=unchecked,
    )


def _lease_status(
    read: Callable[[], LeaseInfo | None],
    now: float,
    host: str | None,
    holder_dead: Callable[[LeaseInfo], bool],
    warnings: list[str],
) -> tuple[LeaseStatus | None, str | None]:
    """The lease as ``read`` finds it, or the error that keeps it from being read (warned)."""
    try:
        info = read()
    except LogstoreError as exc:
        warnings.append(f"lease: {exc.message}")
        return None, exc.message
    if info is None:
        return None, None
    here = socket.gethostname() if host is None else host
    running = None if info.host != here else not holder_dead(info)
    return LeaseStatus(info, now, running), None


def _log_status(
    log_store: LogStoreSpec, committed: Mapping[int, LogPosition], topics: TopicReader | None
) -> LogStatus:
    ends: dict[int, int] = {}
    error = None
    if topics is not None:
        found = topic_status(log_store, topics)
        if found.exists:
            ends = {p.partition: p.end_offset for p in found.partitions}
        else:
            error = found.error
    partitions = tuple(
        PartitionTail(p, ends.get(p), committed.get(p)) for p in sorted(set(ends) | set(committed))
    )
    asked = topics is not None and error is None
    return LogStatus(log_store.topic, partitions, asked=asked, error=error)


@runtime_checkable
class LogTailReader(Protocol):
    """What status asks of a Pulsar table's topic (``provision.pulsar_topics``'s stores): each
    partition's last message id and the messages after the committed position."""

    def log_tail(
        self, log: LogStoreSpec, committed: Mapping[int, LogPosition]
    ) -> Mapping[int, tuple[str | None, int | None]]: ...


def _pulsar_log_status(
    log_store: LogStoreSpec, committed: Mapping[int, LogPosition], topics: TopicReader | None
) -> LogStatus:
    tails: Mapping[int, tuple[str | None, int | None]] = {}
    error = None
    if topics is not None:
        if not isinstance(topics, LogTailReader):
            error = "this topic store cannot read a Pulsar topic"
        else:
            try:
                tails = topics.log_tail(log_store, committed)
            except TopicNotFoundError:
                error = "topic does not exist"
            except LogstoreError as exc:
                error = exc.message
    partitions = tuple(
        PartitionTail(
            p, tails[p][0] if p in tails else None, committed.get(p),
            tails[p][1] if p in tails else None,
        )
        for p in sorted(set(tails) | set(committed))
    )  # fmt: skip
    asked = topics is not None and error is None
    return LogStatus(log_store.topic, partitions, asked=asked, error=error, system="pulsar")


def commit_time(info: Mapping[str, Any]) -> float | None:
    ts = info.get("inCommitTimestamp", info.get("timestamp"))
    if isinstance(ts, bool) or not isinstance(ts, int):
        return None
    return ts / 1000


def count_quarantined(table: Path, warnings: list[str] | None = None) -> dict[str, int]:
    """Records quarantined per job: the lines of ``<table>/_logstore/quarantine/<job>/*.jsonl``,
    each one JSON object. Symlinks are not followed (the files belong to the table); what cannot
    be read is added to ``warnings``."""
    problems = warnings if warnings is not None else []
    root = table / STATE_DIR / QUARANTINE_DIR
    for path in (table / STATE_DIR, root):
        if path.is_symlink():
            problems.append(f"quarantine: {path} is a symlink; not followed")
            return {}
    counts: dict[str, int] = {}
    try:
        with os.scandir(root) as jobs:
            for job in sorted(jobs, key=lambda e: e.name):
                if job.is_dir(follow_symlinks=False):
                    counts[job.name] = _count_job(Path(job.path), problems)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        problems.append(f"quarantine: cannot read {root}: {exc.strerror or exc}")
    return counts


def _count_job(directory: Path, problems: list[str]) -> int:
    total = 0
    try:
        with os.scandir(directory) as files:
            names = [
                e.name
                for e in files
                if e.name.endswith(QUARANTINE_SUFFIX) and e.is_file(follow_symlinks=False)
            ]
    except OSError as exc:
        problems.append(f"quarantine: cannot read {directory}: {exc.strerror or exc}")
        return 0
    for name in names:
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                # Non-blank lines: a record whose write was cut short was still quarantined.
                total += sum(1 for line in f if line.strip())
        except OSError as exc:
            problems.append(f"quarantine: cannot read {path}: {exc.strerror or exc}")
    return total


def count_quarantined_on(table: Storage, warnings: list[str] | None = None) -> dict[str, int]:
    """``count_quarantined`` of a table on any ``Storage`` (``table`` rooted at the table): the
    non-blank lines of ``_logstore/quarantine/<job>/*.jsonl``; what cannot be read is warned."""
    problems = warnings if warnings is not None else []
    root = f"{STATE_DIR}/{QUARANTINE_DIR}"
    counts: dict[str, int] = {}
    try:
        jobs = table.list(root).dirs
        for job in jobs:
            total = 0
            for name in table.list(f"{root}/{job}").files:
                if not name.endswith(QUARANTINE_SUFFIX):
                    continue
                blob = table.read(f"{root}/{job}/{name}")
                if blob is not None:
                    total += sum(1 for line in blob.data.splitlines() if line.strip())
            counts[job] = total
    except LogstoreError as exc:
        problems.append(f"quarantine: {exc.message}")
    return counts
