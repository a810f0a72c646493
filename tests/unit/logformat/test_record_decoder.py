"""``RecordDecoder``, the reader's fast path, returns what ``decode`` returns and raises what it
raises: on generated rows of every scalar type and on hand-made records off the common shape."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.logformat import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    WireFormatError,
    decode,
    encode_change,
    encode_marker,
)
from logstore_cli.logformat.values import parse_type
from logstore_cli.logformat.wire import RecordDecoder
from tests.hypothesis_profiles import budget
from tests.unit.logformat.strategies import scalar_types, values_of

pytestmark = pytest.mark.unit

ORDERS = RowSchema(
    (("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)"), ("ok", "boolean")), ("id",)
)
EPOCH = EpochId("w-5c1e", 7, "a-91d0")
ROW = {"id": 42, "name": "Zoë", "price": Decimal("12.50"), "ok": True}
KEY, VALUE, HEADERS = encode_change(ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EPOCH), ORDERS)
MARKER = encode_marker(CommitMarker(EPOCH, 3))


def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except WireFormatError as exc:
        return ("error", exc.reason, str(exc))


def _same(schema: RowSchema, key: bytes | None, value: bytes | None, headers: Any) -> Any:
    fast = RecordDecoder(schema)
    for _ in range(2):  # the second call takes the cached headers
        got = _outcome(lambda: fast(key, value, headers))
        assert got == _outcome(lambda: decode(key, value, headers, schema))
    return got


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (KEY, VALUE, HEADERS),
        (None, *MARKER[1:]),
        (KEY, b'{"id":42}', [(n, b"-D" if n == "logstore.kind" else v) for n, v in HEADERS]),
        (KEY, b'{"id":42,"name":"x","price":1.5,"ok":true}', HEADERS),  # not at the scale
        (KEY, b'{"id":42,"name":"x","price":1,"ok":true}', HEADERS),  # an integer for a decimal
        (KEY, b'{"id":42,"name":"x","price":-0.00,"ok":true}', HEADERS),  # negative zero
        (KEY, b'{"id":42,"name":"x","price":123456789.00,"ok":true}', HEADERS),  # too many digits
        (KEY, b'{"id":42,"name":"x","price":1.00,"ok":1}', HEADERS),  # a number for a boolean
        (KEY, b'{"id":42,"id":43,"name":"x","price":1.00,"ok":true}', HEADERS),  # a duplicate
        (KEY, b'{"name":"x","id":42,"price":1.00,"ok":true}', HEADERS),  # columns out of order
        (KEY, b'[["id",42],["name","x"],["price",1.00],["ok",true]]', HEADERS),  # an array
        (KEY, b'{"id":42,"name":"x","price":1.00,"ok":true} x', HEADERS),  # trailing text
        (KEY, b' {"id":42,"name":"x","price":1.00,"ok":true}', HEADERS),  # leading space
        (KEY, b'{"id":9223372036854775808,"name":"x","price":1.00,"ok":true}', HEADERS),
        (KEY, b'{"id":42,"name":"x","price":NaN,"ok":true}', HEADERS),
        (KEY, b"\xff", HEADERS),
        (KEY, b"", HEADERS),
        (None, VALUE, HEADERS),
        (b'{"id":"42"}', VALUE, HEADERS),
        (b'{"id":42} ', VALUE, HEADERS),
        (KEY, VALUE, None),
        (KEY, VALUE, []),
        (KEY, VALUE, [(n, b"2" if n == "logstore.format" else v) for n, v in HEADERS]),
        (KEY, VALUE, [(n, b"07" if n == "logstore.epoch" else v) for n, v in HEADERS]),
        (KEY, VALUE, [*HEADERS, ("traceparent", b"00-ab")]),
        # Parsed by msgspec, which takes what decode refuses or reads otherwise: never trusted.
        (KEY, b'{"id":42,"name":"x","price":1.00,"ok":true,"id":43}', HEADERS),  # repeated last
        (KEY, b'{"id":42,"name":"x","price":"1.00","ok":true}', HEADERS),  # a string decimal
        (KEY, b'{"id":42,"name":"\\ud800","price":1.00,"ok":true}', HEADERS),  # lone surrogate
        (KEY, b'{"id":42,"name":"\\u001F\\u00e9","price":1.00,"ok":true}', HEADERS),  # escapes
        (KEY, b'{"id":42,"name":"x","price":1E+2,"ok":true}', HEADERS),
        (KEY, b'{"id":42,"name":"x","price":1.00,"ok":true,"more":1}', HEADERS),
        (KEY, b'{"id":42,"name":"x","price":1.00}', HEADERS),  # a column missing
        (KEY, b'{"id":42,"name":null,"price":null,"ok":null}', HEADERS),
        (b'{"id":42,"id":42}', VALUE, HEADERS),
        (b'{"id":null}', VALUE, HEADERS),
        (b"null", VALUE, HEADERS),
        (KEY, b'{"id":42}', HEADERS),  # only the key, but not a -D
        (KEY, b'{"id":43}', [(n, b"-D" if n == "logstore.kind" else v) for n, v in HEADERS]),
    ],
)
def test_records_off_the_common_shape_decode_as_decode_decodes_them(
    key: bytes | None, value: bytes | None, headers: Any
) -> None:
    _same(ORDERS, key, value, headers)


def test_the_common_shape_takes_the_fast_path() -> None:
    assert _same(ORDERS, KEY, VALUE, HEADERS) == ("ok", decode(KEY, VALUE, HEADERS, ORDERS))
    keyless = RowSchema((("at", "bigint"), ("what", "string")))
    _, value, headers = encode_change(
        ChangeRecord(RowKind.INSERT, None, {"at": 1, "what": "x"}, EPOCH), keyless
    )
    assert _same(keyless, None, value, headers)[0] == "ok"
    assert _same(keyless, b'{"at":1}', value, headers)[0] == "error"  # a key without a PK


@settings(max_examples=budget(300))
@given(st.lists(scalar_types, min_size=1, max_size=4), st.data())
def test_generated_rows_of_every_scalar_type_decode_alike(types: list[str], data: Any) -> None:
    columns = tuple((f"c{i}", t) for i, t in enumerate(types))
    schema = RowSchema(columns, ("c0",))
    row = {n: data.draw(values_of(parse_type(t), key=(n == "c0"))) for n, t in columns}
    kind = data.draw(st.sampled_from([RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE]))
    try:
        key, value, headers = encode_change(
            ChangeRecord(kind, {"c0": row["c0"]}, row, EPOCH), schema
        )
    except WireFormatError:
        return  # a value format 1 cannot carry (e.g. a null key): not a record to decode
    assert _same(schema, key, value, headers)[0] == "ok"


_CONTROL = {c: None for c in [*range(0x20), 0x7F]}


def _no_control_characters(value: Any) -> Any:
    return value.translate(_CONTROL) if isinstance(value, str) else value


FAST_TYPES = ["tinyint", "smallint", "int", "bigint", "string", "boolean", "decimal(12,3)",
              "date", "timestamp", "timestamp_ntz", "binary"]  # fmt: skip


@settings(max_examples=budget(200))
@given(st.lists(st.sampled_from(FAST_TYPES), min_size=1, max_size=5), st.data())
def test_what_logstore_writes_takes_the_fast_path(types: list[str], data: Any) -> None:
    # The reader's speed rests on this: no call of decode() for the records logstore writes
    # (strings without control characters: their escapes are upper-case hex, msgspec's lower).
    names = ["id", "naïve", "a b", "`x`", "9"][: len(types)]
    columns = tuple(zip(names, types, strict=True))
    schema = RowSchema(columns, ("id",))
    row = {
        n: data.draw(values_of(parse_type(t), key=(n == "id")).map(_no_control_characters))
        for n, t in columns
    }  # fmt: skip
    kind = data.draw(st.sampled_from([RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE]))
    if kind is RowKind.DELETE and data.draw(st.booleans()):
        row = {"id": row["id"]}  # a -D may carry its key only
    try:
        key, value, headers = encode_change(
            ChangeRecord(kind, {"id": row["id"]}, row, EPOCH), schema
        )
    except WireFormatError:
        return  # a value format 1 cannot carry (e.g. a null key): not a record to decode
    expected = decode(key, value, headers, schema)
    fast = RecordDecoder(schema)

    def slow(*args: Any) -> Any:
        raise AssertionError(f"took decode() for {value!r}")

    with mock.patch("logstore_cli.logformat.wire.decode", slow):
        assert fast(key, value, headers) == expected
