"""``logstore optimize``: Delta's OPTIMIZE (compaction by bin-packing) of a table, safe while an
ingest runs on it. Neither side waits for the other: an epoch commit that loses the race to the
compaction is committed again by the job (``ingest.epoch.CompactionConflict``), and a compaction
that loses the race to an epoch commit is run again here against the new snapshot. Both change no
data twice: the compaction changes none, the epoch is exactly once by Delta's transaction id."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logstore_cli.catalog import epochs
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.ingest.failures import explain_commit_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.catalog.delta_log import TableLocation

ATTEMPTS = 10  # a compaction lost to this many epoch commits in a row gives up
_BACKOFF_S = 0.5  # after a lost race, before the next attempt (doubling, up to 8 s)
# Spark SQL would expand ${...} in text it parses; a predicate is kept as the user typed it.
_NO_SUBSTITUTION = "spark.sql.variable.substitute"


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
        }


def optimize(
    spark: SparkSession,
    name: str,
    table: TableLocation,
    where: str | None,
    *,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> Optimized:
    """Compact the small files of the table at ``table`` (a local directory, or its ``Storage``
    on an ``hdfs://`` warehouse, opened by Spark at its URI; ``where``: only the partitions it
    selects)."""
    from delta.tables import DeltaTable

    from logstore_cli.catalog.delta_log import spark_path

    path = spark_path(table)
    spark.conf.set(_NO_SUBSTITUTION, "false")
    backoff = _BACKOFF_S
    for attempt in range(1, attempts + 1):
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
