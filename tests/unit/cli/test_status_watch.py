"""``status --watch`` without a terminal, a broker or a clock: the view of one refresh, its two
renderings, the refresh that turns a later failure into a warning, and the options' checks."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from logstore_cli.catalog.watch import Rates
from logstore_cli.cli.app import run
from logstore_cli.cli.status import _Refresher, _ticks, render_plain, render_rich, watch_view
from logstore_cli.errors import BrokerError
from tests.deltalog import write_table


def status_json(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "db.orders",
        "path": "/wh/db/orders",
        "delta": {"version": 7, "history_from": 0},
        "lease": {"job": "ingest", "host": "h", "pid": 42, "acquired_at": "t0",
                  "expires_at": "t1", "expires_in_s": 55.0, "expired": False,
                  "holder_running": True},
        "writers": [{"writer": "w-1", "epoch": 5, "attempt": "a-5", "delta_version": 7,
                     "committed_at": "2026-01-01T10:00:00+00:00"}],
        "last_commit": {"writer": "w-1", "epoch": 5, "attempt": "a-5", "delta_version": 7,
                        "committed_at": "2026-01-01T10:00:00+00:00", "offsets": {"0": 10}},
        "log": {"topic": "orders_log", "end_offsets_read": True, "error": None,
                "partitions": [{"partition": 0, "end_offset": 14, "committed_offset": 10,
                                "after_commit": 4},
                               {"partition": 1, "end_offset": None, "committed_offset": None,
                                "after_commit": None}]},
        "quarantined": {"total": 3, "jobs": {"ingest": 3}},
        "warnings": [],
    }  # fmt: skip
    d.update(over)
    return d


def test_the_view_holds_epochs_rates_version_tail_and_lease() -> None:
    view = watch_view(status_json(), Rates(1234.4, None), 0.0, ["log: broker gone"])
    facts = dict(view.facts)
    assert facts["delta version"] == "7"
    assert facts["rows/s"] == "1,234" and facts["log records/s"] == "-"
    assert facts["lease"].startswith("held by job 'ingest' on h, pid 42")
    assert facts["quarantined"] == "3"
    assert view.writers == [("w-1", "5", "a-5", "7", "2026-01-01T10:00:00+00:00")]
    assert view.topic == "topic orders_log after writer w-1 epoch 5"
    assert view.partitions == [("0", "10", "14", "4"), ("1", "-", "-", "-")]
    assert view.warnings == ["log: broker gone"] and view.notes == []


def test_the_view_of_a_table_without_epochs_or_log() -> None:
    d = status_json(writers=[], last_commit=None, log=None, lease=None)
    view = watch_view(d, Rates(None, None), 0.0, [])
    assert view.notes == ["no epoch committed yet", "log store: off"]
    assert view.topic is None and view.partitions == []
    assert dict(view.facts)["lease"] == "free (no job holds it)"


def test_the_view_names_writes_made_outside_logstore_not_in_the_log_yet() -> None:
    outside = {"uncarried": [{"version": 8, "operation": "DELETE", "at": "10:01"}], "unchecked": 2}
    view = watch_view(status_json(outside=outside), Rates(None, None), 0.0, [])
    assert view.notes == [
        "written outside logstore, not in the log yet: version 8 (DELETE at 10:01) (the next "
        "ingest carries them)",
        "2 older commits not checked for writes outside logstore",
    ]
    assert "  written outside logstore, not in the log yet: version 8" in "\n".join(
        render_plain(view)
    )
    assert watch_view(status_json(), Rates(None, None), 0.0, []).notes == []


def test_plain_lines_carry_everything_without_escape_codes() -> None:
    view = watch_view(status_json(), Rates(50.0, 120.0), 0.0, ["log: cannot reach Kafka"])
    text = "\n".join(render_plain(view))
    assert "\x1b" not in text
    lines = render_plain(view)
    assert lines[0].startswith("db.orders at ") and "rows/s 50; log records/s 120" in lines[0]
    assert "  writer w-1 epoch 5 attempt a-5 delta version 7" in text
    assert "    partition 0: committed offset 10, end offset 14, after commit 4" in lines
    assert lines[-1] == "  warning: log: cannot reach Kafka"


def test_the_live_panel_shows_the_same() -> None:
    view = watch_view(status_json(), Rates(50.0, 120.0), 0.0, ["log: cannot reach Kafka"])
    console = Console(file=io.StringIO(), width=140, no_color=True)
    console.print(render_rich(view))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    for part in ("db.orders", "rows/s", "w-1", "orders_log", "warning: log: cannot reach Kafka",
                 "Ctrl-C to stop"):  # fmt: skip
        assert part in shown, part


def test_a_failed_refresh_after_the_first_is_a_warning_over_the_last_status() -> None:
    answers: list[dict[str, Any] | Exception] = [
        status_json(),
        BrokerError("cannot reach Kafka at b:9092"),
        status_json(delta={"version": 8, "history_from": 0}),
    ]

    def read() -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresh = _Refresher(read, lambda: [], window_s=10)
    first = refresh()
    assert first[0]["delta"]["version"] == 7 and first[3] == []
    second = refresh()
    assert second[0]["delta"]["version"] == 7
    assert second[3] == ["refresh failed, showing the last status: cannot reach Kafka at b:9092"]
    assert refresh()[0]["delta"]["version"] == 8


def test_a_failure_of_the_first_refresh_is_an_error() -> None:
    def read() -> dict[str, Any]:
        raise BrokerError("no table")

    with pytest.raises(BrokerError):
        _Refresher(read, lambda: [], window_s=10)()


def test_ticks_keep_a_cadence_whatever_a_refresh_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    waits: list[float] = []

    def stop(timeout: float) -> bool:  # waits as Event.wait does, on the fake clock
        waits.append(timeout)
        clock[0] += timeout
        return len(waits) == 4

    took = iter([0.2, 3.0, 0.0, 0.5])  # what each refresh takes
    for _ in _ticks(1.0, stop):
        clock[0] += next(took)
    assert waits == pytest.approx([0.8, 0.0, 1.0, 0.5])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "1"], "--interval needs --watch"),
        (["--watch", "--interval", "0"], "--interval must be between 0.1 and 3600 seconds"),
    ],
)
def test_bad_watch_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    write_table(tmp_path / "wh", "CREATE TABLE db.orders (id BIGINT) USING delta")
    code = run(["status", "db.orders", "--warehouse", str(tmp_path / "wh"), *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_pulsar_tail_is_shown_as_message_ids() -> None:
    log = {"topic": "persistent://public/default/orders", "system": "pulsar",
           "end_offsets_read": True, "error": None,
           "partitions": [{"partition": 0, "end_offset": "5:10:-1", "committed_offset": "5:9:-1",
                           "after_commit": 1}]}  # fmt: skip
    view = watch_view(status_json(log=log), Rates(None, None), 0.0, [])
    assert view.partition_columns == ("partition", "committed id", "last id", "after commit")
    assert view.partitions == [("0", "5:9:-1", "5:10:-1", "1")]
    assert "    partition 0: committed id 5:9:-1, last id 5:10:-1, after commit 1" in render_plain(
        view
    )
    kafka = watch_view(status_json(), Rates(None, None), 0.0, [])
    assert "    partition 0: committed offset 10, end offset 14, after commit 4" in render_plain(
        kafka
    )
