"""``verify`` against the real broker and delta-spark: tables written by the ingest job, then the
log tampered with straight through a producer, and an ingest killed between its Delta commit and
its markers."""

from __future__ import annotations

import json
import signal
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli import config as cfg
from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.context import Context
from logstore_cli.cli.ingest import build_job
from logstore_cli.ingest import plan
from logstore_cli.jobs import ingest as job_api
from logstore_cli.jobs.ingest import KILL_AT_ENV
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    encode_change,
    encode_marker,
)
from logstore_cli.read.consumer import LogSource, SourceConf
from logstore_cli.read.verify import VerifyResult, verify_table, writer_running
from tests import jobrun
from tests.deltalog import write_epoch_commit

from ..jobs.ingest_support import changes, create_table, fold, orders_ddl, read_log, write_files

TIMEOUT_S = 15.0


def _run(spark: SparkSession, warehouse: Path, table: str, source: Path, **kw: Any) -> list[Any]:
    """One ingest through the job API (the CLI's own build_job), to its end."""
    ctx = Context(cfg.Config(warehouse=str(warehouse), kafka=cfg.KafkaConfig(timeout_s=15)))
    args: dict[str, Any] = dict(
        format=None, source_options={"maxFilesPerTrigger": "1"}, source_bootstrap=None,
        generate=plan.GenerateSource(1000, 10, None, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=1.0, once=True, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    job = build_job(ctx, table, source=str(source), **{**args, **kw})
    reports: list[job_api.EpochReport] = []
    started = job_api.start(spark, job, job_api.acquire_lease(job), on_epoch=reports.append)
    job_api.wait(started, stop=lambda: False)
    return reports


def _verify(warehouse: Path, name: str) -> VerifyResult:
    stored = load_table(warehouse, name)
    log = stored.spec.log_store
    assert log is not None
    conf = SourceConf(log.address, {}, log.topic, TIMEOUT_S)
    with LogSource(conf, RowSchema.of(stored.spec)) as source:
        return verify_table(stored, source, writer_live=lambda: writer_running(stored.ref.path))


def _produce(bootstrap: str, topic: str, schema: RowSchema, eid: EpochId,
             rows: list[tuple[RowKind, dict[str, Any]]], version: int | None, *,
             markers: bool = True) -> None:  # fmt: skip
    """Records of one attempt, keyed and partitioned as the ingest job does; then (``markers``)
    its marker, naming Delta version ``version``, to every partition."""
    with LogProducer(bootstrap, {}, topic, timeout_s=TIMEOUT_S) as producer:
        for kind, row in rows:
            record = ChangeRecord(kind, schema.key_of(row), row, eid)
            key, value, headers = encode_change(record, schema)
            producer.send(key, value, headers)
        producer.flush()
        if markers:
            _, value, headers = encode_marker(CommitMarker(eid, version))
            for partition in range(producer.partition_count()):
                producer.send(None, value, headers, partition=partition)
            producer.flush()


def test_a_clean_ingest_verifies_equal_and_a_forged_epoch_does_not(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    log = changes(1_200, keys=150, seed=11)
    write_files(tmp_path / "in", [log[:600], log[600:]])
    reports = _run(spark, warehouse, "shop.orders", tmp_path / "in")
    assert len(reports) == 2
    records = read_log(kafka_bootstrap, topic_name)

    began = time.monotonic()
    result = _verify(warehouse, "shop.orders")
    took = time.monotonic() - began

    d = result.to_json()
    assert d["equal"] and d["reason"] is None, d
    last = reports[-1]
    assert d["delta_version"] == last.delta_version
    assert d["epoch"] == {"writer": last.writer, "epoch": last.epoch, "attempt": last.attempt}
    markers = sum(1 for r in records if r.key is None)
    assert d["log"]["records"] == len(records) - markers == len(log)
    assert d["log"]["markers"] == markers == 2 * 3
    assert d["log"]["changes"] == len(log) and d["log"]["epochs"] == 2
    ends = {str(p): max(r.offset for r in records if r.partition == p) + 1 for p in range(3)}
    assert d["log"]["end_offsets"] == ends  # the last epoch's records, then its marker
    assert ends == {str(p): o + 1 for p, o in last.offsets.items()}
    assert d["delta"]["rows"] == d["log"]["rows"] == len(fold(log))
    assert d["notes"] == []
    print(f"verify of {len(records)} records, {len(fold(log))} rows: {took:.2f} s")

    table = load_table(warehouse, "shop.orders")
    schema = RowSchema.of(table.spec)
    # an attempt that never committed (no marker): not part of the committed log
    ghost = EpochId("ghost", 0, "g0")
    _produce(kafka_bootstrap, topic_name, schema, ghost,
             [(RowKind.INSERT, {"id": 5_000, "name": "g", "qty": 1, "price": None})], None,
             markers=False)  # fmt: skip
    d = _verify(warehouse, "shop.orders").to_json()
    assert d["equal"], d
    assert d["notes"] == [
        "1 records of 1 epochs without a commit marker (in flight, or an attempt that never "
        "committed) were not compared"
    ]

    # a new writer's epoch whose markers claim the last Delta version: Delta does not confirm it,
    # so nothing of it is folded (before: one key more, one changed), and that is the reason
    alive = next(iter(fold(log)))
    forged = EpochId("intruder", 0, "x0")
    _produce(kafka_bootstrap, topic_name, schema, forged, [
        (RowKind.INSERT, {"id": 9_999, "name": "forged", "qty": 1, "price": None}),
        (RowKind.UPDATE_AFTER, {**_typed(fold(log)[alive]), "name": "changed"}),
    ], last.delta_version)  # fmt: skip
    result = _verify(warehouse, "shop.orders")
    d = result.to_json()
    assert not result.equal
    assert (d["missing"]["count"], d["extra"]["count"], d["different"]["count"]) == (0, 0, 0)
    assert d["reason"].startswith("3 commit markers in topic ")
    assert (
        f"epoch 0 of writer intruder attempt x0 as Delta version {last.delta_version}, which "
        f"holds epoch {last.epoch} of writer {last.writer} attempt {last.attempt}"
    ) in d["reason"]
    assert d["log"]["unconfirmed"] == {"markers": 3, "records": 2}


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the changes' JSON (price as text) as the table's values."""
    price = row["price"]
    return {**row, "price": None if price is None else Decimal(price).quantize(Decimal("0.01"))}


def test_a_table_without_a_key_verifies_as_a_multiset(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse,
                 orders_ddl("shop.events", topic_name, kafka_bootstrap, partitions=2, key=False))  # fmt: skip
    row = {"id": 1, "name": "same", "qty": 2, "price": "1.50"}
    rows = [{"op": "+I", **row}] * 3 + [
        {"op": "+I", "id": i, "name": f"r{i}", "qty": i, "price": None} for i in range(40)
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _run(spark, warehouse, "shop.events", tmp_path / "in")

    d = _verify(warehouse, "shop.events").to_json()
    assert d["equal"], d
    assert d["delta"]["rows"] == d["log"]["rows"] == 43

    # one copy more of a row in the log: a multiset tells it (an epoch Delta holds, as a commit
    # without data: its marker is confirmed, its record is not in the snapshot)
    table = load_table(warehouse, "shop.events")
    odd = EpochId("another", 0, "x0")
    version = d["delta_version"] + 1
    write_epoch_commit(table.ref.path, version, odd)
    _produce(kafka_bootstrap, topic_name, RowSchema.of(table.spec), odd,
             [(RowKind.INSERT, _typed(row))], version)  # fmt: skip
    d = _verify(warehouse, "shop.events").to_json()
    assert not d["equal"] and d["extra"]["count"] == 1 and d["different"]["count"] == 0
    example = d["extra"]["examples"][0]
    assert example["key"] is None and (example["log_copies"], example["delta_copies"]) == (4, 3)


# -- markers not published: the ingest killed between its Delta commit and its markers ------------


def _ingest(warehouse: Path, source: Path, cwd: Path, env: dict[str, str] | None = None) -> int:
    """The CLI as a script runs it, in its own process group (a kill takes its JVM too)."""
    code, _, err = jobrun.finish(jobrun.start(
        [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source", str(source),
         "--once", "--source-option", "maxFilesPerTrigger=1", "--json", "--lease-ttl", "30"],
        cwd=cwd, env={"LOGSTORE_WAREHOUSE": str(warehouse), **(env or {})},
    ))  # fmt: skip
    if code not in (0, -signal.SIGKILL):
        pytest.fail(f"ingest exited {code}:\n{err[-3000:]}")
    return code


@pytest.mark.crash
def test_markers_not_published_after_a_crash_are_named_until_the_job_runs_again(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    create_table(spark, warehouse, orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    log = changes(500, keys=60, seed=12)
    write_files(tmp_path / "in", [log[:250], log[250:]])
    killed = _ingest(warehouse, tmp_path / "in", tmp_path, {KILL_AT_ENV: "after-commit:1"})
    assert killed == -signal.SIGKILL

    path = warehouse / "shop" / "orders"
    last = epochs.latest_epoch_commit(path)
    assert last is not None and last.epoch.epoch == 1
    result = _verify(warehouse, "shop.orders")
    assert not result.equal and result.diff is None
    assert result.reason == (
        f"epoch 1 of writer {last.epoch.writer} committed as Delta version {last.version} but its "
        "commit markers are not in partitions [0, 1, 2]: run the ingest job again (same "
        "--job/--checkpoint) to publish them"
    )
    assert result.to_json()["equal"] is False and "run the ingest job again" in str(result.hint)

    assert _ingest(warehouse, tmp_path / "in", tmp_path) == 0
    d = _verify(warehouse, "shop.orders").to_json()
    assert d["equal"], d
    assert d["delta_version"] == last.version and d["log"]["changes"] == len(log)
