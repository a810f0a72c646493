"""``logstore optimize``: Delta's OPTIMIZE (compaction by bin-packing) of a table, safe while an
ingest runs on it. Neither side waits for the other: an epoch commit that loses the race to the
compaction is committed again by the job (``ingest.epoch.CompactionConflict``), and a compaction
that loses the race to an epoch commit is run again here against the new snapshot. Both change no
data twice: the compaction changes none, the epoch is exactly once by Delta's transaction id.

On an ``s3://`` warehouse the race is not safe: Delta's S3 log store is single-driver (two drivers
writing the same version can overwrite each other's commit), so there the compaction holds the
table's writer lease, the one ingest takes (``take_writer_lease``), from before Spark starts
until it ends: refused while an ingest holds it, and a writer whose expired lease it took over is
fenced in Delta first (``fence_previous_writers``), as an ingest taking over does."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from logstore_cli.catalog import epochs
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.ingest.failures import explain_commit_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.catalog.delta_log import TableLocation
    from logstore_cli.catalog.lease import HeldLease
    from logstore_cli.model import TableSpec
    from logstore_cli.storage import Storage

ATTEMPTS = 10  # a compaction lost to this many epoch commits in a row gives up
_BACKOFF_S = 0.5  # after a lost race, before the next attempt (doubling, up to 8 s)
# Spark SQL would expand ${...} in text it parses; a predicate is kept as the user typed it.
_NO_SUBSTITUTION = "spark.sql.variable.substitute"
JOB = "optimize"  # the lease's job name while a compaction holds it (what status shows)
LEASE_TTL_S = 60.0  # as ingest's default: renewed every quarter of it while the compaction runs


@dataclass(frozen=True)
class Optimized:
    table: str
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    version: int | None  # the compaction's commit; None when there was nothing to compact
    attempts: int  # 1, or more when epoch commits won the race first
    where: str | None
    fenced: tuple[int, ...] = ()  # fence commits of writers whose expired lease it took (S3)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "where": self.where,
            "files_removed": self.files_removed,
            "files_added": self.files_added,
            "bytes_removed": self.bytes_removed,
            "bytes_added": self.bytes_added,
            "delta_version": self.version,
            "attempts": self.attempts,
            "fenced": list(self.fenced),
        }


def optimize(
    spark: SparkSession,
    name: str,
    table: TableLocation,
    where: str | None,
    *,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    check: Callable[[], None] | None = None,
) -> Optimized:
    """Compact the small files of the table at ``table`` (a local directory, or its ``Storage``
    on a remote warehouse, opened by Spark at its URI; ``where``: only the partitions it
    selects). ``check`` runs before each attempt (the lease's check: it raises when lost)."""
    from delta.tables import DeltaTable

    from logstore_cli.catalog.delta_log import spark_path

    path = spark_path(table)
    spark.conf.set(_NO_SUBSTITUTION, "false")
    backoff = _BACKOFF_S
    for attempt in range(1, attempts + 1):
        if check is not None:
            check()
        builder = DeltaTable.forPath(spark, path).optimize()
        if where is not None:
            builder = builder.where(where)
        try:
            row = builder.executeCompaction().collect()[0]
        except Exception as exc:
            explained = explain_commit_failure(str(exc), name)
            if explained is not None and explained.cause == "another-writer":
                if attempt < attempts:
                    sleep(backoff)
                    backoff = min(backoff * 2, 8.0)
                    continue
                raise LogstoreError(
                    f"the compaction of {name} lost the race to other commits {attempts} times "
                    "in a row; nothing was changed",
                    hint="run it again; an ingest that commits very often leaves little room: "
                    "its own compaction (full-compaction.delta-commits) never races it",
                    detail=_first_line(exc),
                ) from exc
            raise _explain(exc, name, where) from exc
        m = row["metrics"]
        removed, added = int(m["numFilesRemoved"]), int(m["numFilesAdded"])
        version = epochs.commit_versions(table)[0] if removed or added else None
        return Optimized(
            name, removed, added,
            int(m["filesRemoved"]["totalSize"] or 0), int(m["filesAdded"]["totalSize"] or 0),
            version, attempt, where,
        )  # fmt: skip
    raise AssertionError("unreachable")


def optimize_holding(
    spark: SparkSession,
    name: str,
    table: Storage,
    where: str | None,
    lease: HeldLease,
    spec: Callable[[], TableSpec],
) -> Optimized:
    """``optimize`` holding the table's writer lease (``take_writer_lease``): the writers of the
    leases it took over fenced first, the lease checked before each attempt (with a third of its
    TTL left, as before an epoch commit)."""
    fenced = fence_previous_writers(spark, spec, table, lease)
    done = optimize(spark, name, table, where, check=lambda: lease.check(lease.ttl_s / 3))
    return replace(done, fenced=tuple(fenced))


def take_writer_lease(table: Storage, name: str, ttl_s: float = LEASE_TTL_S) -> HeldLease:
    """The writer lease of table ``name`` (stored at ``table``) for a compaction, renewed in the
    background until released. A live holder (an ingest) makes it a LogstoreError (exit 1)
    naming it: nothing was read or written."""
    from logstore_cli.catalog.lease import LeaseHeldError, local_time
    from logstore_cli.catalog.storage_lease import acquire_lease

    try:
        lease = acquire_lease(table, JOB, ttl_s, table=name)
    except LeaseHeldError as exc:
        holder = exc.holder
        raise LogstoreError(
            f"{name} was not compacted: {holder.holder} holds its writer lease (until "
            f"{local_time(holder.expires_at)}, renewed while it runs), and on S3 a compaction "
            "takes that lease, as Delta's S3 log store is safe for one writing driver only; "
            "nothing was changed",
            hint=f"run 'logstore optimize {name}' again once that job has stopped (between two "
            "runs of an ingest --once, say), or let the running ingest compact the table itself "
            "(the table property full-compaction.delta-commits)",
        ) from None
    lease.keep_alive(ttl_s / 4)
    return lease


def fence_previous_writers(
    spark: SparkSession, spec: Callable[[], TableSpec], table: Storage, lease: HeldLease
) -> list[int]:
    """Fence in Delta the writers of the leases ``lease`` took over (an ingest whose lease expired
    may be paused, not gone: docs/consistency.md §6, "The fence"), then record that none is owed.
    ``spec``: the table's, loaded only when there is a writer to fence. The fence commits'
    versions."""
    owed = lease.info.unfenced
    if not owed:
        return []
    from logstore_cli.jobs.ingest import DeltaCommitter
    from logstore_cli.logformat.wire import Fence

    committer = DeltaCommitter(spec(), table, spark)
    fenced: list[int] = []
    for writer in owed:
        lease.check()
        version = committer.fence(Fence(lease.info.fence, JOB, writer, JOB))
        if version is not None:
            fenced.append(version)
    lease.set_unfenced(())
    return fenced


def _explain(exc: Exception, name: str, where: str | None) -> LogstoreError:
    text = str(exc)
    if where is not None and ("non-partition column" in text or "partition column" in text):
        return InvalidInputError(
            f"--where {where!r} is not a condition on {name}'s partition columns: "
            f"{_first_line(exc)}",
            hint="OPTIMIZE can select partitions only; drop --where to compact the whole table",
        )
    if where is not None and ("PARSE_SYNTAX_ERROR" in text or "UNRESOLVED_COLUMN" in text):
        return InvalidInputError(
            f"--where {where!r} cannot be read: {_first_line(exc)}",
            hint='give a Spark SQL condition on partition columns, e.g. --where "day = '
            "'2026-11-25'\"",
        )
    explained = explain_commit_failure(text, name)
    if explained is not None:
        return LogstoreError(explained.message, hint=explained.hint, detail=_first_line(exc))
    return LogstoreError(f"the compaction of {name} failed: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
