"""Which engine commits an epoch: delta-rs only for what it writes as Delta does, else Spark."""

from __future__ import annotations

import pytest

from logstore_cli.ingest import merge_engine as me

LOGSTORE = me.TableFacts(
    min_reader=1, min_writer=7, reader_features=None,
    writer_features=frozenset({"invariants", "changeDataFeed", "appendOnly"}),
    generated_columns=False, table_bytes=10_000,
)  # fmt: skip


def choose(*, rows: int = 20_000, **table: object) -> me.Choice:
    facts = me.TableFacts(**{**LOGSTORE.__dict__, **table})  # type: ignore[arg-type]
    return me.choose(columns=["id", "name"], rows=rows, table=facts)


def test_a_logstore_table_and_a_small_epoch_go_to_delta_rs() -> None:
    assert choose() == me.Choice(me.DELTA_RS, "")
    assert choose().delta_rs
    ntz = choose(min_reader=3, reader_features=frozenset({"timestampNtz"}),
                 writer_features=frozenset({"timestampNtz", "invariants", "changeDataFeed"}))  # fmt: skip
    assert ntz.delta_rs
    assert choose(min_writer=4, writer_features=None).delta_rs  # a legacy protocol: CDF at most
    assert choose(rows=me.MAX_ROWS, table_bytes=me.MAX_TABLE_BYTES).delta_rs  # the bounds hold


def test_an_append_reads_no_file_so_the_tables_size_does_not_matter() -> None:
    facts = me.TableFacts(**{**LOGSTORE.__dict__, "table_bytes": me.MAX_TABLE_BYTES * 10})
    assert me.choose(columns=["id"], rows=1, table=facts, append=True).delta_rs
    assert not me.choose(columns=["id"], rows=1, table=facts).delta_rs
    # the other bounds hold for appends too
    big = me.choose(columns=["id"], rows=me.MAX_ROWS + 1, table=LOGSTORE, append=True)
    assert not big.delta_rs and "more than 1,000,000" in big.reason


@pytest.mark.parametrize(
    ("table", "rows", "reason"),
    [
        ({"writer_features": frozenset({"deletionVectors", "changeDataFeed"}),
          "reader_features": frozenset({"deletionVectors"}), "min_reader": 3},
         1, "table feature(s) deletionVectors"),
        ({"writer_features": frozenset({"rowTracking", "domainMetadata", "invariants"})},
         1, "domainMetadata, rowTracking"),
        ({"min_reader": 2, "min_writer": 5, "writer_features": None}, 1, "columnMapping"),
        ({"min_writer": 6, "writer_features": None}, 1, "identityColumns"),
        ({"generated_columns": True}, 1, "generated or identity columns"),
        ({}, me.MAX_ROWS + 1, "1,000,001 changes are more than 1,000,000"),
        ({"table_bytes": me.MAX_TABLE_BYTES + 1}, 1, "more than 1 GiB"),
    ],
)  # fmt: skip
def test_anything_else_goes_to_spark_saying_why(
    table: dict[str, object], rows: int, reason: str
) -> None:
    choice = choose(rows=rows, **table)
    assert choice.engine == me.SPARK and not choice.delta_rs
    assert reason in choice.reason


def test_spark_when_asked_for_or_with_odd_column_names() -> None:
    assert me.spark_regardless(me.AUTO) is None  # choose() decides
    assert me.spark_regardless(me.SPARK) == "asked for (--delta-engine spark)"
    for odd in ("a.b", "a b", "a`b", "é", "1a", ""):
        got = me.choose(columns=["id", odd], rows=1, table=LOGSTORE)
        assert got.engine == me.SPARK and repr(odd) in got.reason, odd
    # reserved words are plain names: the MERGE quotes every name
    plain = me.choose(columns=["order", "select", "_x1"], rows=1, table=LOGSTORE)
    assert plain.delta_rs


def test_the_option_takes_auto_or_spark_and_names_them_otherwise() -> None:
    assert me.parse_choice(" Spark ") == me.SPARK and me.parse_choice("auto") == me.AUTO
    for bad in ("delta-rs", "", "rust"):
        with pytest.raises(ValueError, match="use one of auto, spark"):
            me.parse_choice(bad)


def test_generated_and_identity_columns_are_found_in_the_schema_metadata() -> None:
    plain = [{"name": "id", "metadata": {"delta.invariants": "x"}}, {"name": "n", "metadata": {}}]
    assert not me.has_generated_columns(plain)
    assert me.has_generated_columns([*plain, {"metadata": {"delta.generationExpression": "1"}}])
    assert me.has_generated_columns([{"metadata": {"delta.identity.start": 1}}])
    assert not me.has_generated_columns(["junk", {"metadata": "junk"}, {}])
