"""``logstore status``'s panel without a terminal: the plain console (200 columns, soft wrap) must
wrap long lines inside the panel, not crop them."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from logstore_cli.cli import status


def _status() -> dict[str, Any]:
    last = {"writer": "w1", "epoch": 7, "delta_version": 9}
    return {
        "name": "db.orders",
        "path": "/wh/db/orders",
        "delta": {"version": 9, "history_from": 0},
        "lease": None,
        "quarantined": {"total": 0, "jobs": {}},
        "writers": [
            {"writer": "w1", "epoch": 7, "attempt": 0, "delta_version": 9, "committed_at": "now"}
        ],
        "last_commit": last,
        "log": {
            "topic": "orders",
            "error": None,
            "end_offsets_read": True,
            "partitions": [
                {"partition": 0, "committed_offset": 10, "end_offset": 11, "after_commit": 1}
            ],
        },
    }


def test_the_tail_note_is_wrapped_whole_without_a_terminal() -> None:
    buffer = io.StringIO()
    # the same settings as cli.output's console when stdout is no terminal
    console = Console(file=buffer, highlight=False, no_color=True, width=200, soft_wrap=True)
    status._render(console, _status())
    flat = " ".join(buffer.getvalue().replace("│", " ").split())
    assert " ".join(status.TAIL_NOTE.split()) in flat
    assert all(len(line) <= 200 for line in buffer.getvalue().splitlines())


def test_a_pulsar_tail_is_headed_by_message_ids() -> None:
    d = _status()
    d["log"] = {**d["log"], "system": "pulsar",
                "partitions": [{"partition": 0, "committed_offset": "5:9:-1",
                                "end_offset": "5:10:-1", "after_commit": 1}]}  # fmt: skip
    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, no_color=True, width=200, soft_wrap=True)
    status._render(console, d)
    out = buffer.getvalue()
    assert "committed id" in out and "last id" in out and "end offset" not in out
    assert "5:9:-1" in out and "5:10:-1" in out
