"""scripts/bench_merge_engines.py's pure parts: options, the engines' order, the source's Arrow
types, medians and ratios, the report."""

from __future__ import annotations

import json
from decimal import Decimal
from types import ModuleType

import pyarrow as pa
import pytest

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_merge_engines")


def test_options_default_and_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args([])
    assert (opts.sizes, opts.epochs, opts.changes, opts.json) == (
        (100_000, 1_000_000, 10_000_000), 5, 20_000, False
    )  # fmt: skip
    assert bench.parse_args(["--sizes", "1_000", "--json"]) == bench.Options(
        (1000,), 5, 20_000, True
    )
    for bad, message in ((["--sizes", "x"], "comma-separated"), (["--epochs", "1"], "at least 2"),
                         (["--changes", "0"], "--changes")):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(bad)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_the_engines_take_turns_going_first(bench: ModuleType) -> None:
    firsts = [bench.engine_order(e)[0] for e in range(4)]
    assert firsts == ["spark", "delta-rs", "spark", "delta-rs"]
    assert all(sorted(bench.engine_order(e)) == sorted(bench.ENGINES) for e in range(4))


def test_an_epoch_becomes_arrow_of_the_tables_types_with_exact_decimals(bench: ModuleType) -> None:
    changes = [{"id": 7, "name": "u0-7", "qty": 3, "price": "10.05", "op": "+U"},
               {"id": 9, "name": "i0-9", "qty": 0, "price": "0.10", "op": "+I"}]  # fmt: skip
    table = bench.arrow_changes(changes)
    assert table.schema.field("id").type == pa.int64()
    assert table.schema.field("qty").type == pa.int32()
    assert table.schema.field("price").type == pa.decimal128(10, 2)
    assert table.column("price").to_pylist() == [Decimal("10.05"), Decimal("0.10")]
    assert table.column("op").to_pylist() == ["+U", "+I"]


def test_medians_leave_the_warm_up_out_and_the_ratio_is_spark_over_delta_rs(
    bench: ModuleType,
) -> None:
    run = bench.SizeRun(100_000)
    run.seconds = {"spark": [9.0, 3.0, 2.0, 4.0], "delta-rs": [0.5, 0.1, 0.3, 0.2]}
    run.to_arrow = [0.4, 0.05, 0.07, 0.06]
    run.files, run.rows_after = {"spark": 4, "delta-rs": 1}, 100_200
    assert (run.median("spark"), run.median("delta-rs")) == (3.0, 0.2)
    assert run.ratio() == pytest.approx(15.0)
    text = bench.format_report([run], {"cpus": 2})
    row = next(line for line in text.splitlines() if line.strip().startswith("100,000"))
    assert row.split() == ["100,000", "3.00", "9.00", "0.20", "0.50", "15.0", "0.06", "4,", "1"]
    assert text.endswith("cpus: 2")
    doc = json.loads(json.dumps(bench.report_json([run], {"cpus": 2})))
    assert doc["sizes"][0]["spark_over_delta_rs"] == pytest.approx(15.0)
    assert doc["sizes"][0]["to_arrow_median_s"] == 0.06 and doc["facts"] == {"cpus": 2}
    run.seconds["delta-rs"] = [0.0, 0.0, 0.0]
    assert run.ratio() is None  # no ratio to a zero
