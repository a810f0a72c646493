#!/usr/bin/env python3
"""Time `logstore list` and `logstore describe` on a warehouse of N tables, side by side in one run.

Tables are written with delta-rs (no JVM) with the properties `create-table` stores, so that the
commands read exactly what they read in use. With a broker (--bootstrap-servers, or the local broker
when running), describe also fetches the topic's end offsets. The baseline is a bare interpreter.

Usage: .venv/bin/python scripts/bench_catalog.py [--tables 50] [--runs 10] [--bootstrap-servers B]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_warehouse(root: Path, n: int, bootstrap: str | None) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from logstore_cli.catalog.warehouse import stored_properties
    from logstore_cli.ddl import ParseOptions, parse_ddl

    for i in range(n):
        ddl = (
            f"CREATE TABLE bench.t{i:03d} (id BIGINT, name STRING, amount DECIMAL(10,2), "
            f"PRIMARY KEY (id) NOT ENFORCED) WITH ('log-store.enabled'='true', "
            f"'log-store.topic'='bench_t{i:03d}', 'log-store.address'='{bootstrap or '127.0.0.1:9'}')"
        )
        spec = parse_ddl(ddl, "bench.sql", ParseOptions())[0]
        props, _ = stored_properties(spec)
        data = pa.table(
            {
                "id": pa.array(range(100), pa.int64()),
                "name": pa.array([f"n{j}" for j in range(100)]),
                "amount": pa.array([j for j in range(100)], pa.decimal128(10, 2)),
            }
        )
        path = str(root / "bench" / f"t{i:03d}")
        write_deltalake(path, data)
        # delta-rs refuses non-delta.* keys at write time unless told not to check them
        DeltaTable(path).alter.set_table_properties(props, raise_if_not_exists=False)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=50)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bootstrap-servers")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wh = Path(tmp) / "wh"
        make_warehouse(wh, args.tables, args.bootstrap_servers)
        env = {**os.environ, "LOGSTORE_WAREHOUSE": str(wh)}
        ls = [sys.executable, "-m", "logstore_cli"]
        cases = {
            "python -c pass (baseline)": [sys.executable, "-c", "pass"],
            f"logstore list --json ({args.tables} tables)": [*ls, "list", "--json"],
            "logstore describe --no-topic --json": [
                *ls,
                "describe",
                "bench.t007",
                "--json",
                "--no-topic",
            ],
        }
        if args.bootstrap_servers:
            cases["logstore describe --json (with topic)"] = [
                *ls,
                "describe",
                "bench.t007",
                "--json",
            ]
        times: dict[str, list[float]] = {k: [] for k in cases}
        for cmd in cases.values():
            timed(cmd, env)  # warm-up
        for _ in range(args.runs):
            for name, cmd in cases.items():
                times[name].append(timed(cmd, env))
    base = statistics.median(times["python -c pass (baseline)"])
    print(f"{'command':45} {'median s':>9} {'max s':>7} {'x baseline':>10}")
    worst = 0.0
    for name, ts in times.items():
        med = statistics.median(ts)
        if name != "python -c pass (baseline)":
            worst = max(worst, med)
        print(f"{name:45} {med:9.3f} {max(ts):7.3f} {med / base:10.1f}")
    print(f"\nslowest median {worst:.3f}s vs budget 1.0s: {'OK' if worst < 1.0 else 'OVER BUDGET'}")
    return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
