"""``ingest``'s progress view on a terminal, without Spark: it is built at each refresh, so its
clock runs before the first epoch, and its rows/s count from the first epoch's start (Spark's
start-up is not ingest time)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from logstore_cli.cli.ingest import Progress
from logstore_cli.cli.output import Output
from logstore_cli.ingest.epoch import EpochReport


def progress() -> Progress:
    job: Any = SimpleNamespace(
        stores=SimpleNamespace(describe=lambda: "file,log"),
        paths=SimpleNamespace(job="ingest"),
        source=SimpleNamespace(spec=SimpleNamespace(describe=lambda: "generated changes")),
    )
    return Progress(Output(json_mode=True), "db.orders", job)  # JSON mode: no live view started


def report(epoch: int, rows: int, seconds: float) -> EpochReport:
    return EpochReport("w", epoch, "a", rows, rows, 0, epoch + 1, {0: rows}, False, seconds)


def test_before_the_first_epoch_the_view_says_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    p = progress()
    clock[0] += 42
    text = p._view().plain
    assert "epochs 0  rows 0  - rows/s" in text and "42 s" in text
    assert "waiting for the first epoch" in text


def test_rows_per_s_count_from_the_first_epochs_start(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    p = progress()
    clock[0] += 60  # Spark starting and planning
    p.epoch(report(0, 500, seconds=5.0))  # began 5 s ago
    clock[0] += 5
    p.epoch(report(1, 1500, seconds=5.0))
    text = p._view().plain
    assert "epochs 2  rows 2,000  200 rows/s" in text  # 2,000 rows in 10 s, not in 70 s
    assert "65 s" in text and "\nepoch 1: 1,500 rows" in text


def test_a_carry_of_outside_writes_is_an_event_and_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from logstore_cli.ingest.epoch import CarryReport
    from logstore_cli.ingest.outside import OutsideCommit

    delete = OutsideCommit(7, "DELETE", 1_764_101_585_000, "Apache-Spark/4.0.1")
    overwrite = OutsideCommit(9, "WRITE", None, None)
    progress().carried(CarryReport((delete,), (overwrite,), 9, "a-1", 3, 10))
    out, err = capsys.readouterr()
    event = json.loads(out)
    assert event["event"] == "carried" and event["epoch"] == 9 and event["log_records"] == 3
    assert [c["version"] for c in event["commits"]] == [7]
    assert [c["version"] for c in event["skipped"]] == [9]
    # Said on stderr even with --json: a script's log shows what reached the log and what did not.
    assert "carried 1 write(s) made outside logstore into the log (3 records, Delta v10)" in err
    assert "version 7 (DELETE at 2025-11-25 20:13:05 UTC by Apache-Spark/4.0.1)" in err
    assert "left 1 write(s) made outside logstore out of the log" in err and "version 9" in err
