"""Wire format version 1: headers, change records, commit markers and Delta commit metadata, byte
for byte; what ``decode`` refuses; round trips (hypothesis)."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore_cli.ddl import parse_ddl
from logstore_cli.logformat import (
    FORMAT_VERSION,
    HEADERS,
    ChangeRecord,
    CommitMarker,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    WireFormatError,
    commit_metadata,
    decode,
    encode_change,
    encode_key,
    encode_marker,
    parse_commit_metadata,
    parse_json,
)
from logstore_cli.logformat.values import parse_type
from tests.hypothesis_profiles import budget
from tests.unit.logformat.strategies import expected, same, type_strings, values_of

pytestmark = pytest.mark.unit

DESIGN = Path(__file__).resolve().parents[3] / "docs" / "design.md"

# The documented example table and epoch (docs/design.md, section 7).
ORDERS = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
STOCK = RowSchema((("id", "bigint"), ("region", "string"), ("qty", "int")), ("region", "id"))
EVENTS = RowSchema((("at", "timestamp"), ("what", "string")))
EPOCH = EpochId("w-5c1e", 7, "a-91d0")
ROW = {"id": 42, "name": "Zoë", "price": Decimal("12.5")}
HEADERS_OF_INSERT = [
    ("logstore.writer", b"w-5c1e"),
    ("logstore.epoch", b"7"),
    ("logstore.attempt", b"a-91d0"),
    ("logstore.kind", b"+I"),
    ("logstore.format", b"1"),
]
METADATA = (
    '{"logstore":{"writer":"w-5c1e","epoch":7,"attempt":"a-91d0","offsets":{"0":1044,"1":987}}}'
)


def _section_7() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    return text[text.index("## 7. Wire format") : text.index("## 8. ")]


# -- constants -------------------------------------------------------------------------------------


def test_header_names_and_version() -> None:
    assert HEADERS == (
        "logstore.writer",
        "logstore.epoch",
        "logstore.attempt",
        "logstore.kind",
        "logstore.format",
    )
    assert FORMAT_VERSION == "1"
    assert [k.value for k in RowKind] == ["+I", "-U", "+U", "-D", "COMMIT"]


@pytest.mark.parametrize(
    ("kind", "retraction"),
    [("+I", "-D"), ("-D", "+I"), ("+U", "-U"), ("-U", "+U")],
)
def test_retraction_reverses_a_change(kind: str, retraction: str) -> None:
    assert RowKind(kind).retraction() is RowKind(retraction)
    assert RowKind(kind).retraction().retraction() is RowKind(kind)


def test_a_marker_has_no_retraction() -> None:
    with pytest.raises(ValueError, match="commit marker"):
        RowKind.COMMIT.retraction()


# -- the documented examples -----------------------------------------------------------------------


def test_insert_byte_for_byte() -> None:
    key, value, headers = encode_change(
        ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EPOCH), ORDERS
    )
    assert key == b'{"id":42}'
    assert value == b'{"id":42,"name":"Zo\xc3\xab","price":12.50}'
    assert headers == HEADERS_OF_INSERT


def test_key_follows_the_primary_key_order_and_value_the_column_order() -> None:
    row = {"qty": 3, "region": "eu", "id": 42}
    key, value, _ = encode_change(
        ChangeRecord(RowKind.UPDATE_AFTER, STOCK.key_of(row), row, EPOCH), STOCK
    )
    assert key == b'{"region":"eu","id":42}'
    assert value == b'{"id":42,"region":"eu","qty":3}'


def test_a_delete_may_carry_only_the_key() -> None:
    key, value, headers = encode_change(
        ChangeRecord(RowKind.DELETE, {"id": 42}, {"id": 42}, EPOCH), ORDERS
    )
    assert (key, value) == (b'{"id":42}', b'{"id":42}')
    assert ("logstore.kind", b"-D") in headers


def test_a_table_without_a_key_has_null_keys() -> None:
    row = {"at": None, "what": "boot"}
    key, value, _ = encode_change(ChangeRecord(RowKind.INSERT, None, row, EPOCH), EVENTS)
    assert key is None
    assert value == b'{"at":null,"what":"boot"}'


def test_markers_byte_for_byte() -> None:
    key, value, headers = encode_marker(CommitMarker(EPOCH, 12))
    assert key is None
    assert value == b'{"delta_version":12}'
    assert headers == [
        *HEADERS_OF_INSERT[:3],
        ("logstore.kind", b"COMMIT"),
        ("logstore.format", b"1"),
    ]
    # Log-only emit: no Delta commit, so no version.
    assert encode_marker(CommitMarker(EPOCH, None))[1] == b'{"delta_version":null}'


def test_commit_metadata_byte_for_byte() -> None:
    assert commit_metadata(EPOCH, {1: 987, 0: 1044}) == METADATA
    assert parse_commit_metadata(METADATA) == (EPOCH, {0: 1044, 1: 987})


def test_the_examples_are_the_ones_the_design_shows() -> None:
    section = _section_7()
    shown = [
        '{"id":42}',
        '{"id":42,"name":"Zoë","price":12.50}',
        '{"region":"eu","id":42}',
        '{"id":42,"region":"eu","qty":3}',
        '{"delta_version":12}',
        '{"delta_version":null}',
        METADATA,
    ]
    assert [text for text in shown if f"`{text}`" not in section] == []


def test_schema_of_a_parsed_table() -> None:
    (table,) = parse_ddl(
        "CREATE TABLE db.t (id BIGINT, region STRING, p DECIMAL(10,2), tags ARRAY<STRING>,"
        " PRIMARY KEY (region, id) NOT ENFORCED) WITH ('log.system' = 'kafka',"
        " 'kafka.topic' = 't', 'kafka.bootstrap.servers' = 'h:1')"
    )
    schema = RowSchema.of(table)
    assert schema.columns == (
        ("id", "bigint"),
        ("region", "string"),
        ("p", "decimal(10,2)"),
        ("tags", "array<string>"),
    )
    assert schema.primary_key == ("region", "id")
    assert encode_key({"id": 1, "region": "eu"}, schema) == b'{"region":"eu","id":1}'


# -- what encoding refuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "record", "message"),
    [
        (ORDERS, ChangeRecord(RowKind.INSERT, None, ROW, EPOCH), "needs its key (id)"),
        (EVENTS, ChangeRecord(RowKind.INSERT, {"at": None}, {"at": None, "what": "x"}, EPOCH), "no primary key"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": None}, ROW, EPOCH), "primary-key column 'id' is null"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42, "name": "Zoë"}, ROW, EPOCH), "'name' is not part of the primary key"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 41}, ROW, EPOCH), "the key's 'id' (41) differs from the row's (42)"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, {"id": 42, "name": "x"}, EPOCH), "the row has no column 'price'"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, {**ROW, "extra": 1}, EPOCH), "column 'extra' the table does not have"),
        (ORDERS, ChangeRecord(RowKind.DELETE, {"id": 42}, {"name": "x"}, EPOCH), "the row has no column 'id'"),
        (EVENTS, ChangeRecord(RowKind.DELETE, None, {"what": "x"}, EPOCH), "the row has no column 'at'"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, {**ROW, "price": 12.5}, EPOCH), "column 'price': expected a Decimal"),
        (ORDERS, ChangeRecord(RowKind.COMMIT, {"id": 42}, ROW, EPOCH), "encode it with encode_marker"),
        (ORDERS, ChangeRecord("+X", {"id": 42}, ROW, EPOCH), "unknown row kind '+X'"),  # type: ignore[arg-type]
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EpochId("", 7, "a")), "writer id must be a non-empty string"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EpochId("w", -1, "a")), "epoch must be an integer >= 0"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EpochId("w", 1, "")), "attempt id must be a non-empty string"),
        (ORDERS, ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EpochId("w\ud800", 1, "a")), "not valid Unicode"),
    ],
)  # fmt: skip
def test_encoding_refuses_what_format_1_cannot_carry(
    schema: RowSchema, record: ChangeRecord, message: str
) -> None:
    with pytest.raises(WireFormatError) as info:
        encode_change(record, schema)
    assert info.value.reason == "value"
    assert message in str(info.value)


@pytest.mark.parametrize("version", [-1, True, 1.0])
def test_a_marker_version_is_a_non_negative_integer(version: Any) -> None:
    with pytest.raises(WireFormatError, match="delta_version must be an integer >= 0 or None"):
        encode_marker(CommitMarker(EPOCH, version))


@pytest.mark.parametrize(
    ("columns", "key", "message"),
    [
        ((("a", "int"), ("a", "int")), (), "column 'a' appears twice"),
        ((("a", "int"),), ("b",), "primary-key column 'b' is not a column"),
        ((("a", "int"),), ("a", "a"), "primary-key column 'a' appears twice"),
        ((("a", "interval"),), (), "unknown type 'interval'"),
        ((("a\ud800", "int"),), (), "lone surrogate U\\+D800"),
    ],
)
def test_a_bad_schema_fails_when_built(
    columns: tuple[tuple[str, str], ...], key: tuple[str, ...], message: str
) -> None:
    with pytest.raises(WireFormatError, match=message) as info:
        RowSchema(columns, key)
    assert info.value.reason == "type"


# -- what decoding refuses -------------------------------------------------------------------------

KEY, VALUE, HEADERS_OK = encode_change(ChangeRecord(RowKind.INSERT, {"id": 42}, ROW, EPOCH), ORDERS)


def _with(name: str, value: bytes | None) -> list[tuple[str, bytes | None]]:
    return [(n, value if n == name else v) for n, v in HEADERS_OK]


def _without(name: str) -> list[tuple[str, bytes | None]]:
    return [(n, v) for n, v in HEADERS_OK if n != name]


@pytest.mark.parametrize(
    ("headers", "reason", "message"),
    [
        (None, "foreign", "not a logstore record: it has no logstore.format header"),
        ([], "foreign", "not a logstore record"),
        ([("traceparent", b"00-ab")], "foreign", "not a logstore record"),
        (_with("logstore.format", b"2"), "version", "logstore wire format '2'; this logstore reads format 1"),
        (_without("logstore.format"), "malformed", "a logstore record without a logstore.format header"),
        (_without("logstore.kind"), "malformed", "a format-1 record without a logstore.kind header"),
        (_without("logstore.writer"), "malformed", "without a logstore.writer header"),
        ([*HEADERS_OK, ("logstore.epoch", b"8")], "malformed", "header logstore.epoch appears twice"),
        (_with("logstore.attempt", None), "malformed", "header logstore.attempt has no value"),
        (_with("logstore.writer", b"\xff"), "malformed", "header logstore.writer is not UTF-8"),
        (_with("logstore.writer", b""), "malformed", "header logstore.writer is empty"),
        (_with("logstore.epoch", b"07"), "malformed", "must be a decimal integer >= 0, not '07'"),
        (_with("logstore.epoch", b"-1"), "malformed", "must be a decimal integer >= 0"),
        (_with("logstore.epoch", b"\xd9\xa1"), "malformed", "must be a decimal integer >= 0"),  # Arabic-Indic 1
        (_with("logstore.kind", b"+X"), "malformed", "unknown row kind '+X'"),
    ],
)  # fmt: skip
def test_records_that_are_not_format_1_are_refused_with_a_reason(
    headers: list[tuple[str, bytes | None]] | None, reason: str, message: str
) -> None:
    with pytest.raises(WireFormatError) as info:
        decode(KEY, VALUE, headers)
    assert info.value.reason == reason
    assert message in str(info.value)


def test_a_newer_format_says_how_to_read_it() -> None:
    with pytest.raises(WireFormatError) as info:
        decode(KEY, VALUE, _with("logstore.format", b"2"))
    assert info.value.hint is not None and "upgrade logstore" in info.value.hint


@pytest.mark.parametrize(
    ("key", "value", "headers", "message"),
    [
        (KEY, None, HEADERS_OK, "a +I record without a value"),
        (KEY, b"[1]", HEADERS_OK, "the record's value is not a JSON object"),
        (KEY, b"{", HEADERS_OK, "the record's value is not valid JSON"),
        (KEY, b'{"a":1,"a":2}', HEADERS_OK, "duplicate name 'a'"),
        (b"42", VALUE, HEADERS_OK, "the record's key is not a JSON object"),
        (b"k", VALUE, encode_marker(CommitMarker(EPOCH, 1))[2], "a commit marker has a key"),
        (None, None, encode_marker(CommitMarker(EPOCH, 1))[2], "a commit marker without a value"),
        (None, b'{"delta_version":1,"x":2}', encode_marker(CommitMarker(EPOCH, 1))[2], "a commit marker's value is"),
        (None, b'{"delta_version":"1"}', encode_marker(CommitMarker(EPOCH, 1))[2], "must be an integer >= 0 or null"),
        (None, b'{"delta_version":-1}', encode_marker(CommitMarker(EPOCH, 1))[2], "must be an integer >= 0 or null"),
    ],
)  # fmt: skip
def test_malformed_format_1_records(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]], message: str
) -> None:
    with pytest.raises(WireFormatError) as info:
        decode(key, value, headers)
    assert info.value.reason == "malformed"
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (None, VALUE, "a record without a key in a table with a primary key"),
        (b'{"name":"x"}', VALUE, "not the primary key ['id']"),
        (KEY, b'{"id":42,"name":"x"}', "the record's value has no column 'price'"),
        (KEY, b'{"id":42,"name":"x","price":1,"z":0}', "unknown column 'z'"),
        (KEY, b'{"id":42,"name":"x","price":"1"}', "column 'price': expected a JSON number"),
        (b'{"id":"42"}', VALUE, "column 'id': expected a JSON integer"),
    ],
)
def test_decoding_with_a_schema_checks_the_table(
    key: bytes | None, value: bytes, message: str
) -> None:
    with pytest.raises(WireFormatError) as info:
        decode(key, value, HEADERS_OK, ORDERS)
    assert message in str(info.value)


def test_a_key_in_a_table_without_one_is_refused() -> None:
    with pytest.raises(
        WireFormatError, match="a record with a key in a table without a primary key"
    ):
        decode(b'{"at":null}', b'{"at":null,"what":"x"}', HEADERS_OK, EVENTS)


def test_decode_reads_the_documented_examples() -> None:
    assert decode(KEY, VALUE, HEADERS_OK, ORDERS) == ChangeRecord(
        RowKind.INSERT, {"id": 42}, {"id": 42, "name": "Zoë", "price": Decimal("12.50")}, EPOCH
    )
    # Other tools' headers, in any order, are ignored.
    shuffled = [("traceparent", b"x"), *reversed(HEADERS_OK)]
    untyped = decode(KEY, VALUE, shuffled)
    assert untyped == ChangeRecord(
        RowKind.INSERT, {"id": 42}, {"id": 42, "name": "Zoë", "price": Decimal("12.50")}, EPOCH
    )
    assert str(untyped.row["price"]) == "12.50"  # exact text without a schema too
    assert decode(*encode_marker(CommitMarker(EPOCH, None))) == CommitMarker(EPOCH, None)
    assert decode(*encode_marker(CommitMarker(EPOCH, 12))) == CommitMarker(EPOCH, 12)
    deleted = decode(b'{"id":42}', b'{"id":42}', _with("logstore.kind", b"-D"), ORDERS)
    assert deleted == ChangeRecord(RowKind.DELETE, {"id": 42}, {"id": 42}, EPOCH)


# -- Delta commit metadata -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", [None, "", "nightly load", "[1]", '{"other":{"writer":"w"}}', "{", "NaN"]
)
def test_metadata_of_other_commits_is_not_an_epoch(text: str | None) -> None:
    assert parse_commit_metadata(text) is None


def test_metadata_fields_a_reader_does_not_know_are_ignored() -> None:
    text = '{"job":"x","logstore":{"writer":"w","epoch":0,"attempt":"a","offsets":{},"since":3}}'
    assert parse_commit_metadata(text) == (EpochId("w", 0, "a"), {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[]", "is not an object"),
        ('{"epoch":1,"attempt":"a","offsets":{}}', "has no 'writer'"),
        ('{"writer":"w","epoch":"1","attempt":"a","offsets":{}}', "'epoch' that is not a int"),
        ('{"writer":"w","epoch":true,"attempt":"a","offsets":{}}', "'epoch' that is not a int"),
        ('{"writer":"w","epoch":1,"attempt":"a","offsets":[]}', "'offsets' that is not a dict"),
        ('{"writer":"","epoch":1,"attempt":"a","offsets":{}}', "empty writer"),
        ('{"writer":"w","epoch":-1,"attempt":"a","offsets":{}}', "negative epoch"),
        ('{"writer":"w","epoch":1,"attempt":"a","offsets":{"01":5}}', "partition '01'"),
        ('{"writer":"w","epoch":1,"attempt":"a","offsets":{"0":-5}}', "offset -5"),
        ('{"writer":"w","epoch":1,"attempt":"a","offsets":{"0":1.5}}', "offset Decimal('1.5')"),
    ],
)
def test_broken_logstore_metadata_is_an_error(body: str, message: str) -> None:
    with pytest.raises(WireFormatError) as info:
        parse_commit_metadata('{"logstore":' + body + "}")
    assert info.value.reason == "malformed"
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("offsets", "message"),
    [({-1: 0}, "partition must be"), ({0: -1}, "offset must be"), ({0: True}, "offset must be")],
)
def test_commit_metadata_refuses_bad_offsets(offsets: dict[int, int], message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        commit_metadata(EPOCH, offsets)


def test_commit_metadata_of_a_pulsar_topic_holds_message_ids_as_strings() -> None:
    text = commit_metadata(EPOCH, {1: "12:0:-1", 0: "11:7:-1"})
    assert text == (
        '{"logstore":{"writer":"w-5c1e","epoch":7,"attempt":"a-91d0",'
        '"offsets":{"0":"11:7:-1","1":"12:0:-1"}}}'
    )
    assert parse_commit_metadata(text) == (EPOCH, {0: "11:7:-1", 1: "12:0:-1"})


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ({0: "11:7"}, "not '<ledger>:<entry>:<batch>'"),
        ({0: "a:b:c"}, "not '<ledger>:<entry>:<batch>'"),
        ({0: " 1:2:3"}, "not '<ledger>:<entry>:<batch>'"),
        ({0: 1.5}, "a float"),
        ({0: None}, "a NoneType"),
        ({0: 3, 1: "1:2:-1"}, "mix Kafka offsets and Pulsar message ids"),
    ],
)
def test_commit_metadata_refuses_bad_positions(offsets: dict[int, object], message: str) -> None:
    with pytest.raises(WireFormatError, match=message) as info:
        commit_metadata(EPOCH, offsets)  # type: ignore[arg-type]
    assert info.value.reason == "value"


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ('{"0":"11:7"}', "offset '11:7' that is neither"),
        ('{"0":"1:2:3:4"}', "offset '1:2:3:4' that is neither"),
        ('{"0":""}', "offset '' that is neither"),
        ('{"0":null}', "offset None that is neither"),
        ('{"0":["1:2:3"]}', "that is neither"),
        ('{"0":5,"1":"1:2:-1"}', "mixes Kafka offsets and Pulsar message ids"),
    ],
)
def test_metadata_with_bad_positions_is_an_error(offsets: str, message: str) -> None:
    body = '{"writer":"w","epoch":1,"attempt":"a","offsets":' + offsets + "}"
    with pytest.raises(WireFormatError) as info:
        parse_commit_metadata('{"logstore":' + body + "}")
    assert info.value.reason == "malformed"
    assert message in str(info.value)


pulsar_ids = st.builds(
    lambda ledger, entry, batch: f"{ledger}:{entry}:{batch}",
    st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1),
)  # fmt: skip


epochs = st.builds(EpochId, st.text(min_size=1), st.integers(0, 2**63 - 1), st.text(min_size=1))


@given(epochs, st.dictionaries(st.integers(0, 10_000), pulsar_ids))
def test_pulsar_commit_metadata_round_trips(epoch: EpochId, offsets: dict[int, str]) -> None:
    parsed = parse_commit_metadata(commit_metadata(epoch, offsets))
    assert parsed == (epoch, offsets)


@given(epochs, st.dictionaries(st.integers(0, 10_000), st.integers(0, 2**63 - 1)))
def test_commit_metadata_round_trips(epoch: EpochId, offsets: dict[int, int]) -> None:
    text = commit_metadata(epoch, offsets)
    assert parse_commit_metadata(text) == (epoch, offsets)
    assert re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)) is None, "not compact"


# -- round trips -----------------------------------------------------------------------------------


@st.composite
def schemas_and_records(draw: st.DrawFn) -> tuple[RowSchema, ChangeRecord, ChangeRecord]:
    """A table, a change to it, and the change a reader with the schema decodes."""
    columns = draw(
        st.lists(
            st.tuples(st.text(min_size=1, max_size=5), type_strings),
            min_size=1,
            max_size=5,
            unique_by=lambda c: c[0],
        )
    )
    names = [name for name, _ in columns]
    primary_key = tuple(draw(st.lists(st.sampled_from(names), unique=True, max_size=3)))
    schema = RowSchema(tuple(columns), primary_key)
    kind = draw(
        st.sampled_from(
            [RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE]
        )
    )
    present = names
    if kind is RowKind.DELETE and primary_key:
        present = [n for n in names if n in primary_key or draw(st.booleans())]
    row: dict[str, Any] = {}
    for name, sql_type in columns:
        if name in present:
            values = values_of(parse_type(sql_type))
            row[name] = draw(values if name in primary_key else st.none() | values)
    record = ChangeRecord(kind, schema.key_of(row), row, draw(epochs))
    types = dict(columns)
    typed = {n: expected(v, parse_type(types[n])) for n, v in row.items()}
    key = None if record.key is None else {n: typed[n] for n in primary_key}
    return schema, record, ChangeRecord(kind, key, typed, record.epoch)


@pytest.mark.parametrize("fmt", list(LogFormat))
@settings(max_examples=budget(200))
@given(schemas_and_records())
def test_change_records_round_trip(
    fmt: LogFormat, case: tuple[RowSchema, ChangeRecord, ChangeRecord]
) -> None:
    schema, record, want = case
    key, value, headers = encode_change(record, schema, fmt)
    got = decode(key, value, headers, schema)
    assert isinstance(got, ChangeRecord)
    assert (got.kind, got.epoch) == (want.kind, want.epoch)
    assert same(got.row, want.row)
    assert list(got.row) == list(want.row)  # table order
    assert (got.key is None) == (want.key is None)
    if want.key is not None:
        assert got.key is not None
        assert same(dict(got.key), dict(want.key))
        assert list(got.key) == list(schema.primary_key)
    # Decoded and encoded again: the same bytes (the encoding is canonical).
    assert encode_change(got, schema, fmt) == (key, value, headers)
    # Without the schema: the same JSON, untyped.
    untyped = decode(key, value, headers)
    assert isinstance(untyped, ChangeRecord)
    body = parse_json(value)
    if fmt is LogFormat.DEBEZIUM_JSON:
        body = body["after" if want.kind in (RowKind.INSERT, RowKind.UPDATE_AFTER) else "before"]
    assert untyped.row == body
    assert untyped.key == (None if key is None else parse_json(key))


@pytest.mark.parametrize("fmt", list(LogFormat))
@given(epochs, st.none() | st.integers(0, 2**63 - 1))
def test_markers_round_trip(fmt: LogFormat, epoch: EpochId, version: int | None) -> None:
    marker = CommitMarker(epoch, version)
    assert decode(*encode_marker(marker, fmt)) == marker
