"""``Collections``: the cyclic collector paused during a read, run between batches instead."""

from __future__ import annotations

import gc

import pytest

from logstore_cli.read import consumer
from logstore_cli.read.consumer import Collections

pytestmark = pytest.mark.unit


def test_paused_during_the_read_collected_on_ticks_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    calls: list[int] = []
    monkeypatch.setattr(consumer.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(consumer.gc, "collect", lambda generation=2: calls.append(generation) or 0)
    assert gc.isenabled()
    with Collections() as collections:
        assert not gc.isenabled()
        collections.tick()
        assert calls == []  # not yet time
        now[0] += Collections.YOUNG_EVERY_S
        collections.tick()
        collections.tick()
        assert calls == [0]  # the young generation, every YOUNG_EVERY_S
        now[0] += Collections.FULL_EVERY_S
        collections.tick()
        assert calls == [0, 2]  # every generation, every FULL_EVERY_S
    assert gc.isenabled()


def test_a_caller_that_paused_the_collector_keeps_it_paused() -> None:
    gc.disable()
    try:
        with Collections():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
