"""The ``debezium-json`` log format: values in Flink's debezium-json envelope byte for byte, markers
with a null value, the reader (``decode`` and its fast path) on both formats alike."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.logformat import (
    ChangeRecord,
    CommitMarker,
    EpochEncoder,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    WireFormatError,
    change_value,
    decode,
    encode_change,
    encode_marker,
    envelope,
    parse_json,
    tombstones,
)
from logstore_cli.logformat.values import parse_type
from logstore_cli.logformat.wire import RecordDecoder
from tests.hypothesis_profiles import budget
from tests.unit.logformat.strategies import values_of

pytestmark = pytest.mark.unit

DBZ = LogFormat.DEBEZIUM_JSON
ORDERS = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
EPOCH = EpochId("w-5c1e", 7, "a-91d0")
ROW = {"id": 42, "name": "Zoë", "price": Decimal("12.50")}
ROW_BYTES = b'{"id":42,"name":"Zo\xc3\xab","price":12.50}'


def _headers(kind: str, fmt: bytes = b"debezium-json") -> list[tuple[str, bytes]]:
    return [
        ("logstore.writer", b"w-5c1e"),
        ("logstore.epoch", b"7"),
        ("logstore.attempt", b"a-91d0"),
        ("logstore.kind", kind.encode()),
        ("logstore.format", fmt),
    ]


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("+I", b'{"before":null,"after":' + ROW_BYTES + b',"op":"c"}'),
        ("+U", b'{"before":null,"after":' + ROW_BYTES + b',"op":"c"}'),
        ("-U", b'{"before":' + ROW_BYTES + b',"after":null,"op":"d"}'),
        ("-D", b'{"before":' + ROW_BYTES + b',"after":null,"op":"d"}'),
    ],
)
def test_changes_byte_for_byte(kind: str, value: bytes) -> None:
    record = ChangeRecord(RowKind(kind), {"id": 42}, ROW, EPOCH)
    assert encode_change(record, ORDERS, DBZ) == (b'{"id":42}', value, _headers(kind))
    assert decode(b'{"id":42}', value, _headers(kind), ORDERS) == record
    # The json format is what it was: the row itself, format header 1.
    assert encode_change(record, ORDERS) == (b'{"id":42}', ROW_BYTES, _headers(kind, b"1"))


def test_markers_have_a_null_value_and_the_version_in_a_header() -> None:
    for version, text in ((12, b"12"), (None, b"null")):
        key, value, headers = encode_marker(CommitMarker(EPOCH, version), DBZ)
        assert (key, value) == (None, None)
        assert headers == [*_headers("COMMIT"), ("logstore.delta-version", text)]
        assert decode(key, value, headers) == CommitMarker(EPOCH, version)
        assert RecordDecoder(ORDERS)(key, value, headers) == CommitMarker(EPOCH, version)


@pytest.mark.parametrize(
    ("value", "headers", "message"),
    [
        (b'{"delta_version":1}', [*_headers("COMMIT"), ("logstore.delta-version", b"1")], "null"),
        (None, _headers("COMMIT"), "without a logstore.delta-version"),
        (None, [*_headers("COMMIT"), ("logstore.delta-version", b"-1")], "decimal integer"),
        (None, _headers("COMMIT", b"1"), "without a value"),
    ],
)
def test_bad_markers(value: bytes | None, headers: Any, message: str) -> None:
    with pytest.raises(WireFormatError, match=message) as info:
        decode(None, value, headers)
    assert info.value.reason == "malformed"


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("+I", ROW_BYTES, "not one with 'id', 'name', 'price'"),
        ("+I", b'{"before":' + ROW_BYTES + b',"after":null,"op":"d"}', '"op":"c"'),
        ("-D", b'{"before":null,"after":' + ROW_BYTES + b',"op":"c"}', '"op":"d"'),
        ("-U", b'{"before":' + ROW_BYTES + b',"after":' + ROW_BYTES + b',"op":"d"}', "a row"),
        ("+U", b'{"before":null,"after":[1],"op":"c"}', "not a JSON object"),
        ("+I", b'{"before":null,"after":{"id":"x","name":"a","price":1.00},"op":"c"}', "'id'"),
        ("+I", b'{"before":null,"after":{"id":42},"op":"c"}', "no column 'name'"),
    ],
)
def test_malformed_debezium_values(kind: str, value: bytes, message: str) -> None:
    for read in (lambda: decode(b'{"id":42}', value, _headers(kind), ORDERS),
                 lambda: RecordDecoder(ORDERS)(b'{"id":42}', value, _headers(kind))):  # fmt: skip
        with pytest.raises(WireFormatError, match=message):
            read()


def test_an_upsert_delete_is_a_tombstone_the_other_kinds_are_not() -> None:
    delete = ChangeRecord(RowKind.DELETE, {"id": 42}, ROW, EPOCH)
    assert encode_change(delete, ORDERS, DBZ, upsert=True) == (b'{"id":42}', None, _headers("-D"))
    # Only debezium-json in upsert mode: json keeps the row, all-kinds the envelope.
    assert encode_change(delete, ORDERS, upsert=True)[1] == ROW_BYTES
    assert encode_change(delete, ORDERS, DBZ)[1] == envelope(ROW_BYTES, RowKind.DELETE, DBZ)
    for kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
        record = ChangeRecord(kind, {"id": 42}, ROW, EPOCH)
        assert encode_change(record, ORDERS, DBZ, upsert=True) == encode_change(record, ORDERS, DBZ)
    assert tombstones(DBZ, True) and not tombstones(DBZ, False)
    assert not tombstones(LogFormat.JSON, True)
    assert change_value(ROW_BYTES, RowKind.DELETE, DBZ, upsert=True) is None


def test_a_tombstone_reads_back_as_a_delete_of_its_key() -> None:
    want = ChangeRecord(RowKind.DELETE, {"id": 42}, {"id": 42}, EPOCH)
    assert decode(b'{"id":42}', None, _headers("-D"), ORDERS) == want
    assert RecordDecoder(ORDERS)(b'{"id":42}', None, _headers("-D")) == want
    assert decode(b'{"id":42}', None, _headers("-D")) == want  # without the schema: parsed JSON


@pytest.mark.parametrize(
    ("key", "headers", "message"),
    [
        (b'{"id":42}', _headers("+I"), "a \\+I record without a value"),
        (b'{"id":42}', _headers("-U"), "only a debezium-json -D may be a tombstone"),
        (b'{"id":42}', _headers("-D", b"1"), "only a debezium-json -D may be a tombstone"),
        (None, _headers("-D"), "a tombstone .* without a key"),
    ],
)
def test_records_without_a_value_that_are_not_tombstones(
    key: bytes | None, headers: Any, message: str
) -> None:
    for read in (lambda: decode(key, None, headers, ORDERS),
                 lambda: RecordDecoder(ORDERS)(key, None, headers)):  # fmt: skip
        with pytest.raises(WireFormatError, match=message) as info:
            read()
        assert info.value.reason == "malformed"


def test_a_reader_of_format_1_only_is_told_to_upgrade() -> None:
    with pytest.raises(WireFormatError, match="'1' or 'debezium-json'") as info:
        decode(None, b"{}", _headers("+I", b"avro"))
    assert info.value.reason == "version"


def test_the_epoch_encoder_and_envelope_give_encode_change_s_bytes() -> None:
    encoder = EpochEncoder(ORDERS, EPOCH, DBZ)
    values = [ROW["id"], ROW["name"], ROW["price"]]
    for kind in (RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE):
        got = (encoder.key(values), envelope(encoder.value(values), kind, encoder.fmt))
        got_headers = encoder.headers(kind)
        assert (*got, got_headers) == encode_change(
            ChangeRecord(kind, {"id": 42}, ROW, EPOCH), ORDERS, DBZ
        )


FAST_TYPES = ["int", "bigint", "string", "boolean", "decimal(12,3)", "date", "timestamp"]


@settings(max_examples=budget(200))
@given(st.lists(st.sampled_from(FAST_TYPES), min_size=1, max_size=4), st.data())
def test_both_formats_decode_to_the_same_change_on_the_fast_path(
    types: list[str], data: Any
) -> None:
    columns = tuple((f"c{i}", t) for i, t in enumerate(types))
    schema = RowSchema(columns, ("c0",))
    row = {n: data.draw(values_of(parse_type(t), key=(n == "c0"))) for n, t in columns}
    row = {n: v.replace("\x7f", "") if isinstance(v, str) else v for n, v in row.items()}
    row = {
        n: "".join(c for c in v if c >= " ") if isinstance(v, str) else v for n, v in row.items()
    }
    kind = data.draw(st.sampled_from(sorted(RowKind, key=str)).filter(lambda k: k != "COMMIT"))
    record = ChangeRecord(kind, {"c0": row["c0"]}, row, EPOCH)
    try:
        plain = encode_change(record, schema)
    except WireFormatError:
        return  # a value format 1 cannot carry (a null key)
    key, value, headers = encode_change(record, schema, DBZ)
    assert parse_json(value)["after" if kind in ("+I", "+U") else "before"] == parse_json(plain[1])
    want = decode(*plain, schema)
    assert decode(key, value, headers, schema) == want
    fast = RecordDecoder(schema)

    def slow(*args: Any) -> Any:
        raise AssertionError(f"took decode() for {value!r}")

    with mock.patch("logstore_cli.logformat.wire.decode", slow):
        assert fast(key, value, headers) == want
        assert fast(*plain) == want  # one reader, both formats (a topic may hold both)


def test_the_design_shows_these_bytes() -> None:
    design = Path(__file__).resolve().parents[3] / "docs" / "design.md"
    text = design.read_text(encoding="utf-8")
    section = text[text.index("## 7. Wire format") : text.index("## 8. ")]
    insert = encode_change(ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EPOCH), ORDERS, DBZ)[1]
    delete = encode_change(ChangeRecord(RowKind.DELETE, {"id": 42}, {"id": 42}, EPOCH), ORDERS, DBZ)
    shown = [
        insert.decode(),
        delete[1].decode(),
        '{"before":null,"after":ROW,"op":"c"}',
        '{"before":ROW,"after":null,"op":"d"}',
    ]
    assert [t for t in shown if f"`{t}`" not in section] == []
    assert envelope(b"ROW", RowKind.UPDATE_AFTER, DBZ) == shown[2].encode()
    assert envelope(b"ROW", RowKind.UPDATE_BEFORE, DBZ) == shown[3].encode()
    marker = encode_marker(CommitMarker(EPOCH, 12), DBZ)[2]
    assert marker[-1] == ("logstore.delta-version", b"12")
    assert "`logstore.delta-version` = `12`" in section
