"""The generate source's change stream (ingest/generate.py): a valid changelog whose fold is
``expected_state``, the same records for any split of a range, values logformat encodes, keys
derived from key numbers, and the refusals of ``check_generate``."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.errors import EXIT_INVALID_INPUT, InvalidInputError
from logstore_cli.ingest import generate
from logstore_cli.ingest.plan import GenerateSource
from logstore_cli.logformat.values import encode_value, to_float32
from logstore_cli.logformat.wire import RowKind
from logstore_cli.model import ColumnSpec, TableSpec
from tests.hypothesis_profiles import budget
from tests.unit.logformat.strategies import SCALAR_TYPES, type_strings

pytestmark = pytest.mark.unit


def table(
    columns: Iterable[tuple[str, str] | tuple[str, str, bool]], key: Iterable[str] = ()
) -> TableSpec:
    specs = tuple(ColumnSpec(*c) for c in columns)
    return TableSpec(None, "t", specs, tuple(key), None, {}, None)


def source(
    keys: int = 50,
    *,
    total: int | None = None,
    update: float = 0.5,
    delete: float = 0.1,
    seed: int = 0,
    rate: int = 1000,
) -> GenerateSource:
    return GenerateSource(rate, keys, total, update, delete, seed)


ORDERS = table(
    [
        ("id", "bigint", False),
        ("customer", "string"),
        ("amount", "decimal(10,2)"),
        ("placed", "timestamp"),
        ("score", "double"),
        ("weight", "float"),
        ("tags", "array<string>"),
        ("attrs", "map<string,int>"),
        ("address", "struct<city:string,since:date>"),
        ("flag", "boolean"),
        ("payload", "binary"),
        ("local", "timestamp_ntz"),
    ],
    key=["id"],
)
EVENTS = table([("at", "timestamp"), ("what", "string"), ("n", "int")])  # no key


def fold(t: TableSpec, records: Iterable[tuple[RowKind, dict[str, Any]]]) -> dict[Any, Any]:
    """Apply a changelog strictly: an insert needs an absent key, -U and -D must name the current
    row, +U must follow the -U of its key."""
    state: dict[Any, Any] = {}
    retracted: Any = None
    for kind, row in records:
        key = generate.row_key(t, row)
        if kind is RowKind.INSERT:
            assert key not in state, f"insert of a present key {key}"
            state[key] = row
        elif kind is RowKind.UPDATE_BEFORE:
            assert state.pop(key) == row, f"-U of {key} is not its current row"
            retracted = key
        elif kind is RowKind.UPDATE_AFTER:
            assert retracted == key, f"+U of {key} without its -U"
            retracted = None
            state[key] = row
        else:
            assert kind is RowKind.DELETE
            assert state.pop(key) == row, f"-D of {key} is not its current row"
    assert retracted is None
    return state


def keyed_state(src: GenerateSource, t: TableSpec, n: int) -> dict[Any, Any]:
    state = generate.expected_state(src, t, n)
    assert isinstance(state, dict)
    return state


def encodes(t: TableSpec, row: dict[str, Any]) -> None:
    for column in t.columns:
        encode_value(row[column.name], column.type)  # raises WireFormatError when invalid


# -- the changelog -----------------------------------------------------------------------------------


@settings(max_examples=budget(60))
@given(
    keys=st.integers(1, 40),
    n=st.integers(0, 400),
    update=st.floats(0, 1),
    delete=st.floats(0, 1),
    seed=st.integers(-(2**63), 2**63),
)
def test_folding_the_records_gives_the_expected_state(
    keys: int, n: int, update: float, delete: float, seed: int
) -> None:
    src = source(keys, update=update, delete=delete, seed=seed)
    if update + delete == 0:
        src = source(keys, update=0.5, delete=0.5, seed=seed)
    assert fold(ORDERS, generate.records(src, ORDERS, 0, n)) == generate.expected_state(
        src, ORDERS, n
    )


@settings(max_examples=budget(60))
@given(
    keys=st.integers(1, 30),
    n=st.integers(0, 300),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_any_split_of_a_range_gives_the_same_records(
    keys: int, n: int, data: st.DataObject, seed: int
) -> None:
    src = source(keys, seed=seed)
    whole = list(generate.flat_records(src, ORDERS, 0, n))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *cuts, n]
    parts = [
        record
        for a, b in itertools.pairwise(bounds)
        for record in generate.flat_records(src, ORDERS, a, b)
    ]
    assert parts == whole
    # Change numbers run 0..n-1; an update is the change's records 0 and 1 (-U, +U).
    assert [c for c, index, _, _ in whole if index == 0] == list(range(n))
    for (c, index, kind, _), nxt in zip(whole, [*whole[1:], None], strict=False):
        if kind == "-U":
            assert nxt is not None and nxt[:3] == (c, 1, "+U")
        else:
            assert index == (1 if kind == "+U" else 0)


def test_a_fresh_generator_gives_the_same_records_and_another_seed_others() -> None:
    src = source(30, seed=11)
    first = list(generate.flat_records(src, ORDERS, 100, 400))
    assert list(generate.Generator(src, ORDERS).rows(100, 400)) == first  # nothing cached
    assert list(generate.flat_records(source(30, seed=12), ORDERS, 100, 400)) != first


def test_changes_touch_every_key_once_per_round_in_another_order() -> None:
    src = source(20, seed=3)
    gen = generate.generator(src, ORDERS)
    orders = []
    for r in range(4):
        ids = [row["id"] for _, row in generate.records(src, ORDERS, r * 20, (r + 1) * 20)]
        touched = list(dict.fromkeys(ids))  # an update's two records name one key
        assert sorted(touched) == [gen.key_values(k)[0] for k in range(20)]
        orders.append(tuple(touched))
    assert len(set(orders)) == 4, "two rounds touched the keys in the same order"


def test_kind_shares_follow_the_ratios() -> None:
    src = source(200, update=0.5, delete=0.1, seed=5)
    n = 200 * 300
    kinds = Counter(
        kind for c, index, kind, _ in generate.flat_records(src, ORDERS, 200, n) if index == 0
    )
    changes = n - 200  # the first round inserts every key
    shares = generate.kind_shares(src)
    assert shares == pytest.approx({"insert": 1 / 7, "update": 5 / 7, "delete": 1 / 7})
    assert kinds["-D"] / changes == pytest.approx(shares["delete"], abs=0.01)
    assert kinds["+I"] / changes == pytest.approx(shares["insert"], abs=0.01)
    assert kinds["-U"] / changes == pytest.approx(shares["update"], abs=0.01)


def test_only_deletes_alternate_deletes_and_inserts() -> None:
    src = source(5, update=0.0, delete=0.3)
    kinds = [kind for kind, _ in generate.records(src, ORDERS, 0, 50)]
    inserts, deletes = [RowKind.INSERT] * 5, [RowKind.DELETE] * 5
    assert kinds == inserts + (deletes + inserts) * 4 + deletes
    assert generate.expected_state(src, ORDERS, 50) == {}
    assert len(generate.expected_state(src, ORDERS, 45)) == 5
    assert len(generate.expected_state(src, ORDERS, 43)) == 3  # two keys deleted, not re-inserted


def test_only_updates_after_the_first_round() -> None:
    src = source(4, update=1.0, delete=0.0)
    kinds = [kind for kind, _ in generate.records(src, ORDERS, 4, 40)]
    assert set(kinds) == {RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER}
    assert len(generate.expected_state(src, ORDERS, 40)) == 4


def test_a_table_without_a_key_gets_inserts_of_fresh_rows() -> None:
    src = source(3, update=0.5, delete=0.5)
    recs = list(generate.records(src, EVENTS, 0, 500))
    assert {kind for kind, _ in recs} == {RowKind.INSERT}
    rows = [row for _, row in recs]
    assert generate.expected_state(src, EVENTS, 500) == rows
    assert len({(r["at"], r["what"], r["n"]) for r in rows}) > 490  # not the `keys` rows again
    assert [row for _, row in generate.records(src, EVENTS, 250, 260)] == rows[250:260]


def test_expected_state_is_computed_per_key_not_by_replaying(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    images: Counter[str] = Counter()  # row images computed: one per key kept, not per change
    touch_hash = generate.Generator._touch_hash

    def counted(self: generate.Generator, k: int, j: int) -> int:
        images["rows"] += 1
        return touch_hash(self, k, j)

    def replay(self: generate.Generator, start: int, end: int) -> Any:
        raise AssertionError(f"replayed changes {start}..{end}")

    monkeypatch.setattr(generate.Generator, "_touch_hash", counted)
    monkeypatch.setattr(generate.Generator, "rows", replay)
    narrow = table([("id", "int", False), ("v", "string")], key=["id"])
    src = source(100_000, seed=9)
    state = generate.expected_state(src, narrow, 100_000)
    assert len(state) == 100_000 == images["rows"]  # one round: every key inserted once
    images.clear()
    wide = generate.expected_state(source(1_000), narrow, 10**9)  # a million rounds
    assert 0 < len(wide) <= 1_000 and images["rows"] == len(wide)  # the deleted keys: no image
    monkeypatch.undo()
    # the state after the first round: changes 0..n-1 touched distinct keys
    first = [generate.row_key(narrow, row) for _, row in generate.records(src, narrow, 0, 7)]
    assert sorted(keyed_state(src, narrow, 7)) == sorted(first)


# -- values ----------------------------------------------------------------------------------------


@settings(max_examples=budget(80))
@given(types=st.lists(type_strings, min_size=1, max_size=4), seed=st.integers(0, 2**20))
def test_values_of_every_type_encode(types: list[str], seed: int) -> None:
    columns: list[tuple[str, str] | tuple[str, str, bool]] = [("k", "int", False)]
    columns += [(f"c{n}", ty) for n, ty in enumerate(types)]
    keyed = table(columns, key=["k"])
    keyless = table(columns)
    src = source(7, seed=seed)
    for t in (keyed, keyless):
        for _, row in generate.records(src, t, 0, 30):
            encodes(t, row)


def test_values_are_what_pyspark_rows_hold() -> None:
    rows = [row for _, row in generate.records(source(50), ORDERS, 0, 400)]
    kinds = {
        "customer": str, "amount": Decimal, "placed": datetime, "score": float, "weight": float,
        "tags": list, "attrs": dict, "address": dict, "flag": bool, "payload": bytes,
        "local": datetime,
    }  # fmt: skip
    for name, kind in kinds.items():
        values = [r[name] for r in rows if r[name] is not None]
        assert values and all(type(v) is kind for v in values), name
    for row in rows:
        assert row["placed"] is None or row["placed"].utcoffset() is not None  # UTC-aware
        assert row["local"] is None or row["local"].tzinfo is None
        assert row["weight"] is None or to_float32(row["weight"]) == row["weight"]  # exact
        assert row["amount"] is None or row["amount"].as_tuple().exponent == -2
        address = row["address"]
        assert address is None or (set(address) == {"city", "since"}
                                   and type(address["since"]) is date)  # fmt: skip
    assert len({r["customer"] for r in rows}) > 100


def test_nullable_columns_are_sometimes_null_and_the_others_never() -> None:
    t = table([("id", "int"), ("a", "string"), ("b", "string", False)], key=["id"])
    rows = [row for _, row in generate.records(source(500), t, 0, 3000)]
    nulls = sum(r["a"] is None for r in rows)
    assert 0.02 < nulls / len(rows) < 0.12  # about one in 16
    assert all(r["b"] is not None and r["id"] is not None for r in rows)


# -- keys -------------------------------------------------------------------------------------------

KEY_CAPACITY = {
    "boolean": 2,
    "tinyint": 256,
    "smallint": 65_536,
    "int": 2**32,
    "bigint": 2**64,
    "float": 2**24,
    "double": 2**53,
    "decimal(3,1)": 1000,
    "date": date.max.toordinal(),
}


@pytest.mark.parametrize("key_type", [*SCALAR_TYPES, "decimal(3,1)", "decimal(38,10)",
                                      "array<smallint>", "struct<a:boolean,b:tinyint>",
                                      "map<tinyint,string>"])  # fmt: skip
def test_distinct_key_numbers_give_distinct_keys(key_type: str) -> None:
    t = table([("k", key_type), ("v", "int")], key=["k"])
    gen = generate.generator(source(1), t)
    capacity = gen.key_capacity
    assert capacity == KEY_CAPACITY.get(key_type, capacity)
    probe = list(range(min(capacity or 3000, 3000)))
    if capacity is not None and capacity > 3000:
        probe += list(range(capacity - 1000, capacity))  # the far end of the range too
    values = [gen.key_values(k)[0] for k in probe]
    for value in values:
        encode_value(value, key_type)
    texts = {encode_value(v, key_type) for v in values}
    assert len(texts) == len(probe)


def test_a_composite_key_holds_as_many_keys_as_its_widest_column() -> None:
    t = table([("region", "boolean"), ("day", "tinyint"), ("v", "string")], key=["day", "region"])
    src = source(256, total=256 * 4)
    generate.check_generate(src, t)
    state = generate.expected_state(src, t, 256 * 4)
    assert all(len(k) == 2 for k in state)  # (day, region): primary-key order
    assert len(fold(t, generate.records(src, t, 0, 256 * 4))) == len(state)
    first_round = {generate.row_key(t, row) for _, row in generate.records(src, t, 0, 256)}
    assert len(first_round) == 256


@pytest.mark.parametrize(
    ("key_type", "keys", "most"),
    [("boolean", 3, 2), ("tinyint", 257, 256), ("decimal(2,0)", 101, 100),
     ("struct<a:boolean>", 5, 2)],
)  # fmt: skip
def test_more_keys_than_the_key_type_holds_are_refused(key_type: str, keys: int, most: int) -> None:
    t = table([("k", key_type, False), ("v", "int")], key=["k"])
    generate.check_generate(source(most), t)  # the most it holds is fine
    with pytest.raises(InvalidInputError) as caught:
        generate.check_generate(source(keys), t)
    assert caught.value.exit_code == EXIT_INVALID_INPUT
    assert f"--keys {keys}" in caught.value.message
    assert f"k {key_type}" in caught.value.message and f"{most} distinct" in caught.value.message
    assert caught.value.hint == f"use --keys {most} or fewer"


def test_frozen_keys_are_hashable_for_every_type() -> None:
    t = table([("k", "struct<a:array<int>,m:map<string,int>>"), ("v", "int")], key=["k"])
    state = generate.expected_state(source(20), t, 100)
    assert len(state) <= 20 and all(hash(k) is not None for k in state)
    assert state == fold(t, generate.records(source(20), t, 0, 100))


# -- refusals --------------------------------------------------------------------------------------


def test_once_needs_a_total() -> None:
    with pytest.raises(InvalidInputError) as caught:
        generate.check_generate(source(10), ORDERS, once=True)
    assert caught.value.exit_code == EXIT_INVALID_INPUT
    assert "--once" in caught.value.message and "--total" in caught.value.message
    assert caught.value.hint is not None and "--total N" in caught.value.hint
    generate.check_generate(source(10, total=100), ORDERS, once=True)
    generate.check_generate(source(10), ORDERS, once=False)


@pytest.mark.parametrize(
    ("src", "fragment"),
    [
        (source(10, rate=0), "--rate"),
        (source(0), "--keys"),
        (source(10, total=-1), "--total"),
        (source(10, update=1.5), "--update-ratio"),
        (source(10, delete=-0.1), "--delete-ratio"),
        (source(10, delete=math.nan), "--delete-ratio"),
    ],
)
def test_bad_numbers_are_refused(src: GenerateSource, fragment: str) -> None:
    with pytest.raises(InvalidInputError, match=fragment):
        generate.check_generate(src, ORDERS)


def test_no_updates_and_no_deletes_is_refused_only_when_a_key_is_touched_twice() -> None:
    with pytest.raises(InvalidInputError, match="both 0") as caught:
        generate.check_generate(source(10, update=0, delete=0), ORDERS)
    assert caught.value.hint is not None and "--total 10" in caught.value.hint
    generate.check_generate(source(10, total=10, update=0, delete=0), ORDERS)
    generate.check_generate(source(10, update=0, delete=0), EVENTS)  # inserts only anyway


def test_a_type_without_generated_values_names_the_column() -> None:
    t = table([("id", "int"), ("span", "interval day")], key=["id"])
    with pytest.raises(InvalidInputError) as caught:
        generate.check_generate(source(10), t)
    assert "'span'" in caught.value.message
    nested = table([("id", "int"), ("m", "map<map<int,int>,int>")], key=["id"])
    with pytest.raises(InvalidInputError, match=r"'m'.*maps as keys"):
        generate.check_generate(source(10), nested)


# -- pacing and partitions --------------------------------------------------------------------------


def test_a_paced_stream_offers_rate_changes_per_second_since_it_resumed() -> None:
    src = source(10, rate=100, total=1000)

    def latest(origin: int, planned: int, elapsed: float, cap: int | None = None) -> int:
        return generate.latest_change(
            origin=origin, planned=planned, elapsed_s=elapsed, source=src, once=False,
            max_per_batch=cap,
        )  # fmt: skip

    assert latest(0, 0, 0.0) == 100  # the first second's changes at once
    assert latest(0, 100, 2.5) == 350
    assert latest(600, 600, 0.5) == 750  # resumed at change 600
    assert latest(0, 0, 60.0) == 1000  # capped by total
    assert latest(0, 0, 60.0, cap=300) == 300  # and by the batch cap
    assert latest(0, 500, 1.0) == 500  # never below what is planned
    endless = source(10, rate=100)
    assert generate.latest_change(origin=0, planned=0, elapsed_s=3600.0, source=endless,
                                  once=False, max_per_batch=None) == 360_100  # fmt: skip


def test_a_once_stream_offers_everything_up_to_total() -> None:
    src = source(10, rate=1, total=5000)
    at_once = generate.latest_change(
        origin=0, planned=0, elapsed_s=0.0, source=src, once=True, max_per_batch=None
    )
    assert at_once == 5000
    capped = [0]
    while capped[-1] < 5000:
        capped.append(generate.latest_change(origin=0, planned=capped[-1], elapsed_s=0.0,
                                             source=src, once=True, max_per_batch=2000))  # fmt: skip
    assert capped == [0, 2000, 4000, 5000]


@settings(max_examples=budget(200))
@given(
    start=st.integers(0, 10**6),
    size=st.integers(0, 50_000),
    parts=st.integers(1, 16),
    minimum=st.integers(1, 5000),
)
def test_split_covers_a_range_in_order(start: int, size: int, parts: int, minimum: int) -> None:
    ranges = generate.split(start, start + size, parts, minimum=minimum)
    if size == 0:
        assert ranges == []
        return
    assert ranges[0][0] == start and ranges[-1][1] == start + size
    assert all(a < b for a, b in ranges)
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(ranges))
    assert len(ranges) <= parts
    assert len(ranges) == 1 or all(b - a >= minimum for a, b in ranges)
