#!/usr/bin/env python3
"""Start-up time of logstore commands that need no Spark, measured side by side in one run.

Runs each command N times, interleaved (so machine noise hits all alike), and prints the median wall
time and its ratio to a bare interpreter start. Usage: .venv/bin/python scripts/bench_startup.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

PY = sys.executable
CASES: dict[str, list[str]] = {
    "python -c pass (baseline)": [PY, "-c", "pass"],
    "logstore --version": [PY, "-m", "logstore_cli", "--version"],
    "logstore --help": [PY, "-m", "logstore_cli", "--help"],
    "logstore broker --help": [PY, "-m", "logstore_cli", "broker", "--help"],
    "python -c 'import pyspark.sql' (for scale)": [PY, "-c", "import pyspark.sql"],
}
BUDGET_S = 0.5  # logstore --help must answer within this


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for cmd in CASES.values():  # warm the page cache once
        subprocess.run(cmd, capture_output=True, check=True)
    for _ in range(runs):
        for name, cmd in CASES.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["python -c pass (baseline)"])
    print(f"{'command':45} {'median s':>9} {'p90 s':>7} {'x baseline':>10}")
    for name, ts in times.items():
        med = statistics.median(ts)
        p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
        print(f"{name:45} {med:9.3f} {p90:7.3f} {med / base:10.1f}")
    help_med = statistics.median(times["logstore --help"])
    verdict = "OK" if help_med < BUDGET_S else "OVER BUDGET"
    print(
        f"\nlogstore --help median {help_med:.3f}s vs budget {BUDGET_S}s: {verdict} ({runs} runs)"
    )
    return 0 if help_med < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
