"""The ingest job lets Spark's ``to_json`` encode records whose column types are
``spark_json_identical``: for those, its bytes are ours (nulls, nesting and every text included);
for the other types the predicate is needed, as a differing value shows."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from logstore_cli.logformat import EpochEncoder, EpochId, RowSchema
from logstore_cli.logformat.values import spark_json_identical

from .test_key_json_spark import TEXTS, _random_text, _rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SAFE = (
    ("t", "tinyint"), ("s", "smallint"), ("i", "int"), ("b", "bigint"), ("flag", "boolean"),
    ("name", "string"), ("day", "date"), ("amount", "decimal(12,2)"), ("fine", "decimal(18,6)"),
    ("tags", "array<string>"), ("pair", "struct<x:int,`y z`:decimal(5,1),w:array<date>>"),
)  # fmt: skip


def _values() -> list[dict[str, Any]]:
    rng = random.Random(7)
    out = []
    for n, row in enumerate(_rows()):
        nulls = n % 5 == 0
        out.append({
            **row,
            "name": None if n % 7 == 0 else row["name"],
            "fine": None if nulls else Decimal(rng.randrange(-(10**18) + 1, 10**18)).scaleb(-6),
            "tags": None if nulls else [rng.choice(TEXTS), None, _random_text(rng)],
            "pair": None if n % 3 == 0 else {"x": None if nulls else n, "y z": Decimal("-12.5"),
                                             "w": [row["day"], None]},
        })  # fmt: skip
    return out


def test_spark_writes_our_bytes_for_the_types_it_is_trusted_with(spark: SparkSession) -> None:
    assert all(spark_json_identical(t) for _, t in SAFE)
    schema = RowSchema(SAFE, ("b", "name"))
    rows = _values()
    ddl = ", ".join(f"`{n}` {t}" for n, t in SAFE)
    df = spark.createDataFrame([tuple(r[n] for n, _ in SAFE) for r in rows], ddl)
    opts = {"ignoreNullFields": "false"}
    got = df.select(
        F.to_json(F.struct(*[F.col(f"`{n}`") for n, _ in SAFE]), opts).alias("v")
    ).collect()
    enc = EpochEncoder(schema, EpochId("w", 0, "a"))
    expected = [enc.value(tuple(r[n] for n, _ in SAFE)).decode() for r in rows]
    assert [r.v for r in got] == expected


def test_the_types_spark_writes_differently_are_not_trusted(spark: SparkSession) -> None:
    cases = {"double": 1e16, "float": 1e-5, "decimal(10,7)": Decimal("0.0000001")}
    for sql_type, value in cases.items():
        assert not spark_json_identical(sql_type)
        df = spark.createDataFrame([(value,)], f"v {sql_type}")
        spark_text = df.select(F.to_json(F.struct("v")).alias("j")).collect()[0].j
        ours = EpochEncoder(RowSchema((("v", sql_type),)), EpochId("w", 0, "a")).value((value,))
        assert spark_text != ours.decode(), sql_type
    assert not spark_json_identical("map<string,int>") and not spark_json_identical("timestamp")
