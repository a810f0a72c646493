"""Column values <-> JSON text: the documented examples byte for byte, the errors, and round trips
of every type (hypothesis)."""

from __future__ import annotations

import json
import math
import re
import struct
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.errors import LogstoreError
from logstore_cli.logformat import WireFormatError, decode_value, encode_value, parse_json
from logstore_cli.logformat.values import (
    _DOUBLE,
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    StructType,
    _format_like_repr,
    _shortest_digits,
    parse_type,
    shortest_repr,
    to_float32,
)
from tests.hypothesis_profiles import budget
from tests.unit.logformat.strategies import (
    SCALAR_TYPES,
    decimal_types,
    expected,
    same,
    type_strings,
    values_of,
)

pytestmark = pytest.mark.unit

DESIGN = Path(__file__).resolve().parents[3] / "docs" / "design.md"
PLUS_2 = timezone(timedelta(hours=2))

# The examples docs/design.md section 7 shows: (type, value, exact JSON text).
EXAMPLES: list[tuple[str, Any, str]] = [
    ("int", 42, "42"),
    ("bigint", -9007199254740993, "-9007199254740993"),
    ("boolean", True, "true"),
    ("double", 0.1, "0.1"),
    ("double", 100.0, "100.0"),
    ("double", 1e16, "1e+16"),
    ("double", 1.5e-07, "1.5e-07"),
    ("double", -0.0, "-0.0"),
    ("float", to_float32(0.1), "0.1"),
    ("float", 3.4028234663852886e38, "3.4028235e+38"),
    ("double", math.nan, '"NaN"'),
    ("double", math.inf, '"Infinity"'),
    ("float", -math.inf, '"-Infinity"'),
    ("decimal(10,2)", Decimal("12.5"), "12.50"),
    ("decimal(5,0)", Decimal("1E+2"), "100"),
    ("decimal(10,7)", Decimal("1E-7"), "0.0000001"),
    ("decimal(4,2)", Decimal("-0.00"), "0.00"),
    ("string", "Zoë", '"Zoë"'),
    ("string", 'a"b\\c\n\x1f/', r'"a\"b\\c\n\u001F/"'),
    ("binary", b"\x00\xff", '"AP8="'),
    ("date", date(2024, 2, 29), '"2024-02-29"'),
    ("timestamp", datetime(2024, 2, 29, 12, 15, tzinfo=PLUS_2), '"2024-02-29T10:15:00.000000Z"'),
    ("timestamp_ntz", datetime(2024, 2, 29, 10, 15, 0, 500000), '"2024-02-29T10:15:00.500000"'),
    ("array<int>", [1, None, 3], "[1,null,3]"),
    ("map<int,string>", {9: "b", 10: "a"}, '{"10":"a","9":"b"}'),
    ("map<date,double>", {date(2024, 1, 1): math.nan}, '{"2024-01-01":"NaN"}'),
    ("struct<a:int,b:string>", {"a": 1, "b": None}, '{"a":1,"b":null}'),
    ("string", None, "null"),
]


def _section_7() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    return text[text.index("## 7. Wire format") : text.index("## 8. ")]


@pytest.mark.parametrize(("sql_type", "value", "text"), EXAMPLES, ids=lambda x: str(x)[:30])
def test_documented_examples_byte_for_byte(sql_type: str, value: Any, text: str) -> None:
    assert encode_value(value, sql_type) == text
    assert same(decode_value(parse_json(text), sql_type), expected(value, parse_type(sql_type)))


def test_the_examples_are_the_ones_the_design_shows() -> None:
    section = _section_7()
    missing = [text for _, _, text in EXAMPLES if f"`{text}`" not in section]
    assert missing == [], "examples missing from docs/design.md section 7"


def test_non_ascii_is_written_as_itself_in_utf8() -> None:
    assert encode_value("Zoë", "string").encode("utf-8") == b'"Zo\xc3\xab"'
    assert encode_value("\u2028😀", "string") == '"\u2028😀"'


def test_only_json_mandatory_escapes_are_used() -> None:
    controls = "".join(chr(c) for c in range(0x20))
    text = encode_value(controls + "\x7f/é", "string")
    assert text == (
        r'"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000B\f\r\u000E\u000F'
        r"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001A\u001B\u001C"
        r"\u001D\u001E\u001F" + '\x7f/é"'
    )
    assert json.loads(text) == controls + "\x7f/é"


def test_decimal_keeps_the_column_scale_when_decoded() -> None:
    decoded = decode_value(parse_json("12.5"), "decimal(10,2)")
    assert decoded.as_tuple().exponent == -2
    assert str(decoded) == "12.50"


def test_a_float_column_value_is_rounded_to_32_bits_first() -> None:
    assert encode_value(0.1, "float") == "0.1"  # the double 0.1 becomes float32(0.1)
    assert decode_value(parse_json("0.1"), "float") == to_float32(0.1)


def test_a_naive_timestamp_is_local_time_like_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        text = encode_value(datetime(2024, 1, 15, 12, 0), "timestamp")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert text == '"2024-01-15T17:00:00.000000Z"'


def test_map_entries_are_sorted_so_equal_maps_give_equal_text() -> None:
    forward = {"b": 1, "a": 2, "é": 3, "B": 4}
    backward = dict(reversed(list(forward.items())))
    assert encode_value(forward, "map<string,int>") == encode_value(backward, "map<string,int>")
    assert encode_value(forward, "map<string,int>") == '{"B":4,"a":2,"b":1,"é":3}'


def test_map_keys_of_every_kind_read_back() -> None:
    cases: list[tuple[str, dict[Any, Any], str]] = [
        ("map<boolean,int>", {True: 1}, '{"true":1}'),
        ("map<decimal(4,2),int>", {Decimal("1.5"): 1}, '{"1.50":1}'),
        ("map<double,int>", {math.inf: 1, 2.5: 2}, '{"2.5":2,"Infinity":1}'),
        ("map<binary,int>", {b"\x01": 1}, '{"AQ==":1}'),
        ("map<struct<a:int>,int>", {}, "{}"),
    ]
    for sql_type, value, text in cases:
        assert encode_value(value, sql_type) == text
        assert decode_value(parse_json(text), sql_type) == value


def test_a_pyspark_row_is_a_struct() -> None:
    row_type = pytest.importorskip("pyspark.sql").Row
    t = "struct<id:bigint,tags:array<string>>"
    assert encode_value(row_type(id=7, tags=["x"]), t) == '{"id":7,"tags":["x"]}'
    assert encode_value((7, None), t) == '{"id":7,"tags":null}'


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("BIGINT", ScalarType("bigint")),
        ("integer", ScalarType("int")),
        ("varchar(10)", ScalarType("string")),
        ("char(3)", ScalarType("string")),
        ("decimal", DecimalType(10, 0)),
        ("decimal(38, 18)", DecimalType(38, 18)),
        ("array< map<string , int> >", ArrayType(MapType(ScalarType("string"), ScalarType("int")))),
        (
            "struct<a:int,`b c`:struct<`x``y`:date>,d e:string>",
            StructType(
                (
                    ("a", ScalarType("int")),
                    ("b c", StructType((("x`y", ScalarType("date")),))),
                    ("d e", ScalarType("string")),
                )
            ),
        ),
        ("struct<>", StructType(())),
    ],
)
def test_type_strings_parse(text: str, parsed: Any) -> None:
    assert parse_type(text) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("interval", "unknown type 'interval'"),
        ("array<int", "expected '>'"),
        ("decimal(39,2)", "decimal(39,2) is not a valid decimal type"),
        ("decimal(5,6)", "decimal(5,6) is not a valid decimal type"),
        ("struct<a:int,a:int>", "duplicate field 'a'"),
        ("int int", "unexpected text"),
        ("struct<`a:int>", "unclosed backquote"),
    ],
)
def test_bad_type_strings_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(WireFormatError) as info:
        encode_value(1, text)
    assert info.value.reason == "type"
    assert message in str(info.value)
    assert text in str(info.value)


@pytest.mark.parametrize(
    ("sql_type", "value", "message"),
    [
        ("tinyint", 128, "128 is out of range for tinyint (-128 to 127)"),
        ("int", True, "expected an integer for int, got bool True"),
        ("bigint", "1", "expected an integer for bigint, got str '1'"),
        ("boolean", 1, "expected True or False"),
        ("float", 1e39, "out of range for float"),
        ("double", "1.5", "expected a number for double"),
        ("decimal(10,2)", Decimal("12.505"), "has more than 2 digits after the point"),
        ("decimal(10,2)", Decimal("123456789"), "has more than 8 digits before the point"),
        ("decimal(10,2)", 1.5, "a float is inexact: pass a Decimal"),
        ("decimal(10,2)", Decimal("NaN"), "is not a number"),
        ("string", b"x", "expected a str"),
        ("string", "\ud800", "lone surrogate U+D800"),
        ("binary", "AP8=", "expected bytes"),
        ("date", datetime(2024, 1, 1), "expected a datetime.date"),
        ("timestamp", date(2024, 1, 1), "expected a datetime"),
        ("timestamp_ntz", datetime(2024, 1, 1, tzinfo=UTC), "holds no time zone"),
        ("array<int>", [1, "x"], "value at [1]: expected an integer"),
        ("array<int>", "12", "expected a list"),
        ("map<string,int>", {None: 1}, "a map key is None"),
        ("map<double,int>", {math.nan: 1, -math.nan: 2}, "two keys encode as the same map key"),
        ("map<string,array<int>>", {"k": [None, 1.5]}, "at ['k'][1]: expected an integer"),
        ("struct<a:int>", {"a": 1, "b": 2}, "has no field 'b'"),
        ("struct<a:int,b:int>", {"a": 1}, "field 'b' of struct<a:int,b:int> is missing"),
        ("struct<a:int>", (1, 2), "has 1 fields, got 2 values"),
        ("struct<a:struct<b:date>>", {"a": {"b": "2024"}}, "at a.b: expected a datetime.date"),
    ],
)
def test_values_that_do_not_fit_are_clear_errors(sql_type: str, value: Any, message: str) -> None:
    with pytest.raises(WireFormatError) as info:
        encode_value(value, sql_type)
    assert info.value.reason == "value"
    assert message in str(info.value)
    assert isinstance(info.value, LogstoreError)


@pytest.mark.parametrize(
    ("sql_type", "json_text", "message"),
    [
        ("int", "1.0", "expected a JSON integer for int"),
        ("int", "4294967296", "out of range for int"),
        ("double", '"nan"', 'expected a number or "NaN"'),
        ("double", "1e400", "out of range for double"),
        ("float", "1e39", "out of range for float"),
        ("decimal(4,2)", "1.234", "more than 2 digits after the point"),
        ("decimal(4,2)", '"1.23"', "expected a JSON number"),
        ("binary", '"A*=="', "is not base64"),
        ("date", '"2024-02-30"', "is not a date"),
        ("date", '"20240201"', "is not a date"),
        ("timestamp", '"2024-02-29T10:15:00"', "has no time zone"),
        ("timestamp_ntz", '"2024-02-29T10:15:00Z"', "has a time zone"),
        ("timestamp", '"yesterday"', "is not an ISO-8601 timestamp"),
        ("map<int,int>", '{"x":1}', "map key 'x' does not read as int"),
        ("map<int,int>", '{"01":1}', "map key '01' does not read as int"),
        ("map<decimal(4,2),int>", '{"1.5":1,"1.50":2}', "map key '1.50' repeats an earlier key"),
        ("struct<a:int>", '{"a":1,"b":2}', "has no field 'b'"),
        ("array<int>", '{"a":1}', "expected a JSON array"),
    ],
)
def test_json_that_does_not_fit_is_a_clear_error(
    sql_type: str, json_text: str, message: str
) -> None:
    with pytest.raises(WireFormatError) as info:
        decode_value(parse_json(json_text), sql_type)
    assert info.value.reason == "value"
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff", "not UTF-8"),
        ("NaN", "not valid JSON"),
        ('{"a":1,"a":2}', "duplicate name 'a'"),
        ("[1,", "not valid JSON"),
    ],
)
def test_parse_json_is_strict(data: bytes | str, message: str) -> None:
    with pytest.raises(WireFormatError) as info:
        parse_json(data)
    assert info.value.reason == "malformed"
    assert message in str(info.value)


def test_parse_json_keeps_the_exact_text_of_numbers() -> None:
    assert parse_json(b'{"a":12.50,"b":1e+16,"c":7}') == {
        "a": Decimal("12.50"),
        "b": Decimal("1E+16"),
        "c": 7,
    }
    assert str(parse_json("12.50")) == "12.50"


# -- floats: shortest text, exact reading ---------------------------------------------------------


def _float32_of(text: str) -> float:
    """Reading text as a 32-bit float the obvious way (double first): the test's oracle."""
    try:
        return struct.unpack("<f", struct.pack("<f", float(text)))[0]  # type: ignore[no-any-return]
    except OverflowError:
        return math.copysign(math.inf, float(text))


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0))
def test_the_shortest_digit_search_is_pythons_repr_for_doubles(x: float) -> None:
    digits, decpt = _shortest_digits(abs(x), _DOUBLE)
    assert _format_like_repr(x < 0, digits, decpt) == repr(x)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_text_is_the_shortest_that_reads_back(x: float) -> None:
    text = shortest_repr(x, single=True)
    assert _float32_of(text) == x
    assert math.copysign(1, float(text)) == math.copysign(1, x)
    digits = len(Decimal(text).normalize().as_tuple().digits)
    if digits > 1:  # no text with one digit fewer reads back as x, rounded either way
        for rounding in (ROUND_FLOOR, ROUND_CEILING):
            shorter = Context(prec=digits - 1, rounding=rounding).plus(Decimal(x))
            assert _float32_of(str(shorter)) != x


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (to_float32(1 / 3), "0.33333334"),
        (16777216.0, "16777216.0"),
        (1e10, "10000000000.0"),
        (struct.unpack("<f", b"\x01\x00\x00\x00")[0], "1e-45"),  # the least subnormal
        (struct.unpack("<f", b"\x00\x00\x80\x00")[0], "1.1754944e-38"),  # the least normal
    ],
)
def test_float32_texts(x: float, text: str) -> None:
    assert encode_value(x, "float") == text
    assert decode_value(parse_json(text), "float") == x


def test_float32_reading_rounds_once_ties_to_even() -> None:
    one_up = 1 + 2**-23  # the float32 after 1.0
    # Exactly half-way between 1.0 and the next float32: ties to the even one, 1.0.
    assert decode_value(parse_json("1.000000059604644775390625"), "float") == 1.0
    # A hair above half-way: the nearest double is the half-way point itself, so reading through
    # a double would give 1.0; the exact reading gives the float32 above.
    assert float("1.0000000596046447753906250001") == 1.000000059604644775390625
    assert decode_value(parse_json("1.0000000596046447753906250001"), "float") == one_up
    assert decode_value(parse_json("-0.0"), "float") == 0.0
    assert math.copysign(1, decode_value(parse_json("-0.0"), "float")) == -1


# -- round trips of every type ---------------------------------------------------------------------


def _round_trip(value: Any, sql_type: str) -> None:
    t = parse_type(sql_type)
    text = encode_value(value, sql_type)
    json.loads(text)  # standard JSON, whatever reads it
    assert re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)) is None, "not compact"
    decoded = decode_value(parse_json(text), sql_type)
    assert same(decoded, expected(value, t)), (value, text, decoded)
    assert encode_value(decoded, sql_type) == text  # the text is canonical


@pytest.mark.parametrize("sql_type", SCALAR_TYPES)
@given(data=st.data())
def test_every_scalar_type_round_trips(sql_type: str, data: st.DataObject) -> None:
    _round_trip(data.draw(st.none() | values_of(parse_type(sql_type))), sql_type)


@given(sql_type=decimal_types, data=st.data())
def test_every_decimal_type_round_trips_at_its_scale(sql_type: str, data: st.DataObject) -> None:
    t = parse_type(sql_type)
    assert isinstance(t, DecimalType)
    value = data.draw(values_of(t))
    _round_trip(value, sql_type)
    decoded = decode_value(parse_json(encode_value(value, sql_type)), sql_type)
    assert decoded.as_tuple().exponent == -t.scale


@settings(max_examples=budget(300))
@given(sql_type=type_strings, data=st.data())
def test_nested_types_round_trip(sql_type: str, data: st.DataObject) -> None:
    _round_trip(data.draw(values_of(parse_type(sql_type))), sql_type)


@pytest.fixture(autouse=True)
def _no_leftover_time_zone() -> Iterator[None]:
    before = time.tzname
    yield
    assert time.tzname == before
