"""EpochEncoder, the ingest hot path, writes exactly what encode_change writes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.logformat import (
    ChangeRecord,
    EpochEncoder,
    EpochId,
    RowKind,
    RowSchema,
    encode_change,
)
from logstore_cli.logformat.errors import WireFormatError

SCHEMA = RowSchema(
    (
        ("id", "bigint"),
        ("region", "string"),
        ("price", "decimal(10,2)"),
        ("at", "timestamp"),
        ("tags", "map<string,int>"),
    ),
    ("region", "id"),
)
EPOCH = EpochId("w-1", 7, "a-9")

rows = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.text(min_size=1),
    st.none() | st.decimals(min_value=-(10**7), max_value=10**7, places=2, allow_nan=False),
    st.none() | st.datetimes(timezones=st.just(dt.UTC), min_value=dt.datetime(1970, 1, 2)),
    st.none() | st.dictionaries(st.text(), st.integers(-(2**31), 2**31 - 1), max_size=3),
)


@given(rows, st.sampled_from([k for k in RowKind if k is not RowKind.COMMIT]))
def test_the_same_bytes_as_encode_change(values: tuple[Any, ...], kind: RowKind) -> None:
    enc = EpochEncoder(SCHEMA, EPOCH)
    row = dict(zip(SCHEMA.names, values, strict=True))
    key = SCHEMA.key_of(row)
    expected = encode_change(ChangeRecord(kind, key, row, EPOCH), SCHEMA)
    assert (enc.key(values), enc.value(values), enc.headers(kind)) == expected


def test_a_keyless_table_has_null_keys() -> None:
    enc = EpochEncoder(RowSchema((("a", "int"),)), EPOCH)
    assert enc.key((1,)) is None
    assert enc.value((1,)) == b'{"a":1}'


def test_a_null_key_column_and_a_bad_value_are_named() -> None:
    enc = EpochEncoder(SCHEMA, EPOCH)
    with pytest.raises(WireFormatError, match="'region' is null"):
        enc.key((1, None, None, None, None))
    with pytest.raises(WireFormatError, match="'price'"):
        enc.value((1, "eu", Decimal("1.234"), None, None))
