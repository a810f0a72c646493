"""The read decision of docs/design.md §6.4 (``logstore_cli.logformat.consistency``).

Hand-written scenarios pin each rule and edge case. The property tests drive the decider with logs
that a simulated ingest job writes by the write path of §6.2 — writers (checkpoints) started,
abandoned and resumed, epochs in order, attempts that crash before producing, after some or all
records, after the Delta commit with markers in only some partitions — and check each level
against what the simulation knows was committed, and that a reader restored midway continues
exactly as one that never stopped.

Folds used below: the *bag* of an output counts each (key, row image) +1 for ``+I``/``+U`` and -1
for ``-U``/``-D``, so a retraction (the same image, reversed kind) cancels its record exactly, in
any order. The *table* of an output applies it in order by key: ``+I``/``+U`` set the key's row,
``-U``/``-D`` remove the key; that is how the Delta table (MERGE by primary key) applies the
committed changes, so it checks order too (retractions newest first).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.errors import EXIT_FAILURE, InvalidInputError
from logstore_cli.logformat.consistency import (
    LEVELS,
    DeciderStateError,
    Emission,
    Item,
    PartitionDecider,
    PendingEpoch,
    ResumePoint,
    TopicDecider,
    decide,
    decide_partitions,
)
from logstore_cli.logformat.wire import ChangeRecord, CommitMarker, EpochId, RowKind
from tests.hypothesis_profiles import budget

pytestmark = pytest.mark.unit


def rec(
    kind: str, key: int, value: Any, *, w: str = "w1", n: int = 0, a: str = "a1"
) -> ChangeRecord:
    return ChangeRecord(RowKind(kind), {"id": key}, {"id": key, "v": value}, EpochId(w, n, a))


def mark(*, w: str = "w1", n: int = 0, a: str = "a1", version: int | None = 7) -> CommitMarker:
    return CommitMarker(EpochId(w, n, a), version)


def offsets(*items: Item, start: int = 100) -> list[tuple[int, Item]]:
    """Items at offsets start, start+2, ... (gaps, as compacted or transactional topics have)."""
    return [(start + 2 * i, item) for i, item in enumerate(items)]


def brief(out: Iterable[Emission]) -> list[tuple[int, str]]:
    return [(e.offset, e.kind.value) for e in out]


def steps(
    decider: PartitionDecider, items: Sequence[tuple[int, Item]]
) -> list[list[tuple[int, str]]]:
    """What the decider returns for each item in turn."""
    return [brief(decider.feed(offset, item)) for offset, item in items]


# -- committed ---------------------------------------------------------------------------------------


def test_committed_holds_an_epoch_until_its_marker_then_emits_it_in_offset_order() -> None:
    items = offsets(rec("+I", 1, "a"), rec("-U", 2, "b"), rec("+U", 2, "c"), mark())
    decider = PartitionDecider("committed")
    assert steps(decider, items) == [[], [], [], [(100, "+I"), (102, "-U"), (104, "+U")]]
    assert decider.pending() == []
    assert decider.committed_through == {"w1": 0}
    assert decider.resume_offset == decider.position == 107


def test_committed_emits_only_the_attempt_the_marker_names() -> None:
    # a1 crashed after producing two records, a2 (the retry, same data) committed.
    items = offsets(
        rec("+I", 1, "x", a="a1"),
        rec("+I", 2, "y", a="a1"),
        rec("+I", 1, "x", a="a2"),
        rec("+I", 2, "y", a="a2"),
        rec("+I", 3, "z", a="a2"),
        mark(a="a2"),
    )
    decider = PartitionDecider("committed")
    out = [e for offset, item in items for e in decider.feed(offset, item)]
    assert brief(out) == [(104, "+I"), (106, "+I"), (108, "+I")]
    assert {e.record.epoch.attempt for e in out} == {"a2"}
    assert decider.stats.dropped == 2


def test_committed_marker_naming_an_attempt_among_interleaved_ones_takes_only_its_records() -> None:
    items = offsets(
        rec("+I", 1, "x", a="A"), rec("+I", 2, "y", a="B"), rec("+I", 3, "z", a="A"), mark(a="A")
    )
    assert brief(decide(items, "committed")) == [(100, "+I"), (104, "+I")]


def test_a_marker_for_an_attempt_that_wrote_nothing_here_emits_nothing_and_drops_the_rest() -> None:
    # a1 produced here and crashed; a2 committed without a record in this partition.
    items = offsets(rec("+I", 1, "x", a="a1"), rec("-D", 1, "x", a="a1"), mark(a="a2"))
    committed = PartitionDecider("committed")
    assert steps(committed, items) == [[], [], []]
    assert committed.pending() == []
    eventual = PartitionDecider("eventual")
    assert steps(eventual, items) == [[(100, "+I")], [(102, "-D")], [(102, "+I"), (100, "-D")]]
    assert eventual.pending() == []


def test_a_repeated_marker_is_a_no_op_and_records_after_the_marker_are_dropped() -> None:
    # A crash between the Delta commit and the markers: the retry re-publishes the markers; a
    # retry that (wrongly) produced again after the marker is ignored as well.
    items = offsets(
        rec("+I", 1, "x"), mark(), mark(), rec("+I", 1, "x", a="a2"), mark(a="a2"), mark()
    )
    for level in ("committed", "eventual"):
        decider = PartitionDecider(level)
        out = [e for offset, item in items for e in decider.feed(offset, item)]
        assert brief(out) == [(100, "+I")], level
        assert decider.stats.repeated_markers == 3
        assert decider.stats.dropped == 1
        assert decider.pending() == []


def test_an_epoch_without_a_marker_is_held_and_reported_while_other_writers_go_on() -> None:
    # Writer w1 died in epoch 5 and its checkpoint was deleted; w2 started from epoch 0.
    items = offsets(
        rec("+I", 1, "old", w="w1", n=5),
        rec("+U", 2, "old", w="w1", n=5),
        rec("+I", 3, "new", w="w2", n=0),
        mark(w="w2", n=0),
    )
    decider = PartitionDecider("committed")
    assert brief(e for o, i in items for e in decider.feed(o, i)) == [(104, "+I")]
    assert decider.pending() == [PendingEpoch("w1", 5, ("a1",), 2, 100, 102)]
    assert decider.resume_offset == 100  # the held epoch is re-read by a reader without state
    assert decider.position == 107
    # If w1's checkpoint ever runs again, it retries epoch 5 with a new attempt and commits it.
    late = offsets(rec("+I", 1, "old", w="w1", n=5, a="r"), mark(w="w1", n=5, a="r"), start=108)
    assert steps(decider, late) == [[], [(108, "+I")]]
    assert decider.pending() == []
    assert decider.committed_through == {"w1": 5, "w2": 0}


def test_eventual_keeps_a_dead_writers_epoch_standing_until_that_writer_retries_it() -> None:
    items = offsets(
        rec("+I", 1, "old", w="w1", n=5),
        rec("+I", 3, "new", w="w2", n=0),
        mark(w="w2", n=0),
        rec("+I", 1, "old", w="w1", n=5, a="r"),
        mark(w="w1", n=5, a="r"),
    )
    decider = PartitionDecider("eventual")
    assert steps(decider, items) == [
        [(100, "+I")],
        [(102, "+I")],
        [],
        [(100, "-D"), (106, "+I")],
        [],
    ]


def test_a_writers_epochs_are_sequential_so_a_later_epochs_marker_fails_the_open_one() -> None:
    # Epoch 5's marker never reached this partition (not possible when the writer follows §6.2:
    # batch 6 runs after batch 5's markers are flushed). Epoch 5 can no longer commit once epoch
    # 6's marker is there; a record of epoch 6 alone proves nothing (see the forged-record test).
    items = offsets(
        rec("+I", 1, "x", n=5),
        rec("+U", 2, "y", n=5),
        rec("+I", 3, "z", n=6),
        mark(n=6),
        mark(n=5),  # a marker of an epoch before the one resolved: a repeat, no-op
    )
    committed = PartitionDecider("committed")
    assert steps(committed, items) == [[], [], [], [(104, "+I")], []]
    assert committed.stats.dropped == 2
    eventual = PartitionDecider("eventual")
    assert steps(eventual, items) == [
        [(100, "+I")],
        [(102, "+U")],
        [(104, "+I")],
        [(102, "-U"), (100, "-D")],
        [],
    ]
    # A marker of a later epoch fails the open one just the same.
    items = offsets(rec("+I", 1, "x", n=5), mark(n=6))
    assert steps(PartitionDecider("committed"), items) == [[], []]
    assert steps(PartitionDecider("eventual"), items) == [[(100, "+I")], [(100, "-D")]]


def test_a_forged_record_of_another_epoch_does_not_close_a_real_writers_open_epoch() -> None:
    # Anyone may produce a record naming writer w1 at some epoch: it must not make w1's real
    # epoch 5, whose marker is on its way, look failed (its records would be dropped).
    items = offsets(
        rec("+I", 1, "real", n=5),
        rec("+I", 9, "forged", n=8, a="a-forged"),
        rec("+U", 2, "real", n=5),
        mark(n=5),
    )
    committed = PartitionDecider("committed")
    assert steps(committed, items) == [[], [], [], [(100, "+I"), (104, "+U")]]
    assert committed.stats.dropped == 0
    (held,) = committed.pending()  # the forged epoch stays held, reported, never released
    assert (held.writer, held.epoch, held.records) == ("w1", 8, 1)
    eventual = PartitionDecider("eventual")
    assert steps(eventual, items) == [[(100, "+I")], [(102, "+I")], [(104, "+U")], []]
    assert eventual.stats.retracted == 0
    # Saved and restored with both epochs open, the decider goes on the same.
    saved = PartitionDecider("committed")
    steps(saved, items[:3])
    again = PartitionDecider.restore(json.loads(json.dumps(saved.state())))
    assert brief(again.feed(*items[3])) == [(100, "+I"), (104, "+U")]


def test_a_hybrid_read_skips_the_epochs_its_snapshot_holds_at_every_level() -> None:
    items = offsets(
        rec("+I", 1, "in snapshot", n=3),
        mark(n=3),
        rec("+I", 2, "after", n=4),
        rec("+I", 3, "other writer", w="w0", n=9),
        mark(n=4),
        mark(w="w0", n=9),
    )
    seed = {"w1": 3}
    assert brief(decide(items, "committed", committed_through=seed)) == [(104, "+I"), (106, "+I")]
    assert brief(decide(items, "eventual", committed_through=seed)) == [(104, "+I"), (106, "+I")]
    assert brief(decide(items, "none", committed_through=seed)) == [(104, "+I"), (106, "+I")]
    assert brief(decide(items, "none")) == [(100, "+I"), (104, "+I"), (106, "+I")]


# -- eventual ----------------------------------------------------------------------------------------


def test_eventual_emits_at_once_and_retracts_a_failed_attempt_newest_first() -> None:
    items = offsets(
        rec("+I", 1, "x", a="a1"),
        rec("-U", 2, "old", a="a1"),
        rec("+U", 2, "new", a="a1"),
        rec("+I", 1, "x", a="a2"),
        rec("-U", 2, "old", a="a2"),
        rec("+U", 2, "new", a="a2"),
        mark(a="a2"),
    )
    decider = PartitionDecider("eventual")
    out = [decider.feed(o, i) for o, i in items]
    assert [brief(x) for x in out] == [
        [(100, "+I")],
        [(102, "-U")],
        [(104, "+U")],
        [(104, "-U"), (102, "+U"), (100, "-D"), (106, "+I")],
        [(108, "-U")],
        [(110, "+U")],
        [],
    ]
    retractions = out[3][:3]
    assert all(e.retraction for e in retractions)
    assert [e.row for e in retractions] == [
        {"id": 2, "v": "new"},
        {"id": 2, "v": "old"},
        {"id": 1, "v": "x"},
    ]
    assert not out[3][3].retraction
    assert decider.pending() == []
    assert decider.stats.retracted == 3


@pytest.mark.parametrize(
    ("kind", "reverse"), [("+I", "-D"), ("-D", "+I"), ("+U", "-U"), ("-U", "+U")]
)
def test_a_retraction_is_the_same_row_image_with_the_reversed_kind(kind: str, reverse: str) -> None:
    record = rec(kind, 1, "image", a="a1")
    items = offsets(record, rec("+I", 9, "other", a="a2"))
    out = decide(items, "eventual")
    assert out[1] == Emission(100, RowKind(reverse), record)
    assert out[1].retraction and out[1].key == {"id": 1} and out[1].row == {"id": 1, "v": "image"}


def test_eventual_marker_of_the_emitted_attempt_emits_nothing_and_forgets_the_epoch() -> None:
    decider = PartitionDecider("eventual")
    assert steps(decider, offsets(rec("+I", 1, "x"), rec("+I", 2, "y"), mark())) == [
        [(100, "+I")],
        [(102, "+I")],
        [],
    ]
    assert decider.pending() == []
    assert decider.state()["open"] == []


def test_eventual_marker_naming_a_retracted_attempt_puts_it_back() -> None:
    # a1 committed, the markers were lost, and a careless retry a2 produced again before
    # re-publishing a1's markers: a2 is retracted and a1's records are emitted again.
    items = offsets(
        rec("+I", 1, "x", a="a1"),
        rec("+I", 2, "y", a="a1"),
        rec("+I", 1, "x", a="a2"),
        mark(a="a1"),
    )
    decider = PartitionDecider("eventual")
    assert steps(decider, items) == [
        [(100, "+I")],
        [(102, "+I")],
        [(102, "-D"), (100, "-D"), (104, "+I")],
        [(104, "-D"), (100, "+I"), (102, "+I")],
    ]
    assert brief(decide(items, "committed")) == [(100, "+I"), (102, "+I")]


# -- none --------------------------------------------------------------------------------------------


def test_none_emits_every_change_record_as_it_is_and_no_marker() -> None:
    items = offsets(
        rec("+I", 1, "x", a="a1"),
        rec("+I", 1, "x", a="a2"),
        mark(a="a2"),
        rec("-D", 1, "x", a="a2"),
        mark(a="a2"),
    )
    out = decide(items, "none")
    assert brief(out) == [(100, "+I"), (102, "+I"), (106, "-D")]
    assert [e.record for e in out] == [items[0][1], items[1][1], items[3][1]]
    decider = PartitionDecider("none")
    steps(decider, items)
    assert decider.pending() == [] and decider.resume_offset == 109


# -- saved state and resumption -----------------------------------------------------------------------

SCENARIO = offsets(
    rec("+I", 1, "dead", w="w0", n=2),
    rec("+I", 1, "x", a="a1"),
    rec("-U", 2, "old", a="a1"),
    rec("+I", 1, "x", a="a2"),
    rec("-U", 2, "old", a="a2"),
    rec("+U", 2, "new", a="a2"),
    mark(a="a2"),
    rec("+I", 3, "z", n=1),
    mark(n=1),
    mark(n=1),
    rec("-D", 3, "z", n=2, a="b1"),
    rec("-D", 3, "z", n=2, a="b2"),
)


@pytest.mark.parametrize("level", LEVELS)
def test_a_decider_restored_at_any_point_continues_as_if_it_never_stopped(level: str) -> None:
    whole = decide(SCENARIO, level)
    for cut in range(len(SCENARIO) + 1):
        first = PartitionDecider(level)
        before = [e for o, i in SCENARIO[:cut] for e in first.feed(o, i)]
        saved = json.loads(json.dumps(first.state()))
        second = PartitionDecider.restore(saved)
        after = [e for o, i in SCENARIO[cut:] for e in second.feed(o, i)]
        assert before + after == whole, cut
        assert PartitionDecider.restore(saved).state() == saved


@pytest.mark.parametrize("level", LEVELS)
def test_a_restored_decider_ignores_offsets_it_already_processed(level: str) -> None:
    first = PartitionDecider(level)
    before = [e for o, i in SCENARIO[:7] for e in first.feed(o, i)]
    second = PartitionDecider.restore(first.state())
    after = [e for o, i in SCENARIO for e in second.feed(o, i)]  # re-delivered from the start
    assert before + after == decide(SCENARIO, level)
    assert second.stats.replayed == 7


def test_a_resume_point_keeps_epochs_resolved_after_it_from_being_emitted_twice() -> None:
    # w0's epoch 2 is still open at the end, so the resume offset stays at its first record (100)
    # while w1's epochs after it were emitted: re-reading from 100 must not emit them again.
    cut = 10
    first = PartitionDecider("committed")
    before = [e for o, i in SCENARIO[:cut] for e in first.feed(o, i)]
    point = first.resume_point()
    assert point.offset == 100 and point.position == SCENARIO[cut - 1][0] + 1
    assert dict(point.committed_through) == {"w1": 1}
    rest = decide(SCENARIO, "committed")[len(before) :]

    naive = PartitionDecider("committed")  # the offset alone: w1's epochs come out again
    assert [e for o, i in SCENARIO for e in naive.feed(o, i)] != rest

    for level in LEVELS:
        start = PartitionDecider(level)
        done = [e for o, i in SCENARIO[:cut] for e in start.feed(o, i)]
        saved = ResumePoint.from_json(json.loads(json.dumps(start.resume_point().to_json())))
        resumed = PartitionDecider.resume(level, saved)
        out = [e for o, i in SCENARIO if o >= (saved.offset or 0) for e in resumed.feed(o, i)]
        assert done + out == decide(SCENARIO, level), level


def test_a_resume_point_is_refused_when_the_records_to_re_read_are_gone() -> None:
    decider = PartitionDecider("committed")
    steps(decider, SCENARIO[:3])
    point = decider.resume_point()
    assert (point.offset, point.position) == (100, 105)
    resumed = PartitionDecider.resume("committed", point)
    assert resumed.resume_point() == point  # saving it again before reading keeps it
    saved = PartitionDecider.restore(json.loads(json.dumps(resumed.state())))
    for decider in (resumed, saved):
        with pytest.raises(
            DeciderStateError, match=r"from offset 100 .* at offset 102 .*retention"
        ):
            decider.feed(*SCENARIO[1])
    # Nothing open: the next record may come after a gap.
    done = PartitionDecider("committed")
    steps(done, offsets(rec("+I", 1, "x"), mark()))
    later = PartitionDecider.resume("committed", done.resume_point())
    assert brief(later.feed(500, rec("+I", 2, "y", n=1))) == []
    assert later.position == 501


def test_state_keeps_column_values_json_has_no_type_for() -> None:
    odd_map = {"$decimal": "not a tag"}
    key = {"id": Decimal("10.50"), "at": datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)}
    row = {
        **key,
        "day": date(1999, 12, 31),
        "blob": b"\x00\xff",
        "nan": float("nan"),
        "inf": float("-inf"),
        "neg0": -0.0,
        "big": 2**70,
        "map": {1: "one", 2: [Decimal("1e-30")]},
        "odd": odd_map,
        "pair": (1, "a"),
        "nested": {"list": [None, True, 1.5, {"x": b"y"}]},
    }
    record = ChangeRecord(RowKind.UPDATE_AFTER, key, row, EpochId("w", 1, "a"))
    decider = PartitionDecider("committed")
    decider.feed(5, record)
    text = json.dumps(decider.state(), allow_nan=False)
    restored = PartitionDecider.restore(json.loads(text))
    (out,) = restored.feed(6, mark(w="w", n=1, a="a"))
    assert out.key == key
    got = dict(out.row)
    nan = got.pop("nan")
    assert nan != nan  # NaN, which compares unequal to itself
    assert got == {k: v for k, v in row.items() if k != "nan"}
    assert str(got["neg0"]) == "-0.0" and got["odd"] == odd_map and isinstance(got["pair"], tuple)


def test_state_refuses_a_value_it_cannot_save() -> None:
    decider = PartitionDecider("eventual")
    decider.feed(0, ChangeRecord(RowKind.INSERT, None, {"x": object()}, EpochId("w", 0, "a")))
    with pytest.raises(TypeError, match="type object cannot be saved"):
        decider.state()


def _saved() -> dict[str, Any]:
    decider = PartitionDecider("committed")
    for offset, item in SCENARIO[:3]:
        decider.feed(offset, item)
    result: dict[str, Any] = json.loads(json.dumps(decider.state()))
    return result


def _set(path: Sequence[str | int], value: Any) -> dict[str, Any]:
    state = _saved()
    target: Any = state
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return state


def _same_epoch_twice() -> dict[str, Any]:
    """Two open entries for one writer and epoch (one writer may have several epochs open)."""
    state = _saved()
    state["open"][1]["writer"] = state["open"][0]["writer"]
    state["open"][1]["epoch"] = state["open"][0]["epoch"]
    return state


@pytest.mark.parametrize(
    ("snapshot", "where"),
    [
        ([], "state: expected a JSON object"),
        (_set(["format"], 2), "state.format: 2"),
        (_set(["level"], "transactional"), "state.level"),
        (_set(["next_offset"], "101"), "state.next_offset"),
        (_set(["committed_through"], {"w1": "1"}), "state.committed_through"),
        (_set(["open"], {}), "state.open"),
        (_set(["open", 0, "epoch"], None), "state.open[0]"),
        (_set(["open", 0, "records"], []), "state.open[0].records"),
        (_set(["open", 1, "records", 0, "offset"], 1000), "state.open[1].records[0].offset"),
        (_set(["open", 1, "records", 1, "offset"], 1), "state.open[1].records[1].offset"),
        (_set(["open", 1, "records", 0, "kind"], "COMMIT"), "state.open[1].records[0].kind"),
        (_set(["open", 1, "records", 0, "row"], [1]), "state.open[1].records[0]"),
        (_set(["open", 1, "records", 0, "row"], {"v": {"$date": "2024-13-01"}}), "records[0].row"),
        (_set(["open", 1, "records", 0, "row"], {"v": {"$nope": 1}}), "records[0].row"),
        (_same_epoch_twice(), "state.open[1]: writer 'w0' epoch 2 is open twice"),
        (_set(["stats", "records"], -0.5), "state.stats"),
    ],
)
def test_a_damaged_state_is_refused_with_where_and_what_to_do(snapshot: Any, where: str) -> None:
    with pytest.raises(DeciderStateError) as caught:
        PartitionDecider.restore(snapshot)
    assert where in str(caught.value)
    assert caught.value.exit_code == EXIT_FAILURE
    assert caught.value.hint is not None and "delete it" in caught.value.hint


def test_the_unmodified_saved_state_used_by_the_damage_cases_restores() -> None:
    assert PartitionDecider.restore(_saved()).pending()[1] == PendingEpoch(
        "w1", 0, ("a1",), 2, 102, 104
    )


@pytest.mark.parametrize(
    "data",
    [
        {"format": 1, "offset": 5, "position": None, "committed_through": {}},
        {"format": 1, "offset": 9, "position": 5, "committed_through": {}},
        {"format": 1, "offset": 1, "position": 5, "committed_through": []},
        {"offset": 1, "position": 5, "committed_through": {}},
    ],
)
def test_a_damaged_resume_point_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(DeciderStateError, match="resume point"):
        ResumePoint.from_json(data)


# -- misuse and the helpers -----------------------------------------------------------------------


def test_an_unknown_level_is_a_clear_input_error() -> None:
    with pytest.raises(InvalidInputError, match="'transactional'") as caught:
        PartitionDecider("transactional")
    assert caught.value.hint == "use one of: committed, eventual, none"


def test_feed_refuses_what_is_not_a_record_or_marker() -> None:
    decider = PartitionDecider("none")
    with pytest.raises(TypeError, match="offset 3"):
        decider.feed(3, "+I")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind COMMIT"):
        decider.feed(3, ChangeRecord(RowKind.COMMIT, None, {}, EpochId("w", 0, "a")))
    assert decider.position is None  # nothing was taken in


def test_decide_refuses_records_out_of_offset_order() -> None:
    with pytest.raises(ValueError, match="offset 5 after 5"):
        decide([(5, rec("+I", 1, "x")), (5, rec("+I", 2, "y"))], "none")


def test_a_topic_decider_decides_each_partition_alone_and_saves_them_together() -> None:
    parts = {0: SCENARIO, 3: offsets(rec("+I", 7, "p3", w="w0", n=2), mark(w="w0", n=2))}
    expected = decide_partitions(parts, "committed")
    assert expected == {p: decide(items, "committed") for p, items in parts.items()}
    topic = TopicDecider("committed")
    got: dict[int, list[Emission]] = {0: [], 3: []}
    for p in (3, 0):
        for i, (offset, item) in enumerate(parts[p]):
            got[p] += topic.feed(p, offset, item)
            if i == 1:
                topic = TopicDecider.restore(json.loads(json.dumps(topic.state())))
    assert got == expected
    assert topic.pending() == {0: topic.partition(0).pending()}
    assert [e.epoch for e in topic.pending()[0]] == [2, 2]
    assert topic.resume_points()[3] == ResumePoint(103, 103, {"w0": 2})


def test_a_topic_deciders_snapshot_epochs_apply_to_partitions_first_seen_after_a_restore() -> None:
    topic = TopicDecider("eventual", committed_through={"w1": 4})
    topic.feed(0, 100, rec("+I", 1, "x", n=5))
    topic = TopicDecider.restore(json.loads(json.dumps(topic.state())))
    assert topic.feed(2, 7, rec("+I", 2, "in the snapshot", n=4)) == []
    assert brief(topic.feed(2, 8, rec("+I", 2, "after it", n=5))) == [(8, "+I")]
    assert topic.partition(2).committed_through == {"w1": 4}


# -- property tests: a simulated ingest job ------------------------------------------------------------

KEYS = 6


def partition_of(key: int, partitions: int) -> int:
    """A fixed hash of the key, as Kafka's partitioner is (one key, one partition)."""
    return (key * 2654435761 >> 7) % partitions


@dataclass
class Batch:
    """One micro-batch (epoch): its changes are fixed when first planned; a retry re-sends them."""

    epoch: int
    changes: list[tuple[str, int, dict[str, Any]]]
    committed: str | None = None  # the attempt whose Delta commit succeeded


@dataclass
class Job:
    writer: str
    next_epoch: int = 0
    batch: Batch | None = None
    crashed: bool = False


@dataclass
class World:
    """The topic and the Delta table, as the write path of §6.2 leaves them."""

    partitions: int
    repair: bool  # a (re)started job first re-publishes the markers of the table's latest commit
    careless: bool  # a retry of an already committed batch produces again before its markers
    logs: list[list[tuple[int, Item]]] = field(default_factory=list)
    committed: dict[tuple[str, int], str] = field(default_factory=dict)  # (W, N) -> attempt
    commit_order: list[EpochId] = field(default_factory=list)
    table: dict[int, dict[str, Any]] = field(default_factory=dict)  # what Delta holds
    jobs: list[Job] = field(default_factory=list)
    serial: int = 0

    def __post_init__(self) -> None:
        self.logs = [[] for _ in range(self.partitions)]

    def new_id(self) -> int:
        self.serial += 1
        return self.serial

    def append(self, partition: int, item: Item) -> None:
        log = self.logs[partition]
        # Offsets start anywhere and have gaps now and then.
        offset = (log[-1][0] + 1 + (len(log) % 3 == 2)) if log else 10 * partition + self.serial
        log.append((offset, item))

    def produce(self, epoch: EpochId, changes: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        for kind, key, row in changes:
            record = ChangeRecord(RowKind(kind), {"id": key}, row, epoch)
            self.append(partition_of(key, self.partitions), record)

    def markers(self, epoch: EpochId, reach: Sequence[bool]) -> None:
        # The version Delta committed ``epoch`` as (a re-publication after later commits names
        # the commit's own version, as the job reads it from the Delta log, not the newest).
        version = self.commit_order.index(epoch) + 1
        for partition in range(self.partitions):
            if reach[partition]:
                self.append(partition, CommitMarker(epoch, version))

    def commit(self, epoch: EpochId, batch: Batch) -> None:
        batch.committed = epoch.attempt
        self.committed[(epoch.writer, epoch.epoch)] = epoch.attempt
        self.commit_order.append(epoch)
        for kind, key, row in batch.changes:
            if kind in ("+I", "+U"):
                self.table[key] = row
            else:
                self.table.pop(key, None)

    def plan(self, draw: st.DrawFn, epoch: int) -> Batch:
        """Changes against the table as committed now: inserts, updates (-U, +U), deletes."""
        state = dict(self.table)
        changes: list[tuple[str, int, dict[str, Any]]] = []
        for key in draw(st.lists(st.integers(0, KEYS - 1), max_size=4)):
            old = state.get(key)
            new = {"id": key, "v": self.new_id()}
            if old is None:
                changes.append(("+I", key, new))
                state[key] = new
            elif draw(st.booleans()):
                changes += [("-U", key, old), ("+U", key, new)]
                state[key] = new
            else:
                changes.append(("-D", key, old))
                del state[key]
        return Batch(epoch, changes)

    def run(self, job: Job, draw: st.DrawFn, outcome: str) -> None:
        """One execution of the job's current batch (a new attempt), ending in ``outcome``."""
        all_partitions = [True] * self.partitions
        if job.crashed and self.repair and self.commit_order:
            self.markers(self.commit_order[-1], all_partitions)
        if job.batch is None:
            job.batch = self.plan(draw, job.next_epoch)
        batch = job.batch
        epoch = EpochId(job.writer, batch.epoch, f"a{self.new_id()}")

        def reach() -> list[bool]:
            if outcome == "ok":
                return all_partitions
            # A crash while the markers were published: some partitions got theirs.
            return draw(st.lists(st.booleans(), min_size=self.partitions, max_size=self.partitions))

        job.crashed = outcome != "ok"
        if batch.committed is not None:
            # Step 1: already committed; re-publish the committed attempt's markers only.
            if self.careless:
                self.produce(epoch, batch.changes)
            done = EpochId(job.writer, batch.epoch, batch.committed)
            self.markers(done, reach())
        elif outcome == "before-produce":
            pass
        elif outcome == "mid-produce":
            cut = draw(st.integers(0, len(batch.changes)))
            self.produce(epoch, batch.changes[:cut])
        elif outcome == "after-produce":
            self.produce(epoch, batch.changes)
        else:  # "after-commit" (markers reach only some partitions) or "ok"
            self.produce(epoch, batch.changes)
            self.commit(epoch, batch)
            self.markers(epoch, reach())
        if outcome == "ok":
            job.batch = None
            job.next_epoch = batch.epoch + 1

    @property
    def finished(self) -> bool:
        return all(job.batch is None for job in self.jobs)


OUTCOMES = ["ok", "ok", "before-produce", "mid-produce", "after-produce", "after-commit"]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    world = World(
        partitions=draw(st.integers(1, 3)), repair=draw(st.booleans()), careless=draw(st.booleans())
    )
    world.jobs.append(Job("w0"))
    job = world.jobs[0]
    for _ in range(draw(st.integers(0, 12))):
        action = draw(st.sampled_from(["run", "run", "run", "new writer", "old writer"]))
        if action == "new writer":  # the checkpoint was deleted: a new W, epochs from 0
            job.crashed = True
            job = Job(f"w{len(world.jobs)}", crashed=True)
            world.jobs.append(job)
        elif action == "old writer":  # a job started again from an earlier checkpoint
            job.crashed = True
            job = draw(st.sampled_from(world.jobs))
            job.crashed = True
        else:
            world.run(job, draw, draw(st.sampled_from(OUTCOMES)))
    if draw(st.booleans()):  # the last job runs on until its batch is done
        world.run(job, draw, "ok")
    return world


def changes(log: Sequence[tuple[int, Item]]) -> list[tuple[int, ChangeRecord]]:
    return [(o, i) for o, i in log if isinstance(i, ChangeRecord)]


def expected_committed(world: World, log: Sequence[tuple[int, Item]]) -> list[Emission]:
    """The committed attempts' records of the epochs whose marker reached this partition, at the
    first such marker, in offset order."""
    first_marker: dict[tuple[str, int], int] = {}
    for offset, item in log:
        if isinstance(item, CommitMarker):
            first_marker.setdefault((item.epoch.writer, item.epoch.epoch), offset)
    chosen = [
        (first_marker[(r.epoch.writer, r.epoch.epoch)], o, r)
        for o, r in changes(log)
        if world.committed.get((r.epoch.writer, r.epoch.epoch)) == r.epoch.attempt
        and (r.epoch.writer, r.epoch.epoch) in first_marker
    ]
    return [Emission(o, r.kind, r) for _, o, r in sorted(chosen, key=lambda x: x[:2])]


def expected_standing(world: World, log: Sequence[tuple[int, Item]]) -> list[ChangeRecord]:
    """What ``eventual`` still shows of epochs unresolved in this partition: per writer with an
    unfinished batch and no marker of it here, the records of the last attempt that wrote here."""
    found: list[ChangeRecord] = []
    resolved = {(i.epoch.writer, i.epoch.epoch) for _, i in log if isinstance(i, CommitMarker)}
    for job in world.jobs:
        if job.batch is None or (job.writer, job.batch.epoch) in resolved:
            continue
        mine = [
            r
            for _, r in changes(log)
            if (r.epoch.writer, r.epoch.epoch) == (job.writer, job.batch.epoch)
        ]
        if mine:
            found += [r for r in mine if r.epoch.attempt == mine[-1].epoch.attempt]
    return found


def _freeze(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def bag(records: Iterable[tuple[RowKind, ChangeRecord]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for kind, record in records:
        image = (_freeze(record.key), _freeze(record.row))
        counts[image] = counts.get(image, 0) + (
            1 if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER) else -1
        )
    return {image: n for image, n in counts.items() if n}


def table(out: Iterable[Emission]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for e in out:
        key = e.record.row["id"]
        if e.kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
            state[key] = dict(e.record.row)
        else:
            state.pop(key, None)
    return state


def assert_retractions_undo(out: Sequence[Emission]) -> None:
    """After each run of retractions the table is as if the retracted records had never been
    emitted (true when no other writer changed those keys in between: retractions newest first)."""
    applied: list[Emission] = []
    kept: list[Emission] = []  # the output with each retraction and what it retracts removed
    for i, e in enumerate(out):
        applied.append(e)
        if not e.retraction:
            kept.append(e)
            continue
        (undone,) = [k for k, x in enumerate(kept) if x.offset == e.offset][-1:]
        del kept[undone]
        if i + 1 == len(out) or not out[i + 1].retraction:
            assert table(applied) == table(kept), f"after the retractions up to output {i}"


def run_restored(
    level: str, log: Sequence[tuple[int, Item]], cut: int, back: int
) -> list[Emission]:
    """Read up to ``cut``, save the state as JSON, restore, and read on from ``back`` items before
    the cut (a consumer re-delivering what was already processed)."""
    first = PartitionDecider(level)
    out = [e for o, i in log[:cut] for e in first.feed(o, i)]
    second = PartitionDecider.restore(json.loads(json.dumps(first.state())))
    return out + [e for o, i in log[max(cut - back, 0) :] for e in second.feed(o, i)]


def _from_point(
    level: str, log: Sequence[tuple[int, Item]], decider: PartitionDecider
) -> tuple[PartitionDecider, list[tuple[int, Item]]]:
    """A decider resumed from ``decider``'s resume point (through JSON) and what it re-reads."""
    point = ResumePoint.from_json(json.loads(json.dumps(decider.resume_point().to_json())))
    start = point.offset if point.offset is not None else log[0][0] if log else 0
    return PartitionDecider.resume(level, point), [(o, i) for o, i in log if o >= start]


def run_resumed(
    level: str, log: Sequence[tuple[int, Item]], cut: int, again: int, via_state: bool
) -> list[Emission]:
    """Read up to ``cut`` and keep only the resume point; re-read from its offset, and after
    ``again`` items stop once more (keeping the state, or again only a resume point)."""
    first = PartitionDecider(level)
    out = [e for o, i in log[:cut] for e in first.feed(o, i)]
    second, rest = _from_point(level, log, first)
    out += [e for o, i in rest[:again] for e in second.feed(o, i)]
    if via_state:
        third = PartitionDecider.restore(json.loads(json.dumps(second.state())))
        rest = rest[again:]
    else:
        third, rest = _from_point(level, log, second)
    return out + [e for o, i in rest for e in third.feed(o, i)]


@settings(max_examples=budget(2000))
@given(world=worlds(), data=st.data())
def test_every_level_against_what_the_writer_committed(world: World, data: st.DataObject) -> None:
    all_committed: list[Emission] = []
    all_eventual: list[Emission] = []
    for log in world.logs:
        committed = decide(log, "committed")
        eventual = decide(log, "eventual")
        none = decide(log, "none")

        # committed: exactly the committed attempts' records, each epoch at its marker.
        expected = expected_committed(world, log)
        assert committed == expected
        if world.repair:  # markers never come late, so that is plain offset order
            assert [e.offset for e in expected] == sorted(e.offset for e in expected)

        # eventual: the same bag, plus what is still standing of epochs unresolved here.
        standing = expected_standing(world, log)
        assert bag((e.kind, e.record) for e in eventual) == bag(
            [(e.kind, e.record) for e in committed] + [(r.kind, r) for r in standing]
        )
        # Every retraction undoes a record emitted before it and still standing.
        shown: dict[int, int] = {}
        for e in eventual:
            shown[e.offset] = shown.get(e.offset, 0) + (-1 if e.retraction else 1)
            assert shown[e.offset] in (0, 1)
        if len(world.jobs) == 1:
            assert_retractions_undo(eventual)

        # none: every change record as it is.
        assert [(e.offset, e.kind, e.record) for e in none] == [
            (o, r.kind, r) for o, r in changes(log)
        ]

        # A reader restored (or resumed) at any point continues exactly.
        for level, whole in (("committed", committed), ("eventual", eventual), ("none", none)):
            cut = data.draw(st.integers(0, len(log)), label=f"cut {level}")
            back = data.draw(st.integers(0, 3), label="re-delivered")
            assert run_restored(level, log, cut, back) == whole
            again = data.draw(st.integers(0, len(log)), label="again")
            via_state = data.draw(st.booleans(), label="via state")
            assert run_resumed(level, log, cut, again, via_state) == whole

        all_committed += committed
        all_eventual += eventual

    if world.finished:  # nothing unresolved: both levels show the Delta table
        if world.repair:
            assert table(all_committed) == world.table
        # (A careless retry without the repair can re-instate a commit after another writer's.)
        if world.repair or not world.careless or len(world.jobs) == 1:
            assert table(all_eventual) == world.table


# -- markers the Delta log does not confirm (issue 18, items 2 and 3) ------------------------------


def _delta(*confirmed: CommitMarker) -> Any:
    """A ``confirm`` that knows the given markers (what the Delta log holds) and counts calls."""
    known = {(m.epoch, m.delta_version) for m in confirmed}

    def confirm(marker: CommitMarker) -> bool:
        confirm.calls += 1  # type: ignore[attr-defined]
        return (marker.epoch, marker.delta_version) in known

    confirm.calls = 0  # type: ignore[attr-defined]
    return confirm


# Epochs 0..3 of w1, each one record, committed as versions 1..4; a forged marker for epoch 9 of
# the same writer comes right after epoch 0.
_REAL = [mark(n=n, a=f"a{n}", version=n + 1) for n in range(4)]
_FORGED_LATER = mark(n=9, a="forged", version=1)


def _with_forged_later() -> list[tuple[int, Item]]:
    items: list[Item] = []
    for n, real in enumerate(_REAL):
        items += [rec("+I", n, f"v{n}", n=n, a=f"a{n}"), real]
        if n == 0:
            items.append(_FORGED_LATER)
    return offsets(*items)


@pytest.mark.parametrize("level", ["committed", "eventual"])
def test_a_forged_marker_for_a_later_epoch_does_not_hide_the_writers_next_epochs(
    level: str,
) -> None:
    log = _with_forged_later()
    assert [e.record.row["v"] for e in decide(log, level)] == ["v0"]  # the attack, unchecked
    confirm = _delta(*_REAL)
    decider = PartitionDecider(level, confirm=confirm)
    out = [e for o, item in log for e in decider.feed(o, item)]
    assert [(e.record.row["v"], e.retraction) for e in out] == [(f"v{n}", False) for n in range(4)]
    assert decider.committed_through == {"w1": 3}
    assert decider.stats.unconfirmed_markers == 1 and decider.stats.unconfirmed_records == 0
    assert confirm.calls == 5  # each marker once: no record asks


def test_forged_records_and_marker_of_an_unknown_writer_are_held_and_counted() -> None:
    forged = [rec("+I", 50, "x", w="intruder", a="x"), rec("+I", 51, "y", w="intruder", a="x")]
    marker = mark(w="intruder", a="x", version=1)  # names the real epoch's version
    log = offsets(rec("+I", 1, "a"), mark(version=1), *forged, marker)
    assert len(decide(log, "committed")) == 3  # the attack, unchecked: released
    for level in ("committed", "eventual"):
        decider = PartitionDecider(level, confirm=_delta(mark(version=1)))
        out = [e for o, item in log for e in decider.feed(o, item)]
        assert [e.record.epoch.writer for e in out] == (
            ["w1"] if level == "committed" else ["w1", "intruder", "intruder"]
        )  # eventual shows what is unresolved at once, as always; it is never resolved
        assert decider.stats.unconfirmed_markers == 1
        assert decider.stats.unconfirmed_records == 2
        assert [(p.writer, p.records) for p in decider.pending()] == [("intruder", 2)]
        assert decider.committed_through == {"w1": 0}
    # A forged marker naming another attempt of a real, open epoch does not fail it.
    real = mark(n=1, a="a1", version=2)
    log = offsets(rec("+I", 1, "a", n=1, a="a1"), mark(n=1, a="bad", version=2), real)
    decider = PartitionDecider("committed", confirm=_delta(real))
    assert [brief(decider.feed(o, i)) for o, i in log] == [[], [], [(100, "+I")]]
    assert decider.stats.unconfirmed_records == 0  # the forged attempt had no records here


def test_unconfirmed_counts_survive_state_and_an_older_state_without_them_restores() -> None:
    decider = PartitionDecider("committed", confirm=_delta())
    for o, item in offsets(rec("+I", 1, "a"), mark()):
        decider.feed(o, item)
    saved = json.loads(json.dumps(decider.state()))
    again = PartitionDecider.restore(saved, confirm=_delta(mark()))
    assert again.stats.unconfirmed_markers == 1 and again.stats.unconfirmed_records == 1
    assert brief(again.feed(104, mark())) == [(100, "+I")]  # the real marker, confirmed
    for name in ("unconfirmed_markers", "unconfirmed_records"):
        del saved["stats"][name]
    assert PartitionDecider.restore(saved).stats.unconfirmed_markers == 0
    topic = TopicDecider("committed", confirm=_delta())
    topic.feed(0, 100, rec("+I", 1, "a"))
    topic.feed(1, 7, mark())
    topic.feed(0, 101, mark())
    assert (topic.stats().unconfirmed_markers, topic.stats().records) == (2, 1)
    restored = TopicDecider.restore(topic.state(), confirm=_delta(mark()))
    assert brief(restored.feed(0, 102, mark())) == [(100, "+I")]


INTRUDER = "intruder"


@given(world=worlds(), data=st.data())
def test_forged_markers_change_nothing_a_confirming_reader_emits(
    world: World, data: st.DataObject
) -> None:
    """Forged markers anywhere (later, earlier or current epochs of real writers, other attempts,
    versions that hold something else) and an unknown writer's records with its own marker: with
    the Delta log as ``confirm``, committed and eventual emit what they emit of the clean log,
    apart from eventual showing the intruder's records (never resolved)."""
    versions = {i + 1: e for i, e in enumerate(world.commit_order)}  # World.markers' numbering

    def confirm(marker: CommitMarker) -> bool:
        version = marker.delta_version
        return version is not None and versions.get(version) == marker.epoch

    writers = [job.writer for job in world.jobs]
    top = len(versions) + 2
    forged = st.one_of(
        st.builds(
            lambda w, n, v: mark(w=w, n=n, a="forged", version=v),
            st.sampled_from(writers), st.integers(0, 20), st.integers(0, top),
        ),
        st.builds(lambda v: mark(w=INTRUDER, a="x", version=v), st.integers(0, top)),
        st.builds(lambda k: rec("+I", k, "forged", w=INTRUDER, a="x"), st.integers(0, KEYS - 1)),
    )  # fmt: skip
    for log in world.logs:
        items = [item for _, item in log]
        for _ in range(data.draw(st.integers(0, 6), label="forgeries")):
            at = data.draw(st.integers(0, len(items)), label="where")
            items.insert(at, data.draw(forged, label="forged"))
        tampered = [(2 * i, item) for i, item in enumerate(items)]
        for level in ("committed", "eventual"):
            clean = [(e.kind, e.record) for e in decide(log, level)]
            got = decide(tampered, level, confirm=confirm)
            kept = [(e.kind, e.record) for e in got if e.record.epoch.writer != INTRUDER]
            assert kept == clean
            if level == "committed":
                assert len(kept) == len(got)
