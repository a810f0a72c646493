"""Counting a Pulsar partition's messages after a position from its ``internalStats`` (status's
"after commit"): ids are not dense, so the count comes from the ledgers' entries."""

from __future__ import annotations

from typing import Any

import pytest

from logstore_cli.pulsar.admin import MessagePosition, entries_after

pytestmark = pytest.mark.unit


def stats(*ledgers: tuple[int, int], current: int) -> dict[str, Any]:
    """internalStats as Pulsar 4.2 answers it: the open (last) ledger lists 0 entries, its count
    is ``currentLedgerEntries``."""
    listed = [{"ledgerId": lid, "entries": n, "size": n * 40} for lid, n in ledgers]
    return {"ledgers": listed, "currentLedgerEntries": current, "numberOfEntries": 0}


def test_all_entries_without_a_position() -> None:
    assert entries_after(stats((3, 10), (7, 0), current=4), None) == 14


def test_after_a_position_in_the_open_ledger() -> None:
    # ledger 7 holds entries 0..4; after 7:1 come 7:2, 7:3, 7:4
    assert entries_after(stats((3, 10), (7, 0), current=5), MessagePosition(7, 1)) == 3
    assert entries_after(stats((3, 10), (7, 0), current=5), MessagePosition(7, 4)) == 0


def test_after_a_position_in_a_closed_ledger_counts_the_later_ledgers_whole() -> None:
    # after 3:7 of ledger 3 (entries 0..9): 3:8, 3:9, then ledger 5 (6) and the open ledger 7 (2)
    found = entries_after(stats((3, 10), (5, 6), (7, 0), current=2), MessagePosition(3, 7))
    assert found == 2 + 6 + 2


def test_a_position_in_a_ledger_retention_removed_counts_what_is_left() -> None:
    assert entries_after(stats((9, 4), (11, 0), current=1), MessagePosition(2, 100)) == 5


def test_a_closed_last_ledger_keeps_its_own_count() -> None:
    """After a ledger roll-over failed or a topic was unloaded the last ledger may be closed with
    its entries listed and ``currentLedgerEntries`` 0."""
    assert entries_after(stats((3, 10), current=0), MessagePosition(3, 5)) == 4


def test_empty_and_odd_answers_count_nothing() -> None:
    assert entries_after({}, None) == 0
    assert entries_after({"ledgers": ["x", None], "currentLedgerEntries": 3}, None) == 0
