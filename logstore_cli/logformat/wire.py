"""Wire format version 1 of a LogStore table's topic (docs/design.md, section 7).

Pure: no I/O, no Kafka client, no Spark; every engine that writes or reads the log shares it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from functools import cached_property
from keyword import iskeyword
from typing import Annotated, Any, NamedTuple, Protocol

from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.values import (
    _INT_RANGES,
    DecimalType,
    Decoder,
    ScalarType,
    SqlType,
    _Problem,
    json_string,
    parse_json,
    parse_type,
    value_decoder,
    value_encoder,
)


class LogFormat(StrEnum):
    """How a record's value carries its row (``log.format`` / ``log-store.data-format``).

    ``json``: the row itself (wire format 1). ``debezium-json``: the row in Flink's debezium-json
    envelope, as Paimon's Kafka log wrote it, so that a Flink ``'format' = 'debezium-json'``
    source reads the topic. Keys, headers and the rendering of values are the same in both; the
    ``logstore.format`` header names the value's format, so a reader needs no table to decode.
    """

    JSON = "json"
    DEBEZIUM_JSON = "debezium-json"

    @property
    def header(self) -> str:
        """The ``logstore.format`` header of this format's records."""
        return _FORMAT_HEADERS[self]


class RowKind(StrEnum):
    """The kind of a log record: a change (``+I -U +U -D``) or a commit marker (``COMMIT``)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"
    COMMIT = "COMMIT"

    def retraction(self) -> RowKind:
        """The kind that undoes a change of this kind (what an ``eventual`` reader emits)."""
        try:
            return _RETRACTION[self]
        except KeyError:
            raise ValueError("a commit marker has no retraction") from None


_RETRACTION = {
    RowKind.INSERT: RowKind.DELETE,
    RowKind.DELETE: RowKind.INSERT,
    RowKind.UPDATE_AFTER: RowKind.UPDATE_BEFORE,
    RowKind.UPDATE_BEFORE: RowKind.UPDATE_AFTER,
}


@dataclass(frozen=True)
class EpochId:
    """One attempt of one epoch: writer ``W``, epoch number ``N`` (the batch id), attempt ``A``."""

    writer: str
    epoch: int
    attempt: str


class ChangeRecord(NamedTuple):
    """A change of one row, as written to the log by attempt ``epoch``.

    A named tuple, not a frozen dataclass: readers build one per record, and this builds in a
    fifth of the time (0.11 against 0.53 us through ``tuple.__new__``).
    """

    kind: RowKind
    key: Mapping[str, Any] | None
    row: Mapping[str, Any]
    epoch: EpochId


@dataclass(frozen=True)
class CommitMarker:
    """Epoch ``epoch`` committed with this attempt, as Delta version ``delta_version``.

    ``delta_version`` is None with log-only emit (no Delta commit).
    """

    epoch: EpochId
    delta_version: int | None


# -- headers and constants -----------------------------------------------------------------------

HEADER_WRITER = "logstore.writer"
HEADER_EPOCH = "logstore.epoch"
HEADER_ATTEMPT = "logstore.attempt"
HEADER_KIND = "logstore.kind"
HEADER_FORMAT = "logstore.format"
HEADERS = (HEADER_WRITER, HEADER_EPOCH, HEADER_ATTEMPT, HEADER_KIND, HEADER_FORMAT)  # as written
# A debezium-json commit marker's Delta version: its value is null (a Flink debezium-json source
# skips a record with a null value), so the version travels here, after the five above.
HEADER_DELTA_VERSION = "logstore.delta-version"
FORMAT_VERSION = "1"
DEBEZIUM_FORMAT = "debezium-json"  # logstore.format of a debezium-json record
_FORMAT_HEADERS = {LogFormat.JSON: FORMAT_VERSION, LogFormat.DEBEZIUM_JSON: DEBEZIUM_FORMAT}
_FORMAT_OF_HEADER = {header: fmt for fmt, header in _FORMAT_HEADERS.items()}
# The debezium-json envelope around a row image, byte for byte: (before the row, after it).
_AFTER_IMAGE = (b'{"before":null,"after":', b',"op":"c"}')  # +I, +U
_BEFORE_IMAGE = (b'{"before":', b',"after":null,"op":"d"}')  # -U, -D
_ENVELOPES = {
    RowKind.INSERT: _AFTER_IMAGE,
    RowKind.UPDATE_AFTER: _AFTER_IMAGE,
    RowKind.UPDATE_BEFORE: _BEFORE_IMAGE,
    RowKind.DELETE: _BEFORE_IMAGE,
}
CHANGE_KINDS = frozenset(
    {RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE}
)

Headers = list[tuple[str, bytes]]
_DECIMAL_TEXT = re.compile(r"0|[1-9][0-9]*")


# -- the table's columns -------------------------------------------------------------------------


class ColumnLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...


class TableLike(Protocol):
    """What the format needs of a table: ``model.TableSpec`` is one."""

    @property
    def columns(self) -> Sequence[ColumnLike]: ...

    @property
    def primary_key(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class RowSchema:
    """The columns (name, Spark SQL type string) in table order, and the primary key in
    declaration order (empty for a table without one). ``optional``: the columns a record's value
    may lack, read as null: the nullable ones, as a value written before ``alter-table
    --add-column`` added them lacks them (what Delta does for a data file written before)."""

    columns: tuple[tuple[str, str], ...]
    primary_key: tuple[str, ...] = ()
    optional: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        names = [name for name, _ in self.columns]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise WireFormatError(f"column {name!r} appears twice", reason="type")
        for i, name in enumerate(self.primary_key):
            if name not in names:
                raise WireFormatError(
                    f"primary-key column {name!r} is not a column ({', '.join(names)})",
                    reason="type",
                )
            if name in self.primary_key[:i]:
                raise WireFormatError(f"primary-key column {name!r} appears twice", reason="type")
        for name in names:
            try:
                json_string(name)
            except _Problem as problem:
                raise WireFormatError(
                    f"column name {name!r}: {problem.message}", reason="type"
                ) from None
        _ = self.types  # an unknown type fails here, not at the first row

    @classmethod
    def of(cls, table: TableLike) -> RowSchema:
        key = tuple(table.primary_key)
        optional = frozenset(
            c.name for c in table.columns if getattr(c, "nullable", False) and c.name not in key
        )
        return cls(tuple((c.name, c.type) for c in table.columns), key, optional)

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @cached_property
    def types(self) -> dict[str, SqlType]:
        """Each column's parsed type, by name."""
        return {name: parse_type(sql_type) for name, sql_type in self.columns}

    def type_of(self, column: str) -> SqlType:
        return self.types[column]

    def key_of(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """The primary-key values of a row, in key order (None for a table without a key)."""
        if not self.primary_key:
            return None
        missing = [name for name in self.primary_key if name not in row]
        if missing:
            raise WireFormatError(
                f"the row has no value for primary-key column {missing[0]!r}", reason="value"
            )
        return {name: row[name] for name in self.primary_key}


def _encode_column(schema: RowSchema, name: str, value: Any) -> str:
    try:
        return value_encoder(schema.type_of(name))(value)
    except _Problem as problem:
        raise problem.error(f"column {name!r}") from None


def _encode_object(schema: RowSchema, names: Sequence[str], values: Mapping[str, Any]) -> bytes:
    parts = (f"{json_string(n)}:{_encode_column(schema, n, values[n])}" for n in names)
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def _check_names(schema: RowSchema, given: Mapping[str, Any], what: str) -> None:
    unknown = [name for name in given if name not in schema.types]
    if unknown:
        raise WireFormatError(
            f"{what} has a column {unknown[0]!r} the table does not have "
            f"(columns: {', '.join(schema.names)})",
            reason="value",
        )


def encode_key(key: Mapping[str, Any] | None, schema: RowSchema) -> bytes | None:
    """The record key: the primary-key columns as a compact JSON object in key order, UTF-8;
    None for a table without a primary key."""
    if not schema.primary_key:
        if key is not None:
            raise WireFormatError(
                "the table has no primary key, so its records have no key (pass key=None)",
                reason="value",
            )
        return None
    if key is None:
        raise WireFormatError(
            f"a record of a table with a primary key needs its key ({', '.join(schema.primary_key)})",
            reason="value",
        )
    _check_names(schema, key, "the key")
    for name in schema.primary_key:
        if key.get(name) is None:
            raise WireFormatError(
                f"primary-key column {name!r} is {'missing' if name not in key else 'null'}",
                reason="value",
            )
    extra = [name for name in key if name not in schema.primary_key]
    if extra:
        raise WireFormatError(
            f"column {extra[0]!r} is not part of the primary key ({', '.join(schema.primary_key)})",
            reason="value",
        )
    return _encode_object(schema, schema.primary_key, key)


def encode_row(row: Mapping[str, Any], schema: RowSchema, *, partial: bool = False) -> bytes:
    """The record value: the row as a compact JSON object, columns in table order, UTF-8.

    Every column is required, except with ``partial`` (the row image of a ``-D``) on a table with a
    primary key, where the key columns suffice and the columns given are written.
    """
    _check_names(schema, row, "the row")
    required = schema.primary_key if partial and schema.primary_key else schema.names
    missing = [name for name in required if name not in row]
    if missing:
        raise WireFormatError(f"the row has no column {missing[0]!r}", reason="value")
    return _encode_object(schema, [n for n in schema.names if n in row], row)


def _check_epoch(epoch: EpochId) -> None:
    if not isinstance(epoch.writer, str) or not epoch.writer:
        raise WireFormatError(
            f"writer id must be a non-empty string, not {epoch.writer!r}", reason="value"
        )
    if not isinstance(epoch.attempt, str) or not epoch.attempt:
        raise WireFormatError(
            f"attempt id must be a non-empty string, not {epoch.attempt!r}", reason="value"
        )
    if isinstance(epoch.epoch, bool) or not isinstance(epoch.epoch, int) or epoch.epoch < 0:
        raise WireFormatError(f"epoch must be an integer >= 0, not {epoch.epoch!r}", reason="value")


def _header_text(name: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise WireFormatError(
            f"header {name} is not valid Unicode: {text!r}", reason="value"
        ) from None


def _headers(epoch: EpochId, kind: RowKind, fmt: LogFormat = LogFormat.JSON) -> Headers:
    _check_epoch(epoch)
    return [
        (HEADER_WRITER, _header_text(HEADER_WRITER, epoch.writer)),
        (HEADER_EPOCH, str(epoch.epoch).encode("ascii")),
        (HEADER_ATTEMPT, _header_text(HEADER_ATTEMPT, epoch.attempt)),
        (HEADER_KIND, kind.value.encode("ascii")),
        (HEADER_FORMAT, LogFormat(fmt).header.encode("ascii")),
    ]


def envelope(value: bytes, kind: RowKind, fmt: LogFormat) -> bytes:
    """A change's value in format ``fmt`` from its row (``encode_row``'s bytes): the row itself
    for ``json``; for ``debezium-json`` ``{"before":null,"after":ROW,"op":"c"}`` for ``+I``/``+U``
    and ``{"before":ROW,"after":null,"op":"d"}`` for ``-U``/``-D`` (Flink's debezium-json writer:
    an update is a delete of the old image and an insert of the new)."""
    if fmt is LogFormat.JSON:
        return value
    before, after = _ENVELOPES[kind]
    return before + value + after


def tombstones(fmt: LogFormat, upsert: bool) -> bool:
    """Whether a ``-D`` is a tombstone (its key, a null value): ``debezium-json`` in ``upsert``
    changelog mode, as Paimon's Kafka log wrote it. Compaction then drops deleted keys; a plain
    debezium-json consumer skips such a record (it does not see the delete)."""
    return upsert and LogFormat(fmt) is LogFormat.DEBEZIUM_JSON


def change_value(row: bytes, kind: RowKind, fmt: LogFormat, *, upsert: bool) -> bytes | None:
    """A change's value as the log carries it: ``envelope(row, kind, fmt)``, or None for a ``-D``
    that is a tombstone (``tombstones``)."""
    if kind is RowKind.DELETE and tombstones(fmt, upsert):
        return None
    return envelope(row, kind, LogFormat(fmt))


def encode_change(
    record: ChangeRecord,
    schema: RowSchema,
    fmt: LogFormat = LogFormat.JSON,
    *,
    upsert: bool = False,
) -> tuple[bytes | None, bytes | None, Headers]:
    """A change record as (key, value, headers) for a Kafka producer, its value in ``fmt``
    (``upsert``: the table's changelog mode is ``upsert``, see ``tombstones``).

    The producer must partition by Kafka's default partitioner (``partition_for``; with
    confluent-kafka, ``partitioner=murmur2_random``).
    """
    try:
        kind = RowKind(record.kind)
    except ValueError:
        raise WireFormatError(f"unknown row kind {record.kind!r}", reason="value") from None
    if kind not in CHANGE_KINDS:
        raise WireFormatError("a COMMIT is a marker: encode it with encode_marker", reason="value")
    headers = _headers(record.epoch, kind, fmt)
    key = encode_key(record.key, schema)
    value = encode_row(record.row, schema, partial=kind is RowKind.DELETE)
    if record.key is not None:
        for name in schema.primary_key:
            if _encode_column(schema, name, record.row[name]) != _encode_column(
                schema, name, record.key[name]
            ):
                raise WireFormatError(
                    f"the key's {name!r} ({record.key[name]!r}) differs from the row's "
                    f"({record.row[name]!r})",
                    reason="value",
                )
    return key, change_value(value, kind, LogFormat(fmt), upsert=upsert), headers


def encode_marker(
    marker: CommitMarker, fmt: LogFormat = LogFormat.JSON
) -> tuple[None, bytes | None, Headers]:
    """A commit marker as (key, value, headers): key null, value ``{"delta_version":V}``
    (``{"delta_version":null}`` with log-only emit). In ``debezium-json`` the value is null (a
    plain debezium-json consumer skips the record) and V (or ``null``) is the header
    ``logstore.delta-version``. The producer sends one to every partition, naming the partition
    explicitly."""
    version = marker.delta_version
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 0
    ):
        raise WireFormatError(
            f"delta_version must be an integer >= 0 or None, not {version!r}", reason="value"
        )
    text = b"null" if version is None else str(version).encode("ascii")
    headers = _headers(marker.epoch, RowKind.COMMIT, fmt)
    if fmt is LogFormat.DEBEZIUM_JSON:
        return None, None, [*headers, (HEADER_DELTA_VERSION, text)]
    return None, b'{"delta_version":' + text + b"}", headers


class EpochEncoder:
    """Change records of one attempt, from row tuples in table order: the hot path of ingest.

    Gives the bytes ``encode_change`` gives for the same record (its unit test says so), with the
    per-column encoders and the five headers of each kind built once instead of per record.
    A ``-D`` carries every column given (nulls included), which is at least the key.
    """

    def __init__(self, schema: RowSchema, epoch: EpochId, fmt: LogFormat = LogFormat.JSON) -> None:
        _check_epoch(epoch)
        self.schema = schema
        self._encoders = [value_encoder(schema.type_of(name)) for name in schema.names]
        self._prefixes = [json_string(name) + ":" for name in schema.names]
        index = {name: i for i, name in enumerate(schema.names)}
        self._key_index = [index[name] for name in schema.primary_key]
        self._headers = {kind: _headers(epoch, kind, fmt) for kind in CHANGE_KINDS}
        self.fmt = LogFormat(fmt)  # value() gives the row: ``envelope`` wraps it in this format

    def headers(self, kind: RowKind) -> Headers:
        return self._headers[kind]

    def key(self, values: Sequence[Any]) -> bytes | None:
        """The key of a row: None for a table without a primary key; a null key column is an
        error (such a record cannot be partitioned by key)."""
        if not self._key_index:
            return None
        parts = []
        for i in self._key_index:
            if values[i] is None:
                raise WireFormatError(
                    f"primary-key column {self.schema.names[i]!r} is null", reason="value"
                )
            parts.append(self._column(i, values[i]))
        return ("{" + ",".join(parts) + "}").encode("utf-8")

    def value(self, values: Sequence[Any]) -> bytes:
        try:
            body = ",".join(
                [p + e(v) for p, e, v in zip(self._prefixes, self._encoders, values, strict=True)]
            )
        except _Problem:
            for i, v in enumerate(values):  # name the column at fault (rare: not the hot path)
                self._column(i, v)
            raise
        return ("{" + body + "}").encode("utf-8")

    def _column(self, i: int, value: Any) -> str:
        try:
            return self._prefixes[i] + self._encoders[i](value)
        except _Problem as problem:
            raise problem.error(f"column {self.schema.names[i]!r}") from None


# -- decoding ------------------------------------------------------------------------------------


# As confluent-kafka's Message.headers() types them (its values are bytes in practice).
RecordHeaders = Sequence[tuple[str, str | bytes | None]]


def _read_headers(headers: RecordHeaders | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, raw in headers or ():
        if name not in HEADERS and name != HEADER_DELTA_VERSION:
            continue  # other tools' headers (tracing ...) are not ours to judge
        if name in found:
            raise WireFormatError(f"header {name} appears twice", reason="malformed")
        if raw is None:
            raise WireFormatError(f"header {name} has no value", reason="malformed")
        try:
            found[name] = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise WireFormatError(
                f"header {name} is not UTF-8: {raw!r}", reason="malformed"
            ) from None
    if HEADER_FORMAT not in found:
        if found:
            raise WireFormatError(
                f"a logstore record without a {HEADER_FORMAT} header (has {', '.join(found)})",
                reason="malformed",
            )
        raise WireFormatError(
            f"not a logstore record: it has no {HEADER_FORMAT} header (a record of an adopted "
            "topic written before adoption, or another producer's)",
            reason="foreign",
        )
    if found[HEADER_FORMAT] not in _FORMAT_OF_HEADER:
        raise WireFormatError(
            f"the record is in logstore wire format {found[HEADER_FORMAT]!r}; this logstore reads "
            f"format {FORMAT_VERSION} ({' or '.join(repr(h) for h in _FORMAT_OF_HEADER)})",
            reason="version",
            hint="upgrade logstore to read records of a newer format",
        )
    for name in HEADERS:
        if name not in found:
            raise WireFormatError(f"a format-1 record without a {name} header", reason="malformed")
    return found


def _read_epoch(found: Mapping[str, str]) -> EpochId:
    epoch_text = found[HEADER_EPOCH]
    if not _DECIMAL_TEXT.fullmatch(epoch_text):
        raise WireFormatError(
            f"header {HEADER_EPOCH} must be a decimal integer >= 0, not {epoch_text!r}",
            reason="malformed",
        )
    for name in (HEADER_WRITER, HEADER_ATTEMPT):
        if not found[name]:
            raise WireFormatError(f"header {name} is empty", reason="malformed")
    return EpochId(found[HEADER_WRITER], int(epoch_text), found[HEADER_ATTEMPT])


def _read_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        parsed = parse_json(data)
    except WireFormatError as exc:
        raise WireFormatError(f"the record's {what} is {exc.message}", reason="malformed") from None
    if not isinstance(parsed, dict):
        raise WireFormatError(f"the record's {what} is not a JSON object", reason="malformed")
    return parsed


def _decode_marker(
    key: bytes | None, value: bytes | None, epoch: EpochId, found: Mapping[str, str]
) -> CommitMarker:
    if key is not None:
        raise WireFormatError("a commit marker has a key (markers have none)", reason="malformed")
    if found[HEADER_FORMAT] == DEBEZIUM_FORMAT:
        return _decode_debezium_marker(value, epoch, found.get(HEADER_DELTA_VERSION))
    if value is None:
        raise WireFormatError("a commit marker without a value", reason="malformed")
    body = _read_object(value, "value")
    if set(body) != {"delta_version"}:
        raise WireFormatError(
            f'a commit marker\'s value is {{"delta_version": V}}, not {value!r}', reason="malformed"
        )
    version = body["delta_version"]
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 0
    ):
        raise WireFormatError(
            f"a commit marker's delta_version must be an integer >= 0 or null, not {version!r}",
            reason="malformed",
        )
    return CommitMarker(epoch, version)


def _decode_debezium_marker(value: bytes | None, epoch: EpochId, text: str | None) -> CommitMarker:
    if value is not None:
        raise WireFormatError(
            f"a debezium-json commit marker has a value ({value!r}); its value is null",
            reason="malformed",
        )
    if text is None:
        raise WireFormatError(
            f"a debezium-json commit marker without a {HEADER_DELTA_VERSION} header",
            reason="malformed",
        )
    if text != "null" and not _DECIMAL_TEXT.fullmatch(text):
        raise WireFormatError(
            f"header {HEADER_DELTA_VERSION} must be a decimal integer >= 0 or null, not {text!r}",
            reason="malformed",
        )
    return CommitMarker(epoch, None if text == "null" else int(text))


def _debezium_image(value: bytes, kind: RowKind) -> dict[str, Any]:
    """The row image of a debezium-json change: ``after`` of a ``+I``/``+U`` (op ``c``),
    ``before`` of a ``-U``/``-D`` (op ``d``), the other image null."""
    body = _read_object(value, "value")
    if set(body) != {"before", "after", "op"}:
        raise WireFormatError(
            'a debezium-json value is {"before":…,"after":…,"op":…}, not one with '
            f"{', '.join(repr(n) for n in body) or 'no members'}",
            reason="malformed",
        )
    image, other, op = (
        ("after", "before", "c") if _ENVELOPES[kind] is _AFTER_IMAGE else ("before", "after", "d")
    )
    if body["op"] != op or body[other] is not None:
        raise WireFormatError(
            f'a debezium-json {kind.value} has "op":"{op}" and "{other}":null, not '
            f'"op":{body["op"]!r} and "{other}":{"null" if body[other] is None else "a row"}',
            reason="malformed",
        )
    if not isinstance(body[image], dict):
        raise WireFormatError(
            f'the "{image}" of a debezium-json {kind.value} is not a JSON object',
            reason="malformed",
        )
    row: dict[str, Any] = body[image]
    return row


def _tombstone_image(
    kind: RowKind, found: Mapping[str, str], key: dict[str, Any] | None
) -> dict[str, Any]:
    """The row image of a record without a value: a ``debezium-json`` ``-D`` in ``upsert`` mode
    is a tombstone, its image the key's columns (as a ``-D`` with only its key)."""
    if kind is not RowKind.DELETE or found[HEADER_FORMAT] != DEBEZIUM_FORMAT:
        raise WireFormatError(
            f"a {kind.value} record without a value (only a debezium-json -D may be a tombstone)",
            reason="malformed",
        )
    if key is None:
        raise WireFormatError(
            "a tombstone (a -D without a value) without a key", reason="malformed"
        )
    return dict(key)


def _decode_columns(
    schema: RowSchema,
    values: dict[str, Any],
    what: str,
    required: Sequence[str],
    order: Sequence[str],
) -> dict[str, Any]:
    unknown = [name for name in values if name not in schema.types]
    if unknown:
        raise WireFormatError(
            f"the record's {what} has an unknown column {unknown[0]!r}", reason="column"
        )
    missing = [name for name in required if name not in values and name not in schema.optional]
    if missing:
        raise WireFormatError(
            f"the record's {what} has no column {missing[0]!r}", reason="malformed"
        )
    result: dict[str, Any] = {}
    for name in order:
        if name not in values:
            if name in required:  # an optional column the record was written without
                result[name] = None
            continue
        try:
            result[name] = value_decoder(schema.type_of(name))(values[name])
        except _Problem as problem:
            raise problem.error(f"the record's {what}: column {name!r}") from None
    return result


def decode(
    key: bytes | None,
    value: bytes | None,
    headers: RecordHeaders | None,
    schema: RowSchema | None = None,
) -> ChangeRecord | CommitMarker:
    """One Kafka record (as a consumer returns it) as a change or a commit marker.

    The ``logstore.format`` header says how the value carries the row: ``1`` (the row) or
    ``debezium-json`` (the row in the envelope, see ``envelope``; a marker's value is null and its
    Delta version a header).

    Raises ``WireFormatError`` for a record that is not format 1: ``reason`` is ``foreign`` (no
    logstore headers: skip it), ``version`` (a newer format) or ``malformed``. With a ``schema``
    the key and row hold typed values (``decode_value``) and are checked against the table;
    without one they are the parsed JSON (non-integral numbers as ``Decimal``).
    """
    found = _read_headers(headers)
    epoch = _read_epoch(found)
    try:
        kind = RowKind(found[HEADER_KIND])
    except ValueError:
        raise WireFormatError(
            f"unknown row kind {found[HEADER_KIND]!r} in header {HEADER_KIND}", reason="malformed"
        ) from None
    if kind is RowKind.COMMIT:
        return _decode_marker(key, value, epoch, found)
    key_object = None if key is None else _read_object(key, "key")
    if value is None:
        row = _tombstone_image(kind, found, key_object)
    elif found[HEADER_FORMAT] == DEBEZIUM_FORMAT:
        row = _debezium_image(value, kind)
    else:
        row = _read_object(value, "value")
    if schema is not None:
        if schema.primary_key and key_object is None:
            raise WireFormatError(
                "a record without a key in a table with a primary key", reason="malformed"
            )
        if not schema.primary_key and key_object is not None:
            raise WireFormatError(
                "a record with a key in a table without a primary key", reason="malformed"
            )
        if key_object is not None:
            if list(key_object) != list(schema.primary_key):
                raise WireFormatError(
                    f"the record's key has columns {list(key_object)}, not the primary key "
                    f"{list(schema.primary_key)}",
                    reason="malformed",
                )
            key_object = _decode_columns(
                schema, key_object, "key", schema.primary_key, schema.primary_key
            )
        partial = kind is RowKind.DELETE and bool(schema.primary_key)
        required = schema.primary_key if partial else schema.names
        row = _decode_columns(schema, row, "value", required, schema.names)
    return ChangeRecord(kind, key_object, row, epoch)


# -- Delta commit metadata -------------------------------------------------------------------------


# Where an epoch's records end in one partition of the log: a Kafka offset (an int, the end offset
# after them) or a Pulsar message id (``"<ledger>:<entry>:<batch>"``, the last message; design §7.1).
# Ordered within a partition, never subtracted across systems: Pulsar ids are not dense.
LogPosition = int | str
_PULSAR_ID = re.compile(r"-?[0-9]{1,19}:-?[0-9]{1,19}:-?[0-9]{1,19}")


def _position_problem(position: object) -> str | None:
    """Why ``position`` is not a log position (None: it is one)."""
    if isinstance(position, bool):
        return "a boolean"
    if isinstance(position, int):
        return None if position >= 0 else "negative"
    if isinstance(position, str):
        return None if _PULSAR_ID.fullmatch(position) else "not '<ledger>:<entry>:<batch>'"
    return f"a {type(position).__name__}"


def commit_metadata(epoch: EpochId, offsets: Mapping[int, LogPosition]) -> str:
    """The Delta commit's ``userMetadata``: the epoch and each partition's end position after the
    epoch's records (compact JSON, partitions in ascending order): a Kafka offset as a JSON number,
    a Pulsar message id as a JSON string."""
    _check_epoch(epoch)
    for partition, offset in offsets.items():
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise WireFormatError(
                f"partition must be an integer >= 0, not {partition!r}", reason="value"
            )
        problem = _position_problem(offset)
        if problem is not None:
            raise WireFormatError(
                f"offset must be an integer >= 0 (Kafka) or a message id "
                f"'<ledger>:<entry>:<batch>' (Pulsar), not {offset!r} ({problem})",
                reason="value",
            )
    if len({type(o) for o in offsets.values()}) > 1:
        raise WireFormatError(
            f"offsets mix Kafka offsets and Pulsar message ids: {dict(offsets)!r}", reason="value"
        )
    try:
        writer, attempt = json_string(epoch.writer), json_string(epoch.attempt)
    except _Problem as problem:
        raise problem.error("the epoch") from None
    parts = ",".join(
        f'"{p}":"{offsets[p]}"' if isinstance(offsets[p], str) else f'"{p}":{offsets[p]}'
        for p in sorted(offsets)
    )
    return (
        f'{{"logstore":{{"writer":{writer},"epoch":{epoch.epoch},"attempt":{attempt},'
        f'"offsets":{{{parts}}}}}}}'
    )


def parse_commit_metadata(text: str | None) -> tuple[EpochId, dict[int, LogPosition]] | None:
    """The epoch and end positions (``LogPosition``: a Kafka offset, or a Pulsar message id) of a
    Delta commit's ``userMetadata``; None when the commit is not
    an ingest epoch's (no metadata, not JSON, no ``logstore`` object). Fields it does not know are
    ignored (the metadata has no version of its own; new fields may only be added)."""
    if not text:
        return None
    try:
        parsed = parse_json(text)
    except WireFormatError:
        return None
    if not isinstance(parsed, dict) or "logstore" not in parsed:
        return None
    body = parsed["logstore"]

    def bad(what: str) -> WireFormatError:
        return WireFormatError(f"logstore commit metadata {what}: {text!r}", reason="malformed")

    if not isinstance(body, dict):
        raise bad("is not an object")
    if "writer" not in body and (FENCE_KEY in body or UNFENCE_KEY in body):
        return None  # a takeover's fence, or a writer's un-fence: no epoch
    for name, kind in (("writer", str), ("epoch", int), ("attempt", str), ("offsets", dict)):
        if name not in body:
            raise bad(f"has no {name!r}")
        if not isinstance(body[name], kind) or isinstance(body[name], bool):
            raise bad(f"has a {name!r} that is not a {kind.__name__}")
    epoch = EpochId(body["writer"], body["epoch"], body["attempt"])
    if not epoch.writer or not epoch.attempt or epoch.epoch < 0:
        raise bad("has an empty writer or attempt, or a negative epoch")
    offsets: dict[int, LogPosition] = {}
    for partition, offset in body["offsets"].items():
        if not _DECIMAL_TEXT.fullmatch(partition):
            raise bad(f"has a partition {partition!r} that is not a decimal integer >= 0")
        if _position_problem(offset) is not None:
            raise bad(
                f"has an offset {offset!r} that is neither an integer >= 0 (Kafka) nor a "
                "message id '<ledger>:<entry>:<batch>' (Pulsar)"
            )
        offsets[int(partition)] = offset
    if len({type(o) for o in offsets.values()}) > 1:
        raise bad("mixes Kafka offsets and Pulsar message ids")
    return epoch, offsets


# -- the fence of a takeover ----------------------------------------------------------------------

# A writer's Delta transaction version (``txnVersion`` for ``txnAppId = writer``) at or above this is
# a fence, not an epoch: the job that took the table over set it (docs/consistency.md §6), and Delta
# then refuses or skips every epoch commit of the fenced writer. Epochs are Spark batch ids, far
# below it; Delta keeps the version as a signed 64-bit integer, so it fits.
FENCED_BASE = 2**62
FENCE_KEY = "fence"
UNFENCE_KEY = "unfence"  # a fenced writer's own commit that takes its fence down on restart


@dataclass(frozen=True)
class TxnState:
    """What a writer's Delta transaction version says: its newest committed epoch (None: none),
    and whether a takeover fenced it after that epoch."""

    last_epoch: int | None
    fenced: bool = False


def fenced_txn_version(last_epoch: int | None) -> int:
    """The transaction version that fences a writer whose newest committed epoch is
    ``last_epoch`` (None: none). One above ``FENCED_BASE + last_epoch``, so that a writer that
    committed nothing is told from one that committed epoch 0."""
    if last_epoch is not None and (isinstance(last_epoch, bool) or last_epoch < 0):
        raise WireFormatError(f"epoch must be an integer >= 0, not {last_epoch!r}", reason="value")
    return FENCED_BASE + (0 if last_epoch is None else last_epoch + 1)


def decode_txn_version(version: int | None) -> TxnState:
    """The ``TxnState`` a stored transaction version means (None or negative: nothing committed;
    at or above ``FENCED_BASE``: fenced, see ``fenced_txn_version``)."""
    if version is None or version < 0:
        return TxnState(None)
    if version >= FENCED_BASE:
        n = version - FENCED_BASE
        return TxnState(None if n == 0 else n - 1, fenced=True)
    return TxnState(version)


@dataclass(frozen=True)
class Fence:
    """A fence commit's metadata: lease ``token`` (the taker's fencing token), taken ``by`` the
    writer of job ``job``, fencing writer ``fenced``."""

    token: int
    by: str
    fenced: str
    job: str | None = None


def fence_metadata(fence: Fence) -> str:
    """The ``userMetadata`` of a fence commit: ``{"logstore":{"fence":{...}}}``. It has no
    ``writer``, so readers of epoch metadata (``parse_commit_metadata``, also older versions of
    it, which find no ``writer`` and treat the commit as someone else's) never take it for an
    epoch."""
    if isinstance(fence.token, bool) or not isinstance(fence.token, int) or fence.token < 0:
        raise WireFormatError(
            f"fencing token must be an integer >= 0, not {fence.token!r}", reason="value"
        )
    body: dict[str, Any] = {"token": fence.token, "by": fence.by, "fenced": fence.fenced}
    if fence.job is not None:
        body["job"] = fence.job
    for name in ("by", "fenced", "job"):
        value = body.get(name)
        if name in body and (not isinstance(value, str) or not value):
            raise WireFormatError(
                f"{name} must be a non-empty string, not {value!r}", reason="value"
            )
    try:
        parts = ",".join(
            f'"{k}":{v}' if isinstance(v, int) else f'"{k}":{json_string(v)}'
            for k, v in body.items()
        )
    except _Problem as problem:
        raise problem.error("the fence") from None
    return f'{{"logstore":{{"{FENCE_KEY}":{{{parts}}}}}}}'


def unfence_metadata(writer: str, last_epoch: int | None) -> str:
    """The ``userMetadata`` of the commit with which a fenced writer, holding the lease again,
    sets its transaction version back to its newest committed epoch."""
    try:
        name = json_string(writer)
    except _Problem as problem:
        raise problem.error("the writer id") from None
    after = "null" if last_epoch is None else str(int(last_epoch))
    return f'{{"logstore":{{"{UNFENCE_KEY}":{{"writer":{name},"after":{after}}}}}}}'


def _logstore_member(text: str | None, key: str) -> dict[str, Any] | None:
    """The object at ``logstore.<key>`` of a commit's ``userMetadata``; None when there is none."""
    if not text:
        return None
    try:
        parsed = parse_json(text)
    except WireFormatError:
        return None
    body = parsed.get("logstore") if isinstance(parsed, dict) else None
    found = body.get(key) if isinstance(body, dict) else None
    return found if isinstance(found, dict) else None


def parse_unfence_metadata(text: str | None) -> tuple[str, int | None] | None:
    """The writer and its newest epoch (None: none) of an un-fence commit's ``userMetadata``;
    None when it is not one's."""
    found = _logstore_member(text, UNFENCE_KEY)
    if found is None:
        return None
    writer, after = found.get("writer"), found.get("after")
    if not isinstance(writer, str) or not writer:
        return None
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        return None
    return writer, after


def parse_fence_metadata(text: str | None) -> Fence | None:
    """The fence of a commit's ``userMetadata``; None when it is not a fence commit's."""
    fence = _logstore_member(text, FENCE_KEY)
    if fence is None:
        return None
    token, by, fenced, job = (fence.get(k) for k in ("token", "by", "fenced", "job"))
    if isinstance(token, bool) or not isinstance(token, int) or token < 0:
        return None
    if not (isinstance(by, str) and by and isinstance(fenced, str) and fenced):
        return None
    return Fence(token, by, fenced, job if isinstance(job, str) and job else None)


# -- the reader's fast path ------------------------------------------------------------------------


class _Slow(Exception):
    """Leave the fast path: ``decode`` decides (and names what is wrong, if anything is)."""


def _fast_column(t: SqlType) -> Decoder:
    """A decoder equal to ``value_decoder(t)`` on the values it accepts; anything else is _Slow."""
    if isinstance(t, ScalarType) and t.name in _INT_RANGES:
        bits = _INT_RANGES[t.name]
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

        def integer(v: Any) -> Any:
            if v is None or (type(v) is int and low <= v <= high):
                return v
            raise _Slow

        return integer
    if isinstance(t, ScalarType) and t.name in ("string", "boolean"):
        kind = str if t.name == "string" else bool

        def plain(v: Any) -> Any:
            if v is None or type(v) is kind:
                return v
            raise _Slow

        return plain
    if isinstance(t, DecimalType):
        quantum = Decimal(1).scaleb(-t.scale)
        above = Decimal(10) ** (t.precision - t.scale)
        below = -above

        def decimal(v: Any) -> Any:
            if v is None:
                return v
            # Already what quantizing gives: the type's scale (same_quantum: false for NaN and
            # infinities), the digits that fit, not -0. (as_tuple() costs three times as much.)
            if (
                type(v) is Decimal
                and v.same_quantum(quantum)
                and below < v < above
                and (v or not v.is_signed())
            ):
                return v
            raise _Slow

        return decimal
    return value_decoder(t)


class RecordDecoder:
    """``decode(key, value, headers, schema)`` for many records of one table, several times
    faster: the headers of an epoch are parsed once (records of one attempt share them), and a key
    or value in the canonical form logstore writes is parsed by msgspec (compiled) and its column
    values checked by type. It returns what ``decode`` returns; a record off that form (a marker,
    a ``-D`` with only its key, nested types, other spacing or escapes, anything malformed) goes
    through ``decode`` itself.

    Canonical form: the parsed object, written again (compact, names in text order, decimals as
    numbers), gives the same bytes. That holds for what every logstore writer sends, and it rules
    out at once what the fast parser would take but ``decode`` refuses: a repeated name (the
    writing again has one member fewer), whitespace, a lone surrogate.
    """

    _CACHE = 4096  # distinct header sets remembered (an epoch's attempt has one per row kind)

    def __init__(self, schema: RowSchema) -> None:
        self.schema = schema
        types = [schema.type_of(n) for n in schema.names]
        self._fast = all(isinstance(t, ScalarType | DecimalType) for t in types)
        self._key = tuple(schema.primary_key)
        self._heads: dict[tuple[Any, ...], tuple[RowKind, EpochId, bool]] = {}
        if not self._fast:
            return
        import msgspec  # here, not at the top: commands that read no log never load it

        self._value = _Shape(schema, schema.names)
        self._key_shape = _Shape(schema, self._key) if self._key else None
        self._parse_error: type[Exception] = msgspec.DecodeError
        # A key of native columns is checked by writing the row's key columns and comparing the
        # bytes, not parsed: equal bytes parse to equal values (twice as fast).
        self._key_from_row = bool(self._key) and all(
            _native_type(schema.type_of(n)) is not None for n in self._key
        )
        self._write_key = msgspec.json.Encoder(decimal_format="number").encode
        self._single_key = self._key[0] if len(self._key) == 1 else None
        # The value's shape, taken apart for the hot path below.
        value = self._value
        self._parse, self._write, self._checks = value.parse, value.write, value.checks
        self._asdict = value.asdict if value.named else None
        self._last: tuple[Any, Any] = (None, None)  # the headers last seen, and what they say

    def __call__(
        self, key: bytes | None, value: bytes | None, headers: RecordHeaders | None
    ) -> ChangeRecord | CommitMarker:
        # One function for the common shape: each Python call here costs per record.
        if self._fast and value is not None and headers is not None:
            try:
                last, head = self._last
                if headers != last:  # records of one attempt come in runs: compare, not hash
                    head = self._heads.get(tuple(headers))
                    if head is None:
                        head = self._head(headers)
                    self._last = (list(headers), head)  # a copy: a caller may reuse its list
                kind, epoch, wrapped = head
                if kind is RowKind.COMMIT:
                    raise _Slow
                if wrapped:  # debezium-json: the row between the envelope's exact bytes
                    before, after = _ENVELOPES[kind]
                    if not (value.startswith(before) and value.endswith(after)):
                        raise _Slow
                    row_bytes = value[len(before) : len(value) - len(after)]
                else:
                    row_bytes = value
                if self._key_shape is None:
                    if key is not None:
                        raise _Slow
                    return _change(ChangeRecord, (kind, None, self._value(row_bytes), epoch))
                if key is None:
                    raise _Slow
                if kind is RowKind.DELETE and row_bytes == key:  # a -D may carry its key only
                    key_row = self._key_shape(key)
                    return _change(ChangeRecord, (kind, key_row, dict(key_row), epoch))
                if self._asdict is None:
                    row = self._value(row_bytes)
                else:  # _Shape.__call__, inline
                    parsed = self._parse(row_bytes)
                    if self._write(parsed) != row_bytes:
                        raise _Slow
                    row = self._asdict(parsed)
                    for name, check in self._checks:
                        row[name] = check(row[name])
                if not self._key_from_row:
                    key_row = self._key_shape(key)
                else:
                    one = self._single_key
                    key_row = {one: row[one]} if one is not None else {n: row[n] for n in self._key}
                    if self._write_key(key_row) != key:
                        raise _Slow
                return _change(ChangeRecord, (kind, key_row, row, epoch))
            except (_Slow, self._parse_error, ValueError, TypeError, KeyError, UnicodeDecodeError):
                pass  # decode() returns the same record, or raises what is wrong with it
        return decode(key, value, headers, self.schema)

    def _head(self, headers: RecordHeaders) -> tuple[RowKind, EpochId, bool]:
        fields = _read_headers(headers)
        wrapped = fields[HEADER_FORMAT] == DEBEZIUM_FORMAT
        head = (RowKind(fields[HEADER_KIND]), _read_epoch(fields), wrapped)
        if len(self._heads) >= self._CACHE:
            self._heads.clear()
        self._heads[tuple(headers)] = head
        return head


_change = tuple.__new__  # ChangeRecord(*fields) without the named tuple's own __new__ (2.5x)


class _Shape:
    """Parse a JSON object of the given columns, in that order, in canonical form (see
    ``RecordDecoder``), to ``{name: value}``; msgspec checks the integers' ranges, the strings and
    booleans, Python the rest. Anything else raises (msgspec's errors, or _Slow)."""

    def __init__(self, schema: RowSchema, names: Sequence[str]) -> None:
        import msgspec

        self.names = tuple(names)
        # A column's name as the struct's attribute when it can be one (asdict() then gives the
        # row in one call), else c0, c1, ... renamed to the column's name in JSON.
        self.named = all(n.isidentifier() and not iskeyword(n) and n[0] != "_" for n in names)
        attrs = self.names if self.named else tuple(f"c{i}" for i in range(len(names)))
        fields: list[tuple[str, Any]] = []
        self.checks: list[tuple[str, Decoder]] = []  # (name, check) done in Python
        for attr, name in zip(attrs, self.names, strict=True):
            t = schema.type_of(name)
            native = _native_type(t)
            fields.append((attr, Any if native is None else native | None))
            if native is None or native is Decimal:
                self.checks.append((name, _fast_column(t)))
        row = msgspec.defstruct(
            "Row", fields, rename=None if self.named else dict(zip(attrs, self.names, strict=True)),
            forbid_unknown_fields=True, gc=False,
        )  # fmt: skip
        # Non-integral numbers in untyped columns as Decimal, exact (what decode's json.loads gives).
        self.parse = msgspec.json.Decoder(row, float_hook=Decimal).decode
        self.write = msgspec.json.Encoder(decimal_format="number").encode
        self.asdict = msgspec.structs.asdict
        self._astuple = msgspec.structs.astuple

    def __call__(self, data: bytes) -> dict[str, Any]:
        parsed = self.parse(data)
        if self.write(parsed) != data:
            raise _Slow  # not canonical: spacing, escapes, a repeated name, a string for a number
        if self.named:
            row = self.asdict(parsed)
        else:
            row = dict(zip(self.names, self._astuple(parsed), strict=True))
        for name, check in self.checks:
            row[name] = check(row[name])
        return row


def _native_type(t: SqlType) -> Any:
    """The msgspec type that checks a column's JSON value exactly as ``value_decoder`` does (None:
    checked in Python). Decimals parse to Decimal, their scale and precision checked in Python."""
    if isinstance(t, DecimalType):
        return Decimal
    if not isinstance(t, ScalarType):
        return None
    if t.name in _INT_RANGES:
        import msgspec

        bits = _INT_RANGES[t.name]
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return Annotated[int, msgspec.Meta(ge=low, le=high)]
    return {"string": str, "boolean": bool}.get(t.name)
