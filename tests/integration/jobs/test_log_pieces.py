"""The log sink's pieces (``SparkLogSink._sorted``): an epoch larger than ``piece_rows`` reaches
the driver one range-partitioned piece at a time, in the same order as the whole epoch sorted at
once; the quarantine's look at a batch counts its good records for it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.jobs.ingest import SparkBatch, SparkLogSink, SparkQuarantine

from .ingest_support import orders_ddl
from .test_merge_source import SCHEMA


def _sink(piece_rows: int) -> SparkLogSink:
    spec = parse_ddl(orders_ddl("shop.orders", "t", "127.0.0.1:9"), "t.sql", ParseOptions())[0]
    sink = SparkLogSink(spec, "t")
    sink.piece_rows = piece_rows
    return sink


def _batch(spark: SparkSession, n: int, seed: int) -> SparkBatch:
    """``n`` good records and a malformed one, spread over partitions out of order; sequence
    numbers on some (shared by many), each arrival (file, line) its own: one total order."""
    rnd = random.Random(seed)
    data: list[tuple[Any, ...]] = []
    for i in range(n):
        seq = rnd.choice([None, rnd.randrange(5)])
        data.append((rnd.randrange(n // 3 + 1), f"r{i}", i, None, rnd.choice(["+I", "+U", "-D"]),
                     seq, (f"f{i % 3}", i), None, None, "f"))  # fmt: skip
    data.append((0, "bad", 0, None, None, None, ("f9", 0), "broken", "raw", "f"))
    rnd.shuffle(data)
    return SparkBatch(spark.createDataFrame(data, SCHEMA).repartition(3), ["file", "line"])


def _sent(sink: SparkLogSink, batch: SparkBatch) -> list[tuple[Any, ...]]:
    return [
        (kind, key, value)
        for piece in sink._sorted(batch)
        for kind, key, value in zip(piece.kinds, piece.keys, piece.values, strict=True)
    ]


@pytest.mark.integration
def test_an_epoch_above_the_piece_size_is_sent_in_pieces_in_the_same_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    batch = _batch(spark, 300, seed=7)
    assert SparkQuarantine(tmp_path / "q").write(batch, "w", 0) == 1
    assert batch.good_rows == 300  # counted by the quarantine's one look

    whole = list(_sink(10_000)._sorted(batch))
    assert len(whole) == 1 and whole[0].rows == 300
    pieces = list(_sink(40)._sorted(batch))
    assert len(pieces) > 3  # several pieces, none holding the whole epoch
    assert max(p.rows for p in pieces) < 300
    assert sum(p.rows for p in pieces) == 300
    # Sequence first, then arrival (nulls first): the same order whole or in pieces.
    assert _sent(_sink(40), batch) == _sent(_sink(10_000), batch)


@pytest.mark.integration
def test_a_carry_with_one_sort_key_is_counted_and_still_split(spark: SparkSession) -> None:
    # A carried commit: every record has the same sequence (none) and arrival (version, rank),
    # and no quarantine counted them.
    data = [(i, f"r{i}", i, None, "+I", None, ("v1", 0), None, None, "delta") for i in range(90)]
    batch = SparkBatch(spark.createDataFrame(data, SCHEMA).repartition(3), ["file", "line"])
    assert batch.good_rows is None
    pieces = list(_sink(25)._sorted(batch))
    assert len(pieces) > 1 and sum(p.rows for p in pieces) == 90
    assert max(p.rows for p in pieces) < 90
    values = [json.loads(v) for p in pieces for v in p.values]
    assert sorted(v["name"] for v in values) == sorted(f"r{i}" for i in range(90))
