"""Column values <-> JSON text, byte for byte, driven by the column's Spark SQL type string.

The rules are wire format version 1 (docs/design.md, section 7, "Values"): the same value of the
same type always gives the same text, so that every producer sends a key to the same partition.
Values are what PySpark rows hold (``int``, ``float``, ``Decimal``, ``str``, ``bytes``/
``bytearray``, ``date``, ``datetime``, ``list``, ``dict``, ``Row``); decoding gives them back
(structs as ``dict``, binary as ``bytes``, timestamps as UTC-aware ``datetime``).

Pure: stdlib only, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any

from logstore_cli.logformat.errors import WireFormatError

# -- column types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarType:
    """A type without parameters, by its Spark SQL name (``int``, ``string``, ``timestamp`` ...)."""

    name: str


@dataclass(frozen=True)
class DecimalType:
    """DECIMAL(precision, scale)."""

    precision: int
    scale: int


@dataclass(frozen=True)
class ArrayType:
    """ARRAY<element>."""

    element: SqlType


@dataclass(frozen=True)
class MapType:
    """MAP<key, value>."""

    key: SqlType
    value: SqlType


@dataclass(frozen=True)
class StructType:
    """STRUCT<name: type, ...>, its fields in order."""

    fields: tuple[tuple[str, SqlType], ...]


SqlType = ScalarType | DecimalType | ArrayType | MapType | StructType

# Spark SQL's spellings (DDL and catalog strings) of the scalar types, by their canonical name.
_SCALARS = {
    "boolean": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}
_TEXT_WITH_LENGTH = ("varchar", "char", "character")  # Spark stores them as strings
_DECIMALS = ("decimal", "dec", "numeric")
_MAX_DECIMAL_PRECISION = 38


class _TypeParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> WireFormatError:
        return WireFormatError(
            f"cannot read the column type {self.text!r}: {what} at character {self.pos + 1}",
            reason="type",
            hint="column types are Spark SQL type strings, e.g. bigint, decimal(10,2), "
            "array<string>, map<string,int>, struct<a:int,b:string>",
        )

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def accept(self, symbol: str) -> bool:
        self.skip_ws()
        if self.text.startswith(symbol, self.pos):
            self.pos += len(symbol)
            return True
        return False

    def expect(self, symbol: str) -> None:
        if not self.accept(symbol):
            raise self.fail(f"expected '{symbol}'")

    def word(self) -> str:
        self.skip_ws()
        match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if not match:
            raise self.fail("expected a type name")
        self.pos = match.end()
        return match.group().lower()

    def number(self) -> int:
        self.skip_ws()
        match = re.compile(r"[0-9]+").match(self.text, self.pos)
        if not match:
            raise self.fail("expected a whole number")
        self.pos = match.end()
        return int(match.group())

    def field_name(self) -> str:
        self.skip_ws()
        if self.text.startswith("`", self.pos):
            # Backquoted, with `` for a backquote (ddl.types.struct_field writes them so).
            chars: list[str] = []
            i = self.pos + 1
            while i < len(self.text):
                if self.text[i] == "`":
                    if self.text.startswith("``", i):
                        chars.append("`")
                        i += 2
                        continue
                    self.pos = i + 1
                    return "".join(chars)
                chars.append(self.text[i])
                i += 1
            raise self.fail("unclosed backquote in a field name")
        # Spark's catalog strings write field names bare: the name runs up to the ':'.
        end = self.text.find(":", self.pos)
        name = self.text[self.pos : end].strip() if end >= 0 else ""
        if not name:
            raise self.fail("expected a field name and ':'")
        self.pos = end
        return name

    def parse(self) -> SqlType:
        t = self.type()
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.fail("unexpected text")
        return t

    def type(self) -> SqlType:
        name = self.word()
        if name == "array":
            self.expect("<")
            element = self.type()
            self.expect(">")
            return ArrayType(element)
        if name == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            value = self.type()
            self.expect(">")
            return MapType(key, value)
        if name == "struct":
            self.expect("<")
            fields: list[tuple[str, SqlType]] = []
            if not self.accept(">"):
                while True:
                    field = self.field_name()
                    if any(field == seen for seen, _ in fields):
                        raise self.fail(f"duplicate field {field!r}")
                    self.expect(":")
                    fields.append((field, self.type()))
                    if self.accept(">"):
                        break
                    self.expect(",")
            return StructType(tuple(fields))
        if name in _DECIMALS:
            precision, scale = 10, 0
            if self.accept("("):
                precision = self.number()
                if self.accept(","):
                    scale = self.number()
                self.expect(")")
            if not 1 <= precision <= _MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
                raise self.fail(f"decimal({precision},{scale}) is not a valid decimal type")
            return DecimalType(precision, scale)
        if name in _TEXT_WITH_LENGTH:
            if self.accept("("):
                self.number()
                self.expect(")")
            return ScalarType("string")
        if name in _SCALARS:
            return ScalarType(_SCALARS[name])
        self.pos -= len(name)
        raise self.fail(f"unknown type {name!r}")


@lru_cache(maxsize=1024)
def parse_type(text: str) -> SqlType:
    """A Spark SQL type string (``ColumnSpec.type``) as a type tree; keywords in any case."""
    return _TypeParser(text).parse()


def _as_type(sql_type: str | SqlType) -> SqlType:
    return parse_type(sql_type) if isinstance(sql_type, str) else sql_type


# -- JSON text -----------------------------------------------------------------------------------


class _Problem(Exception):
    """A value that does not fit its type; ``path`` says where inside a nested value."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = ""

    def within(self, step: str) -> _Problem:
        self.path = step + self.path
        return self

    def error(self, subject: str) -> WireFormatError:
        where = f" at {self.path.removeprefix('.')}" if self.path else ""
        return WireFormatError(f"{subject}{where}: {self.message}", reason="value")


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


# JSON's mandatory escapes, written the way Jackson (the Java client's and Spark's to_json JSON
# writer) writes them, so that a JVM producer's key text can equal ours: short escapes where JSON
# has them, else \u00XX in upper-case hex. Nothing else is escaped ('/', DEL, U+2028 included).
_ESCAPES = {code: f"\\u{code:04X}" for code in range(0x20)} | {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def json_string(text: str) -> str:
    """``text`` as a JSON string: ``"`` ``\\`` and U+0000-U+001F escaped (``\\b \\f \\n \\r \\t``
    where JSON has one, else ``\\u00XX`` in upper-case hex), every other character as itself."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = f"U+{ord(text[exc.start]):04X}"
            raise _Problem(f"text is not valid Unicode (a lone surrogate {bad})") from None
    return '"' + text.translate(_ESCAPES) + '"'


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate name {key!r} in a JSON object")
        result[key] = value
    return result


def parse_json(data: bytes | str) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity literals, no duplicate names; non-integral numbers as
    ``Decimal`` (their exact text kept, so a decimal column loses nothing)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        return json.loads(
            text,
            parse_float=Decimal,
            parse_constant=_reject_constant,
            object_pairs_hook=_object_without_duplicates,
        )
    except UnicodeDecodeError as exc:
        raise WireFormatError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason})", reason="malformed"
        ) from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise WireFormatError(f"not valid JSON: {exc}", reason="malformed") from None


# -- floating point ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Binary:
    """An IEEE 754 binary format, through struct codes (positive values' bits sort like them)."""

    value_code: str
    bits_code: str
    infinity_bits: int
    max_digits: int  # significant digits that always suffice to round-trip

    def bits(self, x: float) -> int:
        result: int = struct.unpack(self.bits_code, struct.pack(self.value_code, x))[0]
        return result

    def value(self, bits: int) -> float:
        result: float = struct.unpack(self.value_code, struct.pack(self.bits_code, bits))[0]
        return result


_SINGLE = _Binary("<f", "<I", 0x7F800000, 9)
_DOUBLE = _Binary("<d", "<Q", 0x7FF0000000000000, 17)
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _rounding_interval(x: float, fmt: _Binary) -> tuple[Fraction, Fraction, bool]:
    """The reals that round to ``x`` (positive, finite): low, high, and whether the bounds do
    (round-half-to-even: they do when ``x``'s significand is even)."""
    bits = fmt.bits(x)
    exact = Fraction(x)
    below = Fraction(fmt.value(bits - 1))
    above = (
        exact + (exact - below) if bits + 1 == fmt.infinity_bits else Fraction(fmt.value(bits + 1))
    )
    return (exact + below) / 2, (exact + above) / 2, bits % 2 == 0


def _shortest_digits(x: float, fmt: _Binary) -> tuple[str, int]:
    """The fewest significant digits that read back as ``x`` (positive, finite) in ``fmt``, the
    closest to ``x`` of those: (digits, decpt) with value = 0.digits x 10**decpt."""
    low, high, inclusive = _rounding_interval(x, fmt)
    exact = Decimal(x)  # exact: every binary float has a finite decimal expansion
    for precision in range(1, fmt.max_digits + 1):
        candidates = {
            Context(prec=precision, rounding=ROUND_FLOOR).plus(exact),
            Context(prec=precision, rounding=ROUND_CEILING).plus(exact),
        }
        inside = []
        for candidate in candidates:
            value = Fraction(candidate)
            if low < value < high or (inclusive and value in (low, high)):
                inside.append(candidate)
        if inside:
            best = min(
                inside, key=lambda c: (abs(Fraction(c) - Fraction(x)), c.as_tuple()[1][-1] % 2)
            )
            _, digit_tuple, exponent = best.as_tuple()
            digits = "".join(map(str, digit_tuple)).rstrip("0")
            assert isinstance(exponent, int)
            return digits, len(digit_tuple) + exponent
    raise AssertionError(f"no decimal of {fmt.max_digits} digits reads back as {x!r}")


def _format_like_repr(negative: bool, digits: str, decpt: int) -> str:
    """Digits placed the way Python's ``repr(float)`` places them: exponent form when
    decpt <= -4 or decpt > 16, else positional with at least one digit after the point."""
    sign = "-" if negative else ""
    if decpt <= -4 or decpt > 16:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exponent = decpt - 1
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if decpt <= 0:
        return f"{sign}0.{'0' * -decpt}{digits}"
    if decpt >= len(digits):
        return f"{sign}{digits}{'0' * (decpt - len(digits))}.0"
    return f"{sign}{digits[:decpt]}.{digits[decpt:]}"


def shortest_repr(x: float, *, single: bool = False) -> str:
    """The shortest decimal text that reads back as ``x``: as a double (this is ``repr(x)``) or,
    with ``single``, as a 32-bit float (``x`` must be one). Finite values only."""
    if not single:
        return float.__repr__(x)
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    digits, decpt = _shortest_digits(abs(x), _SINGLE)
    return _format_like_repr(x < 0, digits, decpt)


def to_float32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float (ties to even), as Spark stores a FLOAT."""
    try:
        return _SINGLE.value(_SINGLE.bits(x))
    except OverflowError:
        raise _Problem(f"{x!r} is out of range for float (32-bit)") from None


def _fraction_to_float32(value: Fraction, negative: bool) -> float:
    """The 32-bit float nearest to an exact decimal (ties to even), without double rounding."""
    magnitude = abs(value)
    if magnitude == 0:
        return -0.0 if negative else 0.0
    max_finite = _SINGLE.value(_SINGLE.infinity_bits - 1)
    guess = _SINGLE.bits(min(float(magnitude), max_finite))
    if Fraction(_SINGLE.value(guess)) > magnitude:
        guess -= 1
    below, above = guess, guess + 1  # the float32s on either side of the value
    low = Fraction(_SINGLE.value(below))
    high = (
        low + (low - Fraction(_SINGLE.value(below - 1)))
        if above == _SINGLE.infinity_bits
        else Fraction(_SINGLE.value(above))
    )
    gap_below, gap_above = magnitude - low, high - magnitude
    pick = below if gap_below < gap_above or (gap_below == gap_above and below % 2 == 0) else above
    if pick == _SINGLE.infinity_bits:
        raise _Problem(f"{value} is out of range for float (32-bit)")
    result = _SINGLE.value(pick)
    return -result if negative else result


# -- encoders --------------------------------------------------------------------------------------

Encoder = Callable[[Any], str]
Decoder = Callable[[Any], Any]

_INT_RANGES = {
    "tinyint": 8,
    "smallint": 16,
    "int": 32,
    "bigint": 64,
}
# Types whose encoding is always a JSON string: a map key of such a type is that string itself.
_STRING_ENCODED = frozenset({"string", "binary", "date", "timestamp", "timestamp_ntz"})


def _nullable(encode: Encoder) -> Encoder:
    def encode_or_null(value: Any) -> str:
        return "null" if value is None else encode(value)

    return encode_or_null


def _int_encoder(name: str) -> Encoder:
    bits = _INT_RANGES[name]
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def encode(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Problem(f"expected an integer for {name}, got {_describe(value)}")
        if not low <= value <= high:
            raise _Problem(f"{value} is out of range for {name} ({low} to {high})")
        return int.__repr__(value)

    return encode


def _encode_boolean(value: Any) -> str:
    if not isinstance(value, bool):
        raise _Problem(f"expected True or False for boolean, got {_describe(value)}")
    return "true" if value else "false"


def _float_encoder(single: bool) -> Encoder:
    name = "float" if single else "double"

    def encode(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, float | int):
            raise _Problem(f"expected a number for {name}, got {_describe(value)}")
        try:
            x = float(value)
        except OverflowError:
            raise _Problem(f"{value} is out of range for {name}") from None
        if math.isnan(x):
            return '"NaN"'
        if math.isinf(x):
            return '"Infinity"' if x > 0 else '"-Infinity"'
        if single:
            x = to_float32(x)
            if math.isinf(x):
                return '"Infinity"' if x > 0 else '"-Infinity"'
        return shortest_repr(x, single=single)

    return encode


def _decimal_value(value: Decimal | int, t: DecimalType) -> Decimal:
    """``value`` at the type's scale, exactly (never rounded), or a _Problem."""
    if isinstance(value, int):
        value = Decimal(value)
    if not value.is_finite():
        raise _Problem(f"{value} is not a number {_type_text(t)} can hold")
    context = Context(prec=_MAX_DECIMAL_PRECISION * 4)
    try:
        scaled = value.quantize(Decimal(1).scaleb(-t.scale, context), context=context)
    except InvalidOperation:
        raise _Problem(f"{value} does not fit {_type_text(t)}") from None
    if scaled != value:
        raise _Problem(f"{value} has more than {t.scale} digits after the point ({_type_text(t)})")
    if scaled.adjusted() >= t.precision - t.scale:
        raise _Problem(
            f"{value} has more than {t.precision - t.scale} digits before the point ({_type_text(t)})"
        )
    return scaled.copy_abs() if scaled.is_zero() else scaled  # no negative zero, as in Spark


def _decimal_encoder(t: DecimalType) -> Encoder:
    def encode(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            hint = " (a float is inexact: pass a Decimal)" if isinstance(value, float) else ""
            raise _Problem(f"expected a Decimal for {_type_text(t)}, got {_describe(value)}{hint}")
        return format(_decimal_value(value, t), "f")

    return encode


def _encode_string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Problem(f"expected a str for string, got {_describe(value)}")
    return json_string(value)


def _encode_binary(value: Any) -> str:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise _Problem(f"expected bytes for binary, got {_describe(value)}")
    return '"' + base64.b64encode(bytes(value)).decode("ascii") + '"'


def _date_text(d: date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _time_text(t: datetime) -> str:
    return f"{_date_text(t)}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond:06d}"


def _encode_date(value: Any) -> str:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise _Problem(f"expected a datetime.date for date, got {_describe(value)}")
    return f'"{_date_text(value)}"'


def _encode_timestamp(value: Any) -> str:
    if not isinstance(value, datetime):
        raise _Problem(f"expected a datetime for timestamp, got {_describe(value)}")
    try:
        # A naive value is local time, as PySpark's TimestampType reads and writes it.
        utc = value.astimezone(UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise _Problem(f"{value!r} has no UTC time in years 1-9999 ({exc})") from None
    return f'"{_time_text(utc)}Z"'


def _encode_timestamp_ntz(value: Any) -> str:
    if not isinstance(value, datetime):
        raise _Problem(f"expected a datetime for timestamp_ntz, got {_describe(value)}")
    if value.utcoffset() is not None:
        raise _Problem(
            f"timestamp_ntz holds no time zone, but {value.isoformat()} has one "
            "(pass a naive datetime, or use a timestamp column)"
        )
    return f'"{_time_text(value)}"'


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _array_encoder(t: ArrayType) -> Encoder:
    element = value_encoder(t.element)

    def encode(value: Any) -> str:
        if not _is_sequence(value):
            raise _Problem(f"expected a list for {_type_text(t)}, got {_describe(value)}")
        parts = []
        for i, item in enumerate(value):
            try:
                parts.append(element(item))
            except _Problem as problem:
                raise problem.within(f"[{i}]") from None
        return "[" + ",".join(parts) + "]"

    return encode


def _map_key_text(encoded: str) -> str:
    """A map key's text: its encoding when that is a JSON string, else its JSON text."""
    if encoded.startswith('"'):
        text: str = json.loads(encoded)
        return text
    return encoded


def _map_encoder(t: MapType) -> Encoder:
    key_encoder, value_enc = value_encoder(t.key), value_encoder(t.value)

    def encode(value: Any) -> str:
        if not isinstance(value, Mapping):
            raise _Problem(f"expected a dict for {_type_text(t)}, got {_describe(value)}")
        entries: dict[str, str] = {}
        for key, item in value.items():
            if key is None:
                raise _Problem("a map key is None (Spark maps have no null keys)")
            try:
                text = _map_key_text(key_encoder(key))
            except _Problem as problem:
                raise problem.within(f"{{key {key!r}}}") from None
            if text in entries:
                raise _Problem(f"two keys encode as the same map key {text!r}")
            try:
                entries[text] = value_enc(item)
            except _Problem as problem:
                raise problem.within(f"[{key!r}]") from None
        # Sorted by key text (code points): a map has no order, so equal maps give equal bytes.
        return "{" + ",".join(f"{json_string(k)}:{entries[k]}" for k in sorted(entries)) + "}"

    return encode


def struct_items(value: Any, names: tuple[str, ...], what: str) -> list[Any]:
    """A struct value's field values in declared order: from a dict, a PySpark ``Row`` (fields
    by name) or a tuple/list (by position)."""
    fields = getattr(value, "__fields__", None)
    if isinstance(value, tuple) and isinstance(fields, list | tuple):
        value = dict(zip(fields, value, strict=True))  # a Row with field names
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in names]
        if unknown:
            raise _Problem(f"{what} has no field {unknown[0]!r} (fields: {', '.join(names)})")
        missing = [n for n in names if n not in value]
        if missing:
            raise _Problem(f"field {missing[0]!r} of {what} is missing")
        return [value[n] for n in names]
    if _is_sequence(value):
        if len(value) != len(names):
            raise _Problem(f"{what} has {len(names)} fields, got {len(value)} values")
        return list(value)
    raise _Problem(f"expected a dict or Row for {what}, got {_describe(value)}")


def _struct_encoder(t: StructType) -> Encoder:
    names = tuple(name for name, _ in t.fields)
    encoders = [(json_string(name), value_encoder(ft)) for name, ft in t.fields]

    def encode(value: Any) -> str:
        items = struct_items(value, names, _type_text(t))
        parts = []
        for (name_text, enc), (name, _), item in zip(encoders, t.fields, items, strict=True):
            try:
                parts.append(f"{name_text}:{enc(item)}")
            except _Problem as problem:
                raise problem.within(f".{name}") from None
        return "{" + ",".join(parts) + "}"

    return encode


@lru_cache(maxsize=1024)
def value_encoder(t: SqlType) -> Encoder:
    """The encoder of one type, built once (None is ``null`` for every type)."""
    encoder: Encoder
    if isinstance(t, DecimalType):
        encoder = _decimal_encoder(t)
    elif isinstance(t, ArrayType):
        encoder = _array_encoder(t)
    elif isinstance(t, MapType):
        encoder = _map_encoder(t)
    elif isinstance(t, StructType):
        encoder = _struct_encoder(t)
    elif t.name in _INT_RANGES:
        encoder = _int_encoder(t.name)
    elif t.name in ("float", "double"):
        encoder = _float_encoder(t.name == "float")
    else:
        encoder = {
            "boolean": _encode_boolean,
            "string": _encode_string,
            "binary": _encode_binary,
            "date": _encode_date,
            "timestamp": _encode_timestamp,
            "timestamp_ntz": _encode_timestamp_ntz,
        }[t.name]
    return _nullable(encoder)


def _type_text(t: SqlType) -> str:
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, ArrayType):
        return f"array<{_type_text(t.element)}>"
    if isinstance(t, MapType):
        return f"map<{_type_text(t.key)},{_type_text(t.value)}>"
    return "struct<" + ",".join(f"{n}:{_type_text(ft)}" for n, ft in t.fields) + ">"


def encode_value(value: Any, sql_type: str | SqlType) -> str:
    """The JSON text of one value of a column of type ``sql_type`` (a Spark SQL type string)."""
    t = _as_type(sql_type)
    try:
        return value_encoder(t)(value)
    except _Problem as problem:
        raise problem.error(f"cannot encode a {_type_text(t)} value") from None


# -- decoders --------------------------------------------------------------------------------------


def _int_decoder(name: str) -> Decoder:
    check = _int_encoder(name)

    def decode(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Problem(f"expected a JSON integer for {name}, got {_describe(value)}")
        check(value)
        return value

    return decode


def _decode_boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise _Problem(f"expected true or false for boolean, got {_describe(value)}")
    return value


def _float_decoder(single: bool) -> Decoder:
    name = "float" if single else "double"

    def decode(value: Any) -> Any:
        if isinstance(value, str):
            if value not in _NON_FINITE:
                raise _Problem(
                    f'expected a number or "NaN", "Infinity", "-Infinity" for {name}, got {value!r}'
                )
            return _NON_FINITE[value]
        if isinstance(value, bool) or not isinstance(value, int | Decimal | float):
            raise _Problem(f"expected a number for {name}, got {_describe(value)}")
        if isinstance(value, float):
            return to_float32(value) if single else value
        if single:
            return _fraction_to_float32(Fraction(value), value < 0 or _is_negative_zero(value))
        try:
            x = float(value)  # correctly rounded (Decimal's and int's conversions both are)
        except OverflowError:
            x = math.inf
        if math.isinf(x):
            raise _Problem(f"{value} is out of range for double")
        return x

    return decode


def _is_negative_zero(value: int | Decimal) -> bool:
    return isinstance(value, Decimal) and value.is_zero() and value.is_signed()


def _decimal_decoder(t: DecimalType) -> Decoder:
    def decode(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise _Problem(f"expected a JSON number for {_type_text(t)}, got {_describe(value)}")
        return _decimal_value(value, t)

    return decode


def _text_decoder(name: str, parse: Callable[[str], Any]) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, str):
            raise _Problem(f"expected a JSON string for {name}, got {_describe(value)}")
        return parse(value)

    return decode


def _parse_binary(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise _Problem(f"{text!r} is not base64 ({exc})") from None


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _parse_date(text: str) -> date:
    try:
        if _DATE.fullmatch(text):
            return date.fromisoformat(text)
    except ValueError:
        pass
    raise _Problem(f"{text!r} is not a date (YYYY-MM-DD)")


def _parse_datetime(text: str) -> datetime:
    try:
        if text[:4].isdigit() and len(text) >= 16 and text[10] in "T ":
            return datetime.fromisoformat(text)
    except ValueError:
        pass
    raise _Problem(f"{text!r} is not an ISO-8601 timestamp (YYYY-MM-DDTHH:MM:SS.ffffff)")


def _parse_timestamp(text: str) -> datetime:
    parsed = _parse_datetime(text)
    if parsed.utcoffset() is None:
        raise _Problem(f"{text!r} has no time zone (a timestamp is written in UTC, with 'Z')")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise _Problem(f"{text!r} has no UTC time in years 1-9999") from None


def _parse_timestamp_ntz(text: str) -> datetime:
    parsed = _parse_datetime(text)
    if parsed.utcoffset() is not None:
        raise _Problem(f"{text!r} has a time zone, but timestamp_ntz holds none")
    return parsed


def _array_decoder(t: ArrayType) -> Decoder:
    element = value_decoder(t.element)

    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            raise _Problem(f"expected a JSON array for {_type_text(t)}, got {_describe(value)}")
        result = []
        for i, item in enumerate(value):
            try:
                result.append(element(item))
            except _Problem as problem:
                raise problem.within(f"[{i}]") from None
        return result

    return decode


def _map_decoder(t: MapType) -> Decoder:
    key_decoder, item_decoder = value_decoder(t.key), value_decoder(t.value)
    key_is_text = isinstance(t.key, ScalarType) and t.key.name in _STRING_ENCODED
    key_is_float = isinstance(t.key, ScalarType) and t.key.name in ("float", "double")

    def decode_key(text: str) -> Any:
        if key_is_text or (key_is_float and text in _NON_FINITE):
            return key_decoder(text)
        try:
            return key_decoder(parse_json(text))
        except WireFormatError:
            raise _Problem(f"map key {text!r} does not read as {_type_text(t.key)}") from None

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Problem(f"expected a JSON object for {_type_text(t)}, got {_describe(value)}")
        result: dict[Any, Any] = {}
        for text, item in value.items():
            try:
                key = decode_key(text)
            except _Problem as problem:
                raise problem.within(f"{{key {text!r}}}") from None
            if key in result:
                raise _Problem(f"map key {text!r} repeats an earlier key")
            try:
                result[key] = item_decoder(item)
            except _Problem as problem:
                raise problem.within(f"[{text!r}]") from None
        return result

    return decode


def _struct_decoder(t: StructType) -> Decoder:
    names = tuple(name for name, _ in t.fields)
    decoders = [value_decoder(ft) for _, ft in t.fields]

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Problem(f"expected a JSON object for {_type_text(t)}, got {_describe(value)}")
        items = struct_items(value, names, _type_text(t))
        result = {}
        for name, dec, item in zip(names, decoders, items, strict=True):
            try:
                result[name] = dec(item)
            except _Problem as problem:
                raise problem.within(f".{name}") from None
        return result

    return decode


@lru_cache(maxsize=1024)
def value_decoder(t: SqlType) -> Decoder:
    """The decoder of one type, built once (``null`` is None for every type)."""
    decoder: Decoder
    if isinstance(t, DecimalType):
        decoder = _decimal_decoder(t)
    elif isinstance(t, ArrayType):
        decoder = _array_decoder(t)
    elif isinstance(t, MapType):
        decoder = _map_decoder(t)
    elif isinstance(t, StructType):
        decoder = _struct_decoder(t)
    elif t.name in _INT_RANGES:
        decoder = _int_decoder(t.name)
    elif t.name in ("float", "double"):
        decoder = _float_decoder(t.name == "float")
    elif t.name == "boolean":
        decoder = _decode_boolean
    else:
        parsers: dict[str, Callable[[str], Any]] = {
            "string": str,
            "binary": _parse_binary,
            "date": _parse_date,
            "timestamp": _parse_timestamp,
            "timestamp_ntz": _parse_timestamp_ntz,
        }
        decoder = _text_decoder(t.name, parsers[t.name])

    def decode_or_none(value: Any) -> Any:
        return None if value is None else decoder(value)

    return decode_or_none


def decode_value(json_value: Any, sql_type: str | SqlType) -> Any:
    """The value of a column of type ``sql_type`` from its parsed JSON (``parse_json``'s result:
    non-integral numbers as ``Decimal``; a plain ``float`` is accepted for float and double)."""
    t = _as_type(sql_type)
    try:
        return value_decoder(t)(json_value)
    except _Problem as problem:
        raise problem.error(f"cannot decode a {_type_text(t)} value") from None


def spark_json_identical(t: str | SqlType) -> bool:
    """Whether Spark's ``to_json`` (with ``ignoreNullFields=false``) writes values of this type
    byte for byte as this module does: integers, booleans, strings, dates, decimals of scale at
    most 6 (``BigDecimal.toString`` switches to exponent form below 10^-6), and arrays and structs
    of those. Not doubles and floats (``1.0E16``), timestamps (milliseconds), binary, nor maps
    (entry order); ``tests/integration/logformat`` holds this to Spark."""
    t = _as_type(t)
    if isinstance(t, DecimalType):
        return t.scale <= 6
    if isinstance(t, ArrayType):
        return spark_json_identical(t.element)
    if isinstance(t, StructType):
        return all(spark_json_identical(field) for _, field in t.fields)
    if isinstance(t, MapType):
        return False
    return t.name in {"tinyint", "smallint", "int", "bigint", "boolean", "string", "date"}
