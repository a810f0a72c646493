"""``status`` reads the epoch commits delta-spark writes: its commit files, ``userMetadata`` and
commit timestamps, not only the hand-written logs of the unit tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.status import table_status
from logstore_cli.logformat.wire import EpochId, commit_metadata
from tests.deltalog import write_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_status_of_commits_written_by_delta_spark(tmp_path: Path, spark: SparkSession) -> None:
    table = write_table(tmp_path, "CREATE TABLE db.orders (id BIGINT, name STRING) USING delta")
    epochs = [EpochId("w-1", 0, "a-0"), EpochId("w-1", 1, "a-1"), EpochId("w-2", 0, "b-0")]
    started = time.time()
    for n, epoch in enumerate(epochs):
        rows = spark.createDataFrame([(n, f"n{n}")], "id BIGINT, name STRING")
        meta = commit_metadata(epoch, {0: 10 * (n + 1), 1: n})
        rows.write.format("delta").mode("append").option("userMetadata", meta).save(str(table))
    # a commit of another tool: no logstore metadata
    spark.createDataFrame([(9, "x")], "id BIGINT, name STRING").write.format("delta").mode(
        "append"
    ).save(str(table))

    status = table_status(wh.find_table(tmp_path, "db.orders"), None)
    assert status.delta_version == 4
    assert [(w.writer, w.epoch, w.attempt, w.delta_version) for w in status.writers] == [
        ("w-2", 0, "b-0", 3),
        ("w-1", 1, "a-1", 2),
    ]
    assert status.last_commit is not None and dict(status.last_commit.offsets) == {0: 30, 1: 2}
    for writer in status.writers:
        assert writer.committed_at is not None
        assert started - 5 <= writer.committed_at <= time.time() + 5
    assert status.log is None and status.warnings == ()
