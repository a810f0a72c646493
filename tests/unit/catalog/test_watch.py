"""``status --watch``'s numbers: rows/s and log records/s from the Delta commits (pure), and the
commit cache that lets a refresh read only the commits new since the last one."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog import status as status_mod
from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog import watch as samples_mod
from logstore_cli.catalog.status import CommitCache, table_status
from logstore_cli.catalog.watch import CommitSample, Rates, commit_rows, rates, samples
from logstore_cli.errors import LogstoreError
from logstore_cli.logformat.pulsar_form import ordinal
from logstore_cli.logformat.wire import EpochId, LogPosition, commit_metadata
from tests.deltalog import write_table
from tests.unit.catalog.test_status import DDL, commit, epoch_commit


def info(
    at_s: float, rows: int | None, offsets: dict[int, LogPosition] | None, op: str = "MERGE"
) -> dict[str, Any]:
    out: dict[str, Any] = {"timestamp": int(at_s * 1000), "operation": op}
    if rows is not None:
        out["operationMetrics"] = {"numSourceRows" if op == "MERGE" else "numOutputRows": str(rows)}
    if offsets is not None:
        out["userMetadata"] = commit_metadata(EpochId("w", int(at_s), "a"), offsets)
    return out


def test_rows_of_a_merge_and_of_an_append_and_none_otherwise() -> None:
    assert commit_rows(info(1, 50, None)) == 50
    assert commit_rows(info(1, 7, None, op="WRITE")) == 7
    assert (
        commit_rows({"operation": "OPTIMIZE", "operationMetrics": {"numOutputRows": "3"}}) is None
    )
    assert commit_rows({"operation": "MERGE", "operationMetrics": {"numSourceRows": "x"}}) is None
    assert commit_rows({"operation": "MERGE"}) is None
    # an epoch committed by delta-rs, a write_deltalake append: delta-rs' names
    delta_rs = {"num_source_rows": 20, "num_target_rows_inserted": 3}
    assert commit_rows({"operation": "MERGE", "operationMetrics": delta_rs}) == 20
    assert commit_rows({"operation": "WRITE", "operationMetrics": {"num_added_rows": 4}}) == 4


def test_samples_keep_epoch_commits_in_order_with_the_records_the_log_gained() -> None:
    found = samples(
        [
            (4, info(104, 30, {0: 25, 1: 12})),
            (1, info(101, 10, {0: 5, 1: 3})),
            (2, {"timestamp": 102_000, "operation": "SET TBLPROPERTIES"}),  # not an epoch
            (3, info(103, 20, {0: 15, 1: 8})),
        ]
    )
    assert found == [
        CommitSample(1, 101.0, 10, None),  # no earlier epoch commit: unknown
        CommitSample(3, 103.0, 20, 15),  # (15 - 5) + (8 - 3)
        CommitSample(4, 104.0, 30, 14),
    ]


def test_a_topic_created_again_or_other_partitions_give_no_record_count() -> None:
    found = samples(
        [(1, info(1, 1, {0: 50})), (2, info(2, 1, {0: 3})), (3, info(3, 1, {0: 4, 1: 1}))]
    )
    assert [s.log_records for s in found] == [None, None, None]


def test_pulsar_message_ids_give_rows_but_no_record_count() -> None:
    """Pulsar ids are not dense: no subtraction (design §7.1); the commits still count."""
    found = samples([(1, info(1, 4, {0: "9:0:-1"})), (2, info(2, 6, {0: "9:3:-1"}))])
    assert [(s.version, s.rows, s.log_records) for s in found] == [(1, 4, None), (2, 6, None)]


def test_an_epoch_commit_gives_read_positions_for_kafka_offsets_and_pulsar_ids() -> None:
    kafka = epochs.EpochCommit(EpochId("w", 1, "a"), 3, {0: 7}, None)
    assert kafka.offsets == {0: 7}
    pulsar = epochs.EpochCommit(EpochId("w", 1, "a"), 4, {0: "9:3:-1", 1: "9:10:-1"}, None)
    assert pulsar.positions == {0: "9:3:-1", 1: "9:10:-1"}
    # just after the recorded last message: where a hybrid read goes on
    assert pulsar.offsets == {0: ordinal(9, 3) + 1, 1: ordinal(9, 10) + 1}
    bad = epochs.EpochCommit(EpochId("w", 1, "a"), 5, {0: "9:x:-1"}, None)
    with pytest.raises(LogstoreError, match="Delta version 5 records partition 0 at"):
        bad.offsets  # noqa: B018


def steady(period: float, count: int, rows: int, start: float = 1000.0) -> list[CommitSample]:
    return [CommitSample(i, start + i * period, rows, rows * 2) for i in range(count)]


@pytest.mark.parametrize("now_offset", [0.0, 0.5, 1.0, 1.9])
def test_a_steady_ingest_reads_steady_whenever_the_refresh_comes(now_offset: float) -> None:
    commits = steady(period=2.0, count=30, rows=100)  # 50 rows/s, 100 records/s
    now = commits[-1].at + now_offset
    r = rates(commits, now, window_s=10)
    assert r.rows_per_s is not None and r.log_records_per_s is not None
    assert 50 * 10 / 12 <= r.rows_per_s <= 50 * 1.0001  # the idle part of the last period lowers it
    assert r.log_records_per_s == pytest.approx(2 * r.rows_per_s)


def test_the_rate_falls_to_zero_when_commits_stop() -> None:
    commits = steady(period=1.0, count=20, rows=10)
    last = commits[-1].at
    seen = [rates(commits, last + dt, window_s=10).rows_per_s for dt in (0, 3, 6, 9, 10.5)]
    assert seen[0] == pytest.approx(10.0)
    assert all(a is not None and b is not None and a > b for a, b in itertools.pairwise(seen))
    assert seen[-1] == 0.0


def test_not_enough_commits_is_unknown_not_zero() -> None:
    assert rates([], 100.0) == Rates(None, None)
    one = [CommitSample(1, 99.0, 10, None)]
    assert rates(one, 100.0) == Rates(None, None)
    # the first commit of a new run after a long idle time: its rows began nobody knows when
    old_then_new = [CommitSample(1, 1000.0, 5, 5), CommitSample(2, 1999.0, 10, 10)]
    assert rates(old_then_new, 2000.0, window_s=10) == Rates(None, None)
    old_then_two = [*old_then_new, CommitSample(3, 2000.0, 30, 40)]
    assert rates(old_then_two, 2001.0, window_s=10) == Rates(15.0, 20.0)  # from the second one on


def test_slow_epochs_minutes_apart_still_have_a_rate() -> None:
    commits = [CommitSample(i, 1000.0 + 90 * i, 900, 1800) for i in range(3)]  # one per 90 s
    r = rates(commits, commits[-1].at + 5, window_s=10)
    assert r.rows_per_s == pytest.approx(900 / 95) and r.log_records_per_s == pytest.approx(
        1800 / 95
    )


def test_a_table_without_a_log_has_rows_but_no_log_rate() -> None:
    commits = [CommitSample(i, 100.0 + i, 10, None) for i in range(5)]
    r = rates(commits, 104.0, window_s=10)
    assert r.rows_per_s == pytest.approx(10.0) and r.log_records_per_s is None


def test_the_cache_reads_each_commit_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = write_table(tmp_path, DDL)
    ref = wh.find_table(tmp_path, "db.orders")
    reads: list[int] = []
    real = epochs.commit_info

    def counting(path: Path, version: int) -> dict[str, object] | None:
        reads.append(version)
        return real(path, version)

    monkeypatch.setattr(status_mod, "commit_info", counting)
    cache = CommitCache()
    v1 = epoch_commit(table, "w", 0, "a", {0: 4})
    v2 = epoch_commit(table, "w", 1, "a", {0: 9})
    first = table_status(ref, None, commits=cache)
    assert sorted(reads) == [0, v1, v2]
    reads.clear()
    v3 = epoch_commit(table, "w", 2, "a", {0: 13})
    commit(table, {"operation": "OPTIMIZE"})
    second = table_status(ref, None, commits=cache)
    assert sorted(reads) == [v3, v3 + 1]  # only the new ones
    assert first.writers[0].epoch == 1 and second.writers[0].epoch == 2
    assert [v for v, _ in cache.cached()] == [v3 + 1, v3, v2, v1, 0]
    assert "operationParameters" not in cache.cached()[0][1]
    # what a fresh status says is what the cached one says
    assert table_status(ref, None).to_json() == second.to_json()
    # a commit removed by log retention (as delta-rs would not read it: the files only) leaves it
    (table / "_delta_log" / f"{v1:020d}.json").unlink()
    assert [v for v, _ in cache.commits(table, up_to=v3 + 1)] == [v3 + 1, v3, v2, 0]
    assert [v for v, _ in cache.cached()] == [v3 + 1, v3, v2, 0]


def test_samples_since_stop_at_the_newest_commit_before_the_window() -> None:
    commits = [(v, info(100 + v, 10, {0: 10 * v})) for v in range(1, 50)]
    parsed: list[int] = []

    def parse(version: int, i: Any) -> Any:
        parsed.append(version)
        return samples_mod._parse(version, i)

    found = samples(commits, since=140.0, parse=parse)
    assert [s.version for s in found] == list(range(40, 50))  # 40 is the anchor at 140
    assert found[0].log_records is None and found[1].log_records == 10
    assert sorted(parsed) == list(range(40, 50))  # the older ones were not even parsed
    assert rates(found, 150.0, 10) == rates(samples(commits), 150.0, 10)
