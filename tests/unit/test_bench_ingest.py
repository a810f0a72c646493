"""scripts/bench_ingest.py's pure parts: options, medians and ratios, the report."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_ingest")


def test_options_default_and_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args(["--changes", "5000", "--json"])
    assert (opts.changes, opts.warmup, opts.json, opts.bootstrap) == (5000, 5000, True, None)
    assert bench.parse_args(["--changes", "5000", "--warmup", "9000"]).warmup == 5000
    assert bench.parse_args(["--warmup", "0"]).warmup == 0
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--rounds", "0"])
    assert exit_info.value.code == 2
    assert "--rounds: must be at least 1, got 0" in capsys.readouterr().err


def test_medians_ratios_and_report(bench: ModuleType) -> None:
    FILE, LOG, DOUBLE, RAW = bench.FILE, bench.LOG, bench.DOUBLE, bench.RAW
    secs = {FILE: [10.0, 12.0, 11.0], LOG: [4.0, 5.0, 6.0], DOUBLE: [11.0, 15.0, 12.0],
            RAW: [1.0, 1.0, 2.0]}  # fmt: skip
    cpu = {"driver": 1.0, "spark": 2.0}  # no broker started: its column stays empty
    runs = [
        bench.Run(
            mode,
            r,
            s,
            s + 0.5,
            1000,
            {} if mode == RAW else {"delta": s / 2, "other": r},
            {**cpu, "spark": 2.0 * r},
        )
        for mode, times in secs.items()
        for r, s in enumerate(times)
    ]
    result = bench.summarize(list(reversed(runs)))  # round order comes from the runs
    by_mode = {m.mode: m for m in result.modes}
    assert [m.mode for m in result.modes] == [FILE, LOG, DOUBLE, RAW]
    assert by_mode[DOUBLE].median_s == 12.0 and by_mode[DOUBLE].wall_median_s == 12.5
    assert result.double_over_file == pytest.approx(12.0 / 11.0)
    assert result.per_round == pytest.approx((1.1, 1.25, 12.0 / 11.0))
    assert by_mode[RAW].records_per_s == 1000.0 and by_mode[LOG].ratio == pytest.approx(5 / 11)
    assert by_mode[FILE].phases == {"delta": 5.5, "other": 1} and by_mode[RAW].phases == {}
    assert by_mode[LOG].cpu == {"driver": 1.0, "spark": 2.0, "total": 3.0}
    assert result.within_target

    text = bench.format_report(result, {"changes": 1000})
    assert text.startswith("changes: 1000\n")
    assert "double-write / file-only = 1.09 (target <= 1.15): OK; per round: 1.10 1.25 1.09" in text
    lines = text.splitlines()
    raw_row = lines[lines.index("") + 5].split()  # facts, blank, heading, four modes
    assert raw_row == ["raw", "producer", "1.00", "1.50", "1,000", "0.09", *["-"] * 5]
    assert lines[-3].split() == ["raw", "producer", "1.00", "2.00", "-", "3.00"]
    data = json.loads(json.dumps(bench.report_json(result, {"changes": 1000})))
    assert data["modes"][FILE]["runs_s"] == [10.0, 12.0, 11.0]
    assert data["double_over_file"] == 1.091 and data["within_target"] is True


def test_rounds_rotate_the_order(bench: ModuleType) -> None:
    firsts = [bench.round_order(r)[0] for r in range(4)]
    assert sorted(firsts) == sorted(bench.MODES) and firsts[0] == bench.LOG
    assert all(sorted(bench.round_order(r)) == sorted(bench.MODES) for r in range(4))


def test_warehouses_default_local_and_take_several(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.parse_args([]).warehouses == ("local",)
    assert bench.parse_args(["--warehouse", "s3"]).warehouses == ("s3",)
    several = bench.parse_args(["--warehouse", "local,s3", "--warehouse", "hdfs,s3"])
    assert several.warehouses == ("local", "s3", "hdfs")  # each once, in the order named
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--warehouse", "local,gcs"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--warehouse: 'gcs' is not a warehouse the benchmark knows: use local, s3, hdfs" in err


def _result(bench: ModuleType, scale: float) -> object:
    secs = {bench.FILE: 10.0, bench.LOG: 4.0, bench.DOUBLE: 11.0, bench.RAW: 1.0}
    runs = [bench.Run(m, 0, s * scale, s * scale, 100, {}, {}) for m, s in secs.items()]
    return bench.summarize(runs)


def test_several_warehouses_report_ratios_to_local(bench: ModuleType) -> None:
    results = {"s3": _result(bench, 3.0), "local": _result(bench, 1.0), "hdfs": _result(bench, 2.0)}
    where = {"local": "/tmp/w", "s3": "s3://b/w", "hdfs": "hdfs://127.0.0.1:1/b/w"}
    assert bench.base_warehouse(["s3", "local"]) == "local"
    assert bench.base_warehouse(["hdfs", "s3"]) == "hdfs"
    table = bench.ratios(results)
    assert table["local"] == {m: 1.0 for m in bench.MODES}
    assert table["s3"][bench.DOUBLE] == pytest.approx(3.0) and table["hdfs"][bench.RAW] == 2.0

    text = bench.format_reports(results, {"changes": 100}, where)
    assert "== warehouse s3: s3://b/w" in text and "== warehouse hdfs: hdfs://" in text
    lines = text.splitlines()
    at = lines.index("median seconds relative to local")
    assert lines[at + 1].split() == ["mode", "s3", "local", "hdfs"]
    assert lines[at + 4].split() == ["double-write", "3.00", "1.00", "2.00"]
    data = json.loads(json.dumps(bench.reports_json(results, {"changes": 100}, where)))
    assert data["ratio_base"] == "local" and data["ratios"]["s3"][bench.FILE] == 3.0
    assert data["warehouses"]["hdfs"]["uri"] == where["hdfs"]

    # one warehouse: the report as before, saying where the tables were
    one = bench.format_reports({"local": results["local"]}, {"changes": 100}, where)
    assert one.startswith("changes: 100\nwarehouse: local: /tmp/w\n") and "relative" not in one
    assert bench.reports_json({"s3": results["s3"]}, {}, where)["warehouse"] == "s3"


def test_logs_default_kafka_and_take_several(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args([])
    assert opts.logs == ("kafka",) and opts.dimension == "warehouse"
    assert opts.kinds == ("local",)
    pulsar = bench.parse_args(["--log", "pulsar", "--warehouse", "s3"])
    assert pulsar.logs == ("pulsar",) and pulsar.kinds == ("s3",)  # one log: by warehouse
    several = bench.parse_args(["--log", "pulsar,kafka", "--log=pulsar"])
    assert several.logs == ("pulsar", "kafka")  # each once, in the order named
    assert several.dimension == "log" and several.kinds == ("pulsar", "kafka")
    assert bench.base_log(["pulsar", "kafka"]) == "kafka" and bench.base_log(["pulsar"]) == "pulsar"

    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--log", "kafka,redpanda"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--log: 'redpanda' is not a log system the benchmark knows: use kafka, pulsar" in err
    with pytest.raises(SystemExit) as exit_info:  # one dimension at a time
        bench.parse_args(["--log", "kafka,pulsar", "--warehouse", "local,s3"])
    assert exit_info.value.code == 2
    assert "several log systems and several warehouses" in capsys.readouterr().err


def test_the_raw_producer_runs_on_kafka_only(bench: ModuleType) -> None:
    assert bench.modes_on("kafka") == bench.MODES
    on_pulsar = bench.modes_on("pulsar")
    assert bench.RAW not in on_pulsar and set(on_pulsar) == set(bench.MODES) - {bench.RAW}
    for r in range(3):  # the rotation without the raw producer: each mode leads once
        assert sorted(bench.round_order(r, on_pulsar)) == sorted(on_pulsar)
    assert {bench.round_order(r, on_pulsar)[0] for r in range(3)} == set(on_pulsar)


def test_several_logs_report_ratios_to_kafka(bench: ModuleType) -> None:
    secs = {bench.FILE: 10.0, bench.LOG: 4.0, bench.DOUBLE: 11.0}
    pulsar = bench.summarize([bench.Run(m, 0, s * 2, s * 2, 100, {}, {}) for m, s in secs.items()])
    results = {"pulsar": pulsar, "kafka": _result(bench, 1.0)}
    where = {"kafka": "127.0.0.1:9092", "pulsar": "pulsar://127.0.0.1:6650"}
    table = bench.ratios(results, "log")
    assert table["kafka"] == {m: 1.0 for m in bench.MODES}
    assert table["pulsar"] == {bench.FILE: 2.0, bench.LOG: 2.0, bench.DOUBLE: 2.0}  # no raw

    text = bench.format_reports(results, {"changes": 100}, where, "log")
    assert "== log pulsar: pulsar://127.0.0.1:6650" in text and "== log kafka: 127.0.0.1" in text
    lines = text.splitlines()
    at = lines.index("median seconds relative to kafka")
    assert lines[at + 1].split() == ["mode", "pulsar", "kafka"]
    assert ["double-write", "2.00", "1.00"] in [line.split() for line in lines[at:]]
    # a mode the other log did not run (Pulsar has no raw producer) shows "-" there
    (raw,) = [line.split() for line in lines[at:] if line.startswith(bench.RAW)]
    assert raw[-2:] == ["-", "1.00"]
    data = json.loads(json.dumps(bench.reports_json(results, {"changes": 100}, where, "log")))
    assert data["ratio_base"] == "kafka" and data["ratios"]["pulsar"][bench.DOUBLE] == 2.0
    assert data["logs"]["pulsar"]["uri"] == where["pulsar"] and "warehouses" not in data
    one = bench.reports_json({"pulsar": pulsar}, {}, where, "log")
    assert one["log"] == "pulsar" and one["log_uri"] == where["pulsar"]
