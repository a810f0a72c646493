#!/usr/bin/env python3
"""Spark commands with the driver's class archive against without it, as a shell script runs them.

Each round, both ways, the order alternating round by round (median of each reported):
- ``ingest --once`` of three small epochs (one JSON file each, 50 changes) into a new keyed table;
- ``read --mode file --engine spark -o jsonl`` of that table.
"Without" passes ``--conf spark.driver.extraJavaOptions=-Xshare:auto`` (the JVM's own default): a
user's own class-sharing option, so logstore adds no archive (``jvm/class_archive.py``). The
archive is the one ``logstore setup`` built for this Java and pyspark; the script stops if there is
none. Every run gets a new warehouse and state directory; bytecode is cached first (this machine
sets PYTHONDONTWRITEBYTECODE=1; users' installs have it), as in scripts/bench_startup.py.

    .venv/bin/python scripts/bench_class_archive.py [--rounds 5] [--json]
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
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = "bench.archive"
DDL = f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED);"
WITHOUT = ["--conf", "spark.driver.extraJavaOptions=-Xshare:auto"]
WAYS = ("with archive", "without")
COMMANDS = ("ingest --once, 3 epochs", "read --engine spark")


def epoch_lines(epoch: int, changes: int = 50) -> str:
    """One epoch's JSON lines: inserts of new keys, then an update of the epoch's first key."""
    base = epoch * 1000
    rows = [{"op": "+I", "id": base + k, "name": f"n{k}"} for k in range(changes - 1)]
    rows.append({"op": "+U", "id": base, "name": "again"})
    return "".join(json.dumps(r) + "\n" for r in rows)


def order(round_index: int) -> tuple[str, ...]:
    """The ways in this round's order: alternating, so neither always runs on a warmer machine."""
    return WAYS if round_index % 2 == 0 else WAYS[::-1]


def _env(tmp: Path, run: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("SPARK_SUBMIT_OPTS", None)
    env |= {"PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "LOGSTORE_WAREHOUSE": str(run / "wh"),
            "LOGSTORE_STATE_DIR": str(run / "state")}  # fmt: skip
    return env


def _timed(args: Sequence[str], env: dict[str, str]) -> float:
    cmd = [sys.executable, "-m", "logstore_cli", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"logstore {' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def one_run(tmp: Path, way: str) -> dict[str, float]:
    run = tmp / "run"
    shutil.rmtree(run, ignore_errors=True)
    source = run / "source"
    source.mkdir(parents=True)
    for i in range(3):
        path = source / f"part-{i}.json"
        path.write_text(epoch_lines(i), encoding="utf-8")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # oldest first: the epochs in this order
    env = _env(tmp, run)
    extra = WITHOUT if way == "without" else []
    _timed(["create-table", "--sql", DDL], env)
    ingest = _timed(["ingest", TABLE, "--source", str(source), "--format", "json", "--source-option",
                     "maxFilesPerTrigger=1", "--once", "--emit", "file", *extra], env)  # fmt: skip
    read = _timed(
        ["read", TABLE, "--mode", "file", "--engine", "spark", "-o", "jsonl", *extra], env
    )
    return dict(zip(COMMANDS, (ingest, read), strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from logstore_cli.jvm import class_archive

    archive = class_archive.current_archive()
    if archive is None:
        raise SystemExit("no class archive for this Java and pyspark: run 'logstore setup' first")
    times = {(way, cmd): [] for way in WAYS for cmd in COMMANDS}  # type: dict[tuple[str, str], list[float]]
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as d:
        tmp = Path(d)
        _timed(["--help"], _env(tmp, tmp / "run"))  # cache bytecode
        for r in range(opts.rounds):
            for way in order(r):
                for cmd, seconds in one_run(tmp, way).items():
                    times[way, cmd].append(seconds)
    medians = {key: statistics.median(v) for key, v in times.items()}
    if opts.json:
        print(json.dumps({"rounds": opts.rounds, "archive": str(archive), "median_s": {
            f"{way}: {cmd}": m for (way, cmd), m in medians.items()}}, indent=2))  # fmt: skip
        return 0
    print(f"median of {opts.rounds} rounds; archive {archive}")
    for cmd in COMMANDS:
        with_, without = medians["with archive", cmd], medians["without", cmd]
        print(f"  {cmd:<26} with {with_:6.2f} s   without {without:6.2f} s   "
              f"with/without {with_ / without:5.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
