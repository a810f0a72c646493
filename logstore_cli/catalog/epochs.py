"""The ingest epochs a Delta table records: commits whose ``userMetadata`` is logstore commit
metadata (wire format 1, docs/design.md §7), read from the commit files without a JVM.

Only the newest commits are read in the common case (the epoch asked for is the last or nearly
the last one), so a long-lived table costs no more than a short one. Commit files older than the
table's log retention may be gone; an epoch only they held is then not found here, while Delta's
own transaction record (``committed_version``) still knows it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from logstore_cli.errors import LogstoreError
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import EpochId, parse_commit_metadata

_COMMIT_FILE = re.compile(r"(\d{20})\.json")
_COMMIT_INFO = b'{"commitInfo"'


@dataclass(frozen=True)
class EpochCommit:
    """One Delta commit of an ingest epoch: which attempt committed, as which version, and the
    topic's end offsets after the epoch's records (what a hybrid reader starts from)."""

    epoch: EpochId
    version: int
    offsets: dict[int, int]
    timestamp_ms: int | None


def commit_versions(table: Path) -> list[int]:
    """The versions that have a commit file, newest first."""
    try:
        names = [entry.name for entry in (table / "_delta_log").iterdir()]
    except OSError as exc:
        raise LogstoreError(f"cannot read the Delta log of {table}: {exc.strerror}") from exc
    found = (_COMMIT_FILE.fullmatch(name) for name in names)
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


def commit_info(table: Path, version: int) -> dict[str, object] | None:
    """The ``commitInfo`` action of one commit; None when the file is gone or has none."""
    path = table / "_delta_log" / f"{version:020d}.json"
    try:
        with path.open("rb") as fh:
            for line in fh:
                if line.startswith(_COMMIT_INFO):
                    info = json.loads(line)["commitInfo"]
                    return info if isinstance(info, dict) else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LogstoreError(f"cannot read Delta commit {path}: {exc}") from exc
    return None


def epoch_of(table: Path, version: int) -> EpochCommit | None:
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


def epoch_commits(table: Path) -> Iterator[EpochCommit]:
    """Every epoch commit still in the log, newest first."""
    for version in commit_versions(table):
        found = epoch_of(table, version)
        if found is not None:
            yield found


def latest_epoch_commit(table: Path) -> EpochCommit | None:
    """The newest epoch commit, whichever writer made it."""
    return next(epoch_commits(table), None)


def find_epoch_commit(table: Path, writer: str, epoch: int) -> EpochCommit | None:
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


def committed_version(table: Path, writer: str) -> int | None:
    """The highest epoch Delta records as committed for ``writer`` (its idempotent-write
    transaction version ``txnVersion`` for ``txnAppId = writer``); None when it has none."""
    from deltalake import DeltaTable

    try:
        version = DeltaTable(str(table)).transaction_version(writer)
    except Exception as exc:  # delta-rs raises its own error types
        raise LogstoreError(
            f"cannot read the Delta table at {table}: {exc}",
            hint="check that the path holds a Delta table readable by this user",
        ) from exc
    return None if version is None else int(version)
