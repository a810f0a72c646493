"""Wire format 1 on Pulsar (design §7.1): every record ``encode_change``/``encode_marker`` makes, in
both value formats, becomes a Pulsar message and back unchanged, so ``decode`` reads it as the
Kafka record; what Pulsar cannot carry faithfully is refused."""

from __future__ import annotations

import itertools
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
from logstore_cli.logformat.pulsar_form import (
    after,
    from_pulsar,
    message_id,
    ordinal,
    position_text,
    to_pulsar,
)

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


# -- positions: message ids as ordered integers --------------------------------------------------

ids = st.tuples(
    st.integers(0, 2**63 - 1), st.integers(0, 2**42), st.integers(-1, 2**19)
)  # ledger, entry, batch index


@given(a=ids, b=ids)
def test_ordinals_order_as_pulsar_orders_message_ids(
    a: tuple[int, int, int], b: tuple[int, int, int]
) -> None:
    assert (ordinal(*a) < ordinal(*b)) == (a < b)
    assert (ordinal(*a) == ordinal(*b)) == (a == b)


@given(mid=ids)
def test_an_ordinal_names_its_message_and_the_next_position_is_just_after_it(
    mid: tuple[int, int, int],
) -> None:
    at = ordinal(*mid)
    assert at % 2 == 0 and at >= 0
    assert message_id(at) == (*mid, True)  # a read starting here includes the message
    assert message_id(at + 1) == (*mid, False)  # the decider's offset + 1: just after it
    assert position_text(at) == ("earliest" if at == 0 else "{}:{}:{}".format(*mid))
    assert position_text(at + 1) == "after {}:{}:{}".format(*mid)
    assert after("{}:{}:{}".format(*mid)) == at + 1


def test_the_next_message_is_after_the_position_just_after_the_last() -> None:
    # entries of a ledger, then the next ledger: each "just after" lies before the next message
    order = [(5, 0, -1), (5, 1, -1), (5, 49_999, -1), (6, 0, -1), (6, 0, 0), (6, 0, 1), (7, 2, -1)]
    for earlier, later in itertools.pairwise(order):
        assert ordinal(*earlier) < ordinal(*earlier) + 1 < ordinal(*later)


@pytest.mark.parametrize(
    "mid", [(-1, 0, -1), (1, -1, -1), (1, 2**43, -1), (1, 0, -2), (1, 0, 2**20)]
)
def test_ids_out_of_range_are_refused_not_wrapped(mid: tuple[int, int, int]) -> None:
    with pytest.raises(WireFormatError, match="out of logstore's range"):
        ordinal(*mid)


@pytest.mark.parametrize(
    "text", ["", "1:2", "1:2:3:4", "a:1:-1", "1: 2:-1", "\uff11:2:-1", "--1:2:-1", "1:2:-1 "]
)
def test_a_commit_position_that_is_no_message_id_is_refused(text: str) -> None:
    with pytest.raises(WireFormatError, match="not a Pulsar message id"):
        after(text)
