"""scripts/bench_cluster.py's pure parts: options, rotation, events, medians and ratios, the report."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from logstore_cli.ddl import parse_ddl

from .scripts_support import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_cluster")


def test_options_default_and_refuse_bad_values(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = bench.parse_args(["--changes", "5000", "--json"])
    assert (opts.changes, opts.rounds, opts.workers, opts.json) == (5000, 2, 2, True)
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--workers", "0"])
    assert exit_info.value.code == 2
    assert "--workers: must be at least 1, got 0" in capsys.readouterr().err


def test_every_configuration_runs_once_per_round_and_none_always_first(bench: ModuleType) -> None:
    rounds = [bench.round_order(r) for r in range(len(bench.CONFIGS))]
    assert all(sorted(c.name for c in r) == sorted(c.name for c in bench.CONFIGS) for r in rounds)
    assert len({r[0].name for r in rounds}) == len(bench.CONFIGS)


def test_events_give_the_job_time_and_counts(bench: ModuleType) -> None:
    lines = [
        (1.0, json.dumps({"event": "start", "writer": "w"})),
        (1.5, "not json: a stray line"),
        (2.0, json.dumps({"event": "epoch", "rows": 10, "log_records": 12})),
        (3.0, json.dumps({"event": "epoch", "rows": 5, "log_records": 6})),
        (4.5, json.dumps({"event": "done", "rows": 15})),
    ]
    events = bench.collect(iter(lines))
    assert (events.start_at, events.done_at) == (1.0, 4.5)
    assert (events.epochs, events.rows, events.records) == (2, 15, 18)
    assert bench.collect(iter(lines[:-1])).done_at is None


def test_medians_and_ratios_against_the_reference(bench: ModuleType) -> None:
    names = [c.name for c in bench.CONFIGS]
    runs = [
        bench.Run(names[0], 0, 10.0, 20.0, 4, 100, 120),
        bench.Run(names[0], 1, 12.0, 22.0, 4, 100, 120),
        bench.Run(names[0], 2, 30.0, 40.0, 4, 100, 120),
        bench.Run(names[2], 0, 24.0, 44.0, 4, 100, 120),
        bench.Run(names[2], 1, 24.0, 44.0, 4, 100, 120),
    ]
    results = {r.config: r for r in bench.summarize(runs)}
    assert set(results) == {names[0], names[2]}
    assert results[names[0]].median_s == 12.0 and results[names[0]].ratio == 1.0
    assert results[names[2]].ratio == pytest.approx(2.0)
    assert results[names[2]].wall_ratio == pytest.approx(2.0)
    assert results[names[2]].rows_per_s == pytest.approx(100 / 24)
    report = bench.format_report(list(results.values()), {"cpus": 2})
    assert "cpus: 2" in report and f"against '{names[0]}'" in report
    data = bench.report_json(list(results.values()), {"cpus": 2})
    assert data["configurations"][names[2]]["ratio"] == 2.0
    with pytest.raises(ValueError, match="reference"):
        bench.summarize(runs[3:])


def test_the_tables_ddl_is_valid_and_leaves_replication_to_the_cluster(bench: ModuleType) -> None:
    ddl = bench.table_ddl("bench.c1_r0", "bench-c1_r0", "127.0.0.1:1,127.0.0.1:2", 3)
    (spec,) = parse_ddl(ddl)
    assert spec.log_store is not None
    assert spec.log_store.topic == "bench-c1_r0" and spec.log_store.partitions == 3
    assert "log.system.replication" not in spec.properties
