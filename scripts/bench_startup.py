#!/usr/bin/env python3
"""Start-up of the logstore commands that need no Spark, as a ratio to importing Typer and Rich.

Each case is the real CLI as a shell script runs it (``python -m logstore_cli ...``), timed from
process start to exit. The baseline is ``python -c "import typer, rich.console"`` in the same venv:
the framework every command pays for, so a ratio of 1.0 means "no slower than the framework".
Runs are interleaved (round after round of every case, so machine noise hits all alike) and the
median of each case is reported. Bytecode is cached: the script runs every case once with
``PYTHONDONTWRITEBYTECODE`` unset and ``PYTHONPYCACHEPREFIX`` set to a temporary directory before
timing, so no case pays for compiling our modules (this machine sets PYTHONDONTWRITEBYTECODE=1).

Cases: ``--help``, ``--version``, ``validate`` of one table (a DDL fixture) and of 1,000 tables
(scripts/bench_validate.py's file), ``properties``, ``list`` and ``describe --no-topic`` and
``status --no-topic`` of a table in a temporary warehouse (written without Spark, as the tests do:
tests/deltalog.py), with a temporary, empty state directory (no local broker to look up).

    .venv/bin/python scripts/bench_startup.py [--runs 15] [--source DIR ...] [--tables 1000] [--json]

``--source DIR`` times the ``logstore_cli`` of that checkout (default: this one); given twice (e.g.
an older commit exported with ``git archive`` and this one), both are timed in the same interleaved
rounds, for before/after figures from one machine state. Targets (issue 20):
``--help``, ``validate`` of one table, ``describe`` and ``list`` at most 1.3x the baseline;
``validate`` of 1,000 tables under 1 s. Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "import typer, rich.console"
BASELINE_CASE = "baseline: import typer, rich.console"
ONE_TABLE = ROOT / "tests" / "fixtures" / "ddl" / "paimon_kafka_filled.sql"
TABLE_DDL = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, customer STRING, amount DECIMAL(12,2), "
    "PRIMARY KEY (id) NOT ENFORCED) WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders', "
    "'kafka.bootstrap.servers' = '127.0.0.1:9')"
)
RATIO_TARGET = 1.3
RATIO_CASES = ("--help", "validate (1 table)", "describe --no-topic", "list")
BULK_TARGET_S = 1.0  # validate of 1,000 tables


def bulk_case(tables: int) -> str:
    return f"validate ({tables:,} tables)"


def _make_inputs(tmp: Path, tables: int) -> tuple[Path, Path]:
    """A warehouse with one table, and a DDL file of ``tables`` tables; their paths."""
    sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
    from bench_validate import make_ddl

    from tests.deltalog import write_table

    warehouse = tmp / "warehouse"
    write_table(warehouse, TABLE_DDL)
    bulk = tmp / "tables.sql"
    bulk.write_text(make_ddl(tables), encoding="utf-8")
    return warehouse, bulk


def cases(warehouse: Path, bulk: Path, tables: int) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "logstore_cli"]
    at = ["--warehouse", str(warehouse)]
    return {
        BASELINE_CASE: [sys.executable, "-c", BASELINE],
        "--help": [*cli, "--help"],
        "--version": [*cli, "--version"],
        "validate (1 table)": [*cli, "validate", str(ONE_TABLE)],
        bulk_case(tables): [*cli, "validate", str(bulk), "--json"],
        "properties": [*cli, "properties"],
        "list": [*cli, "list", *at],
        "describe --no-topic": [*cli, "describe", "shop.orders", "--no-topic", *at],
        "status --no-topic": [*cli, "status", "shop.orders", "--no-topic", *at],
    }


def _run(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    # cwd: not a checkout, or ``python -m`` would import the logstore_cli found there first
    cwd = env["LOGSTORE_STATE_DIR"]
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="timed rounds (default 15)")
    ap.add_argument(
        "--source",
        type=Path,
        action="append",
        help="checkout whose logstore_cli to time (repeatable)",
    )
    ap.add_argument(
        "--tables", type=int, default=1000, help="tables of the bulk validate (target: 1,000 < 1 s)"
    )
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()

    sources: list[Path] = [p.resolve() for p in args.source or [ROOT]]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as name:
        tmp = Path(name)
        warehouse, bulk = _make_inputs(tmp, args.tables)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base_env |= {"LOGSTORE_STATE_DIR": str(tmp / "state"), "COLUMNS": "120"}
        (tmp / "state").mkdir()
        todo: list[tuple[Path, str, list[str], dict[str, str]]] = []
        for i, source in enumerate(sources):
            # one bytecode cache per source: the same module names, different code
            env = base_env | {
                "PYTHONPATH": str(source),
                "PYTHONPYCACHEPREFIX": str(tmp / f"pycache-{i}"),
            }
            todo += [
                (source, case, cmd, env)
                for case, cmd in cases(warehouse, bulk, args.tables).items()
            ]
        for _, _, cmd, env in todo:  # compile and cache the bytecode, warm the page cache
            _run(cmd, env)
        times: dict[tuple[Path, str], list[float]] = {(s, c): [] for s, c, _, _ in todo}
        for _ in range(args.runs):
            for source, case, cmd, env in todo:
                times[source, case].append(_run(cmd, env))

    report: dict[str, Any] = {"runs": args.runs, "sources": {}}
    failed = False
    for source in sources:
        medians = {c: statistics.median(ts) for (s, c), ts in times.items() if s == source}
        # the baseline does not depend on the source: its runs of every source pooled
        base = medians[BASELINE_CASE] = statistics.median(
            t for (_, c), ts in times.items() if c == BASELINE_CASE for t in ts
        )
        ratios = {case: m / base for case, m in medians.items()}
        misses = [c for c in RATIO_CASES if ratios[c] > RATIO_TARGET]
        if args.tables == 1000 and medians[bulk_case(1000)] >= BULK_TARGET_S:
            misses.append(bulk_case(1000))
        failed |= bool(misses) and source == sources[-1]
        report["sources"][str(source)] = {"median_s": medians, "ratio": ratios, "missed": misses}
        if args.json:
            continue
        print(f"source {source}")
        print(f"{'case':38} {'median s':>9} {'min s':>7} {'x baseline':>10}")
        for case, m in medians.items():
            print(f"{case:38} {m:9.3f} {min(times[source, case]):7.3f} {ratios[case]:10.2f}")
        print(f"missed: {', '.join(misses) or 'none'}\n")
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"{args.runs} interleaved runs. Targets: {', '.join(RATIO_CASES)} <= {RATIO_TARGET}x "
            f"the baseline; {bulk_case(1000)} < {BULK_TARGET_S} s (exit code: the last source's)."
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
