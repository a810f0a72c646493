"""A JVM producer that builds the key with Spark's ``to_json(struct(<key columns>))`` gets our key
bytes, for the key types docs/design.md section 7 names: integers, boolean, string, date, decimal."""

from __future__ import annotations

import random
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from logstore_cli.logformat import RowSchema, encode_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = (
    ("t", "tinyint"),
    ("s", "smallint"),
    ("i", "int"),
    ("b", "bigint"),
    ("flag", "boolean"),
    ("name", "string"),
    ("day", "date"),
    ("amount", "decimal(12,2)"),
)
# Declared key order differs from the column order, as it may in a table.
KEY = ("name", "b", "day", "amount", "flag", "i", "s", "t")
TEXTS = [
    "", "plain", "Zoë", "東京", "😀", 'quote " and backslash \\', "slash /", "\x00\x01\x1f",
    "\b\t\n\f\r", "\x7f", "\u2028\u2029", "\ufeff", "\U0010ffff",
]  # fmt: skip


def _random_text(rng: random.Random) -> str:
    # Code points from every plane but the surrogates (Spark strings are valid UTF-8).
    points = [
        rng.choice([rng.randrange(0x80), rng.randrange(0xD800), rng.randrange(0xE000, 0x110000)])
        for _ in range(rng.randrange(12))
    ]
    return "".join(map(chr, points))


def _rows() -> list[dict[str, Any]]:
    rng = random.Random(20240229)
    rows = []
    for n, text in enumerate(TEXTS + [_random_text(rng) for _ in range(200)]):
        rows.append(
            {
                "t": rng.choice([-128, 0, 127, rng.randrange(-128, 128)]),
                "s": rng.randrange(-(2**15), 2**15),
                "i": rng.choice([-(2**31), 2**31 - 1, n]),
                "b": rng.choice([-(2**63), 2**63 - 1, 9007199254740993, n]),
                "flag": n % 2 == 0,
                "name": text,
                "day": rng.choice([date(1, 1, 1), date(9999, 12, 31), date(2024, 2, 29)]),
                # Magnitudes of 10^-6 and more (smaller ones Java writes with an exponent), and 0.
                "amount": rng.choice(
                    [
                        Decimal("0.00"),
                        Decimal("-0.01"),
                        Decimal("9999999999.99"),
                        Decimal(rng.randrange(-(10**12), 10**12)).scaleb(-2),
                    ]
                ),
            }
        )
    return rows


def test_spark_to_json_of_the_key_columns_is_our_key(spark: SparkSession) -> None:
    from pyspark.sql import functions as f
    from pyspark.sql.types import (
        BooleanType,
        ByteType,
        DateType,
        DecimalType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
    )

    spark_types = {
        "tinyint": ByteType(),
        "smallint": ShortType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "boolean": BooleanType(),
        "string": StringType(),
        "date": DateType(),
        "decimal(12,2)": DecimalType(12, 2),
    }
    schema = StructType([StructField(n, spark_types[t], False) for n, t in COLUMNS])
    rows = _rows()
    frame = spark.createDataFrame([tuple(r[n] for n, _ in COLUMNS) for r in rows], schema)
    collected = frame.select(f.to_json(f.struct(*KEY)).alias("key")).collect()
    spark_keys = sorted(row["key"].encode("utf-8") for row in collected)

    table = RowSchema(COLUMNS, KEY)
    ours = sorted(encode_key({n: r[n] for n in KEY}, table) or b"" for r in rows)
    assert len(ours) == len(rows)
    mismatched = [(s, o) for s, o in zip(spark_keys, ours, strict=True) if s != o]
    assert mismatched == []
