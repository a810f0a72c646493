"""Writes made to the Delta table outside logstore (a GDPR ``DELETE`` and an ``UPDATE`` in Spark
SQL, an overwrite that breaks the primary key), with real Spark, Kafka and Delta: ``verify`` and
``status`` name them; the next ``ingest`` carries them into the log from the Change Data Feed, so
log readers see them; a write Delta recorded no feed for stops ingest with what to run, and
``--skip-outside-through`` goes on without it. (The protocol's unit tests:
``tests/unit/ingest/test_epoch.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.outside import carried_through
from logstore_cli.catalog.status import table_status
from logstore_cli.catalog.tables import load_table
from logstore_cli.errors import OutsideWriteError
from logstore_cli.ingest.epoch import CarryReport
from logstore_cli.ingest.outside import OUTSIDE_WRITER
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import RowSchema
from logstore_cli.read.consumer import LogSource, SourceConf
from logstore_cli.read.verify import VerifyResult, verify_table

from .ingest_support import (
    Change,
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
    create_table,
    ingest_once,
    orders_ddl,
    read_log,
    write_files,
)

pytestmark = pytest.mark.integration

TABLE = "shop.orders"


def _cli(warehouse: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=tmp, env={**os.environ, "LOGSTORE_WAREHOUSE": str(warehouse),
                      "LOGSTORE_STATE_DIR": str(tmp / "state")},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    parsed = json.loads(proc.stdout)
    assert isinstance(parsed, dict), proc.stdout
    return parsed


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    with KafkaAdmin(bootstrap, timeout_s=15) as admin:
        return admin.end_offsets(topic)


def test_outside_writes_are_named_then_carried_into_the_log(
    spark: Any, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap))
    path = load_table(warehouse, TABLE).ref.path
    write_files(tmp_path / "in", [changes(300, keys=40, seed=3)])
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))  # in this process's Spark
    # The job kept how far it found nothing to carry: its next start reads the commits after it.
    kept = json.loads((path / "_logstore/checkpoints/ingest/logstore-outside.json").read_text())
    assert 0 <= kept["checked_through"] < epochs.commit_versions(path)[0] and kept["table_id"]
    live = sorted(r.id for r in spark.read.format("delta").load(str(path)).collect())
    assert len(live) > 10

    # A GDPR delete and an update, run in Spark SQL by someone else.
    gone = live[:3]
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN ({', '.join(map(str, gone))})")
    spark.sql(f"UPDATE delta.`{path}` SET qty = -1 WHERE id = {live[5]}")
    versions = epochs.commit_versions(path)[:2]  # the two outside writes, newest first

    verified = _cli(warehouse, tmp_path, "verify", TABLE, "--json")
    assert verified.returncode == 1, verified.stderr[-3000:]
    result = _json(verified)
    assert not result["equal"]
    assert [(c["version"], c["operation"]) for c in result["outside"]] == [
        (versions[1], "DELETE"), (versions[0], "UPDATE")
    ]  # fmt: skip
    assert "outside logstore" in result["reason"] and "ingest" in result["hint"]
    status = _json(_cli(warehouse, tmp_path, "status", TABLE, "--json"))
    assert [c["version"] for c in status["outside"]["uncarried"]] == sorted(versions)

    # The next ingest, with nothing new to ingest, carries both before its first epoch.
    reports: list[CarryReport] = []
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"), on_carry=reports.append)
    (report,) = reports
    assert [c.version for c in report.commits] == sorted(versions)
    assert report.log_records == 3 + 2  # three deletes; the update's pre- and post-image
    assert carried_through(path) == report.through == max(versions)
    table = load_table(warehouse, TABLE).spec
    check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert_log_reads_equal_delta(warehouse, TABLE)  # the deletes reached log readers
    after = table_status(load_table(warehouse, TABLE).ref, None)
    assert after.outside == () and OUTSIDE_WRITER in [w.writer for w in after.writers]

    # An overwrite that leaves one key twice: carried too, and verify says the table broke its key.
    spark.createDataFrame(
        [(1, "a", 1, None), (1, "b", 2, None), (2, "c", 3, None)],
        "id BIGINT, name STRING, qty INT, price DECIMAL(10,2)",
    ).write.format("delta").mode("overwrite").save(str(path))
    reports.clear()
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"), on_carry=reports.append)
    assert [[c.operation for c in r.commits] for r in reports] == [["WRITE"]]
    result = _verify(warehouse)
    assert not result.equal and result.outside == [], result.to_json()
    assert any("more than once" in note for note in result.notes), result.notes


def _verify(warehouse: Path) -> VerifyResult:
    stored = load_table(warehouse, TABLE)
    assert stored.spec.log_store is not None
    conf = SourceConf(stored.spec.log_store.address, {}, stored.spec.log_store.topic, 15.0)
    with LogSource(conf, RowSchema.of(stored.spec)) as source:
        return verify_table(stored, source)


def test_a_write_without_change_data_stops_ingest_until_skipped(
    spark: Any, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap))
    path = load_table(warehouse, TABLE).ref.path
    rows = [(i, f"n{i}", i, None) for i in range(6)]
    schema = "id BIGINT, name STRING, qty INT, price DECIMAL(10,2)"
    spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(str(path))
    appended = epochs.commit_versions(path)[0]  # recorded with its Change Data Feed
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 2")
    deleted = epochs.commit_versions(path)[0]  # recorded without it
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    before = _ends(kafka_bootstrap, topic_name)

    (tmp_path / "empty").mkdir()
    with pytest.raises(OutsideWriteError) as refused:
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "empty"), format="json")
    assert f"version {deleted}" in refused.value.message
    assert "Change Data Feed" in refused.value.message
    assert f"--skip-outside-through {deleted}" in (refused.value.hint or "")
    assert _ends(kafka_bootstrap, topic_name) == before  # nothing was written
    assert carried_through(path) == -1

    reports: list[CarryReport] = []
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "empty"), format="json", on_carry=reports.append,
                skip_outside_through=deleted)  # fmt: skip
    (report,) = reports
    assert [c.version for c in report.commits] == [appended]  # its feed is there: carried
    assert [c.version for c in report.skipped] == [deleted]
    assert report.log_records == 6
    # What was skipped is not hidden: verify shows the two deleted rows still in the log.
    result = _verify(warehouse)
    assert result.outside == [] and not result.equal
    assert result.diff is not None and result.diff.extra.count == 2, result.to_json()


def test_a_write_found_behind_an_epoch_is_carried_with_the_keys_current_images(
    spark: Any, tmp_path: Path, kafka_bootstrap: str, topic_name: str, monkeypatch: Any
) -> None:
    """An outside UPDATE of key 1 and DELETE of key 2, then an epoch (in the log) that updates key
    1 again, by a job
    that did not see the write (it landed after its check, or came before carrying existed). The
    carry's feed rows alone would put the older value last in the log; the carry ends with key 1's
    current image, so the log still folds to the table."""
    from logstore_cli.jobs import ingest as job_api

    warehouse = tmp_path / "wh"
    create_table(spark, warehouse, orders_ddl(TABLE, topic_name, kafka_bootstrap))
    path = load_table(warehouse, TABLE).ref.path
    row = {"id": 1, "name": "first", "qty": 1, "price": "1.00"}
    write_files(tmp_path / "in", [[Change("+I", row), Change("+I", {**row, "id": 2})]])
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
    spark.sql(f"UPDATE delta.`{path}` SET name = 'outside' WHERE id = 1")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2")
    outside = epochs.commit_versions(path)[:2][::-1]

    with monkeypatch.context() as patched:  # a job that does not see the write
        patched.setattr(job_api.DeltaOutsideWrites, "pending", lambda self: None)
        write_files(tmp_path / "in", [[Change("+U", {**row, "name": "epoch"})]], start=1)
        ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"))
    assert epochs.latest_epoch_commit(path).version > outside[1]  # type: ignore[union-attr]

    reports: list[CarryReport] = []
    ingest_once(spark, warehouse, TABLE, str(tmp_path / "in"), on_carry=reports.append)
    (report,) = reports
    assert [c.version for c in report.commits] == outside
    table = load_table(warehouse, TABLE).spec
    check_protocol(table, path, read_log(kafka_bootstrap, topic_name))  # folds to Delta
    assert_log_reads_equal_delta(warehouse, TABLE)
    # The update's two images and the delete, then keys 1 and 2 as the table has them (+U, -D).
    assert report.log_records == 2 + 1 + 2
