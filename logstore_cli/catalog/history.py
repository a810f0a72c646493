"""``logstore history``: a table's Delta commits, newest first, each named for what it was, read
from the commit files without a JVM.

A commit is one of:

- ``epoch``: an ingest epoch (its ``userMetadata`` is logstore commit metadata, wire format 1):
  writer, epoch, attempt, the log's end offsets it recorded;
- ``carry``: writes made outside logstore, carried into the log by an ingest job (an epoch of the
  reserved writer ``delta-outside``, docs/consistency.md §3.4);
- ``outside``: a write made outside logstore (data changed, no epoch metadata), with whether it is
  carried into the log yet;
- ``maintenance``: files rewritten or removed without a data change (``OPTIMIZE``, ``VACUUM``,
  ``REORG``, a compaction with ``dataChange`` false);
- ``table``: everything else: the table created, its properties or schema changed.

Commit files older than the Delta log's retention are gone: ``History.history_from`` says where
the log's files begin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from logstore_cli.catalog.delta_log import TableLocation, open_commit, where
from logstore_cli.catalog.epochs import commit_rows, commit_versions
from logstore_cli.catalog.lease import local_time
from logstore_cli.catalog.outside import carried_through
from logstore_cli.errors import LogstoreError
from logstore_cli.ingest.outside import (
    OUTSIDE_WRITER,
    classify,
    commit_timestamp_ms,
    parse_actions,
)
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import (
    EpochId,
    LogPosition,
    parse_commit_metadata,
    parse_fence_metadata,
    parse_unfence_metadata,
)

Kind = Literal["epoch", "carry", "outside", "maintenance", "table", "fence"]
MAINTENANCE: Final = frozenset(
    {"OPTIMIZE", "VACUUM START", "VACUUM END", "REORG", "PURGE", "CLONE", "ANALYZE STATS"}
)


@dataclass(frozen=True)
class Commit:
    version: int
    kind: Kind
    operation: str | None
    timestamp_ms: int | None
    engine: str | None = None
    epoch: EpochId | None = None  # epoch and carry
    offsets: Mapping[int, LogPosition] = field(default_factory=dict)  # epoch and carry
    rows: int | None = None  # rows written, from the commit's operationMetrics
    carried: bool | None = None  # outside: whether an ingest carried it into the log yet
    problem: str | None = None  # epoch metadata that is logstore's but broken
    fence: Mapping[str, Any] | None = None  # a takeover's fence, or a writer taking its own down

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "kind": self.kind,
            "operation": self.operation,
            "at": None if self.timestamp_ms is None else local_time(self.timestamp_ms / 1000),
            "engine": self.engine,
            "rows": self.rows,
        }
        if self.epoch is not None:
            out["writer"], out["epoch"] = self.epoch.writer, self.epoch.epoch
            out["attempt"] = self.epoch.attempt
            out["offsets"] = {str(p): o for p, o in sorted(self.offsets.items())}
        if self.kind == "outside":
            out["carried"] = self.carried
        if self.problem is not None:
            out["problem"] = self.problem
        if self.fence is not None:
            out["fence"] = dict(self.fence)
        return out


@dataclass(frozen=True)
class History:
    table: str
    commits: tuple[Commit, ...]  # newest first
    latest: int | None  # the newest version (None: no commit file at all)
    history_from: int | None  # the oldest commit file the log holds
    total: int  # commit files the log holds

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "latest_version": self.latest,
            "history_from": self.history_from,
            "total": self.total,
            "commits": [c.to_json() for c in self.commits],
        }


def describe_commit(version: int, actions: Iterable[Mapping[str, Any]], carried: int) -> Commit:
    """What commit ``version`` was, from its actions; ``carried`` is the carried-through version."""
    listed = list(actions)
    info: Mapping[str, Any] = next(
        (a["commitInfo"] for a in listed if isinstance(a.get("commitInfo"), Mapping)), {}
    )
    operation = info.get("operation") if isinstance(info.get("operation"), str) else None
    engine = info.get("engineInfo") if isinstance(info.get("engineInfo"), str) else None
    stamp, rows = commit_timestamp_ms(info), commit_rows(info)

    def commit(kind: Kind, **extra: Any) -> Commit:
        return Commit(version, kind, operation, stamp, engine, rows=rows, **extra)

    meta = info.get("userMetadata")
    try:
        parsed = parse_commit_metadata(meta if isinstance(meta, str) else None)
    except WireFormatError as exc:
        return commit("table", problem=exc.message)
    fence = parse_fence_metadata(meta if isinstance(meta, str) else None)
    if fence is not None:
        return commit("fence", fence={"token": fence.token, "by": fence.by,
                                      "fenced": fence.fenced, "job": fence.job})  # fmt: skip
    unfence = parse_unfence_metadata(meta if isinstance(meta, str) else None)
    if unfence is not None:
        return commit("fence", fence={"unfenced": unfence[0], "after": unfence[1]})
    if parsed is not None:
        epoch, offsets = parsed
        return commit("carry" if epoch.writer == OUTSIDE_WRITER else "epoch", epoch=epoch,
                      offsets=offsets)  # fmt: skip
    if classify(version, listed) is not None:
        return commit("outside", carried=version <= carried)
    if operation in MAINTENANCE or any("add" in a or "remove" in a for a in listed):
        return commit("maintenance")  # files rewritten or removed without a data change
    return commit("table")


def read_history(table: TableLocation, name: str, limit: int | None = None) -> History:
    """The newest ``limit`` commits of the table at ``table`` (a local directory, or a ``Storage``
    rooted at the table; every commit with None)."""
    versions = commit_versions(table)
    chosen = versions if limit is None else versions[:limit]
    carried = carried_through(table) if chosen else -1
    commits = []
    for version in chosen:
        try:
            with open_commit(table, version) as fh:
                actions = list(parse_actions(fh))
        except FileNotFoundError:
            continue  # removed by the log's cleanup since the listing
        except (OSError, ValueError) as exc:
            raise LogstoreError(
                f"cannot read Delta commit {where(table, version)}: {exc}",
                hint="check the table's _delta_log directory: its commit files are Delta's JSON",
            ) from exc
        commits.append(describe_commit(version, actions, carried))
    return History(
        name,
        tuple(commits),
        versions[0] if versions else None,
        versions[-1] if versions else None,
        len(versions),
    )
