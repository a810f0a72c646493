"""scripts/bench_read.py's pure parts: options, percentiles, per-round ratios, latency samples,
the verdict and the report."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_read")


def test_options_defaults(bench: ModuleType) -> None:
    opts = bench.parse_args([])
    assert (opts.records, opts.partitions, opts.epoch_records, opts.rounds) == (
        200_000, 4, 5_000, 5,
    )  # fmt: skip
    assert (opts.samples, opts.rate, opts.epoch_size, opts.spark) == (5_000, 200.0, 5, True)
    assert (opts.bootstrap, opts.warehouse, opts.json) == (None, None, False)
    assert opts.warehouses == ("local",)
    no_spark = bench.parse_args(["--no-spark", "--warehouse", "./wh", "--json"])
    assert (no_spark.spark, no_spark.spark_samples) == (False, 0)
    assert no_spark.warehouse == Path("wh") and no_spark.json
    assert no_spark.warehouses == ("local",)  # a directory is the local warehouse's


def test_warehouses_several_and_a_directory(bench: ModuleType, tmp_path: Path) -> None:
    several = bench.parse_args(["--warehouse", "s3,local", "--warehouse", "hdfs,s3"])
    assert several.warehouses == ("s3", "local", "hdfs") and several.warehouse is None
    mine = tmp_path / "wh"
    mine.mkdir()
    with_dir = bench.parse_args(["--warehouse", "hdfs", "--warehouse", str(mine)])
    assert with_dir.warehouses == ("hdfs", "local") and with_dir.warehouse == mine


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds: must be at least 1, got 0"),
        (["--records", "ten"], "--records: not a whole number: 'ten'"),
        (["--rate", "0"], "--rate: must be more than 0 and at most 10000, got 0"),
        (["--rate", "nan"], "--rate: must be more than 0 and at most 10000, got nan"),
        (["--spark-samples", "-1"], "--spark-samples: must be 0 or more, got -1"),
        (["--records", "100", "--epoch-records", "200"], "200 is more than --records 100"),
        (["--bootstrap", " "], "--bootstrap: empty"),
        (["--warehouse", ""], "--warehouse: empty"),
        (["--warehouse", "s3,gcs"], "--warehouse: 'gcs' is not a warehouse the benchmark knows"),
        (["--warehouse", "s4"], "use local, s3, hdfs"),  # not a directory either
        (["--warehouse", "./a", "--warehouse", "./b"], "one directory at most, got ./a, ./b"),
    ],
)
def test_options_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_rounds_rotate_the_order(bench: ModuleType) -> None:
    firsts = [bench.round_order(r)[0] for r in range(len(bench.CASES))]
    assert sorted(firsts) == sorted(bench.CASES)
    assert all(sorted(bench.round_order(r)) == sorted(bench.CASES) for r in range(6))
    assert bench.round_order(1, ["a", "b"]) == ["b", "a"]


def test_percentile_interpolates_between_ranks(bench: ModuleType) -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")  # 1st..99th percentile
    assert bench.percentile(values, 50) == pytest.approx(statistics.median(values))
    assert bench.percentile(values, 99) == pytest.approx(cuts[98])
    assert bench.percentile(values, 25) == pytest.approx(cuts[24])
    assert (bench.percentile(values, 0), bench.percentile(values, 100)) == (1.0, 10.0)
    assert bench.percentile([0.5], 99) == 0.5
    with pytest.raises(ValueError, match="no values"):
        bench.percentile([], 50)
    with pytest.raises(ValueError, match="q must be in"):
        bench.percentile(values, 101)


def _runs(bench: ModuleType) -> list[Any]:
    raw, consumer, jsonl = bench.RAW, bench.CONSUMER, bench.JSONL
    # (case, round, start-up s, read s): jsonl is timed whole (start-up 0)
    times = [
        (raw, 0, 0.1, 1.0), (raw, 1, 0.1, 2.0), (raw, 2, 0.3, 1.0),
        (consumer, 0, 0.2, 2.0), (consumer, 1, 0.2, 2.5), (consumer, 2, 0.2, 1.0),
        (jsonl, 0, 0.0, 2.2), (jsonl, 1, 0.0, 4.2), (jsonl, 2, 0.0, 2.6),
    ]  # fmt: skip
    return [bench.Run(case, r, up, read, 1000, {"bench": read / 2}) for case, r, up, read in times]


def test_summary_ratios_per_round_and_medians(bench: ModuleType) -> None:
    result = bench.summarize(list(reversed(_runs(bench))))  # round order comes from the runs
    assert [c.case for c in result.cases] == [bench.RAW, bench.CONSUMER, bench.JSONL]
    assert result.records == 1000
    consumer = result.case(bench.CONSUMER)
    # records/s over the raw consumer's in the same round, by read time
    assert consumer.per_round == pytest.approx((0.5, 0.8, 1.0))
    assert consumer.ratio == pytest.approx(0.8)
    assert (consumer.startup_s, consumer.read_s, consumer.total_s) == pytest.approx((0.2, 2.0, 2.2))
    assert consumer.records_per_s == pytest.approx(500.0)
    assert consumer.cpu == {"bench": 1.0}
    # jsonl by whole time against the raw consumer's whole time: 1.1/2.2, 2.1/4.2, 1.3/2.6
    jsonl = result.case(bench.JSONL)
    assert jsonl.per_round == pytest.approx((0.5, 0.5, 0.5))
    assert jsonl.startup_s is None and jsonl.read_s == pytest.approx(2.6)
    assert result.case(bench.RAW).per_round == pytest.approx((1.0, 1.0, 1.0))


def test_summary_needs_the_raw_consumer(bench: ModuleType) -> None:
    runs = [r for r in _runs(bench) if r.case != bench.RAW]
    with pytest.raises(ValueError, match="raw consumer"):
        bench.summarize(runs)


def test_write_to_visible_maps_rows_to_their_epoch_flush(bench: ModuleType) -> None:
    # epochs of 2 rows from id 10: epoch 0 = ids 10, 11 flushed at 1.0; epoch 1 = 12, 13 at 2.0
    emitted = {8: 0.5, 9: 0.6, 10: 1.25, 11: 1.5, 12: 2.0625, 13: 2.5, 14: 9.0}
    times = bench.write_to_visible(emitted, [1.0, 2.0], 2, 10)
    assert sorted(times) == [0.0625, 0.25, 0.5, 0.5]  # warm-up ids and id 14 (no epoch) left out
    found = bench.latency("consumer", "eventual", times, 199.5)
    assert (found.samples, found.max_s, found.rate) == (4, 0.5, 199.5)
    assert found.p50_s == pytest.approx(0.375) and found.p99_s == pytest.approx(0.5)


def _result(bench: ModuleType, p99_s: float) -> Any:
    latencies = (
        bench.latency("consumer", "committed", [0.01, 0.02, 0.03], 200.0),
        bench.latency("consumer", "eventual", [0.004, p99_s], 200.0),
    )
    return bench.Result(bench.summarize(_runs(bench)), latencies)


def test_verdict_report_and_json(bench: ModuleType) -> None:
    result = _result(bench, 0.5)
    assert result.consumer_ratio == pytest.approx(0.8)
    assert result.eventual_p99_s == pytest.approx(0.5 - 0.496 * 0.01)
    assert result.within_target
    assert not _result(bench, 1.2).within_target

    text = bench.format_report(result, {"records": 1000})
    assert text.startswith("records: 1000\n")
    assert "consumer / raw consumer = 0.80 (target >= 0.7): OK" in text
    assert "eventual p99 = 495.0 ms (target < 1000 ms): OK" in text
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("engine"))
    raw, consumer, jsonl = (line.split() for line in lines[head + 1 : head + 4])
    assert raw == ["raw", "consumer", "0.100", "1.000", "1,000", "1.00", "1.300", *["1.00"] * 3]
    assert consumer == [
        "consumer",
        "0.200",
        "2.000",
        "500",
        "0.80",
        "2.200",
        "0.50",
        "0.80",
        "1.00",
    ]
    assert jsonl[:4] == ["consumer", "jsonl", "-", "-"] and jsonl[-2:] == ["(whole", "run)"]
    latency_rows = lines[lines.index("write-to-visible (ms), following reads") + 2 :][:2]
    assert latency_rows[0].split() == [
        "consumer",
        "committed",
        "3",
        "20.0",
        "29.8",
        "30.0",
        "200.0",
    ]

    data = json.loads(json.dumps(bench.report_json(result, {"records": 1000})))
    consumer = data["throughput"]["cases"]["consumer"]
    assert consumer["ratio_to_raw"] == 0.8 and consumer["ratio_per_round"] == [0.5, 0.8, 1.0]
    assert data["throughput"]["cases"]["consumer jsonl"]["read_median_s"] is None
    assert data["latency"][1] == {
        "engine": "consumer", "level": "eventual", "samples": 2, "p50_ms": 252.0,
        "p99_ms": 495.04, "max_ms": 500.0, "epochs_per_s": 200.0,
    }  # fmt: skip
    assert data["within_target"] is True


def test_below_target_is_reported(bench: ModuleType) -> None:
    runs = [
        bench.Run(bench.RAW, 0, 0.0, 1.0, 100),
        bench.Run(bench.CONSUMER, 0, 0.0, 2.0, 100),
    ]
    result = bench.Result(bench.summarize(runs), ())
    assert not result.within_target and result.eventual_p99_s is None
    text = bench.format_report(result, {})
    assert "consumer / raw consumer = 0.50 (target >= 0.7): BELOW TARGET" in text
    assert "eventual p99" not in text


def test_several_warehouses_report_ratios_to_local(bench: ModuleType) -> None:
    local, s3 = _result(bench, 0.5), _result(bench, 0.5)
    slower = bench.Result(
        bench.summarize(
            [
                bench.Run(r.case, r.round_no, r.startup_s, r.read_s * 2, r.records)
                for r in _runs(bench)
            ]
        ),
        s3.latencies,
    )
    results = {"s3": slower, "local": local}
    where = {"local": "/tmp/w", "s3": "s3://b/w"}
    table = bench.ratios(results)
    assert table["local"] == {name: 1.0 for name in table["local"]}
    assert table["s3"]["consumer"] == pytest.approx(2.0)
    assert table["s3"]["consumer committed p99"] == pytest.approx(1.0)
    # a base that took no time is no base: left out
    zero = bench.Result(local.throughput, (bench.latency("consumer", "none", [0.0], 1.0),))
    assert "consumer none p99" not in bench.ratios({"local": zero, "s3": zero})["s3"]
    text = bench.format_reports(results, {"records": 10}, where)
    assert "== warehouse s3: s3://b/w" in text and "== warehouse local: /tmp/w" in text
    lines = text.splitlines()
    at = lines.index("median seconds relative to local")
    assert lines[at + 1].split() == ["s3", "local"]
    assert lines[at + 3].split() == ["consumer", "2.00", "1.00"]
    data = json.loads(json.dumps(bench.reports_json(results, {}, where)))
    assert data["ratio_base"] == "local" and data["ratios"]["s3"]["consumer"] == 2.0
    assert data["warehouses"]["s3"]["uri"] == "s3://b/w" and data["within_target"] is True
    one = bench.format_reports({"local": local}, {"records": 10}, where)
    assert one.startswith("records: 10\nwarehouse: local: /tmp/w\n") and "relative" not in one


def test_logs_default_kafka_and_take_several(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args([])
    assert opts.logs == ("kafka",) and opts.dimension == "warehouse" and opts.kinds == ("local",)
    pulsar = bench.parse_args(["--log", "pulsar", "--no-spark"])
    assert pulsar.logs == ("pulsar",) and pulsar.kinds == ("local",)
    several = bench.parse_args(["--log", "pulsar", "--log", "kafka,pulsar", "--warehouse", "./wh"])
    assert several.logs == ("pulsar", "kafka") and several.dimension == "log"
    assert several.kinds == ("pulsar", "kafka") and several.warehouse == Path("wh")

    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--log=redpanda"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--log: 'redpanda' is not a log system the benchmark knows: use kafka, pulsar" in err
    with pytest.raises(SystemExit) as exit_info:  # one dimension at a time
        bench.parse_args(["--log", "kafka,pulsar", "--warehouse", "local,hdfs"])
    assert exit_info.value.code == 2
    assert "several log systems and several warehouses" in capsys.readouterr().err


def test_the_cases_on_each_log(bench: ModuleType) -> None:
    assert bench.cases_on("kafka", True) == bench.CASES
    assert bench.cases_on("kafka", False) == tuple(c for c in bench.CASES if c != bench.SPARK)
    # Pulsar: the raw consumer (pulsar-client) and the CLI's read; Kafka's LogReader and Spark not
    assert bench.cases_on("pulsar", True) == (bench.RAW, bench.JSONL)


def test_pulsar_has_no_throughput_target_and_ratios_to_kafka(bench: ModuleType) -> None:
    kafka = _result(bench, 0.5)
    runs = [r for r in _runs(bench) if r.case in (bench.RAW, bench.JSONL)]
    slower = [bench.Run(r.case, r.round_no, r.startup_s, r.read_s * 2, r.records) for r in runs]
    pulsar = bench.Result(bench.summarize(slower), kafka.latencies)
    assert pulsar.consumer_ratio is None  # no consumer case: the target is Kafka's
    assert pulsar.within_target  # its eventual p99 still counts
    results = {"pulsar": pulsar, "kafka": kafka}
    where = {"kafka": "127.0.0.1:9092", "pulsar": "pulsar://127.0.0.1:6650"}
    table = bench.ratios(results, "log")
    assert table["kafka"] == {name: 1.0 for name in table["kafka"]}
    assert table["pulsar"]["raw consumer"] == pytest.approx(2.0)
    assert "consumer" not in table["pulsar"] and "spark" not in table["pulsar"]
    text = bench.format_reports(results, {"records": 10}, where, "log")
    assert "== log pulsar: pulsar://127.0.0.1:6650" in text
    assert "median seconds relative to kafka" in text
    assert "consumer / raw consumer" not in text.split("== log kafka")[0]  # none for Pulsar
    data = json.loads(json.dumps(bench.reports_json(results, {}, where, "log")))
    assert data["ratio_base"] == "kafka" and data["ratios"]["pulsar"]["raw consumer"] == 2.0
    assert data["logs"]["pulsar"]["uri"] == where["pulsar"] and "warehouses" not in data
