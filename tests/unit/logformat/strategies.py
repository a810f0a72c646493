"""Hypothesis strategies for the record format: column types, values of a type, and what a value
decodes back to."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from decimal import Context, Decimal
from typing import Any

from hypothesis import strategies as st

from logstore_cli.ddl.types import struct_field
from logstore_cli.logformat.values import (
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    SqlType,
    StructType,
    to_float32,
)

SCALAR_TYPES = [
    "tinyint", "smallint", "int", "bigint", "boolean", "float", "double", "string", "binary",
    "date", "timestamp", "timestamp_ntz",
]  # fmt: skip
INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}

decimal_types = st.integers(1, 38).flatmap(
    lambda p: st.integers(0, p).map(lambda s: f"decimal({p},{s})")
)
scalar_types = st.one_of(st.sampled_from(SCALAR_TYPES), decimal_types)
# Field names of every kind: ddl.types.struct_field backquotes those that need it.
field_names = st.text(min_size=1, max_size=6)
type_strings = st.recursive(
    scalar_types,
    lambda inner: st.one_of(
        inner.map(lambda t: f"array<{t}>"),
        st.tuples(scalar_types, inner).map(lambda kv: f"map<{kv[0]},{kv[1]}>"),
        st.lists(
            st.tuples(field_names, inner), min_size=1, max_size=4, unique_by=lambda f: f[0]
        ).map(lambda fields: "struct<" + ",".join(struct_field(n, t) for n, t in fields) + ">"),
    ),
    max_leaves=6,
)

# Offsets a datetime.timezone accepts; years kept off the calendar's ends so UTC exists.
offsets = st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
).map(timezone)
aware_datetimes = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)


def _decimals(t: DecimalType) -> st.SearchStrategy[Decimal]:
    # From integers, exactly: st.decimals rounds 38-digit bounds in a 28-digit context.
    bound = 10**t.precision - 1
    exact = Context(prec=t.precision + 2)
    return st.integers(-bound, bound).map(lambda n: Decimal(n).scaleb(-t.scale, exact))


def values_of(t: SqlType, *, key: bool = False) -> st.SearchStrategy[Any]:
    """Values of type ``t`` as PySpark rows hold them; ``key``: usable as a map key (hashable, and
    equal keys encode alike: no NaN, no naive local timestamps)."""
    if isinstance(t, DecimalType):
        return _decimals(t)
    if isinstance(t, ArrayType):
        return st.lists(st.none() | values_of(t.element), max_size=4)
    if isinstance(t, MapType):
        return st.dictionaries(
            values_of(t.key, key=True), st.none() | values_of(t.value), max_size=4
        )
    if isinstance(t, StructType):
        return st.fixed_dictionaries({n: st.none() | values_of(ft) for n, ft in t.fields})
    assert isinstance(t, ScalarType)
    if t.name in INT_BITS:
        bits = INT_BITS[t.name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "boolean": st.booleans(),
        "float": st.floats(width=32, allow_nan=not key),
        "double": st.floats(allow_nan=not key),
        "string": st.text(),
        "binary": st.binary() if key else st.binary() | st.binary().map(bytearray),
        "date": st.dates(),
        # A naive timestamp is local time (PySpark's reading): fine as a value, not as a key.
        "timestamp": aware_datetimes
        if key
        else aware_datetimes
        | st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
        "timestamp_ntz": st.datetimes(),
    }
    return simple[t.name]


def expected(value: Any, t: SqlType) -> Any:
    """What ``value`` of type ``t`` decodes back to."""
    if value is None:
        return None
    if isinstance(t, ArrayType):
        return [expected(v, t.element) for v in value]
    if isinstance(t, MapType):
        return {expected(k, t.key): expected(v, t.value) for k, v in value.items()}
    if isinstance(t, StructType):
        return {n: expected(value[n], ft) for n, ft in t.fields}
    if isinstance(t, ScalarType):
        if t.name == "float":
            return to_float32(value)
        if t.name == "binary":
            return bytes(value)
        if t.name == "timestamp":
            return value.astimezone(UTC)
    return value


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and the sign of a float zero counted, and types checked."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        unmatched = list(b.items())
        for ka, va in a.items():
            match = next(
                (i for i, (kb, vb) in enumerate(unmatched) if same(ka, kb) and same(va, vb)), None
            )
            if match is None:
                return False
            unmatched.pop(match)
        return True
    if isinstance(a, datetime):
        return bool(a == b and a.utcoffset() == b.utcoffset())
    return bool(a == b)
