#!/usr/bin/env python3
"""What an epoch's Delta commit costs by engine: the same MERGE of the same changes into the same
keyed table (Change Data Feed on, as logstore's tables), by Spark (delta-spark's
``DeltaTable.merge``, as the ingest job runs it with ``--delta-engine spark`` or past delta-rs'
bounds) and by delta-rs (``deltalake``'s ``DeltaTable.merge``, in this process, no JVM, a MERGE
of the shape the job's delta-rs commit makes), side by side in one run.

For each size S, two Delta tables hold the same S rows (``id`` 0..S-1, written by Spark in four
files, as ``bench_ingest_scale.py`` loads them). Then the same epochs of changes
(``bench_ingest_scale.epoch_changes``: 70% updates of random live keys, 20% inserts, 10% deletes,
each key once an epoch) are merged into each, the engines' order alternating every epoch. Each
MERGE is the job's: ``t.id = s.id AND t.id BETWEEN <the epoch's min and max>``, delete on ``-D``,
update and insert otherwise, with Delta's idempotent-write transaction id (app id and version) and
``userMetadata`` on the commit. Timed: the MERGE call, from a source already in memory (a cached
Spark DataFrame; an Arrow table) — and, apart, what handing the epoch's merge source from Spark to
the driver as Arrow costs (``DataFrame.toArrow()`` of the cached source), which a delta-rs commit
inside the job would add. The first epoch of each engine (warm-up) is reported but left out of the
median.

After the epochs both tables are compared (the same rows, read back with delta-rs) and Spark reads
the delta-rs table's snapshot and its Change Data Feed: a ratio between two different results
would mean nothing, so a difference fails the run.

Everything lives in one temporary directory, removed at the end (also after an error or Ctrl-C).

Usage: .venv/bin/python scripts/bench_merge_engines.py [--sizes 100000,1000000,10000000]
       [--epochs N] [--changes N] [--json]
Exit 0 when done, 1 when a run failed or the engines' tables differ, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ingest_scale as scale

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

SPARK, DELTA_RS = "spark", "delta-rs"
ENGINES = (SPARK, DELTA_RS)
COLUMNS = ("id", "name", "qty", "price")
WRITER = "w-bench"  # the transaction app id both engines commit with


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    epochs: int
    changes: int
    json: bool


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """The options; bad values exit 2 with argparse's message naming the flag."""
    ap = argparse.ArgumentParser(
        prog="bench_merge_engines.py",
        description="An epoch's Delta MERGE by Spark and by delta-rs, side by side.",
    )
    ap.add_argument("--sizes", type=scale._sizes, default=(100_000, 1_000_000, 10_000_000),
                    help="table sizes in rows, comma-separated")  # fmt: skip
    ap.add_argument("--epochs", type=scale.base._positive, default=5, help="epochs per size")
    ap.add_argument("--changes", type=scale.base._positive, default=20_000,
                    help="changes per epoch")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ns = ap.parse_args(argv)
    if ns.epochs < 2:
        ap.error("argument --epochs: at least 2 (the first epoch of each engine is warm-up)")
    return Options(ns.sizes, ns.epochs, ns.changes, ns.json)


def engine_order(epoch: int) -> tuple[str, ...]:
    """Spark first in even epochs, delta-rs first in odd ones: a warmer machine favours neither."""
    return ENGINES if epoch % 2 == 0 else ENGINES[::-1]


@dataclass
class SizeRun:
    size: int
    seconds: dict[str, list[float]] = field(default_factory=lambda: {e: [] for e in ENGINES})
    to_arrow: list[float] = field(default_factory=list)  # the source's hand-over, per epoch
    files: dict[str, int] = field(default_factory=dict)
    rows_after: int = 0

    def median(self, engine: str) -> float:
        return statistics.median(self.seconds[engine][1:])

    def ratio(self) -> float | None:
        """Spark's median over delta-rs': how many times slower Spark's MERGE is."""
        rs = self.median(DELTA_RS)
        return self.median(SPARK) / rs if rs > 0 else None


def format_report(runs: Sequence[SizeRun], facts: Mapping[str, object]) -> str:
    lines = [
        "Seconds per MERGE of one epoch's changes (median of epochs 2.., first in brackets); "
        "Spark / delta-rs",
        "",
        f"{'rows':>11}  {'spark':>7} {'(first)':>8}  {'delta-rs':>8} {'(first)':>8}  "
        f"{'spark/rs':>8}  {'toArrow':>7}  files spark, rs",
    ]
    for run in runs:
        ratio = run.ratio()
        shown = f"{ratio:8.1f}" if ratio is not None else " " * 8
        lines.append(
            f"{run.size:>11,}  {run.median(SPARK):7.2f} {run.seconds[SPARK][0]:8.2f}  "
            f"{run.median(DELTA_RS):8.2f} {run.seconds[DELTA_RS][0]:8.2f}  {shown}  "
            f"{statistics.median(run.to_arrow[1:]):7.2f}  "
            f"{run.files.get(SPARK, 0)}, {run.files.get(DELTA_RS, 0)}"
        )
    lines.append("")
    lines += [f"{k}: {v}" for k, v in facts.items()]
    return "\n".join(lines)


def report_json(runs: Sequence[SizeRun], facts: Mapping[str, object]) -> dict[str, Any]:
    return {
        "sizes": [
            {
                "rows": run.size,
                "median_s": {e: run.median(e) for e in ENGINES},
                "epochs_s": run.seconds,
                "spark_over_delta_rs": run.ratio(),
                "to_arrow_median_s": statistics.median(run.to_arrow[1:]),
                "files": run.files,
                "rows_after": run.rows_after,
            }
            for run in runs
        ],
        "facts": dict(facts),
    }


def arrow_changes(changes: Sequence[Mapping[str, Any]]) -> pa.Table:
    """One epoch's changes as an Arrow table of the table's types, ``op`` included."""
    import pyarrow as pa

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int32()),
                        ("price", pa.decimal128(10, 2)), ("op", pa.string())])  # fmt: skip
    rows = [{**c, "price": Decimal(c["price"])} for c in changes]
    return pa.Table.from_pylist(rows, schema=schema)


# -- the run ---------------------------------------------------------------------------------------


class MergeBench:
    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark, self.root = spark, root

    def _load(self, path: Path, size: int) -> None:
        from pyspark.sql import functions as F

        rows = self.spark.range(size).select(
            F.col("id"),
            F.concat(F.lit("n-"), F.col("id").cast("string")).alias("name"),
            (F.col("id") % 1000).cast("int").alias("qty"),
            (F.col("id") % 100_000 / 100).cast("decimal(10,2)").alias("price"),
        )
        (rows.repartition(4).write.format("delta")
         .option("delta.enableChangeDataFeed", "true").save(str(path)))  # fmt: skip

    def _spark_merge(self, path: Path, source: DataFrame, low: int, high: int, epoch: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        values: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in COLUMNS}
        conf = self.spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", WRITER)
        conf.set("spark.databricks.delta.write.txnVersion", str(epoch))
        conf.set("spark.databricks.delta.commitInfo.userMetadata", f"bench epoch {epoch}")
        try:
            (DeltaTable.forPath(self.spark, str(path)).alias("t")
             .merge(source.alias("s"), F.expr(f"t.id = s.id AND t.id BETWEEN {low} AND {high}"))
             .whenMatchedDelete(condition="s.op = '-D'")
             .whenMatchedUpdate(condition="s.op != '-D'", set=values)
             .whenNotMatchedInsert(condition="s.op != '-D'", values=values)
             .execute())  # fmt: skip
        finally:
            for key in ("write.txnAppId", "write.txnVersion", "commitInfo.userMetadata"):
                conf.unset(f"spark.databricks.delta.{key}")

    @staticmethod
    def _rs_merge(path: Path, source: pa.Table, low: int, high: int, epoch: int) -> None:
        from deltalake import CommitProperties, DeltaTable, Transaction

        values = {c: f"s.{c}" for c in COLUMNS}
        props = CommitProperties(
            app_transactions=[Transaction(app_id=WRITER, version=epoch)],
            custom_metadata={"userMetadata": f"bench epoch {epoch}"},
            max_commit_retries=0,
        )
        (DeltaTable(str(path))
         .merge(source, f"t.id = s.id AND t.id BETWEEN {low} AND {high}", source_alias="s",
                target_alias="t", commit_properties=props)
         .when_matched_delete("s.op = '-D'")
         .when_matched_update(values, "s.op != '-D'")
         .when_not_matched_insert(values, "s.op != '-D'")
         .execute())  # fmt: skip

    def run_size(self, size: int, opts: Options, say: Any) -> SizeRun:
        paths = {e: self.root / f"{e}-{size}" for e in ENGINES}
        say(f"{size:,} rows: loading the two tables ...")
        for path in paths.values():
            self._load(path, size)
        run = SizeRun(size)
        for epoch, changes in enumerate(scale.epoch_changes(size, opts.changes, opts.epochs)):
            arrow = arrow_changes(changes)
            source = self.spark.createDataFrame(arrow).cache()
            source.count()
            low, high = min(c["id"] for c in changes), max(c["id"] for c in changes)
            started = time.perf_counter()
            source.toArrow()
            run.to_arrow.append(time.perf_counter() - started)
            took = []
            for engine in engine_order(epoch):
                started = time.perf_counter()
                if engine == SPARK:
                    self._spark_merge(paths[SPARK], source, low, high, epoch)
                else:
                    self._rs_merge(paths[DELTA_RS], arrow, low, high, epoch)
                run.seconds[engine].append(time.perf_counter() - started)
                took.append(f"{engine} {run.seconds[engine][-1]:.2f} s")
            source.unpersist()
            say(f"  epoch {epoch + 1}/{opts.epochs}: " + ", ".join(took))
        run.rows_after = self._check(paths, opts.epochs)
        run.files = {e: _files(p) for e, p in paths.items()}
        return run

    def _check(self, paths: Mapping[str, Path], epochs: int) -> int:
        """The two tables hold the same rows, each engine's commits carry the transaction id and
        metadata, and Spark reads the delta-rs table and its Change Data Feed; the row count."""
        from deltalake import DeltaTable

        tables = {e: DeltaTable(str(p)) for e, p in paths.items()}
        data = {e: t.to_pyarrow_table().sort_by("id") for e, t in tables.items()}
        if not data[SPARK].equals(data[DELTA_RS]):
            raise SystemExit("the engines' tables differ after the same MERGEs")
        for engine, table in tables.items():
            if table.transaction_version(WRITER) != epochs - 1:
                raise SystemExit(f"{engine}'s table does not record the last epoch's transaction")
        read = self.spark.read.format("delta").load(str(paths[DELTA_RS]))
        feed = (self.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", 1).load(str(paths[DELTA_RS])))  # fmt: skip
        if read.count() != data[DELTA_RS].num_rows or feed.count() == 0:
            raise SystemExit("Spark does not read the delta-rs table as delta-rs wrote it")
        return data[SPARK].num_rows


def _files(path: Path) -> int:
    from deltalake import DeltaTable

    uris: list[str] = list(DeltaTable(str(path)).file_uris())
    return len(uris)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stderr if opts.json else sys.stdout, flush=True)

    from deltalake import __version__ as deltalake_version

    from logstore_cli.jobs.spark import SparkSettings, build_session

    root = Path(tempfile.mkdtemp(prefix="logstore-bench-merge-"))
    try:
        spark = build_session(SparkSettings(app_name="bench-merge-engines",
                                            work_dir=root / "spark"))  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        bench = MergeBench(spark, root)
        runs = [bench.run_size(size, opts, say) for size in opts.sizes]
        facts = {
            "changes_per_epoch": opts.changes,
            "epochs": opts.epochs,
            "mix": "70% updates, 20% inserts, 10% deletes",
            "cpus": os.cpu_count(),
            "spark": spark.version,
            "deltalake": deltalake_version,
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        }
        if opts.json:
            print(json.dumps(report_json(runs, facts), indent=2))
        else:
            print(format_report(runs, facts))
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
