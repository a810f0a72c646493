"""``verify_table``'s decisions, with the Delta log written by hand (no JVM), the topic in memory
and the snapshot's rows handed in: which markers count, what a missing marker, a deleted log
prefix or an empty Delta history mean, and the notes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import StoredTable, load_table
from logstore_cli.errors import InvalidInputError
from logstore_cli.logformat.consistency import Item
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    commit_metadata,
)
from logstore_cli.read.consumer import ReadStats
from logstore_cli.read.verify import VerifyResult, verify_table
from tests.deltalog import write_table

DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders_log',
      'kafka.bootstrap.servers' = 'broker:9092', 'log.system.partitions' = '2');
"""


class MemLog:
    """A topic in memory: what ``LogSource`` answers, with offsets from 0 (or ``low``)."""

    def __init__(self, partitions: int = 2) -> None:
        self.items: dict[int, list[Item]] = {p: [] for p in range(partitions)}
        self.low: dict[int, int] = {}
        self.on_watermarks: list[
            Callable[[int], None]
        ] = []  # callbacks run at each watermarks() call
        self.watermark_calls = 0

    def change(self, p: int, eid: EpochId, i: int, name: str = "a", kind: str = "+I") -> None:
        row = {"id": i} if kind == "-D" else {"id": i, "name": name}
        self.items[p].append(ChangeRecord(RowKind(kind), {"id": i}, row, eid))

    def marker(
        self, eid: EpochId, version: int | None, partitions: list[int] | None = None
    ) -> None:
        for p in self.items if partitions is None else partitions:
            self.items[p].append(CommitMarker(eid, version))

    def ends(self) -> dict[int, int]:
        return {p: self.low.get(p, 0) + len(items) for p, items in self.items.items()}

    # LogRange
    def partitions(self) -> list[int]:
        return sorted(self.items)

    def watermarks(self) -> dict[int, tuple[int, int]]:
        self.watermark_calls += 1
        for callback in self.on_watermarks:
            callback(self.watermark_calls)
        return {p: (self.low.get(p, 0), end) for p, end in self.ends().items()}

    def consume_range(
        self, partition: int, start: int, end: int, stats: ReadStats | None = None
    ) -> Iterator[tuple[int, Item]]:
        base = self.low.get(partition, 0)
        for offset in range(start, end):
            item = self.items[partition][offset - base]
            if stats is not None:
                if isinstance(item, CommitMarker):
                    stats.markers += 1
                else:
                    stats.records += 1
            yield offset, item


class Table:
    """A table whose Delta log gets epoch commits by hand, and whose snapshot rows are given."""

    def __init__(self, tmp: Path, ddl: str = DDL) -> None:
        self.path = write_table(tmp, ddl)
        self.warehouse = tmp
        self.rows: dict[int, list[dict[str, Any]]] = {}  # version -> snapshot rows

    def commit(self, eid: EpochId, offsets: dict[int, int],
               rows: list[dict[str, Any]] | None = None) -> int:  # fmt: skip
        log = self.path / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json")) + 1
        info = {"commitInfo": {"timestamp": 0, "operation": "MERGE",
                               "userMetadata": commit_metadata(eid, offsets)}}  # fmt: skip
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
        self.rows[version] = list(rows or [])
        return version

    def plain_commit(self) -> int:
        log = self.path / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json")) + 1
        (log / f"{version:020d}.json").write_text(
            json.dumps({"commitInfo": {"timestamp": 0, "operation": "SET TBLPROPERTIES"}}) + "\n"
        )
        return version

    def outside_commit(self, operation: str = "DELETE") -> int:
        """A write made outside logstore: data changed, no epoch metadata."""
        log = self.path / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json")) + 1
        actions = [
            {"commitInfo": {"timestamp": 1_764_101_585_000, "operation": operation}},
            {"remove": {"path": "part-0.parquet", "dataChange": True}},
        ]
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
        return version

    def stored(self) -> StoredTable:
        return load_table(self.warehouse, "db.orders")

    def snapshot(self, path: Path, version: int, columns: list[str]) -> list[list[dict[str, Any]]]:
        assert path == self.path and columns == ["id", "name"]
        return [self.rows[version]]

    def verify(self, log: MemLog, **kw: Any) -> VerifyResult:
        return verify_table(self.stored(), log, snapshot=self.snapshot, **kw)


W = EpochId("w1", 0, "a0")
W1 = EpochId("w1", 1, "a1")


@pytest.fixture
def table(tmp_path: Path) -> Table:
    return Table(tmp_path)


def rows(*pairs: tuple[int, str]) -> list[dict[str, Any]]:
    return [{"id": i, "name": n} for i, n in pairs]


def test_a_clean_log_equals_its_snapshot(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1, "a")
    log.change(1, W, 2, "b")
    version = table.commit(W, log.ends(), rows((1, "a"), (2, "b")))
    log.marker(W, version)
    log.change(0, W1, 1, "a", "-U")
    log.change(0, W1, 1, "a2", "+U")
    log.change(1, W1, 2, kind="-D")
    v1 = table.commit(W1, log.ends(), rows((1, "a2")))
    log.marker(W1, v1)

    result = table.verify(log)

    assert result.equal and result.reason is None, result.to_json()
    d = result.to_json()
    assert d["delta_version"] == v1 and d["epoch"] == {"writer": "w1", "epoch": 1, "attempt": "a1"}
    assert d["log"]["records"] == 5 and d["log"]["markers"] == 4
    assert d["log"]["changes"] == 5 and d["log"]["epochs"] == 2 and d["log"]["partitions"] == 2
    assert d["log"]["end_offsets"] == {"0": 5, "1": 4} and d["notes"] == []
    assert d["missing"] == {"count": 0, "examples": []} and d["delta"] == {"rows": 1, "epochs": 2}
    assert d["log"]["dropped"] == 0


def test_a_killed_attempts_records_are_counted_as_dropped(table: Table) -> None:
    log = MemLog()
    killed, retry = EpochId("w1", 0, "a-killed"), EpochId("w1", 0, "a-retry")
    log.change(0, killed, 1, "x")
    log.change(1, killed, 2, "y")
    log.change(0, killed, 3, "z")  # the job was killed here, before its Delta commit
    log.change(0, retry, 1, "x")
    log.change(1, retry, 2, "y")
    log.change(0, retry, 3, "z")
    version = table.commit(retry, log.ends(), rows((1, "x"), (2, "y"), (3, "z")))
    log.marker(retry, version)
    table.commit(EpochId("w1", 1, "a-file"), {}, rows((1, "x"), (2, "y"), (3, "z")))  # no log

    d = table.verify(log).to_json()

    assert d["equal"], d
    assert d["log"]["dropped"] == 3 and d["log"]["changes"] == 3
    assert d["log"]["epochs"] == d["delta"]["epochs"] == 1


def test_a_difference_is_reported_with_examples(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1, "log")
    log.change(1, W, 3, "only-in-log")
    version = table.commit(W, log.ends(), rows((1, "delta"), (2, "only-in-delta")))
    log.marker(W, version)
    d = table.verify(log).to_json()
    assert not d["equal"] and d["reason"] is None
    assert [d[k]["count"] for k in ("missing", "extra", "different")] == [1, 1, 1]
    assert d["different"]["examples"][0]["columns"] == ["name"]


def test_markers_missing_for_the_last_commit_say_so_and_what_to_do(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version, partitions=[0])  # the crash cut the markers short

    result = table.verify(log)

    assert not result.equal and result.diff is None
    assert result.reason == (
        f"epoch 0 of writer w1 committed as Delta version {version} but its commit markers are "
        "not in partitions [1]: run the ingest job again (same --job/--checkpoint) to publish them"
    )
    assert result.to_json()["missing"] is None


def test_a_live_writers_markers_are_waited_for(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))

    # the writer publishes its markers after verify asked for the offsets a second time
    def publish(call: int) -> None:
        if call == 3:
            log.marker(W, version)

    log.on_watermarks.append(publish)
    result = table.verify(log, writer_live=lambda: True, marker_wait_s=30)
    assert result.equal, result.to_json()
    assert log.watermark_calls >= 3


def test_a_dead_writers_markers_are_not_waited_for(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    table.commit(W, log.ends(), rows((1, "a")))
    result = table.verify(log, writer_live=lambda: False, marker_wait_s=30)
    assert result.reason is not None and "not in partitions [0, 1]" in result.reason
    assert log.watermark_calls == 1


def test_an_older_epoch_held_for_want_of_markers_is_named(table: Table) -> None:
    log = MemLog()
    log.change(1, W, 7)
    table.commit(W, log.ends(), rows((7, "a")))  # its markers never came
    other = EpochId("w2", 0, "b0")
    log.change(0, other, 8)
    version = table.commit(other, log.ends(), rows((7, "a"), (8, "a")))
    log.marker(other, version)
    result = table.verify(log)
    assert result.reason is not None
    assert "epoch 0 of writer w1 is committed in Delta but its records in partitions [1] have " \
           "no commit marker" in result.reason  # fmt: skip


def test_the_logs_beginning_deleted_cannot_be_verified(table: Table) -> None:
    log = MemLog()
    log.low[1] = 4
    table.commit(W, log.ends(), [])
    result = table.verify(log)
    assert result.reason is not None and not result.equal
    assert result.reason.startswith(
        "the log no longer holds offsets [0, 4) of partition 1 (deleted by the topic's retention)"
    )


def _adopt(table: Table, value: str) -> None:
    """The table as create-table --adopt-topic leaves it: ``value`` in its adopted-topic property."""
    config = table.path / "_delta_log" / "00000000000000000000.json"
    lines = [json.loads(line) for line in config.read_text().splitlines()]
    lines[1]["metaData"]["configuration"][wh.P_ADOPTED_TOPIC] = value
    config.write_text("".join(json.dumps(a) + "\n" for a in lines))


def test_an_adopted_topics_prefix_may_be_gone(tmp_path: Path) -> None:
    table = Table(tmp_path)
    _adopt(table, '{"0":10,"1":0}')
    log = MemLog()
    log.low[0] = 6  # records before 10 were another producer's: deleting them loses nothing
    log.items[0] = []
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    assert table.verify(log).equal


def test_what_an_adopted_topic_held_is_not_read_even_when_it_looks_like_logstores(
    tmp_path: Path,
) -> None:
    # The topic of a dropped table (drop-table keeps it) adopted by a new one: the old epoch's
    # records and markers name Delta versions the new table's log does not confirm.
    table = Table(tmp_path)
    log = MemLog()
    old = EpochId("dropped", 3, "x")
    log.change(0, old, 7)
    log.marker(old, 1)
    _adopt(table, wh.adopted_positions_text(log.ends()))  # {0: 2, 1: 1}
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    d = table.verify(log).to_json()
    assert d["equal"], d
    assert d["log"]["markers"] == 2 and d["log"]["unconfirmed"] == {"markers": 0, "records": 0}


def test_a_pulsar_partition_holding_a_message_from_before_adoption_is_known_whole(
    table: Table,
) -> None:
    # Positions as Pulsar's are (not dense): whether retention deleted a partition's start is
    # known only where the partition still holds a message from before the adoption point.
    log = MemLog()
    log.low = {0: 2, 1: 4}
    log.change(0, W, 1)
    log.change(1, W, 2)
    version = table.commit(W, log.ends(), rows((1, "a"), (2, "a")))
    log.marker(W, version)
    unknown = "the start is not known"
    assert unknown in table.verify(log, unknown_start=unknown).notes  # not adopted
    _adopt(table, '{"0":3,"1":5}')
    assert table.verify(log, unknown_start=unknown).notes == []
    _adopt(table, '{"0":3,"1":0}')  # partition 1 held nothing at adoption
    assert unknown in table.verify(log, unknown_start=unknown).notes


def test_without_an_epoch_commit_an_empty_log_is_equal(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)  # in flight: no marker
    d = table.verify(log).to_json()
    assert d["equal"] and d["delta_version"] is None
    assert any("nothing to verify" in n for n in d["notes"])
    assert any("1 records of 1 epochs without a commit marker" in n for n in d["notes"])


def test_without_an_epoch_commit_markers_naming_delta_versions_are_unconfirmed(
    table: Table,
) -> None:
    log = MemLog()
    log.change(0, W, 1)
    log.marker(W, 3)  # the Delta table was re-created, or the marker forged: no version 3
    d = table.verify(log).to_json()
    assert not d["equal"]
    assert d["reason"].startswith(
        "2 commit markers in topic orders_log are not confirmed by the Delta log: partition 0 "
        "offset 1: epoch 0 of writer w1 attempt a0 as Delta version 3, which holds no ingest epoch"
    )
    assert d["log"]["unconfirmed"] == {"markers": 2, "records": 1}
    assert d["log"]["changes"] == 0


def test_log_only_and_later_epochs_are_notes_not_differences(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    log.change(0, W1, 2)
    log.marker(W1, None)  # log-only epoch
    later = EpochId("w1", 2, "a2")
    log.change(1, later, 3)
    log.marker(later, version + 1)
    # committed after verify read V (its first step), before it read the topic's offsets
    log.on_watermarks.append(lambda n: n == 1 and table.commit(later, log.ends()) and None)
    log.change(1, EpochId("w9", 0, "z"), 4)  # an orphan: no marker
    d = table.verify(log).to_json()
    assert d["equal"], d
    notes = " | ".join(d["notes"])
    assert "1 log-only epochs (--emit log: markers without a Delta version) with 1 changes" in notes
    assert "1 epochs committed after Delta version" in notes
    assert "1 records of 1 epochs without a commit marker" in notes


def test_a_forged_marker_naming_the_last_version_is_unconfirmed_and_its_records_not_folded(
    table: Table,
) -> None:
    log = MemLog()
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    forged = EpochId("intruder", 0, "x")
    log.change(1, forged, 99)
    log.marker(forged, version)
    d = table.verify(log).to_json()
    assert not d["equal"]
    assert d["extra"]["count"] == 0 and d["missing"]["count"] == 0  # the data is Delta's
    assert d["reason"].startswith(
        f"2 commit markers in topic orders_log are not confirmed by the Delta log: partition 0 "
        f"offset 2: epoch 0 of writer intruder attempt x as Delta version {version}, which holds "
        "epoch 0 of writer w1 attempt a0; partition 1 offset 2:"
    )
    assert "(1 records of the attempts they name were not folded)" in d["reason"]
    assert "Kafka principal (ACLs)" in d["hint"]
    assert d["log"]["unconfirmed"] == {"markers": 2, "records": 1}
    assert not any("without a commit marker" in n for n in d["notes"])  # said in the reason
    # Pulsar's positions are named as its message ids (cli/verify.py), not as ordinals.
    named = table.verify(log, record_at=lambda at: f"message #{at}").to_json()
    assert "partition 0 message #2: epoch 0 of writer intruder" in named["reason"]
    assert "offset" not in named["reason"]


def test_versions_after_the_last_epoch_and_file_only_epochs_are_noted(table: Table) -> None:
    log = MemLog()
    table.commit(W, {}, rows((1, "a")))  # --emit file: no offsets, no markers
    table.plain_commit()
    d = table.verify(log).to_json()
    assert d["missing"]["count"] == 1 and not d["equal"]
    notes = " | ".join(d["notes"])
    assert "1 epochs were committed to Delta without writing the log" in notes
    assert "latest version is 2" in notes


def test_a_table_without_a_log_store_is_refused(tmp_path: Path) -> None:
    write_table(
        tmp_path, "CREATE TABLE db.plain (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED);"
    )
    with pytest.raises(InvalidInputError, match="has no log store"):
        verify_table(load_table(tmp_path, "db.plain"), MemLog())


def test_a_topic_holding_less_than_the_last_commit_recorded_was_recreated(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    log.change(1, W, 2)
    version = table.commit(W, log.ends(), rows((1, "a"), (2, "a")))
    fresh = MemLog()  # the topic deleted and created again: empty
    fresh.change(1, EpochId("w2", 0, "b"), 3)
    result = table.verify(fresh)
    assert not result.equal and result.diff is None
    assert result.reason == (
        f"the topic holds fewer records than epoch 0 of writer w1 (Delta version {version}) "
        "recorded: partition 0 ends at offset 0, before 1; the topic was deleted and created "
        "again, or its records deleted"
    )


def test_a_marker_naming_a_version_that_is_no_epoch_is_unconfirmed(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1)
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    odd = EpochId("w3", 0, "c")
    log.marker(odd, 0)  # version 0 is create-table's commit
    d = table.verify(log).to_json()
    assert not d["equal"] and d["missing"]["count"] == d["extra"]["count"] == 0
    assert "epoch 0 of writer w3 attempt c as Delta version 0, which holds no ingest" in d["reason"]
    assert d["notes"] == []


def test_markers_naming_another_attempt_than_delta_committed_are_a_protocol_note(
    table: Table,
) -> None:
    log = MemLog()
    retry = EpochId("w1", 0, "a-retry")
    log.change(0, retry, 1)
    version = table.commit(retry, log.ends(), rows((1, "a")))
    log.marker(retry, version)
    # A marker for the same epoch and version naming an attempt Delta did not commit (a broken
    # or forged writer); its records are not Delta's.
    log.marker(EpochId("w1", 0, "a-other"), version, partitions=[1])
    d = table.verify(log).to_json()
    assert (
        "protocol: markers of epoch 0 of writer w1 name attempts [a-other, a-retry], Delta "
        "committed a-retry" in d["notes"]
    ), d["notes"]


def test_a_write_made_outside_logstore_after_the_last_epoch_makes_the_two_unequal(
    table: Table,
) -> None:
    log = MemLog()
    log.change(0, W, 1, "a")
    version = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, version)
    outside = table.outside_commit("DELETE")  # e.g. a GDPR delete in Spark SQL

    d = table.verify(log).to_json()

    assert not d["equal"] and d["missing"] is None  # not compared: the log cannot hold it yet
    assert d["outside"] == [{"version": outside, "operation": "DELETE",
                             "at": "2025-11-25 20:13:05 UTC", "engine": None}]  # fmt: skip
    assert f"version {outside} (DELETE" in d["reason"] and "outside logstore" in d["reason"]
    assert "logstore ingest db.orders" in d["hint"]


def test_an_uncarried_write_before_the_last_epoch_is_named_as_the_cause_of_differences(
    table: Table,
) -> None:
    log = MemLog()
    log.change(0, W, 1, "a")
    v0 = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, v0)
    outside = table.outside_commit("UPDATE")  # committed while epoch 1 was in flight
    log.change(0, W1, 2, "b")
    v1 = table.commit(W1, log.ends(), rows((1, "changed"), (2, "b")))
    log.marker(W1, v1)

    d = table.verify(log).to_json()

    assert not d["equal"] and d["reason"] is None and d["different"]["count"] == 1
    assert [c["version"] for c in d["outside"]] == [outside]
    assert any(f"version {outside} (UPDATE" in n and "never carried" in n for n in d["notes"])


def test_a_carried_write_is_not_reported(table: Table) -> None:
    log = MemLog()
    log.change(0, W, 1, "a")
    v0 = table.commit(W, log.ends(), rows((1, "a")))
    log.marker(W, v0)
    outside = table.outside_commit("DELETE")
    carry = EpochId("delta-outside", outside, "a-carry")
    log.change(0, carry, 1, kind="-D")
    v1 = table.commit(carry, log.ends(), rows())
    with (table.path / "_delta_log" / f"{v1:020d}.json").open("a") as fh:  # Delta's record
        fh.write(json.dumps({"txn": {"appId": "delta-outside", "version": outside}}) + "\n")
    log.marker(carry, v1)

    result = table.verify(log)

    assert result.equal, result.to_json()
    assert result.outside == []
