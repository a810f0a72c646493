"""The ingest epochs a Delta table records: commits whose ``userMetadata`` is logstore commit
metadata (wire format 1, docs/design.md §7), read from the commit files without a JVM.

Only the newest commits are read in the common case (the epoch asked for is the last or nearly
the last one), so a long-lived table costs no more than a short one. Commit files older than the
table's log retention may be gone; an epoch only they held is then not found here, while Delta's
own transaction record (``committed_version``) still knows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from logstore_cli.catalog.delta_log import (
    COMMIT_FILE,
    TableLocation,
    delta_rs_args,
    has_commit,
    log_names,
    open_commit,
    where,
)
from logstore_cli.errors import LogstoreError
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import (
    CommitMarker,
    EpochId,
    LogPosition,
    TxnState,
    decode_txn_version,
    parse_commit_metadata,
)

if TYPE_CHECKING:
    from logstore_cli.logformat.consistency import PendingEpoch

_COMMIT_INFO = b'{"commitInfo"'


@dataclass(frozen=True)
class EpochCommit:
    """One Delta commit of an ingest epoch: which attempt committed, as which version, and the
    topic's end positions after the epoch's records (what a hybrid reader starts from):
    ``positions`` as recorded (Kafka offsets or Pulsar message ids), ``offsets`` as Kafka's."""

    epoch: EpochId
    version: int
    positions: dict[int, LogPosition]
    timestamp_ms: int | None

    @property
    def offsets(self) -> dict[int, int]:
        """Where a read goes on after this epoch, per partition, as the read engine's ordered
        positions: Kafka's end offsets as recorded; for a Pulsar topic the position just after the
        recorded last message id (``logformat.pulsar_form.after``, design §7.1)."""
        out: dict[int, int] = {}
        for partition, position in self.positions.items():
            if isinstance(position, int):
                out[partition] = position
                continue
            # imported here: a Kafka table's commands (status, ...) do not load the Pulsar form
            from logstore_cli.logformat.pulsar_form import after as pulsar_after

            try:
                out[partition] = pulsar_after(position)
            except WireFormatError as exc:
                raise LogstoreError(
                    f"Delta version {self.version} records partition {partition} at {exc.message}",
                    hint="the commit metadata was not written by logstore's ingest",
                ) from None
        return out


def gone_offsets(commit: EpochCommit, log_start: Mapping[int, int]) -> dict[int, int]:
    """The partitions whose offset ``commit`` recorded is below where the log now starts
    (``log_start``: partition -> earliest offset still held): partition -> that offset."""
    return {p: o for p, o in sorted(commit.offsets.items()) if o < log_start.get(p, 0)}


def usable_snapshots(
    commits: Iterable[EpochCommit], log_start: Mapping[int, int]
) -> list[EpochCommit]:
    """The epoch commits a hybrid read can still start from, newest first: every offset their
    commit recorded is still in the log (retention deletes from the start of a partition, so
    these are the newest ones, down to the oldest whose offsets survive)."""
    found = sorted(commits, key=lambda c: c.version, reverse=True)
    return [c for c in found if not gone_offsets(c, log_start)]


def commit_versions(table: TableLocation) -> list[int]:
    """The versions that have a commit file, newest first."""
    try:
        names = log_names(table)
    except OSError as exc:
        raise LogstoreError(f"cannot read the Delta log of {where(table)}: {exc.strerror}") from exc
    found = (COMMIT_FILE.fullmatch(name) for name in names)
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


def commit_info(table: TableLocation, version: int) -> dict[str, object] | None:
    """The ``commitInfo`` action of one commit; None when the file is gone or has none."""
    try:
        with open_commit(table, version) as fh:
            for line in fh:
                if line.startswith(_COMMIT_INFO):
                    info = json.loads(line)["commitInfo"]
                    return info if isinstance(info, dict) else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LogstoreError(f"cannot read Delta commit {where(table, version)}: {exc}") from exc
    return None


def epoch_of(table: TableLocation, version: int) -> EpochCommit | None:
    """The epoch committed as ``version``; None when that commit is not an ingest epoch's."""
    info = commit_info(table, version)
    if info is None:
        return None
    meta = info.get("userMetadata")
    try:
        parsed = parse_commit_metadata(meta if isinstance(meta, str) else None)
    except WireFormatError:
        return None  # someone else's metadata that merely mentions "logstore"
    if parsed is None:
        return None
    stamp = info.get("timestamp")
    return EpochCommit(parsed[0], version, parsed[1], stamp if isinstance(stamp, int) else None)


def epoch_commits(table: TableLocation) -> Iterator[EpochCommit]:
    """Every epoch commit still in the log, newest first."""
    for version in commit_versions(table):
        found = epoch_of(table, version)
        if found is not None:
            yield found


def latest_epoch_commit(table: TableLocation) -> EpochCommit | None:
    """The newest epoch commit, whichever writer made it."""
    return next(epoch_commits(table), None)


def find_epoch_commit(table: TableLocation, writer: str, epoch: int) -> EpochCommit | None:
    """The commit of epoch ``epoch`` of ``writer``. A writer's epochs commit in order, so the
    search stops at the first commit of that writer with a lower epoch."""
    for commit in epoch_commits(table):
        if commit.epoch.writer != writer:
            continue
        if commit.epoch.epoch == epoch:
            return commit
        if commit.epoch.epoch < epoch:
            return None
    return None


def committed_version(table: TableLocation, writer: str) -> int | None:
    """The highest epoch Delta records as committed for ``writer`` (its idempotent-write
    transaction version ``txnVersion`` for ``txnAppId = writer``, a fence decoded); None when it
    has none."""
    return writer_txn(table, writer).last_epoch


def writer_txn(table: TableLocation, writer: str) -> TxnState:
    """What Delta's transaction version for ``writer`` says: its newest committed epoch, and
    whether a takeover fenced it (a version at or above ``FENCED_BASE``: see
    ``logformat.wire.decode_txn_version``)."""
    return decode_txn_version(raw_txn_version(table, writer))


def fenced_pending(table: TableLocation, pending: Iterable[PendingEpoch]) -> list[PendingEpoch]:
    """The ``pending`` epochs (records no marker released) of writers a takeover fenced, after
    the epoch Delta last committed for them: they are never released unless that writer runs again
    from its checkpoint (its new attempt then supersedes them). A table Delta cannot read: none."""
    states: dict[str, TxnState] = {}
    found = []
    for epoch in pending:
        if epoch.writer not in states:
            try:
                states[epoch.writer] = writer_txn(table, epoch.writer)
            except LogstoreError:
                return []
        state = states[epoch.writer]
        if state.fenced and (state.last_epoch is None or epoch.epoch > state.last_epoch):
            found.append(epoch)
    return found


def raw_txn_version(table: TableLocation, writer: str) -> int | None:
    """Delta's transaction version for ``txnAppId = writer`` as stored; None when it has none."""
    from deltalake import DeltaTable

    try:
        uri, options = delta_rs_args(table)
        version = DeltaTable(uri, storage_options=options).transaction_version(writer)
    except Exception as exc:  # delta-rs raises its own error types
        raise LogstoreError(
            f"cannot read the Delta table at {where(table)}: {exc}",
            hint="check that the path holds a Delta table readable by this user",
        ) from exc
    return None if version is None else int(version)


class EpochConfirmer:
    """Whether a commit marker is confirmed by the Delta log (a reader's ``confirm``,
    ``logformat.consistency``): the commit at the marker's version is an epoch commit of the same
    writer, epoch and attempt. Anyone who can write to the topic can produce a marker; only the
    ingest job that committed an epoch can make Delta hold it.

    Each commit file is read once (commits never change) and only when a marker names a version not
    seen yet, so a read costs one small file per epoch, not per record. A version whose file is not
    there is not remembered: it may be committed later. Commit files Delta's log cleanup removed
    (older than the oldest left) cannot be read; for them the writer's transaction id in the
    snapshot (``txnVersion`` >= the epoch) confirms the writer and epoch, not the attempt.

    Log-only markers (``--emit log``: no Delta version) name nothing Delta could confirm: they are
    trusted, as the topic's ACLs are (docs/consistency.md §10, "What a reader trusts").
    """

    def __init__(self, table: TableLocation) -> None:
        self._table = table
        self._commits: dict[int, EpochId | None] = {}  # version -> its epoch (None: not one)
        self._txn: dict[str, int | None] = {}  # writer -> txnVersion, for cleaned-up versions
        self._newest = -1  # the newest version known to have a commit file
        self.checked = 0  # commit files read, for tests and benchmarks

    def __call__(self, marker: CommitMarker) -> bool:
        version = marker.delta_version
        if version is None:
            return True
        if version not in self._commits:
            self.checked += 1
            if not has_commit(self._table, version):
                return self._cleaned_up(marker, version)
            self._newest = max(self._newest, version)
            found = epoch_of(self._table, version)
            self._commits[version] = None if found is None else found.epoch
        return self._commits[version] == marker.epoch

    def _cleaned_up(self, marker: CommitMarker, version: int) -> bool:
        """A version without its commit file: not committed (yet), or removed by log cleanup
        (Delta's versions have no gaps: a version below an existing one was committed)."""
        if version >= self._newest:
            versions = commit_versions(self._table)
            self._newest = max(self._newest, versions[0] if versions else -1)
            if version >= self._newest:
                return False  # not committed (yet): a later marker naming it asks again
        writer = marker.epoch.writer
        if writer not in self._txn:  # the snapshot's: it covers every cleaned-up commit
            self._txn[writer] = committed_version(self._table, writer)
        through = self._txn[writer]
        return through is not None and marker.epoch.epoch <= through


# The operationMetrics entry that says how many rows a commit wrote (or removed), per operation:
# Spark's name, then delta-rs' (an epoch committed by delta-rs, a user's write_deltalake).
ROW_METRICS: Final[Mapping[str, tuple[str, ...]]] = {
    "MERGE": ("numSourceRows", "num_source_rows"),  # an epoch's changes (its last one per key)
    "WRITE": ("numOutputRows", "num_added_rows"),
    "STREAMING UPDATE": ("numOutputRows",),
    "CREATE TABLE AS SELECT": ("numOutputRows",),
    "REPLACE TABLE AS SELECT": ("numOutputRows",),
    "DELETE": ("numDeletedRows", "num_deleted_rows"),
    "UPDATE": ("numUpdatedRows", "num_updated_rows"),
}


def commit_rows(info: Mapping[str, Any]) -> int | None:
    """The rows a commit wrote (deleted, for a DELETE); None when its metrics do not say."""
    metrics, names = info.get("operationMetrics"), ROW_METRICS.get(str(info.get("operation")))
    if not isinstance(metrics, Mapping) or names is None:
        return None
    name = next((n for n in names if n in metrics), None)
    if name is None:
        return None
    try:
        return int(metrics[name])
    except (TypeError, ValueError):
        return None
