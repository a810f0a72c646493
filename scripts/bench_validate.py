#!/usr/bin/env python3
"""Time ``logstore validate`` end to end on a file of 1,000 CREATE TABLE statements.

Runs the real CLI as a subprocess (interpreter start, imports, read, parse, validate, output)
several times and reports the median, for the Rich summary and for ``--json``; then checks, with
``-X importtime``, that neither pyspark nor py4j was imported (no JVM for validation).

    .venv/bin/python scripts/bench_validate.py [--tables 1000] [--runs 5] [--target 2.0]

Exit code 1 when the median exceeds the target or a JVM-side module was imported.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_RUN_CLI = "import sys; from logstore_cli.cli.app import main; sys.argv[0] = 'logstore'; main()"
_FORBIDDEN = ("pyspark", "py4j", "delta", "confluent_kafka")

_SPARK = """CREATE TABLE IF NOT EXISTS db.orders_{i} (
    id BIGINT NOT NULL COMMENT 'order id',
    customer STRING,
    amount DECIMAL(12,2),
    tags ARRAY<STRING>,
    attrs MAP<STRING, STRING>,
    ts TIMESTAMP,
    PRIMARY KEY (id)
) USING delta
PARTITIONED BY (customer)
TBLPROPERTIES (
    "log-store.enabled" = "true",
    "log-store.topic" = "orders_{i}",
    "log-store.address" = "localhost:9092",
    "log-store.consistency-guarantee.enabled" = "true",
    "properties.security.protocol" = "SASL_SSL",
    "properties.sasl.jaas.config" = "org.apache.kafka.common.security.plain.PlainLoginModule required username='u' password='p';"
);
"""
_FLINK = """-- Paimon vocabulary, Flink shape
CREATE TABLE `db`.`events_{i}` (
    id INT,
    payload ROW<kind STRING, size BIGINT>,
    at TIMESTAMP(3),
    PRIMARY KEY (id) NOT ENFORCED
) WITH (
    'log.system' = 'kafka',
    'kafka.bootstrap.servers' = 'localhost:9092',
    'kafka.topic' = 'events_{i}',
    'log.consistency' = 'eventual',
    'log.system.partitions' = '3'
);
"""


def make_ddl(tables: int) -> str:
    return "".join((_SPARK if i % 2 == 0 else _FLINK).format(i=i) for i in range(tables))


def run_once(path: Path, *extra: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_CLI, "validate", str(path), *extra],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"validate failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def imported_modules(path: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _RUN_CLI, "validate", str(path), "--json"],
        capture_output=True,
        text=True,
    )
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def in_process_profile(text: str) -> dict[str, float]:
    """Where the time goes inside one parse (tokenize vs the rest), for the report."""
    from logstore_cli.ddl import parse_document
    from logstore_cli.ddl.lexer import tokenize
    from logstore_cli.ddl.source import clean

    t0 = time.perf_counter()
    tokenize(clean(text))
    t1 = time.perf_counter()
    result = parse_document(text, "bench.sql")
    t2 = time.perf_counter()
    assert not result.errors, result.errors[0].render()
    return {"tokenize_s": t1 - t0, "parse_document_s": t2 - t1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", type=float, default=2.0, help="seconds, median, per mode")
    args = ap.parse_args()

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tables.sql"
        text = make_ddl(args.tables)
        path.write_text(text, encoding="utf-8")
        print(f"{args.tables} tables, {len(text.splitlines())} lines, {len(text) / 1024:.0f} KiB")

        for label, extra in (("rich", ()), ("--json", ("--json",))):
            run_once(path, *extra)  # warm the OS file cache and __pycache__
            times = [run_once(path, *extra) for _ in range(args.runs)]
            median = statistics.median(times)
            ok &= median < args.target
            print(
                f"validate {label:7s} median {median:.3f} s  "
                f"(min {min(times):.3f}, max {max(times):.3f}, {args.runs} runs, target < {args.target} s)"
            )

        profile = in_process_profile(text)
        print(
            f"in process: tokenize {profile['tokenize_s']:.3f} s, "
            f"whole parse_document {profile['parse_document_s']:.3f} s"
        )
        modules = imported_modules(path)
        bad = sorted(m for m in modules if m.split(".")[0] in _FORBIDDEN)
        print(f"modules imported: {len(modules)}; JVM-side modules: {', '.join(bad) or 'none'}")
        ok &= not bad
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
