#!/usr/bin/env python3
"""``create-table`` end to end, as a shell script runs it: without a JVM against the Spark path.

Cases, interleaved round after round so machine noise hits all alike (median of each reported):
- ``create-table`` of a table without a log store, whose Delta table logstore commits itself (no
  JVM), once with Java on ``PATH`` and once with no Java at all (``PATH`` without ``java``,
  ``JAVA_HOME`` unset);
- the same DDL plus ``'delta.enableDeletionVectors' = 'true'``, a property only Spark lays out
  right, so create-table starts Spark (``local[1]``) to create it: what every create-table paid
  before issue 20;
- ``alter-table --set`` of a property on the first table (no JVM).
Every run gets a new warehouse and state directory. Bytecode is cached first (this machine sets
PYTHONDONTWRITEBYTECODE=1; users' installs have it), as in scripts/bench_startup.py.

    .venv/bin/python scripts/bench_create.py [--runs 5] [--json]

Target (issue 20): create-table of a table without a log store under 1 s with no Java on PATH.
Exit code 1 when it is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DDL = (
    "CREATE TABLE shop.orders (id BIGINT, customer STRING COMMENT 'who', amount DECIMAL(12,2), "
    "ts TIMESTAMP, PRIMARY KEY (id)) USING delta TBLPROPERTIES ('my.owner' = 'team-a'"
)
PLAIN = DDL + ")"
SPARK_ONLY = DDL + ", 'delta.enableDeletionVectors' = 'true')"
TARGET_S = 1.0


def _env(tmp: Path, *, java: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    env["LOGSTORE_SPARK_MASTER"] = "local[1]"
    if not java:
        env.pop("JAVA_HOME", None)
        env["PATH"] = os.pathsep.join(
            d for d in env["PATH"].split(os.pathsep) if not (Path(d) / "java").exists()
        )
    return env


def _run(tmp: Path, args: list[str], *, java: bool, fresh: bool) -> float:
    if fresh:
        for d in ("wh", "state"):
            shutil.rmtree(tmp / d, ignore_errors=True)
    cmd = [sys.executable, "-m", "logstore_cli", *args,
           "--warehouse", str(tmp / "wh")]  # fmt: skip
    env = {**_env(tmp, java=java), "LOGSTORE_STATE_DIR": str(tmp / "state")}
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} failed:\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    cases = {
        "create-table, no JVM": (["create-table", "--sql", PLAIN], True, True),
        "create-table, no JVM, no Java on PATH": (["create-table", "--sql", PLAIN], False, True),
        "alter-table --set, no JVM": (
            ["alter-table", "shop.orders", "--set", "my.owner=team-b"], False, False,
        ),
        "create-table through Spark (a Spark-only property)": (
            ["create-table", "--sql", SPARK_ONLY], True, True,
        ),
    }  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory(prefix="bench-create-") as d:
        tmp = Path(d)
        _run(tmp, ["create-table", "--sql", PLAIN], java=True, fresh=True)  # cache bytecode
        for _ in range(opts.runs):
            for name, (args, java, fresh) in cases.items():
                times[name].append(_run(tmp, args, java=java, fresh=fresh))
    medians = {name: statistics.median(t) for name, t in times.items()}
    spark = medians["create-table through Spark (a Spark-only property)"]
    no_java = medians["create-table, no JVM, no Java on PATH"]
    if opts.json:
        print(json.dumps({"runs": opts.runs, "median_s": medians}, indent=2))
    else:
        print(f"median of {opts.runs} interleaved runs each")
        for name, median in medians.items():
            print(f"  {name:<52} {median:7.3f} s   {median / spark:6.3f}x the Spark path")
        verdict = "met" if no_java < TARGET_S else "MISSED"
        print(f"target: create-table with no Java under {TARGET_S:.0f} s: {verdict}")
    return 0 if no_java < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
