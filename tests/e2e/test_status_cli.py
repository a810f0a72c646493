"""``logstore status`` as a script calls it: a table whose Delta log holds epoch commits (written
by hand, no JVM), its topic on the real broker with the epoch's records and markers, a lease held by
another process, and a broker that cannot be reached."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Producer

from logstore_cli.catalog.tables import load_table
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.local_broker import free_port
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from tests.deltalog import write_table
from tests.e2e.cli_support import keyed_ddl, run_cli

Message = tuple[bytes | None, bytes, list[tuple[str, str | bytes | None]]]  # key, value, headers


_run = run_cli
_ddl = keyed_ddl


def _epoch_commit(table: Path, epoch: EpochId, offsets: dict[int, int]) -> int:
    """What the ingest job's Delta commit leaves in the log: commitInfo with the epoch metadata."""
    log = table / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json")) + 1
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "MERGE",
                        "userMetadata": commit_metadata(epoch, offsets)}},
        {"txn": {"appId": epoch.writer, "version": epoch.epoch, "lastUpdated": 0}},
    ]  # fmt: skip
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return version


def _produce(producer: Producer, topic: str, items: list[tuple[int, Message]]) -> None:
    for partition, (key, value, headers) in items:
        producer.produce(topic, value=value, key=key, headers=headers, partition=partition)
    assert producer.flush(30) == 0


def test_status_of_a_table_with_a_committed_epoch_and_one_in_flight(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    table = write_table(warehouse, _ddl("db.orders", topic_name, kafka_bootstrap))
    row_schema = RowSchema.of(load_table(warehouse, "db.orders").spec)

    def change(i: int, epoch: EpochId) -> Message:
        rec = ChangeRecord(RowKind.INSERT, {"id": i}, {"id": i, "name": f"n{i}"}, epoch)
        key, value, headers = encode_change(rec, row_schema)
        return key, value, list(headers)

    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic_name, 2, 1, {})
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
        # epoch 0: 3 records to partition 0, 1 to partition 1; committed; markers to both
        e0 = EpochId("w-e2e", 0, "a-0")
        _produce(producer, topic_name, [(0, change(1, e0)), (0, change(2, e0)),
                                        (0, change(3, e0)), (1, change(4, e0))])  # fmt: skip
        offsets = admin.end_offsets(topic_name)
        version = _epoch_commit(table, e0, offsets)
        marker = encode_marker(CommitMarker(e0, version))
        _produce(
            producer, topic_name, [(p, (marker[0], marker[1], list(marker[2]))) for p in (0, 1)]
        )
        # epoch 1 in flight: 2 records to partition 0, no commit yet
        e1 = EpochId("w-e2e", 1, "a-1")
        _produce(producer, topic_name, [(0, change(5, e1)), (0, change(6, e1))])
        ends = admin.end_offsets(topic_name)

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from logstore_cli.catalog.lease import Lease\n"
         f"Lease.acquire(Path({str(table)!r}), 'orders-cdc', 600, table='db.orders')\n"
         "print('taken', flush=True); sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "taken"
        result = _run("status", "db.orders", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        d = json.loads(result.stdout)
        assert d["lease"]["job"] == "orders-cdc" and d["lease"]["pid"] == holder.pid
        assert d["lease"]["holder_running"] is True and d["lease"]["expired"] is False

        people = _run("status", "db.orders", cwd=tmp_path)
        assert people.returncode == 0, people.stderr
        assert "held by job 'orders-cdc'" in people.stdout and "after commit" in people.stdout
    finally:
        holder.kill()
        holder.wait()

    assert d["delta"]["version"] == version
    assert [(w["writer"], w["epoch"], w["attempt"], w["delta_version"]) for w in d["writers"]] == [
        ("w-e2e", 0, "a-0", version)
    ]
    assert d["last_commit"]["offsets"] == {str(p): o for p, o in offsets.items()}
    tails = {p["partition"]: p for p in d["log"]["partitions"]}
    assert {p: t["end_offset"] for p, t in tails.items()} == ends
    # partition 0: the marker and epoch 1's two records; partition 1: the marker only
    assert tails[0]["after_commit"] == 3 and tails[1]["after_commit"] == 1
    assert d["log"]["end_offsets_read"] is True and d["log"]["error"] is None

    # the holder was killed: still within its expiry, but a job on this host may take it at once
    after = json.loads(_run("status", "db.orders", "--json", cwd=tmp_path).stdout)
    assert after["lease"]["holder_running"] is False and after["lease"]["expired"] is False


def test_an_unreachable_broker_still_shows_the_table_and_exits_0(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    table = write_table(tmp_path / "wh", _ddl("db.down", "down_log", dead))
    version = _epoch_commit(table, EpochId("w", 4, "a"), {0: 10, 1: 12})
    result = _run("status", "db.down", "--json", "--kafka-timeout", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"warning: log: cannot reach Kafka at {dead}" in result.stderr
    d = json.loads(result.stdout)
    assert d["writers"][0]["delta_version"] == version
    assert d["log"]["end_offsets_read"] is False and dead in d["log"]["error"]
    assert [p["committed_offset"] for p in d["log"]["partitions"]] == [10, 12]

    # --no-topic never asks: no warning at all
    quiet = _run("status", "db.down", "--no-topic", "--json", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout)["log"]["error"] is None


def test_a_missing_table_exits_1_without_a_traceback(tmp_path: Path) -> None:
    write_table(tmp_path / "wh", "CREATE TABLE db.orders (id BIGINT) USING delta")
    result = _run("status", "db.ordrs", cwd=tmp_path)
    assert result.returncode == 1
    assert "table 'db.ordrs' not found" in result.stderr and "db.orders" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_starts_no_spark(tmp_path: Path) -> None:
    write_table(tmp_path / "wh", "CREATE TABLE db.orders (id BIGINT) USING delta")
    code = (
        "import sys\n"
        "from logstore_cli.cli.app import run\n"
        f"rc = run(['status', 'db.orders', '--json', '--warehouse', {str(tmp_path / 'wh')!r}])\n"
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=tmp_path)  # fmt: skip
    assert proc.stderr.strip().splitlines()[-1] == "0 []"
    assert json.loads(proc.stdout)["name"] == "db.orders"


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """The lines of ``stream`` as they come, read by a thread (None at the end), so that a test
    can wait for the next one with a deadline."""
    found: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            found.put(line)
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return found


def _next_json(lines: queue.Queue[str | None], deadline: float, proc: subprocess.Popen[str]) -> Any:
    try:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise AssertionError("no line before the deadline") from None
    assert line is not None, f"the process ended (exit {proc.wait()})"
    return json.loads(line)


def _interrupt(
    proc: subprocess.Popen[str], lines: queue.Queue[str | None], timeout: float = 120
) -> tuple[list[str], str]:
    """Ctrl-C as a terminal sends it (SIGINT to the process group); the lines ``lines`` had not
    handed out yet, and stderr."""
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout)
    assert proc.stderr is not None
    err = proc.stderr.read()
    rest: list[str] = []
    while (line := lines.get(timeout=timeout)) is not None:
        rest.append(line)
    return rest, err


def test_watch_json_follows_a_running_ingest_until_ctrl_c(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    write_table(tmp_path / "wh", _ddl("db.orders", topic_name, kafka_bootstrap))
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic_name, 2, 1, {})
    env = {**os.environ, "LOGSTORE_WAREHOUSE": str(tmp_path / "wh"),
           "LOGSTORE_STATE_DIR": str(tmp_path / "state")}  # fmt: skip

    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "logstore_cli", *args], cwd=tmp_path, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip

    ingest = start("ingest", "db.orders", "--source", "generate", "--rate", "400", "--keys", "60",
                   "--trigger", "1", "--job", "watched", "--json")  # fmt: skip
    watch: subprocess.Popen[str] | None = None
    try:
        assert ingest.stdout is not None
        events = _lines(ingest.stdout)
        deadline = time.monotonic() + 240  # the JVM starts slowly on a loaded 2-core machine
        while _next_json(events, deadline, ingest).get("event") != "epoch":
            pass
        watch = start("status", "db.orders", "--watch", "--json", "--interval", "0.5")
        assert watch.stdout is not None
        refreshes = _lines(watch.stdout)
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 180
        # until the view has followed another epoch commit, and a rate from it
        while not (
            len({d["delta"]["version"] for d in seen}) >= 2 and any(d["rows_per_s"] for d in seen)
        ):
            seen.append(_next_json(refreshes, deadline, watch))
        rest, err = _interrupt(watch, refreshes)
        assert watch.returncode == 130, err
        assert "error: interrupted" in err and "Traceback" not in err
        seen += [json.loads(line) for line in rest]
        _, err = _interrupt(ingest, events)
        assert ingest.returncode == 130, err
    finally:
        for proc in (watch, ingest):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    stamps = [datetime.fromisoformat(d["timestamp"]) for d in seen]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    versions = [d["delta"]["version"] for d in seen]
    assert versions == sorted(versions)
    for d in seen:
        # the shape of `status --json`, plus the refresh's time and rates
        assert set(d) >= {"name", "delta", "lease", "writers", "last_commit", "log", "quarantined",
                          "warnings", "timestamp", "rows_per_s", "log_records_per_s"}  # fmt: skip
        assert d["lease"]["job"] == "watched" and d["lease"]["holder_running"] is True
        assert d["log"]["end_offsets_read"] is True and d["warnings"] == []
        assert all(p["after_commit"] >= 0 for p in d["log"]["partitions"])
    epochs = [d["writers"][0]["epoch"] for d in seen]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]
    assert any(d["rows_per_s"] and d["log_records_per_s"] for d in seen)


def test_watch_shows_a_broker_that_goes_away_as_a_warning_and_goes_on(tmp_path: Path) -> None:
    """A private broker (the session's must stay up), stopped while ``status --watch`` runs."""
    state = tmp_path / "broker-state"
    env = {**os.environ, "LOGSTORE_STATE_DIR": str(state),
           "LOGSTORE_WAREHOUSE": str(tmp_path / "wh")}  # fmt: skip

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "logstore_cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=180, check=False)  # fmt: skip

    started = cli("broker", "start", "--json")
    assert started.returncode == 0, started.stderr
    bootstrap = json.loads(started.stdout)["bootstrap"]
    watch: subprocess.Popen[str] | None = None
    try:
        table = write_table(tmp_path / "wh", _ddl("db.orders", "gone_log", bootstrap))
        with KafkaAdmin(bootstrap, timeout_s=15) as admin:
            admin.create_topic("gone_log", 2, 1, {})
        _epoch_commit(table, EpochId("w", 0, "a"), {0: 0, 1: 0})
        watch = subprocess.Popen(
            [sys.executable, "-m", "logstore_cli", "status", "db.orders", "--watch", "--json",
             "--interval", "0.3", "--kafka-timeout", "2"],
            env=env, cwd=tmp_path, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        assert watch.stdout is not None
        refreshes = _lines(watch.stdout)
        deadline = time.monotonic() + 60
        # A refresh on a loaded machine may miss the 2 s Kafka timeout: the broker being up is a
        # refresh that reads the end offsets without a warning, before the deadline.
        early_warnings = 0
        while not ((first := _next_json(refreshes, deadline, watch))["log"]["end_offsets_read"]):
            early_warnings += 1
        assert first["warnings"] == []

        stopped = cli("broker", "stop", "--json")
        assert stopped.returncode == 0, stopped.stderr
        deadline = time.monotonic() + 60
        while not (d := _next_json(refreshes, deadline, watch))["warnings"]:
            pass
        assert d["log"]["end_offsets_read"] is False and bootstrap in d["log"]["error"]
        after = [_next_json(refreshes, deadline, watch) for _ in range(2)]  # it goes on
        assert all(a["warnings"] and a["writers"][0]["epoch"] == 0 for a in after)
        _, err = _interrupt(watch, refreshes)
        assert watch.returncode == 130, err
        warned = [line for line in err.splitlines() if line.startswith("warning: log:")]
        # each warning once while it lasts (the broker going down may say something else first;
        # a timed-out refresh before the first good one said it once more)
        assert len(warned) <= 2 + early_warnings, warned
        if not early_warnings:
            assert len(warned) == len(set(warned)), warned
        assert warned[-1] == f"warning: log: cannot reach Kafka at {bootstrap}"
        assert "Traceback" not in err
    finally:
        if watch is not None and watch.poll() is None:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
        cli("broker", "stop")
