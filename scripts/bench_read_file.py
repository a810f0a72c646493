#!/usr/bin/env python3
"""``logstore read --mode file`` of a 10,000-row table: the delta-rs engine against the Spark engine,
side by side in one run.

The table (``id BIGINT, name STRING, qty INT, price DECIMAL(10,2)``, a primary key, Change Data
Feed on) is written without Spark (version 0 as create-table leaves it, as the tests write it:
tests/deltalog.py; then ``--rows`` rows appended with delta-rs, a tenth of them updated and a
twentieth deleted), in a temporary warehouse removed at the end. Each case is the real CLI as a
shell script runs it, ``python -m logstore_cli read shop.orders --mode file ...`` with stdout to
/dev/null, timed from process start to exit (a Spark case includes starting its JVM, which is what
a user waits for). Cases: the snapshot as JSON lines and the change feed (``--changes``) as JSON
lines, each with ``--engine delta-rs`` (run with a PATH holding no ``java`` and no ``JAVA_HOME``)
and ``--engine spark``. Rounds are interleaved; medians are reported, with spark / delta-rs.

    .venv/bin/python scripts/bench_read_file.py [--rows 10000] [--rounds 3] [--no-spark] [--json]

``--no-spark`` times the delta-rs engine alone (a quick check; no ratio).

Target (issue 20): the delta-rs snapshot read under 1 s on a quiet machine; exit 1 when missed.
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
TABLE = "shop.orders"
DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, name STRING, qty INT, price DECIMAL(10,2), "
    "PRIMARY KEY (id) NOT ENFORCED)"
)
TARGET_S = 1.0
ENGINES = ("delta-rs", "spark")
READS = {"snapshot": [], "changes": ["--changes"]}


def make_table(warehouse: Path, rows: int) -> None:
    """The benchmark's table: ``rows`` rows, then updates and deletes (for the change feed)."""
    sys.path[:0] = [str(ROOT)]
    from decimal import Decimal

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from tests.deltalog import write_table

    path = write_table(warehouse, DDL)
    ids = range(rows)
    data = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "name": [f"customer-{i}" for i in ids],
            "qty": pa.array([i % 50 for i in ids], pa.int32()),
            "price": pa.array([Decimal(i % 997) / 4 for i in ids], pa.decimal128(10, 2)),
        }
    )
    write_deltalake(str(path), data, mode="append")
    DeltaTable(str(path)).update(updates={"qty": "qty + 1"}, predicate="id % 10 = 0")
    DeltaTable(str(path)).delete("id % 20 = 1")


def _no_java_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no JAVA_HOME and a PATH of this venv's bin only (no ``java`` on it)."""
    bare = {k: v for k, v in env.items() if k != "JAVA_HOME"}
    bare["PATH"] = str(Path(sys.executable).parent)
    return bare


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    with open(os.devnull, "w") as sink:
        proc = subprocess.run(
            cmd, env=env, cwd=cwd, stdout=sink, stderr=subprocess.PIPE, text=True, check=False
        )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000, help="rows of the table (default 10,000)")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--no-spark", action="store_true", help="time the delta-rs engine only")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    engines = ENGINES[:1] if args.no_spark else ENGINES
    if args.rows < 1 or args.rounds < 1:
        ap.error("--rows and --rounds must be at least 1")

    with tempfile.TemporaryDirectory(prefix="bench-read-file-") as name:
        tmp = Path(name)
        warehouse = tmp / "warehouse"
        make_table(warehouse, args.rows)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
        env |= {
            "LOGSTORE_WAREHOUSE": str(warehouse),
            "LOGSTORE_STATE_DIR": str(tmp / "state"),
            "PYTHONPATH": str(ROOT),
        }
        cli = [sys.executable, "-m", "logstore_cli", "read", TABLE, "--mode", "file", "-o", "jsonl"]
        todo = [
            (read, engine, [*cli, *flags, "--engine", engine],
             _no_java_env(env) if engine == "delta-rs" else env)
            for read, flags in READS.items()
            for engine in engines
        ]  # fmt: skip
        for _, _, cmd, case_env in todo:  # untimed: bytecode and page cache warm
            _run(cmd, case_env, tmp)
        times: dict[tuple[str, str], list[float]] = {(r, e): [] for r, e, _, _ in todo}
        for _ in range(args.rounds):
            for read, engine, cmd, case_env in todo:
                times[read, engine].append(_run(cmd, case_env, tmp))

    report: dict[str, Any] = {"rows": args.rows, "rounds": args.rounds, "reads": {}}
    for read in READS:
        medians = {e: statistics.median(times[read, e]) for e in engines}
        figures: dict[str, float | None] = {f"{e}_s": round(m, 3) for e, m in medians.items()}
        spark = medians.get("spark")
        figures["spark_over_delta_rs"] = (
            None if spark is None else round(spark / medians["delta-rs"], 1)
        )
        report["reads"][read] = figures
    ok = report["reads"]["snapshot"]["delta-rs_s"] < TARGET_S
    report["target_met"] = ok
    if args.json:
        print(json.dumps(report))
    else:
        print(f"read --mode file of {args.rows:,} rows, median of {args.rounds} rounds")
        print(f"{'read':<10} {'delta-rs (s)':>13} {'spark (s)':>10} {'spark/delta-rs':>15}")
        for read, r in report["reads"].items():
            spark_s, ratio = r.get("spark_s"), r["spark_over_delta_rs"]
            print(f"{read:<10} {r['delta-rs_s']:>13.3f} "
                  + (f"{'-':>10} {'-':>15}" if spark_s is None or ratio is None
                     else f"{spark_s:>10.3f} {ratio:>14.1f}x"))  # fmt: skip
        print(f"target: delta-rs snapshot < {TARGET_S:.0f} s: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
