"""The pure helpers of ``jobs.sources``: which parquet types fit a table column, the type of an
input-only sequence column, and what the up-front checks read from the head of a file."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from logstore_cli.jobs.sources import (
    CsvDialect,
    can_hold,
    csv_rows,
    glob_characters,
    json_sample,
    option,
    sample_value_type,
)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (IntegerType(), IntegerType()),
        (ByteType(), ShortType()),
        (ShortType(), LongType()),
        (IntegerType(), LongType()),
        (IntegerType(), DecimalType(10, 0)),
        (LongType(), DecimalType(21, 2)),
        (IntegerType(), DoubleType()),
        (ShortType(), FloatType()),
        (FloatType(), DoubleType()),
        (DecimalType(4, 2), DecimalType(5, 2)),
        (DecimalType(4, 2), DecimalType(6, 4)),
        (DateType(), TimestampType()),
        (DateType(), TimestampNTZType()),
        (LongType(), StringType()),
        (TimestampType(), StringType()),
        (BooleanType(), StringType()),
        (ArrayType(IntegerType()), ArrayType(IntegerType())),
    ],
)
def test_lossless_conversions_fit(source: DataType, target: DataType) -> None:
    assert can_hold(source, target)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (LongType(), IntegerType()),  # out of range values
        (IntegerType(), ShortType()),
        (IntegerType(), DecimalType(9, 0)),  # 2147483647 has ten digits
        (LongType(), DoubleType()),  # 2**53 + 1 is not a double
        (IntegerType(), FloatType()),
        (DoubleType(), FloatType()),
        (DoubleType(), DecimalType(38, 10)),
        (DecimalType(6, 2), DecimalType(5, 2)),  # one digit fewer before the point
        (DecimalType(4, 3), DecimalType(5, 2)),  # one digit fewer after it
        (TimestampType(), DateType()),
        (TimestampType(), TimestampNTZType()),  # a different meaning, not a widening
        (StringType(), IntegerType()),
        (ArrayType(IntegerType()), ArrayType(LongType())),  # nested types must match
        (ArrayType(IntegerType()), StringType()),
        (
            StructType([StructField("a", IntegerType())]),
            StructType([StructField("b", IntegerType())]),
        ),
    ],
)
def test_lossy_conversions_do_not_fit(source: DataType, target: DataType) -> None:
    assert not can_hold(source, target)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], "bigint"),
        ([None, None], "bigint"),
        ([1, 2, None], "bigint"),
        (["17", " -3 "], "bigint"),  # CSV text
        ([1, 2.5], "double"),
        (["1", "2.5e3"], "double"),
        ([1, "2024-01-01T00:00:00Z"], "string"),
        ([True], "string"),  # a boolean is not a number
        (["12345678901234567890"], "double"),  # more digits than a bigint holds
    ],
)
def test_sequence_type_from_sampled_values(values: list[object], expected: str) -> None:
    assert sample_value_type(values) == expected


def test_json_sample_keeps_objects_and_drops_a_cut_last_line() -> None:
    lines = [
        json.dumps({"id": 1, "op": "+I"}),
        "",
        "not json",
        "[1, 2]",
        json.dumps({"id": 2, "ts": "x"}),
        '{"id": 3, "na',  # cut: the head ended here
    ]
    data = "\n".join(lines).encode()
    assert json_sample(data, complete=False) == [{"id": 1, "op": "+I"}, {"id": 2, "ts": "x"}]
    whole = (json.dumps({"id": 4}) + "\n" + json.dumps({"id": 5})).encode()
    assert json_sample(whole, complete=True) == [{"id": 4}, {"id": 5}]
    assert json_sample(whole, complete=False) == [{"id": 4}]


def test_csv_rows_split_like_spark() -> None:
    dialect = CsvDialect()
    data = '\ufeffid,"qty, total","say ""hi"""\n1,2,x\n3,4,'.encode()
    assert csv_rows(data, complete=True, dialect=dialect) == [
        ["id", "qty, total", 'say "hi"'],
        ["1", "2", "x"],
        ["3", "4", ""],
    ]
    assert csv_rows(data, complete=False, dialect=dialect)[-1] == ["1", "2", "x"]
    # A header longer than the head is still the header: the only line is never dropped.
    assert csv_rows(b"id,qty", complete=False, dialect=dialect) == [["id", "qty"]]
    semicolons = CsvDialect.of({"SEP": ";", "encoding": "latin-1"})
    assert csv_rows("nom;qté\n".encode("latin-1"), complete=True, dialect=semicolons) == [
        ["nom", "qté"]
    ]
    two_chars = CsvDialect.of({"delimiter": "||"})
    assert csv_rows(b"a||b\n", complete=True, dialect=two_chars) == [["a", "b"]]


def test_reader_options_are_found_whatever_their_case() -> None:
    options = {"Header": "false", "maxFilesPerTrigger": "1"}
    assert option(options, "header") == "false"
    assert option(options, "MAXFILESPERTRIGGER") == "1"
    assert option(options, "sep") is None


def test_glob_characters_are_named_once_in_order() -> None:
    assert glob_characters("/data/in") == ""
    assert glob_characters("/data/in [1] (2) {a,b}*?[") == "[]{}*?"
    assert glob_characters("C:\\data") == "\\"


def test_json_sample_skips_nesting_too_deep_for_python() -> None:
    # json.loads raised RecursionError: the job ended in `internal error` (issue 18 item 6).
    deep = "[" * 30_000 + "]" * 30_000
    data = "\n".join(['{"id": 1}', deep, '{"id": 2, "v": ' + deep + "}", '{"id": 3}']).encode()
    assert json_sample(data, complete=True) == [{"id": 1}, {"id": 3}]
