"""``logstore vacuum``: Delta VACUUM (delta-rs, no JVM) that keeps what a hybrid read can still
need (docs/guide.md, "Running a table for months").

A hybrid read starts from an epoch commit's snapshot V and continues the log at the offsets V's
commit recorded; the topic's retention decides which V still work (``read.plan.usable_snapshots``).
Vacuum deletes the data files that commits removed longer ago than the retention; a file some
usable snapshot still references is exactly one removed by a commit after the oldest usable
snapshot. The guard (:func:`check_vacuum`, pure) refuses a vacuum that would delete one, and a
retention shorter than the table's ``delta.deletedFileRetentionDuration``, unless forced.

No lease is taken: vacuum never deletes a file of the current snapshot, so an ingest running
meanwhile loses nothing (its commit only adds files and removes current ones).

On a remote warehouse (``s3://``, ``hdfs://``; the table a ``Storage``) the same steps run through
delta-rs with the storage options (the listing and the deletes, all below the table's own root),
the Delta log through the seam, the sizes from delta-rs's object store.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logstore_cli.catalog.delta_log import TableLocation, delta_rs_args, open_commit, where
from logstore_cli.catalog.epochs import (
    EpochCommit,
    commit_versions,
    epoch_commits,
    usable_snapshots,
)
from logstore_cli.ddl.delta_properties import DELETED_FILE_RETENTION, retention_ms
from logstore_cli.errors import LogstoreError

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class VacuumGuard:
    """What the guard weighs: the retention asked for, the table's, the files a vacuum at that
    retention would delete, the snapshots a hybrid read can start from (newest first) and the
    files removed after the oldest of them (path -> when it was removed, ms since the epoch)."""

    retain_hours: int
    table_retention_ms: int
    candidates: frozenset[str]
    usable: Sequence[EpochCommit] = ()
    removed_after_oldest: Mapping[str, int] = field(default_factory=dict)


def hours_for(ms: int) -> int:
    """The whole hours that cover ``ms``."""
    return max(0, math.ceil(ms / HOUR_MS))


def check_vacuum(guard: VacuumGuard, *, now_ms: int, force: bool) -> None:
    """Refuse (LogstoreError, exit 1) a vacuum that breaks a hybrid start the log still allows, or
    whose retention is shorter than the table's; ``force`` skips both."""
    if force:
        return
    if guard.retain_hours * HOUR_MS < guard.table_retention_ms:
        table_hours = hours_for(guard.table_retention_ms)
        raise LogstoreError(
            f"--retain {guard.retain_hours} is shorter than the table's "
            f"{DELETED_FILE_RETENTION} ({table_hours} hours): a reader of an older version, or a "
            "writer that started before the files were removed, may still need them",
            hint=f"use --retain {table_hours} or more, or --force if nothing reads old versions",
        )
    needed = sorted(guard.candidates & guard.removed_after_oldest.keys())
    if not needed or not guard.usable:
        return
    oldest, newest = guard.usable[-1].version, guard.usable[0].version
    first_removed = min(guard.removed_after_oldest[p] for p in needed)
    keep = hours_for(now_ms - first_removed) + 1
    raise LogstoreError(
        f"--retain {guard.retain_hours} would delete {len(needed)} data file(s) that snapshots a "
        f"hybrid read can still start from need: versions {oldest} to {newest} (their recorded "
        "log offsets are still in the topic)",
        hint=f"keep them with --retain {keep}, or --force (a read --from snapshot:{oldest} "
        "would then fail); once the topic's retention deletes those offsets, they may go",
    )


# -- the Delta log and delta-rs ----------------------------------------------------------------


def removed_after(table: TableLocation, version: int) -> dict[str, int]:
    """The data files removed by commits after ``version``: relative path (decoded, as vacuum
    names them) -> the removal's ``deletionTimestamp`` (the commit's time when it has none)."""
    out: dict[str, int] = {}
    for v in commit_versions(table):
        if v <= version:
            break
        for action in _actions(table, v):
            remove = action.get("remove")
            if isinstance(remove, dict) and isinstance(remove.get("path"), str):
                stamp = remove.get("deletionTimestamp")
                path = urllib.parse.unquote(remove["path"])
                out[path] = stamp if isinstance(stamp, int) else 0
    return out


def _actions(table: TableLocation, version: int) -> Iterable[dict[str, Any]]:
    path = where(table, version)
    try:
        with open_commit(table, version) as fh:
            for line in fh:
                if line.strip():
                    action = json.loads(line)
                    if isinstance(action, dict):
                        yield action
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        raise LogstoreError(f"cannot read Delta commit {path}: {exc}") from exc


@dataclass
class VacuumResult:
    table: str
    retain_hours: int
    dry_run: bool
    files: list[str]
    bytes: int
    hybrid_from: list[int] | None  # versions a hybrid read can start from; None: no log store
    forced: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "retain_hours": self.retain_hours,
            "dry_run": self.dry_run,
            "files": len(self.files),
            "bytes": self.bytes,
            "paths": self.files,
            "hybrid_from": self.hybrid_from,
            "forced": self.forced,
        }


def vacuum(
    table: TableLocation,
    name: str,
    *,
    retain_hours: int | None,
    dry_run: bool,
    force: bool,
    log_start: Mapping[int, int] | None,
) -> VacuumResult:
    """Vacuum the Delta table at ``table`` (a local directory or its ``Storage``); ``log_start`` is
    its topic's earliest offsets (None: the table has no log store, so no hybrid read to keep)."""
    from deltalake import DeltaTable

    uri, options = delta_rs_args(table)
    try:
        dt = DeltaTable(uri, storage_options=options)
        configuration = dt.metadata().configuration
    except Exception as exc:  # delta-rs raises its own error types
        raise LogstoreError(f"cannot read the Delta table at {where(table)}: {exc}") from exc
    table_ms = retention_ms(configuration, DELETED_FILE_RETENTION)
    retain = hours_for(table_ms) if retain_hours is None else retain_hours
    usable: list[EpochCommit] = []
    removed: dict[str, int] = {}
    if log_start is not None:
        usable = usable_snapshots(epoch_commits(table), log_start)
        if usable:
            removed = removed_after(table, usable[-1].version)
    # Delta's own retention check is check_vacuum's first (a message naming the flag): off here.
    # delta-rs lists the files of every tombstone old enough, deleted by an earlier vacuum or not.
    listed = _vacuum(dt, retain, dry_run=True)
    sizes = _sizes(table, listed)
    guard = VacuumGuard(retain, table_ms, frozenset(sizes), usable, removed)
    check_vacuum(guard, now_ms=int(time.time() * 1000), force=force)
    gone = set(listed) - sizes.keys()
    files = (
        list(sizes) if dry_run else [p for p in _vacuum(dt, retain, dry_run=False) if p not in gone]
    )
    return VacuumResult(
        name,
        retain,
        dry_run,
        sorted(files),
        sum(sizes.get(p, 0) for p in files),
        None if log_start is None else [c.version for c in usable],
        force,
    )


def _vacuum(dt: Any, retain: int, *, dry_run: bool) -> list[str]:
    try:
        # full: every file the log no longer references, as Spark's VACUUM lists them; delta-rs's
        # default ("lite") sees only the tombstones since the last checkpoint, and a checkpoint
        # drops tombstones older than the retention: their files would stay for ever.
        found = dt.vacuum(
            retention_hours=retain, dry_run=dry_run, enforce_retention_duration=False, full=True
        )
    except Exception as exc:  # delta-rs raises its own error types
        raise LogstoreError(f"Delta vacuum failed: {exc}") from exc
    return [str(p) for p in found]


def _sizes(table: TableLocation, paths: Sequence[str]) -> dict[str, int]:
    """The size of each of ``paths`` (relative to the table) that exists; one gone is left out."""
    if isinstance(table, Path):
        found: dict[str, int] = {}
        for p in paths:
            try:
                found[p] = (table / p).stat().st_size
            except FileNotFoundError:
                continue
            except OSError:
                found[p] = 0
        return found
    if not paths:
        return {}
    from deltalake.fs import DeltaStorageHandler
    from pyarrow.fs import FileType

    uri, options = delta_rs_args(table)
    try:
        infos = DeltaStorageHandler(uri, options).get_file_info(list(paths))
    except Exception as exc:  # delta-rs's object store raises its own error types
        raise LogstoreError(f"cannot list the files of {where(table)}: {exc}") from exc
    return {
        p: int(i.size or 0)
        for p, i in zip(paths, infos, strict=True)
        if i.type != FileType.NotFound
    }
