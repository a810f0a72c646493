"""A column added to the table (``alter-table --add-column``) after records were written: a value
written before lacks it and reads as null; a record written after has a column an older reader's
schema lacks, refused with reason ``column`` (the reader reads the table's schema again)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pytest

from logstore_cli.logformat import (
    ChangeRecord,
    EpochId,
    RowKind,
    RowSchema,
    WireFormatError,
    decode,
    encode_change,
)
from logstore_cli.logformat.wire import RecordDecoder
from logstore_cli.model import ColumnSpec


@dataclass(frozen=True)
class TableSpec:  # what RowSchema.of reads of model.TableSpec
    database: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] = ()


pytestmark = pytest.mark.unit

EPOCH = EpochId("w", 1, "a")
COLUMNS = (ColumnSpec("id", "bigint", nullable=False), ColumnSpec("name", "string"))
BEFORE = TableSpec("db", "t", COLUMNS, primary_key=("id",))
AFTER = TableSpec("db", "t", (*COLUMNS, ColumnSpec("price", "decimal(10,2)")), primary_key=("id",))


def _written(
    spec: TableSpec, row: dict[str, object]
) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    schema = RowSchema.of(spec)
    return encode_change(ChangeRecord(RowKind.INSERT, {"id": row["id"]}, row, EPOCH), schema)


def test_the_nullable_columns_of_a_table_are_optional_and_its_key_is_not() -> None:
    schema = RowSchema.of(AFTER)
    assert schema.optional == frozenset({"name", "price"})


@pytest.mark.parametrize("decoder", ["decode", "RecordDecoder"])
def test_a_record_written_before_the_column_was_added_reads_it_as_null(decoder: str) -> None:
    key, value, headers = _written(BEFORE, {"id": 1, "name": "a"})
    schema = RowSchema.of(AFTER)
    record = (
        decode(key, value, headers, schema)
        if decoder == "decode"
        else RecordDecoder(schema)(key, value, headers)
    )
    assert isinstance(record, ChangeRecord)
    assert record.row == {"id": 1, "name": "a", "price": None}
    assert list(record.row) == ["id", "name", "price"]  # table order


@pytest.mark.parametrize("decoder", ["decode", "RecordDecoder"])
def test_a_record_with_a_column_the_readers_schema_lacks_is_refused_as_column(decoder: str) -> None:
    key, value, headers = _written(AFTER, {"id": 1, "name": "a", "price": Decimal("2.50")})
    schema = RowSchema.of(BEFORE)
    with pytest.raises(WireFormatError, match="unknown column 'price'") as caught:
        if decoder == "decode":
            decode(key, value, headers, schema)
        else:
            RecordDecoder(schema)(key, value, headers)
    assert caught.value.reason == "column"


def test_a_key_column_is_never_optional() -> None:
    schema = RowSchema.of(AFTER)
    with pytest.raises(WireFormatError, match="has no column 'id'") as caught:
        decode(
            b'{"id":1}',
            b'{"name":"a"}',
            _written(AFTER, {"id": 1, "name": "a", "price": None})[2],
            schema,
        )
    assert caught.value.reason == "malformed"


def test_a_schema_without_optional_columns_still_needs_every_column() -> None:
    schema = RowSchema((("id", "bigint"), ("name", "string")), ("id",))
    key, value, headers = _written(
        TableSpec("db", "t", (ColumnSpec("id", "bigint", nullable=False),), primary_key=("id",)),
        {"id": 1},
    )
    with pytest.raises(WireFormatError, match="has no column 'name'"):
        decode(key, value, headers, schema)
