"""``status`` as a typed result: writers from the Delta commits' epoch metadata, the log's tail
against the last epoch commit, the lease and the quarantine. Delta logs are written by hand (no
JVM); Kafka is the in-memory topic store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.lease import LEASE_FILE, Lease, local_time
from logstore_cli.catalog.status import count_quarantined, table_status
from logstore_cli.ingest.plan import STATE_DIR, JobPaths
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.logformat.wire import EpochId, commit_metadata
from tests.deltalog import write_table
from tests.unit.provision.fakes import MemTopics

DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders_log',
      'kafka.bootstrap.servers' = 'broker:9092', 'log.system.partitions' = '3');
"""
T0 = 1_700_000_000_000  # ms


def commit(table: Path, info: Mapping[str, Any], *actions: Mapping[str, Any]) -> int:
    """Append the next Delta commit: ``commitInfo`` first (as Spark writes it), then ``actions``."""
    log = table / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json")) + 1
    lines = [{"commitInfo": {"timestamp": T0 + version * 1000, **info}}, *actions]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))
    return version


def epoch_commit(
    table: Path, writer: str, epoch: int, attempt: str, offsets: dict[int, int]
) -> int:
    meta = commit_metadata(EpochId(writer, epoch, attempt), offsets)
    txn = {"txn": {"appId": writer, "version": epoch, "lastUpdated": T0}}
    return commit(table, {"operation": "MERGE", "userMetadata": meta}, txn)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_table(tmp_path, DDL)


def status(table: Path, topics: MemTopics | None = None, **kw: Any) -> dict[str, Any]:
    ref = wh.find_table(table.parents[1], "db.orders")
    return table_status(ref, topics, **kw).to_json()


def topics_with(ends: dict[int, int]) -> MemTopics:
    topics = MemTopics(topics={"orders_log": TopicInfo("orders_log", len(ends), 1, {})})
    topics.offsets["orders_log"] = ends
    return topics


def test_each_writers_last_epoch_newest_first(table: Path) -> None:
    epoch_commit(table, "w-1", 0, "a-0", {0: 4, 1: 2, 2: 0})
    commit(table, {"operation": "SET TBLPROPERTIES"})  # alter-table: not an epoch
    v1 = epoch_commit(table, "w-1", 1, "a-1", {0: 9, 1: 5, 2: 1})
    commit(table, {"operation": "WRITE", "userMetadata": '{"note": "another tool"}'})
    v2 = epoch_commit(table, "w-2", 0, "b-0", {0: 12, 1: 7, 2: 3})
    d = status(table)
    assert d["delta"] == {"version": v2, "history_from": 0}
    assert d["writers"] == [
        {"writer": "w-2", "epoch": 0, "attempt": "b-0", "delta_version": v2,
         "committed_at": local_time((T0 + v2 * 1000) / 1000)},
        {"writer": "w-1", "epoch": 1, "attempt": "a-1", "delta_version": v1,
         "committed_at": local_time((T0 + v1 * 1000) / 1000)},
    ]  # fmt: skip
    assert d["last_commit"]["writer"] == "w-2"
    assert d["last_commit"]["offsets"] == {"0": 12, "1": 7, "2": 3}
    assert d["warnings"] == []


def test_the_tail_is_the_end_offsets_minus_the_last_commits_offsets(table: Path) -> None:
    epoch_commit(table, "w-1", 0, "a-0", {0: 4, 1: 2})
    epoch_commit(table, "w-1", 1, "a-1", {0: 10, 1: 6})
    # partition 0: the marker and an epoch in flight; 1: only the marker; 2: added after the commit
    d = status(table, topics_with({0: 15, 1: 7, 2: 3}))
    assert d["log"] == {
        "topic": "orders_log",
        "system": "kafka",
        "end_offsets_read": True,
        "partitions": [
            {"partition": 0, "end_offset": 15, "committed_offset": 10, "after_commit": 5},
            {"partition": 1, "end_offset": 7, "committed_offset": 6, "after_commit": 1},
            {"partition": 2, "end_offset": 3, "committed_offset": None, "after_commit": None},
        ],
        "error": None,
    }


def test_without_an_epoch_commit_the_end_offsets_stand_alone(table: Path) -> None:
    d = status(table, topics_with({0: 0, 1: 0, 2: 0}))
    assert d["writers"] == [] and d["last_commit"] is None
    assert [p["end_offset"] for p in d["log"]["partitions"]] == [0, 0, 0]
    assert all(p["after_commit"] is None for p in d["log"]["partitions"])


def test_an_unreachable_broker_leaves_the_delta_part_and_says_so(table: Path) -> None:
    v = epoch_commit(table, "w-1", 3, "a-3", {0: 8, 1: 8, 2: 8})
    topics = topics_with({0: 9, 1: 9, 2: 9})
    topics.unreachable = True
    d = status(table, topics)
    assert d["writers"][0]["delta_version"] == v
    log = d["log"]
    assert log["end_offsets_read"] is False
    assert log["error"].startswith("cannot reach Kafka at broker:9092")
    assert [(p["committed_offset"], p["end_offset"]) for p in log["partitions"]] == [(8, None)] * 3
    assert any(w.startswith("log: cannot reach Kafka") for w in d["warnings"])


def test_a_missing_topic_is_reported(table: Path) -> None:
    d = status(table, MemTopics())
    assert d["log"]["error"] == "topic does not exist"
    assert d["log"]["end_offsets_read"] is False


def test_not_asking_kafka_is_not_an_error(table: Path) -> None:
    epoch_commit(table, "w-1", 0, "a-0", {0: 1, 1: 2, 2: 3})
    d = status(table, None)
    assert d["log"]["end_offsets_read"] is False and d["log"]["error"] is None
    assert [p["committed_offset"] for p in d["log"]["partitions"]] == [1, 2, 3]
    assert d["warnings"] == []


def test_a_table_without_log_store_has_no_log_part(tmp_path: Path) -> None:
    write_table(tmp_path, "CREATE TABLE db.orders (id BIGINT) USING delta")
    d = status(tmp_path / "db" / "orders", topics_with({0: 1}))
    assert d["log"] is None


def test_a_log_store_that_cannot_be_resolved_leaves_the_rest(table: Path) -> None:
    first = table / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        if "metaData" in action:
            del action["metaData"]["configuration"]["kafka.bootstrap.servers"]
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))
    epoch_commit(table, "w-1", 0, "a-0", {0: 1})
    d = status(table, topics_with({0: 1}))
    assert d["log"]["topic"] is None and "no Kafka broker address" in d["log"]["error"]
    assert d["writers"][0]["writer"] == "w-1"


def test_malformed_epoch_metadata_is_a_warning_not_a_failure(table: Path) -> None:
    good = epoch_commit(table, "w-1", 0, "a-0", {0: 1})
    bad = commit(table, {"operation": "MERGE", "userMetadata": '{"logstore": {"writer": "w-2"}}'})
    d = status(table)
    assert [w["delta_version"] for w in d["writers"]] == [good]
    assert len(d["warnings"]) == 1 and d["warnings"][0].startswith(f"Delta version {bad}:")


def test_commit_time_prefers_the_in_commit_timestamp(table: Path) -> None:
    meta = commit_metadata(EpochId("w", 0, "a"), {0: 1})
    commit(table, {"operation": "MERGE", "userMetadata": meta, "inCommitTimestamp": T0 + 5})
    assert status(table)["writers"][0]["committed_at"] == local_time((T0 + 5) / 1000)


# -- lease -----------------------------------------------------------------------------------------


def test_lease_live_expired_and_whether_its_holder_runs(table: Path) -> None:
    now = 1_800_000_000.0
    Lease.acquire(table, "orders-cdc", 60, clock=lambda: now, host="h1", pid=321)
    alive = status(table, now=now + 15, host="h1", holder_dead=lambda info: False)["lease"]
    assert alive == {
        "job": "orders-cdc", "host": "h1", "pid": 321,
        "acquired_at": local_time(now), "expires_at": local_time(now + 60),
        "expires_in_s": 45.0, "expired": False, "holder_running": True, "writer": None,
        "fence": 1,
    }  # fmt: skip
    gone = status(table, now=now + 15, host="h1", holder_dead=lambda info: info.pid == 321)
    assert gone["lease"]["holder_running"] is False
    elsewhere = status(table, now=now + 61, host="h2", holder_dead=lambda info: True)["lease"]
    assert elsewhere["holder_running"] is None  # another host's process: cannot tell
    assert elsewhere["expired"] is True and elsewhere["expires_in_s"] == -1.0


def test_no_lease_and_an_unreadable_lease(table: Path) -> None:
    assert status(table)["lease"] is None
    (table / STATE_DIR).mkdir()
    (table / STATE_DIR / LEASE_FILE).write_text("not json")
    d = status(table)
    assert "is not a logstore lease" in d["lease"]["error"]
    assert any(w.startswith("lease: ") for w in d["warnings"])
    assert d["delta"]["version"] == 0  # the rest is still there


def test_the_status_shows_the_holder_not_the_leases_internals(table: Path) -> None:
    Lease.acquire(table, "j", 60)
    lease = status(table)["lease"]
    assert lease["job"] == "j"
    assert "process" not in lease and "token" not in lease


# -- quarantine ----------------------------------------------------------------------------------


def _records(n: int) -> str:
    rows = [{"reason": "bad json", "raw": f"{{{i}", "source": "f.json", "writer": "w",
             "epoch": 1} for i in range(n)]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_quarantine_lines_are_counted_per_job(table: Path, tmp_path: Path) -> None:
    cdc = Path(JobPaths(str(table), "cdc").quarantine)
    backfill = Path(JobPaths(str(table), "backfill").quarantine)
    cdc.mkdir(parents=True)
    backfill.mkdir(parents=True)
    (cdc / "epoch-1.jsonl").write_text(_records(3))
    (cdc / "epoch-2.jsonl").write_text(_records(2) + "\n" + '{"reason": "cut sh')  # blank; cut
    (cdc / "notes.txt").write_text(_records(5))  # not a quarantine file
    outside = tmp_path / "outside.jsonl"
    outside.write_text(_records(7))
    (cdc / "linked.jsonl").symlink_to(outside)  # not followed
    (backfill / "epoch-0.jsonl").write_text("")
    assert count_quarantined(table) == {"backfill": 0, "cdc": 6}
    d = status(table)
    assert d["quarantined"] == {"total": 6, "jobs": {"backfill": 0, "cdc": 6}}


def test_a_symlinked_quarantine_is_not_followed(table: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "job"
    elsewhere.mkdir(parents=True)
    (elsewhere / "e.jsonl").write_text(_records(4))
    (table / STATE_DIR).mkdir()
    (table / STATE_DIR / "quarantine").symlink_to(elsewhere.parent)
    warnings: list[str] = []
    assert count_quarantined(table, warnings) == {}
    assert warnings and "symlink" in warnings[0]


def test_no_quarantine_counts_zero(table: Path) -> None:
    assert status(table)["quarantined"] == {"total": 0, "jobs": {}}


def test_status_modules_load_no_kafka_client_and_no_spark() -> None:
    code = (
        "import sys\n"
        "import logstore_cli.catalog.status, logstore_cli.catalog.lease\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'pyspark')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_writes_made_outside_logstore_and_not_carried_are_listed(table: Path) -> None:
    epoch_commit(table, "w-1", 0, "a-0", {0: 4, 1: 2, 2: 0})
    removed = {"remove": {"path": "p.parquet", "dataChange": True}}
    deleted = commit(table, {"operation": "DELETE"}, removed)
    commit(table, {"operation": "SET TBLPROPERTIES"})  # no data: not listed
    d = status(table)
    assert d["outside"] == {
        "uncarried": [{"version": deleted, "operation": "DELETE", "engine": None,
                       "at": d["outside"]["uncarried"][0]["at"]}],
        "unchecked": 0,
    }  # fmt: skip
    assert d["outside"]["uncarried"][0]["at"].endswith("UTC")

    # Carried by an ingest (the carry's commit records delta-outside's transaction version).
    carry = commit_metadata(EpochId("delta-outside", deleted + 1, "c-0"), {0: 5})
    txn = {"txn": {"appId": "delta-outside", "version": deleted + 1, "lastUpdated": T0}}
    commit(table, {"operation": "WRITE", "userMetadata": carry}, txn)
    assert status(table)["outside"]["uncarried"] == []


PULSAR_DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
      'log-store.address' = 'pulsar://broker:6650', 'log-store.topic' = 'orders',
      'log.system.partitions' = '2');
"""


class PulsarTails:
    """A Pulsar topic store's ``log_tail``: what the broker would answer, and what it was asked."""

    def __init__(self, tails: dict[int, tuple[str | None, int | None]] | Exception) -> None:
        self.tails = tails
        self.asked: list[dict[int, Any]] = []

    def describe(self, log: Any) -> None:
        raise AssertionError("a Pulsar tail is not read through describe")

    def end_offsets(self, log: Any) -> dict[int, int]:
        raise AssertionError("Pulsar message counts are no end offsets")

    def log_tail(
        self, log: Any, committed: Mapping[int, Any]
    ) -> dict[int, tuple[str | None, int | None]]:
        self.asked.append(dict(committed))
        if isinstance(self.tails, Exception):
            raise self.tails
        return self.tails


def pulsar_epoch_commit(table: Path, positions: dict[int, str]) -> int:
    meta = commit_metadata(EpochId("w-1", 0, "a-0"), positions)
    return commit(table, {"operation": "MERGE", "userMetadata": meta})


def test_a_pulsar_tail_is_the_last_ids_and_the_brokers_count_after_the_commit(
    tmp_path: Path,
) -> None:
    table = write_table(tmp_path, PULSAR_DDL)
    pulsar_epoch_commit(table, {0: "5:9:-1", 1: "5:3:-1"})
    store = PulsarTails({0: ("5:10:-1", 1), 1: ("6:0:-1", 3)})
    d = status(table, store)  # type: ignore[arg-type]
    assert store.asked == [{0: "5:9:-1", 1: "5:3:-1"}]
    assert d["log"] == {
        "topic": "persistent://public/default/orders",
        "system": "pulsar",
        "end_offsets_read": True,
        "partitions": [
            {"partition": 0, "end_offset": "5:10:-1", "committed_offset": "5:9:-1",
             "after_commit": 1},
            {"partition": 1, "end_offset": "6:0:-1", "committed_offset": "5:3:-1",
             "after_commit": 3},
        ],
        "error": None,
    }  # fmt: skip


def test_a_pulsar_tail_that_cannot_be_read_leaves_the_committed_ids(tmp_path: Path) -> None:
    from logstore_cli.errors import BrokerError, TopicNotFoundError

    table = write_table(tmp_path, PULSAR_DDL)
    pulsar_epoch_commit(table, {0: "5:9:-1"})
    for failure, said in [
        (TopicNotFoundError("Pulsar topic 'orders' does not exist"), "topic does not exist"),
        (BrokerError("cannot reach Pulsar at http://broker:8080"), "cannot reach Pulsar"),
    ]:
        d = status(table, PulsarTails(failure))  # type: ignore[arg-type]
        log = d["log"]
        assert (log["end_offsets_read"], log["system"]) == (False, "pulsar")
        assert said in log["error"]
        assert log["partitions"] == [{"partition": 0, "end_offset": None,
                                      "committed_offset": "5:9:-1", "after_commit": None}]  # fmt: skip
        assert any(said in w for w in d["warnings"])


def test_a_kafka_only_store_is_no_pulsar_tail(tmp_path: Path) -> None:
    table = write_table(tmp_path, PULSAR_DDL)
    d = status(table, topics_with({0: 5}))
    assert d["log"]["error"] == "this topic store cannot read a Pulsar topic"
