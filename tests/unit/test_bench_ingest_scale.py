"""scripts/bench_ingest_scale.py's pure parts: options, the epochs' changes, medians, the report."""

from __future__ import annotations

from types import ModuleType

import pytest

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_ingest_scale")


def test_options_default_and_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args([])
    assert (opts.sizes, opts.changes, opts.json) == (
        (100_000, 1_000_000, 10_000_000),
        20_000,
        False,
    )
    assert bench.parse_args(["--sizes", "1_000,20"]).sizes == (1000, 20)
    assert opts.dv is False and bench.parse_args(["--deletion-vectors"]).dv is True
    assert opts.engine == "auto" and bench.parse_args(["--delta-engine", "spark"]).engine == "spark"
    for bad, message in ((["--sizes", "1e6"], "comma-separated"), (["--sizes", "0"], "at least 1"),
                         (["--epochs", "1"], "at least 2"),
                         (["--delta-engine", "rust"], "invalid choice")):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(bad)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_each_epoch_changes_live_keys_once_and_inserts_new_ones(bench: ModuleType) -> None:
    size, changes = 500, 100
    live = set(range(size))
    for batch in bench.epoch_changes(size, changes, epochs=8, seed=3):
        assert len(batch) == changes
        keys = [r["id"] for r in batch]
        assert len(set(keys)) == changes  # each key once: the MERGE needs no ranking
        ops = [r["op"] for r in batch]
        assert (ops.count("+U"), ops.count("+I"), ops.count("-D")) == (70, 20, 10)
        for r in batch:
            if r["op"] == "+I":
                assert r["id"] not in live
                live.add(r["id"])
            else:
                assert r["id"] in live, r
                if r["op"] == "-D":
                    live.discard(r["id"])
    assert len(live) == size + 8 * (20 - 10)
    assert bench.epoch_changes(size, changes, 3, seed=3) == bench.epoch_changes(
        size, changes, 3, seed=3
    )


def test_medians_leave_the_first_epoch_out_and_ratios_are_to_the_plain_merge(
    bench: ModuleType,
) -> None:
    result = bench.Result([
        bench.ModeRun(bench.FILE, 1000, [9.0, 2.0, 4.0, 3.0], [{"delta": 8.0}, {"delta": 1.0},
                      {"delta": 3.0}, {"delta": 2.0}], files=7, read_s=0.5, rows_after=1000),
        bench.ModeRun(bench.PLAIN, 1000, [5.0, 1.0, 2.0, 1.5], files=4, read_s=0.4, rows_after=1000),
    ])  # fmt: skip
    runs = result.by_size()[1000]
    assert runs[bench.FILE].median == 3.0 and runs[bench.PLAIN].median == 1.5
    assert runs[bench.FILE].phase_medians() == {"delta": 2.0}
    report = bench.format_report(result, {"cpus": 2})
    [line] = [x for x in report.splitlines() if bench.FILE in x]
    assert line.split()[:7] == ["1,000", "file-only", "3.00", "9.00", "2.00", "7", "0.50"]
    assert line.endswith("delta 2.00") and "cpus: 2" in report
    data = bench.report_json(result, {})
    assert data["sizes"][0]["modes"][bench.FILE]["ratio_to_plain"] == 2.0
    assert bench.mode_order(0) != bench.mode_order(1) and sorted(bench.mode_order(2)) == sorted(
        bench.MODES
    )
