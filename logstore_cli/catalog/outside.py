"""Outside writes found in a table's Delta log (``ingest/outside.py`` says what they are), read from
the commit files without a JVM: which are not carried into the log yet, for ``ingest``, ``verify``
and ``status``.

Carried means: at or below Delta's transaction version for ``OUTSIDE_WRITER`` (the newest version a
carrying job checked). Commit files the log's cleanup removed (older than its retention, 30 days by
default) cannot be read: a write only they held is not found.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

from logstore_cli.catalog.delta_log import TableLocation, has_commit, open_commit, where
from logstore_cli.catalog.epochs import commit_versions, committed_version
from logstore_cli.errors import LogstoreError
from logstore_cli.ingest.outside import (
    OUTSIDE_WRITER,
    OutsideCommit,
    changes_data,
    classify,
    parse_actions,
)

# What a scan has classified, by version (None: not an outside write); commits never change.
Cache = MutableMapping[int, OutsideCommit | None]


@dataclass(frozen=True)
class Scan:
    """The outside writes found after ``after``, oldest first."""

    commits: tuple[OutsideCommit, ...]
    after: int  # the scan began after this version (the carried-through version, or -1)
    checked_through: int  # the newest version checked (``after`` when there was none)
    unchecked: int = 0  # versions after ``after`` not read (beyond ``limit``, the oldest ones)


def read_commit(table: TableLocation, version: int) -> OutsideCommit | None:
    """The outside write commit ``version`` is; None when it is not one or its file is gone."""
    try:
        with open_commit(table, version) as fh:
            return classify(version, parse_actions(fh))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LogstoreError(
            f"cannot read Delta commit {where(table, version)}: {exc}",
            hint="check the table's _delta_log directory: its commit files are Delta's JSON",
        ) from exc


def only_maintenance_since(table: TableLocation, version: int) -> bool:
    """Whether every commit after ``version`` changes no data (compactions, property changes):
    a commit that lost the race to them only has to be made again."""
    if version < 0:
        return False  # what the commit read is not known
    try:
        newer = [v for v in commit_versions(table) if v > version]
    except LogstoreError:
        return False
    for v in newer:
        try:
            with open_commit(table, v) as fh:
                if changes_data(parse_actions(fh)):
                    return False
        except (OSError, ValueError):
            return False  # unreadable or cleaned up: not known to be harmless
    return bool(newer)


def carried_through(table: TableLocation) -> int:
    """The newest Delta version whose outside writes are carried into the log (-1: none yet)."""
    found = committed_version(table, OUTSIDE_WRITER)
    return -1 if found is None else found


def scan(
    table: TableLocation,
    after: int,
    *,
    up_to: int | None = None,
    limit: int | None = None,
    cache: Cache | None = None,
    versions: list[int] | None = None,
) -> Scan:
    """The outside writes at versions after ``after`` (and at most ``up_to``), oldest first.

    ``limit`` bounds the commit files read (the newest ones: a status of a long-lived table with
    nothing carried yet reads no more than that); ``cache`` keeps what was read across calls;
    ``versions`` is the log's listing when the caller has it (newest first)."""
    listed = commit_versions(table) if versions is None else versions
    wanted = sorted(v for v in listed if v > after and (up_to is None or v <= up_to))
    unchecked = 0
    if limit is not None and len(wanted) > limit:
        unchecked = len(wanted) - limit
        wanted = wanted[unchecked:]
    found: list[OutsideCommit] = []
    for version in wanted:
        if cache is not None and version in cache:
            commit = cache[version]
        else:
            commit = read_commit(table, version)
            if cache is not None:
                cache[version] = commit
        if commit is not None:
            found.append(commit)
    return Scan(
        tuple(found),
        after,
        wanted[-1] if wanted else after,
        unchecked,
    )


def uncarried(
    table: TableLocation,
    *,
    up_to: int | None = None,
    limit: int | None = None,
    cache: Cache | None = None,
    versions: list[int] | None = None,
) -> Scan:
    """The outside writes not carried into the log yet."""
    after = carried_through(table)
    return scan(table, after, up_to=up_to, limit=limit, cache=cache, versions=versions)


@dataclass
class Follower:
    """The outside writes a running ingest job has not seen yet: each call reads only the commit
    files that are new since the last one (probing the next versions, not listing the log).

    ``known`` is a version through which an earlier run of the job found every outside write
    carried (kept in its checkpoint): the first call starts after it, or after the carried-through
    version if that is newer, instead of reading the whole log again."""

    table: TableLocation
    seen: int | None = None  # the newest version checked; None: not started
    known: int | None = None

    def new(self) -> Scan:
        """Outside writes after the carried-through version (first call) or after the last call's
        newest version, oldest first; ``checked_through`` is the newest version there is."""
        if self.seen is None:
            after = carried_through(self.table)
            versions = commit_versions(self.table)
            if self.known is not None and versions and self.known <= versions[0]:
                after = max(after, self.known)  # a known point past the newest version is stale
            found = scan(self.table, after, versions=versions)
        else:
            commits: list[OutsideCommit] = []
            version = self.seen + 1
            while has_commit(self.table, version):
                commit = read_commit(self.table, version)
                if commit is not None:
                    commits.append(commit)
                version += 1
            found = Scan(tuple(commits), self.seen, version - 1)
        self.seen = found.checked_through
        return found
