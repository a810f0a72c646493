#!/usr/bin/env python3
"""What reading a streaming query's progress reports costs the ingest CLI after every epoch:
PySpark's ``query.recentProgress`` (every report the query keeps, its last 100, each converted
in dozens of py4j calls) against ``jobs.ingest.progress_after`` (the reports after the last one
taken, as JSON: one report an epoch), side by side in one run.

A local Spark session runs a ``foreachBatch`` query of ``--batches`` micro-batches (one tiny JSON
file each, ``maxFilesPerTrigger=1``), then times each way of reading, interleaved, ``--rounds``
times: ``recentProgress``; ``progress_after`` of the newest batch's report only (what the CLI
reads after an epoch); ``progress_after`` of all the kept reports.

    .venv/bin/python scripts/bench_progress.py [--batches 120] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, default=120, help="micro-batches run (120)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds (5)")
    args = ap.parse_args()
    if args.batches < 2 or args.rounds < 1:
        ap.error("--batches must be at least 2 and --rounds at least 1")
    sys.path[:0] = [str(ROOT)]
    from logstore_cli.jobs.ingest import progress_after
    from logstore_cli.jobs.spark import SparkSettings, build_session

    with tempfile.TemporaryDirectory(prefix="bench-progress-") as name:
        tmp = Path(name)
        source = tmp / "in"
        source.mkdir()
        for i in range(args.batches):
            (source / f"part-{i:05d}.json").write_text(f'{{"id": {i}}}\n', encoding="utf-8")
        spark = build_session(SparkSettings(app_name="logstore bench_progress", work_dir=tmp / "s"))
        try:
            query = (
                spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1)
                .json(str(source)).writeStream.foreachBatch(lambda batch, _: None)
                .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True).start()
            )  # fmt: skip
            query.awaitTermination()
            kept = query.recentProgress
            newest = int(kept[-1].batchId)
            ways: dict[str, Callable[[], Any]] = {
                "recentProgress (all kept)": lambda: query.recentProgress,
                "progress_after (newest)": lambda: progress_after(query, newest - 1),
                "progress_after (all kept)": lambda: progress_after(query, None),
            }
            times: dict[str, list[float]] = {way: [] for way in ways}
            for _ in range(args.rounds):
                for way, read in ways.items():
                    start = time.perf_counter()
                    read()
                    times[way].append(time.perf_counter() - start)
        finally:
            spark.stop()

    base = statistics.median(times["recentProgress (all kept)"])
    print(f"{len(kept)} reports kept of {args.batches} batches; median of {args.rounds} rounds")
    print(f"{'read':<28} {'median':>12} {'recentProgress / it':>20}")
    for way, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{way:<28} {median * 1000:9.1f} ms {base / median:19.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
