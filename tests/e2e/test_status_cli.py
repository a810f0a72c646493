"""``logstore status`` as a script calls it: a table whose Delta log holds epoch commits (written
by hand, no JVM), its topic on the real broker with the epoch's records and markers, a lease held by
another process, and a broker that cannot be reached."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

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
    t0 = time.monotonic()
    result = _run("status", "db.down", "--json", "--kafka-timeout", "3", cwd=tmp_path)
    assert time.monotonic() - t0 < 30
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
