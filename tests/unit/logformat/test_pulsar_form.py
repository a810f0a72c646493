"""Wire format 1 on Pulsar (design §7.1): every record ``encode_change``/``encode_marker`` makes, in
both value formats, becomes a Pulsar message and back unchanged, so ``decode`` reads it as the
Kafka record; what Pulsar cannot carry faithfully is refused."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.logformat import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    WireFormatError,
    decode,
    encode_change,
    encode_marker,
)
from logstore_cli.logformat.pulsar_form import from_pulsar, to_pulsar

pytestmark = pytest.mark.unit

ORDERS = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
EVENTS = RowSchema((("at", "bigint"), ("what", "string")))  # no key
EPOCH = EpochId("w-5c1e", 7, "a-91d0")


def _round_trip(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> tuple:
    return from_pulsar(*to_pulsar(key, value, headers))


@given(
    kind=st.sampled_from(list(RowKind)).filter(lambda k: k.value != "COMMIT"),
    fmt=st.sampled_from(list(LogFormat)),
    upsert=st.booleans(),
    ident=st.integers(-(2**63), 2**63 - 1),
    name=st.text(),
    cents=st.integers(-(10**10) + 1, 10**10 - 1),
)
def test_a_change_reads_back_as_the_kafka_record_reads(
    kind: RowKind, fmt: LogFormat, upsert: bool, ident: int, name: str, cents: int
) -> None:
    row = {"id": ident, "name": name, "price": Decimal(cents).scaleb(-2)}
    record = ChangeRecord(kind, {"id": ident}, row, EPOCH)
    key, value, headers = encode_change(record, ORDERS, fmt, upsert=upsert)
    assert decode(*_round_trip(key, value, headers), ORDERS) == decode(key, value, headers, ORDERS)


@pytest.mark.parametrize("fmt", list(LogFormat))
@pytest.mark.parametrize("version", [12, None])
def test_a_marker_reads_back(fmt: LogFormat, version: int | None) -> None:
    key, value, headers = encode_marker(CommitMarker(EPOCH, version), fmt)
    partition_key, payload, props = to_pulsar(key, value, headers)
    assert partition_key is None and props["logstore.kind"] == "COMMIT"
    assert decode(*from_pulsar(partition_key, payload, props)) == CommitMarker(EPOCH, version)


def test_a_keyless_record_has_no_partition_key() -> None:
    record = ChangeRecord(RowKind.INSERT, None, {"at": 1, "what": "x"}, EPOCH)
    key, value, headers = encode_change(record, EVENTS)
    partition_key, payload, props = to_pulsar(key, value, headers)
    assert partition_key is None and payload == value
    assert props["logstore.writer"] == "w-5c1e" and props["logstore.epoch"] == "7"
    assert decode(*from_pulsar(partition_key, payload, props), EVENTS) == record


def test_a_tombstone_is_an_empty_payload_with_its_key() -> None:
    record = ChangeRecord(RowKind.DELETE, {"id": 1}, {"id": 1}, EPOCH)
    key, value, headers = encode_change(record, ORDERS, LogFormat.DEBEZIUM_JSON, upsert=True)
    assert value is None
    assert to_pulsar(key, value, headers)[:2] == ('{"id":1}', b"")


@pytest.mark.parametrize(
    ("key", "value", "headers", "message"),
    [
        (b"", b"{}", [], "empty key"),
        (b"k", b"", [], "empty value"),
        (b"\xff", b"{}", [], "not UTF-8"),
        (None, b"{}", [("logstore.kind", b"\xff")], "not UTF-8"),
        (None, b"{}", [("a", b"1"), ("a", b"2")], "a header repeats"),
    ],
)
def test_what_pulsar_cannot_carry_is_refused(
    key: bytes | None, value: bytes, headers: list[tuple[str, bytes]], message: str
) -> None:
    with pytest.raises(WireFormatError, match=message):
        to_pulsar(key, value, headers)
