"""Folding changes by key (or as a multiset), comparing two folded states, and the canonical row
images that make a delta-rs row and a decoded log row of equal values compare equal."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.values import (
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    SqlType,
    StructType,
    parse_type,
)
from logstore_cli.logformat.wire import (
    ChangeRecord,
    EpochId,
    RowKind,
    RowSchema,
    decode,
    encode_change,
    encode_row,
)
from logstore_cli.read.fold import (
    ArrowRows,
    CanonicalRows,
    FoldedState,
    compare,
    from_arrow,
    json_value,
)
from tests.hypothesis_profiles import budget

from ..logformat.strategies import type_strings, values_of

INS, UB, UA, DEL = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
KEYED = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
BAG = RowSchema((("id", "bigint"), ("name", "string")))


def row(i: int, name: str = "a", price: str = "1.00") -> dict[str, Any]:
    return {"id": i, "name": name, "price": Decimal(price)}


def state(schema: RowSchema, *changes: tuple[RowKind, Mapping[str, Any]]) -> FoldedState:
    return FoldedState(schema).fold(changes)


def snapshot(schema: RowSchema, *rows: dict[str, Any]) -> FoldedState:
    s = FoldedState(schema)
    for r in rows:
        s.add(r)
    return s


# -- folding ---------------------------------------------------------------------------------------


def test_keyed_fold_puts_updates_and_removes_by_key() -> None:
    log = state(
        KEYED,
        (INS, row(1, "a")), (INS, row(2, "b")), (UB, row(1, "a")), (UA, row(1, "a2")),
        (DEL, {"id": 2}), (INS, row(3, "c")), (UA, row(3, "c2")),  # a lone +U is an upsert
    )  # fmt: skip
    assert compare(snapshot(KEYED, row(1, "a2"), row(3, "c2")), log).equal
    assert len(log) == 2 and log.stats.changes == 7 and log.stats.absent_removals == 0


def test_a_removal_of_an_absent_key_is_counted_not_fatal() -> None:
    log = state(KEYED, (DEL, {"id": 9}), (UB, row(8)))
    assert len(log) == 0 and log.stats.absent_removals == 2


def test_keyless_fold_is_a_multiset_of_rows() -> None:
    a, b = {"id": 1, "name": "x"}, {"id": 2, "name": "y"}
    log = state(BAG, (INS, a), (INS, a), (INS, b), (DEL, a), (UA, b), (UB, b))
    assert compare(snapshot(BAG, a, b), log).equal
    assert not compare(snapshot(BAG, a, b, b), log).equal  # copies count
    removed = state(BAG, (DEL, a))
    assert len(removed) == 0 and removed.stats.absent_removals == 1


def test_a_value_that_does_not_fit_its_column_is_a_clear_error() -> None:
    with pytest.raises(WireFormatError, match="column 'name'"):
        FoldedState(KEYED).apply(INS, {"id": 1, "name": 5, "price": None})
    with pytest.raises(WireFormatError, match="column 'nope' the table does not have"):
        FoldedState(KEYED).add({"id": 1, "name": "a", "nope": 1})
    with pytest.raises(WireFormatError, match="no column 'id'"):
        FoldedState(KEYED).apply(DEL, {"name": "a"})


def test_commit_is_not_a_change() -> None:
    with pytest.raises(ValueError, match="not a change"):
        FoldedState(KEYED).apply(RowKind.COMMIT, row(1))


# -- comparing -------------------------------------------------------------------------------------


def test_missing_extra_and_different_keys_with_both_images() -> None:
    delta = snapshot(KEYED, row(1), row(2, "same"), row(3, "delta", "9.99"))
    log = state(KEYED, (INS, row(2, "same")), (INS, row(3, "log", "9.99")), (INS, row(4)))
    diff = compare(delta, log)
    assert not diff.equal
    assert (diff.missing.count, diff.extra.count, diff.different.count) == (1, 1, 1)
    assert diff.delta_rows == 3 and diff.log_rows == 3
    missing, extra, different = (d.examples[0].to_json() for d in
                                 (diff.missing, diff.extra, diff.different))  # fmt: skip
    assert missing == {"key": {"id": 1}, "log": None,
                       "delta": {"id": 1, "name": "a", "price": 1.0}}  # fmt: skip
    assert extra == {"key": {"id": 4}, "log": {"id": 4, "name": "a", "price": 1.0}, "delta": None}
    assert different == {
        "key": {"id": 3},
        "log": {"id": 3, "name": "log", "price": 9.99},
        "delta": {"id": 3, "name": "delta", "price": 9.99},
        "columns": ["name"],
    }


def test_examples_are_capped_and_in_key_order_while_counts_are_whole() -> None:
    delta = snapshot(KEYED, *(row(i) for i in range(30, 0, -1)))
    diff = compare(delta, FoldedState(KEYED), examples=3)
    assert diff.missing.count == 30
    # in the order of the keys' canonical bytes: '{"id":10}' < '{"id":1}'
    first = sorted(range(1, 31), key=lambda i: f'{{"id":{i}}}'.encode())[:3]
    assert [e.to_json()["key"]["id"] for e in diff.missing.examples] == first
    assert compare(delta, FoldedState(KEYED), examples=0).missing.examples == []


def test_a_key_delta_holds_twice_is_different_even_if_the_log_has_one_of_them() -> None:
    delta = snapshot(KEYED, row(1, "a"), row(1, "b"))
    assert delta.duplicate_keys == 1 and len(delta) == 2
    diff = compare(delta, state(KEYED, (INS, row(1, "a"))))
    assert diff.different.count == 1
    shown = diff.different.examples[0].to_json()
    assert shown["log_copies"] == 1 and shown["delta_copies"] == 2


def test_keyless_differences_count_copies() -> None:
    a, b = {"id": 1, "name": "x"}, {"id": 2, "name": "y"}
    diff = compare(snapshot(BAG, a, a, a), state(BAG, (INS, a), (INS, b), (INS, b)))
    assert (diff.missing.count, diff.extra.count, diff.different.count) == (2, 2, 0)
    assert diff.missing.examples[0].to_json() == {
        "key": None, "log": {"id": 1, "name": "x"}, "delta": {"id": 1, "name": "x"},
        "log_copies": 1, "delta_copies": 3,
    }  # fmt: skip
    assert diff.extra.examples[0].to_json()["delta"] is None


def test_comparing_states_of_two_schemas_is_refused() -> None:
    with pytest.raises(ValueError, match="schemas"):
        compare(FoldedState(KEYED), FoldedState(BAG))


def test_numbers_shown_in_examples_are_never_rounded() -> None:
    assert json_value(b'{"a":12.50,"b":1e+16,"c":-0.0}') == {"a": 12.5, "b": 1e16, "c": -0.0}
    big = "12345678901234567890123456.12"  # more digits than a double holds
    assert json_value(f'{{"a":{big},"b":{10**30}}}'.encode()) == {"a": big, "b": 10**30}


# -- canonical images: equal values of different Python types --------------------------------------

TYPED = RowSchema(
    (
        ("id", "int"), ("price", "decimal(10,2)"), ("f", "float"), ("d", "double"),
        ("ts", "timestamp"), ("ntz", "timestamp_ntz"), ("day", "date"), ("bin", "binary"),
        ("tags", "map<string,int>"), ("s", "struct<a:int,m:map<int,string>>"),
        ("arr", "array<map<string,timestamp>>"),
    ),
    ("id",),
)  # fmt: skip
UTC_TS = datetime(2024, 2, 29, 10, 15, tzinfo=UTC)


def test_equal_values_of_different_python_types_fold_alike() -> None:
    log_side = {
        "id": 1, "price": Decimal("12.5"), "f": 0.1, "d": 1.0,
        "ts": UTC_TS.astimezone(timezone(timedelta(hours=2))),  # 12:15 at +02:00
        "ntz": datetime(2024, 1, 1, 1, 1), "day": date(2024, 2, 29), "bin": bytearray(b"\x00\xff"),
        "tags": {"b": 2, "a": 1}, "s": {"a": 1, "m": {2: "x"}}, "arr": [{"k": UTC_TS}],
    }  # fmt: skip
    arrow_side = {  # as delta-rs' to_pylist gives them
        "id": 1, "price": Decimal("12.50"), "f": 0.10000000149011612, "d": 1,
        "ts": datetime(2024, 2, 29, 10, 15),  # a zone-less timestamp from Arrow is UTC
        "ntz": datetime(2024, 1, 1, 1, 1), "day": date(2024, 2, 29), "bin": b"\x00\xff",
        "tags": [("a", 1), ("b", 2)], "s": {"a": 1, "m": [(2, "x")]},
        "arr": [[("k", datetime(2024, 2, 29, 10, 15))]],
    }  # fmt: skip
    diff = compare(snapshot(TYPED, from_arrow(arrow_side, TYPED)), state(TYPED, (INS, log_side)))
    assert diff.equal, diff
    changed = {**arrow_side, "price": Decimal("12.51")}
    diff = compare(snapshot(TYPED, from_arrow(changed, TYPED)), state(TYPED, (INS, log_side)))
    assert diff.different.count == 1 and diff.different.examples[0].columns == ("price",)


def test_arrow_rows_leave_a_row_without_such_columns_alone() -> None:
    plain = {"id": 1, "name": None, "price": None}
    assert ArrowRows(KEYED)(plain) == plain
    assert from_arrow({"id": 1, "tags": None, "s": None, "arr": None, "ts": None}, TYPED) == {
        "id": 1, "tags": None, "s": None, "arr": None, "ts": None,
    }  # fmt: skip


def _arrow_type(t: SqlType) -> pa.DataType:
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, ArrayType):
        return pa.list_(_arrow_type(t.element))
    if isinstance(t, MapType):
        return pa.map_(_arrow_type(t.key), _arrow_type(t.value))
    if isinstance(t, StructType):
        return pa.struct([(n, _arrow_type(ft)) for n, ft in t.fields])
    assert isinstance(t, ScalarType)
    return {
        "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
        "boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64(),
        "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    }[t.name]  # fmt: skip


def _arrow_value(value: Any, t: SqlType) -> Any:
    """A decoded log value as pyarrow takes it in (maps as pairs, like the Arrow data)."""
    if value is None:
        return None
    if isinstance(t, MapType):
        return [(_arrow_value(k, t.key), _arrow_value(v, t.value)) for k, v in value.items()]
    if isinstance(t, ArrayType):
        return [_arrow_value(v, t.element) for v in value]
    if isinstance(t, StructType):
        return {n: _arrow_value(value[n], ft) for n, ft in t.fields}
    return value


@settings(max_examples=budget(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), type_strings, st.booleans())
def test_a_log_row_through_arrow_folds_to_the_same_image(
    data: st.DataObject, type_text: str, naive_timestamps: bool
) -> None:
    """Write a value to the log, decode it, hand it through Arrow as delta-rs would (timestamps
    with or without the UTC zone): both sides fold to the same row."""
    t = parse_type(type_text)
    schema = RowSchema((("k", "int"), ("v", type_text)), ("k",))
    value = data.draw(st.none() | values_of(t))
    key, raw, headers = encode_change(
        ChangeRecord(INS, {"k": 1}, {"k": 1, "v": value}, EpochId("w", 0, "a")), schema
    )
    decoded = decode(key, raw, headers, schema)
    assert isinstance(decoded, ChangeRecord)
    arrow_t = _arrow_type(t)
    if naive_timestamps:
        arrow_t = _naive(arrow_t)
    try:
        column = pa.array([_arrow_value(decoded.row["v"], t)], type=arrow_t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        return  # a value Arrow cannot hold (Delta cannot store it either)
    through = from_arrow({"k": 1, "v": column.to_pylist()[0]}, schema)
    assert compare(snapshot(schema, through), state(schema, (INS, decoded.row))).equal
    assert CanonicalRows(schema).row(through) == encode_row(decoded.row, schema)  # the fast path


def _naive(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.timestamp("us")
    if pa.types.is_map(t):
        return pa.map_(_naive(t.key_type), _naive(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_naive(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, _naive(f.type)) for f in t])
    return t


def test_json_of_an_example_is_plain_json() -> None:
    delta = snapshot(TYPED, from_arrow({"id": 1, "price": None, "f": float("nan"), "d": None,
                                        "ts": None, "ntz": None, "day": None, "bin": b"\x01",
                                        "tags": None, "s": None, "arr": None}, TYPED))  # fmt: skip
    shown = compare(delta, FoldedState(TYPED)).missing.examples[0].to_json()
    assert json.loads(json.dumps(shown))["delta"]["f"] == "NaN"
    assert shown["delta"]["bin"] == "AQ=="
