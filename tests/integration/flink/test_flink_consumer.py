"""A consumer nobody here wrote: a Flink SQL job (PyFlink 2.2.1, Flink's Kafka connector, the
``debezium-json`` format) reads a debezium-json table's topic after an ingest with updates and
deletes, and after one SIGKILLed mid-epoch and restarted; its changelog folded by key equals the
Delta table (in upsert mode, where deletes are tombstones, it skips them). ``scripts/flink-env.sh``
prepares PyFlink's own venv and the connector jar (``scripts/test.sh`` runs it; alone: ``pytest -m
flink``). Skipped when that environment is not there, unless ``scripts/test.sh`` prepared it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli.jobs.ingest import KILL_AT_ENV
from tests import jobrun
from tests.integration.jobs.ingest_support import (
    COLUMNS,
    changes,
    create_table,
    delta_state,
    fold,
    ingest_once,
    normalized,
    orders_ddl,
    plain_debezium_fold,
    read_log,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.flink]

HOME = Path(os.environ.get("LOGSTORE_FLINK_HOME", Path.home() / ".cache" / "logstore" / "flink"))
PYTHON = HOME / "venv" / "bin" / "python"
JAR = HOME / "flink-sql-connector-kafka-5.0.0-2.2.jar"
READER = Path(__file__).with_name("flink_read.py")
FLINK_TIMEOUT_S = 600  # a guard against a hung JVM, not a performance bound


@pytest.fixture(scope="module")
def flink() -> Path:
    if not (PYTHON.exists() and JAR.exists()):
        missing = f"no PyFlink environment in {HOME}: run scripts/flink-env.sh first"
        if os.environ.get("LOGSTORE_FLINK_REQUIRED") == "1":  # scripts/test.sh prepared it
            pytest.fail(missing)
        pytest.skip(missing)
    return PYTHON


def flink_fold(python: Path, bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    """Flink's changelog of the topic, folded by key: +I/+U upsert the row, -U/-D delete it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "changes.jsonl"
        done = subprocess.run(
            [str(python), str(READER), str(JAR), bootstrap, topic, str(out)],
            capture_output=True, text=True, timeout=FLINK_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-5000:]
        # Our rows only: Flink's JVM logs to stdout (an ERROR line at times as the job ends).
        lines = out.read_text("utf-8").splitlines()
    state: dict[int, dict[str, Any]] = {}
    assert lines, (done.stdout + done.stderr)[-3000:]
    for line in lines:
        change = json.loads(line)
        key = int(change["row"]["id"])
        if change["kind"] in ("+I", "+U"):
            state[key] = normalized(change["row"])
        else:
            state.pop(key, None)
    return state


def _table(
    spark: SparkSession, warehouse: Path, topic: str, bootstrap: str, mode: str = "all"
) -> None:
    if mode == "all":  # Amoro's vocabulary: every kind in the log
        extra = {"log-store.data-format": "debezium-json"}
        ddl = orders_ddl("shop.orders", topic, bootstrap, partitions=3, extra=extra)
    else:  # Paimon's defaults for a keyed table: debezium-json, upsert (deletes are tombstones)
        ddl = (f"CREATE TABLE shop.orders ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ("
               f"'log.system' = 'kafka', 'kafka.bootstrap.servers' = '{bootstrap}', "
               f"'kafka.topic' = '{topic}', 'log.system.partitions' = '3');")  # fmt: skip
    create_table(spark, warehouse, ddl)


@pytest.mark.parametrize("mode", ["all", "upsert"])
def test_flink_reads_a_debezium_json_topic_to_the_delta_table(
    flink: Path, spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str,
    mode: str,
) -> None:  # fmt: skip
    warehouse = tmp_path / "warehouse"
    _table(spark, warehouse, topic_name, kafka_bootstrap, mode)
    log = changes(900, keys=100, seed=21)
    assert {c.op for c in log} == {"+I", "-U", "+U", "-D"}
    write_files(tmp_path / "in", [log[:300], log[300:600], log[600:]])
    ingest_once(spark, warehouse, "shop.orders", str(tmp_path / "in"),
                source_options={"maxFilesPerTrigger": "1"})  # fmt: skip
    want = delta_state(warehouse / "shop" / "orders")
    assert want == {k: normalized(v) for k, v in fold(log).items()}
    got = flink_fold(flink, kafka_bootstrap, topic_name)
    if mode == "all":
        assert got == want
    else:
        # Flink's debezium-json source skips the tombstones without a parse error: it sees every
        # insert and update, and keeps the rows deleted last (docs/guide.md, "Deletes in upsert
        # mode"), exactly what a plain consumer that skips null values folds the topic to.
        assert got == plain_debezium_fold(read_log(kafka_bootstrap, topic_name))
        assert {k: v for k, v in got.items() if k in want} == want and set(got) > set(want)


def test_flink_reads_the_topic_of_a_job_killed_mid_epoch_to_the_delta_table(
    flink: Path, spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    _table(spark, warehouse, topic_name, kafka_bootstrap)
    log = changes(600, keys=60, seed=22)
    source = tmp_path / "in"
    write_files(source, [log[:300], log[300:]])

    def ingest(env: dict[str, str]) -> tuple[int, str]:
        proc = jobrun.start(
            [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source",
             str(source), "--once", "--source-option", "maxFilesPerTrigger=1", "--json"],
            cwd=tmp_path, env={"LOGSTORE_WAREHOUSE": str(warehouse), **env},
        )  # fmt: skip
        code, _, err = jobrun.finish(proc)
        return code, err

    # Killed after producing epoch 1's records, before its Delta commit: they stay in the topic.
    code, err = ingest({KILL_AT_ENV: "after-log:1"})
    assert code == -signal.SIGKILL, err[-3000:]
    code, err = ingest({})
    assert code == 0, err[-3000:]
    want = delta_state(warehouse / "shop" / "orders")
    assert want == {k: normalized(v) for k, v in fold(log).items()}
    assert flink_fold(flink, kafka_bootstrap, topic_name) == want
