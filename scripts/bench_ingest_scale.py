#!/usr/bin/env python3
"""Ingest cost as the table grows: seconds per epoch of 20,000 changes into a keyed table of 100k,
1M and 10M rows, file-only and double-write, next to a plain hand-written Structured Streaming
``foreachBatch`` MERGE of the same changes (what a user writes without logstore), in one run.

For each size S, three tables hold the same S rows (``id`` 0..S-1; Spark appends them in one write
after ``create-table``: an outside write, which the double-write job's first start carries into its
topic, in pieces, outside the timed epochs): a logstore table ingested file-only, one ingested
double-write (its own topic), and a plain Delta table. Then the same epochs (one JSON-lines file
each, read with ``maxFilesPerTrigger=1``: updates over random existing keys, inserts of new keys,
deletes; each key at most once per epoch) go into each **in rounds**: each round gives every mode
its next epoch (one bounded run resuming from the mode's checkpoint: the job with ``--once``, the
plain query with ``availableNow``), in an order that rotates by one each round, so that the JVM's
warm-up and the machine's noise fall on all modes alike (run one mode after another, the last one
ran on the warmest JVM and looked up to twice as fast). An epoch's time is the job's own
(``EpochReport.seconds``: read, log, Delta commit, markers) for logstore, and the ``foreachBatch``
call for the plain MERGE; the first round (Spark's planning and JIT warm-up) is reported but left
out of the median. After the epochs: each table's file count and a full read (``count()`` in Spark).
``--deletion-vectors`` turns deletion vectors on in all three tables. ``--delta-engine spark`` has
the job commit every epoch with Spark's MERGE (the default, ``auto``, commits them by delta-rs
for a table of up to 1 GiB of files; guide, "What an epoch's MERGE costs").

The reference MERGE: ``t.id = s.id``, delete when ``op = '-D'``, update all / insert all else. The
job's MERGE also bounds ``t.id`` to the epoch's key range, ranks a key's changes within the epoch
when a key occurs twice (never here: each key once per epoch; one aggregation over the epoch
tells) and sets Delta's idempotent-write ids, and double-write produces the records and the
markers too.

Without ``--bootstrap`` a single-node KRaft broker is started for the run. Everything the run
creates lives in one temporary directory, removed at the end (also after an error or Ctrl-C).

Usage: .venv/bin/python scripts/bench_ingest_scale.py [--sizes 100000,1000000,10000000]
       [--epochs N] [--changes N] [--partitions P] [--bootstrap HOST:PORT] [--json]
       [--deletion-vectors] [--delta-engine auto|spark]
Exit 0 when done, 1 when a run failed or did not do all its work, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ingest as base

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.interrupt import StopOnCtrlC

FILE, DOUBLE, PLAIN = "file-only", "double-write", "plain MERGE"
MODES = (FILE, DOUBLE, PLAIN)
EMIT = {FILE: "file", DOUBLE: "file,log"}
UPDATES, INSERTS = 0.7, 0.2  # of each epoch's changes; the rest are deletes
COLUMNS = base.COLUMNS
SCHEMA = "id BIGINT, name STRING, qty INT, price DECIMAL(10,2), op STRING"


# -- the pure parts: options, the changes, statistics, the report ---------------------------------


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    epochs: int
    changes: int
    partitions: int
    bootstrap: str | None
    json: bool
    dv: bool = False  # deletion vectors on in every table (logstore's and the plain one)
    engine: str = "auto"  # who commits the job's epochs to Delta (``--delta-engine``)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of row counts: {text!r} (e.g. 100000,1000000)"
        ) from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"row counts must be at least 1, got {text!r}")
    return sizes


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """The options; bad values exit 2 with argparse's message naming the flag."""
    ap = argparse.ArgumentParser(
        prog="bench_ingest_scale.py",
        description="Seconds per epoch against table size: logstore and a plain foreachBatch MERGE.",
    )
    ap.add_argument("--sizes", type=_sizes, default=(100_000, 1_000_000, 10_000_000),
                    help="table sizes in rows, comma-separated")  # fmt: skip
    ap.add_argument("--epochs", type=base._positive, default=6, help="epochs per size and mode")
    ap.add_argument("--changes", type=base._positive, default=20_000, help="changes per epoch")
    ap.add_argument("--partitions", type=base._positive, default=3, help="partitions per topic")
    ap.add_argument("--bootstrap", default=None, help="an existing broker (default: start one)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--deletion-vectors", action="store_true",
                    help="turn deletion vectors on in every table, logstore's and the plain one")  # fmt: skip
    ap.add_argument("--delta-engine", choices=("auto", "spark"), default="auto",
                    help="who commits the job's epochs: auto (delta-rs up to 1 GiB) or spark")  # fmt: skip
    ns = ap.parse_args(argv)
    if ns.epochs < 2:
        ap.error("argument --epochs: at least 2 (the first epoch of each query is warm-up)")
    return Options(
        ns.sizes, ns.epochs, ns.changes, ns.partitions, ns.bootstrap, ns.json,
        ns.deletion_vectors, ns.delta_engine,
    )  # fmt: skip


def epoch_changes(
    size: int, changes: int, epochs: int, seed: int = 0
) -> list[list[dict[str, Any]]]:
    """Each epoch's changes to a table holding ids ``0..size-1``: updates over random live keys,
    inserts of new keys, deletes of live keys, each key at most once per epoch; every change
    valid against the state the epochs before left."""
    rnd = random.Random(seed)
    deleted: set[int] = set()
    next_id = size  # new keys from here up
    n_ins, n_upd = int(changes * INSERTS), int(changes * UPDATES)
    n_del = changes - n_ins - n_upd
    out = []
    for e in range(epochs):
        taken: set[int] = set()
        while len(taken) < n_upd + n_del:  # distinct live keys: the first n_upd updated
            k = rnd.randrange(next_id)
            if k not in deleted:
                taken.add(k)
        picked = rnd.sample(sorted(taken), len(taken))
        batch = [_row(k, f"u{e}", rnd, "+U") for k in picked[:n_upd]]
        batch += [_row(k, f"d{e}", rnd, "-D") for k in picked[n_upd:]]
        deleted.update(picked[n_upd:])
        batch += [_row(next_id + i, f"i{e}", rnd, "+I") for i in range(n_ins)]
        next_id += n_ins
        rnd.shuffle(batch)
        out.append(batch)
    return out


def _row(key: int, name: str, rnd: random.Random, op: str) -> dict[str, Any]:
    return {"id": key, "name": f"{name}-{key}", "qty": rnd.randrange(1000),
            "price": f"{rnd.randrange(100_000) / 100:.2f}", "op": op}  # fmt: skip


@dataclass
class ModeRun:
    mode: str
    size: int
    epochs: list[float]  # seconds per epoch, in order
    phases: list[dict[str, float]] = field(default_factory=list)  # logstore's, per epoch
    files: int = 0
    read_s: float = 0.0
    rows_after: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.epochs[1:])

    def phase_medians(self) -> dict[str, float]:
        """Each phase's median over epochs 2.. (the job's read, log, delta, markers)."""
        later = self.phases[1:]
        names = [p for p in ("read", "log", "delta", "markers") if any(p in x for x in later)]
        return {p: statistics.median(x.get(p, 0.0) for x in later) for p in names}


@dataclass
class Result:
    runs: list[ModeRun] = field(default_factory=list)

    def by_size(self) -> dict[int, dict[str, ModeRun]]:
        out: dict[int, dict[str, ModeRun]] = {}
        for run in self.runs:
            out.setdefault(run.size, {})[run.mode] = run
        return out


def format_report(result: Result, facts: Mapping[str, object]) -> str:
    lines = [
        "Seconds per epoch (median of epochs 2.., first in brackets) against table size; ratio to "
        "the plain foreachBatch MERGE of the same changes in the same run",
        "",
        f"{'rows':>11}  {'mode':<13} {'s/epoch':>8} {'(first)':>8} {'x plain':>8} "
        f"{'files':>6} {'read s':>7}  phases (median s)",
    ]
    for size, modes in sorted(result.by_size().items()):
        plain = modes.get(PLAIN)
        for mode in MODES:
            run = modes.get(mode)
            if run is None:
                continue
            ratio = f"{run.median / plain.median:8.2f}" if plain and plain.median > 0 else " " * 8
            phases = "  ".join(f"{p} {t:.2f}" for p, t in run.phase_medians().items())
            lines.append(
                f"{size:>11,}  {mode:<13} {run.median:8.2f} {run.epochs[0]:8.2f} {ratio} "
                f"{run.files:6d} {run.read_s:7.2f}  {phases}".rstrip()
            )
    lines.append("")
    lines += [f"{k}: {v}" for k, v in facts.items()]
    return "\n".join(lines)


def report_json(result: Result, facts: Mapping[str, object]) -> dict[str, Any]:
    sizes = []
    for size, modes in sorted(result.by_size().items()):
        plain = modes.get(PLAIN)
        sizes.append({
            "rows": size,
            "modes": {
                mode: {
                    "median_s": run.median, "epochs_s": run.epochs, "files": run.files,
                    "read_s": run.read_s, "rows_after": run.rows_after,
                    "phases_median_s": run.phase_medians(),
                    "ratio_to_plain": run.median / plain.median if plain and plain.median else None,
                }
                for mode, run in modes.items()
            },
        })  # fmt: skip
    return {"sizes": sizes, "facts": dict(facts)}


def mode_order(index: int) -> list[str]:
    """The modes of the ``index``-th size, rotated by one each size."""
    k = index % len(MODES)
    return list(MODES[k:] + MODES[:k])


# -- the run ---------------------------------------------------------------------------------------


class ScaleBench:
    def __init__(self, spark: SparkSession, root: Path, bootstrap: str, opts: Options,
                 stop: StopOnCtrlC) -> None:  # fmt: skip
        from logstore_cli import config as cfg

        self.spark, self.root, self.bootstrap, self.opts, self.stop = (
            spark,
            root,
            bootstrap,
            opts,
            stop,
        )
        self.warehouse = root / "warehouse"
        self.kafka = cfg.KafkaConfig(bootstrap_servers=bootstrap, timeout_s=base.KAFKA_TIMEOUT_S)
        self.config = cfg.Config(warehouse=str(self.warehouse), kafka=self.kafka)

    def _ddl(self, name: str, topic: str) -> str:
        props = {"log-store.enabled": "true", "log-store.topic": topic,
                 "log-store.address": self.bootstrap,
                 "log.system.partitions": str(self.opts.partitions)}  # fmt: skip
        if self.opts.dv:
            props["delta.enableDeletionVectors"] = "true"  # a Spark-only property: Spark creates it
        body = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        return f"CREATE TABLE {name} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ({body});"

    def _load(self, path: Path, size: int) -> None:
        """``size`` rows, ids 0..size-1, appended in one Spark write."""
        rows = self.spark.range(size).selectExpr(
            "id", "concat('r-', id) AS name", "CAST(id % 1000 AS INT) AS qty",
            "CAST((id % 100000) / 100 AS DECIMAL(10,2)) AS price",
        )  # fmt: skip
        rows.write.format("delta").mode("append").save(str(path))

    def logstore_table(self, mode: str, size: int) -> str:
        from logstore_cli.ddl import ParseOptions, parse_ddl
        from logstore_cli.provision import service
        from logstore_cli.provision.delta_log import DeltaLogStore
        from logstore_cli.provision.delta_spark import SparkDeltaStore
        from logstore_cli.provision.kafka_topics import KafkaTopicStore
        from logstore_cli.provision.service import Stores

        tag = f"{'file' if mode == FILE else 'double'}_{size}"
        spec = parse_ddl(self._ddl(f"bench.{tag}", f"bench-{tag}"), "b.sql", ParseOptions())[0]
        topics = KafkaTopicStore(self.kafka)
        try:
            spark = self.spark
            delta = DeltaLogStore(self.warehouse, SparkDeltaStore(self.warehouse, lambda: spark))
            service.create_tables([spec], self.warehouse, Stores(delta, topics))
        finally:
            topics.close()
        self._load(self.warehouse / "bench" / tag, size)
        return spec.name

    def plain_table(self, size: int) -> Path:
        path = self.root / "plain" / str(size)
        props = " TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')" if self.opts.dv else ""
        self.spark.sql(f"CREATE TABLE delta.`{path}` ({COLUMNS}) USING delta{props}")
        self._load(path, size)
        return path

    def ingest_epoch(self, name: str, mode: str, source: Path) -> tuple[float, dict[str, float]]:
        """One bounded run of the job over ``source`` (one new file: one epoch), resuming from
        the checkpoint of the run before; the epoch's own time and phases."""
        from logstore_cli.cli.context import Context
        from logstore_cli.cli.ingest import build_job
        from logstore_cli.ingest import plan
        from logstore_cli.jobs import ingest as job_api

        job = build_job(
            Context(self.config), name, source=str(source), format="json",
            source_options={"maxFilesPerTrigger": "1"}, source_bootstrap=None,
            generate=plan.GenerateSource(1, 1, None, 0.0, 0.0, 0), op_column="op",
            sequence_column=None, emit=EMIT[mode], trigger_s=0.5, once=True, job="bench",
            checkpoint=str(self.root / "checkpoints" / name),
            lease_ttl_s=job_api.DEFAULT_LEASE_TTL_S, max_epochs=None, skip_outside_through=None,
            delta_engine=self.opts.engine,
        )  # fmt: skip
        reports: list[Any] = []
        lease = job_api.acquire_lease(job)
        run = job_api.start(self.spark, job, lease, on_epoch=reports.append)
        job_api.wait(run, stop=self.stop.requested.is_set)
        self.stop.check()
        done = [r for r in reports if r.rows]
        if len(done) != 1:
            raise RuntimeError(f"{mode}: {len(done)} epochs ran in one round, expected 1")
        return done[0].seconds, dict(done[0].phases)

    def plain_epoch(self, path: Path, source: Path) -> float:
        """One ``availableNow`` run of the plain query over ``source`` (one new file), resuming
        from its checkpoint; the ``foreachBatch`` call's time."""
        from delta.tables import DeltaTable

        times: list[float] = []

        def upsert(batch: Any, batch_id: int) -> None:  # what a user writes without logstore
            t0 = time.perf_counter()
            (
                DeltaTable.forPath(batch.sparkSession, str(path)).alias("t")
                .merge(batch.alias("s"), "t.id = s.id")
                .whenMatchedDelete(condition="s.op = '-D'")
                .whenMatchedUpdate(condition="s.op != '-D'",
                                   set={c: f"s.{c}" for c in ("id", "name", "qty", "price")})
                .whenNotMatchedInsert(condition="s.op != '-D'",
                                      values={c: f"s.{c}" for c in ("id", "name", "qty", "price")})
                .execute()
            )  # fmt: skip
            times.append(time.perf_counter() - t0)

        query = (
            self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
            .writeStream.foreachBatch(upsert)
            .option("checkpointLocation", str(self.root / "plain-checkpoints" / path.name))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        self.stop.check()
        if len(times) != 1:
            raise RuntimeError(f"plain: {len(times)} batches ran in one round, expected 1")
        return times[0]

    def _after(self, run: ModeRun, path: Path) -> ModeRun:
        from deltalake import DeltaTable

        run.files = len(DeltaTable(str(path)).file_uris())
        t0 = time.perf_counter()
        run.rows_after = self.spark.read.format("delta").load(str(path)).count()
        run.read_s = time.perf_counter() - t0
        return run

    def size(self, index: int, size: int, say: Callable[[str], None]) -> list[ModeRun]:
        """The three tables of ``size`` rows, then the epochs in rounds: each round gives every
        mode its next epoch, in an order that rotates by one each round, so that the JVM's
        warm-up and the machine's noise fall on all modes alike (one mode after another, the
        last one ran on the warmest JVM)."""
        epochs = epoch_changes(size, self.opts.changes, self.opts.epochs, seed=size)
        expected = size + sum(1 if r["op"] == "+I" else -1 if r["op"] == "-D" else 0
                              for b in epochs for r in b)  # fmt: skip
        say(f"{size:,} rows: loading the three tables ...")
        names = {mode: self.logstore_table(mode, size) for mode in (FILE, DOUBLE)}
        paths = {mode: self.warehouse / name.replace(".", "/") for mode, name in names.items()}
        paths[PLAIN] = self.plain_table(size)
        sources = {mode: self.root / "changes" / str(size) / mode.replace(" ", "-")
                   for mode in MODES}  # fmt: skip
        runs = {mode: ModeRun(mode, size, []) for mode in MODES}
        for i, batch in enumerate(epochs):
            text = "".join(json.dumps(r) + "\n" for r in batch)
            order = mode_order(index + i)
            for mode in order:
                sources[mode].mkdir(parents=True, exist_ok=True)
                (sources[mode] / f"part-{i:05d}.json").write_text(text, encoding="utf-8")
                if mode == PLAIN:
                    runs[mode].epochs.append(self.plain_epoch(paths[mode], sources[mode]))
                else:
                    seconds, phases = self.ingest_epoch(names[mode], mode, sources[mode])
                    runs[mode].epochs.append(seconds)
                    runs[mode].phases.append(phases)
            say(f"  round {i + 1}/{len(epochs)}: " + ", ".join(
                f"{m} {runs[m].epochs[-1]:.2f} s" for m in order))  # fmt: skip
        for mode in MODES:
            run = self._after(runs[mode], paths[mode])
            if run.rows_after != expected:
                raise RuntimeError(f"{mode}: {run.rows_after} rows after, expected {expected}")
            say(f"{size:,} rows, {mode}: median {run.median:.2f} s/epoch (first "
                f"{run.epochs[0]:.2f} s), {run.files} files, read {run.read_s:.2f} s")  # fmt: skip
        return [runs[mode] for mode in MODES]


def measure(opts: Options, say: Callable[[str], None]) -> tuple[Result, dict[str, object]]:
    from logstore_cli.jobs.ingest import stop_on_ctrl_c

    root = Path(tempfile.mkdtemp(prefix="logstore-bench-scale-"))
    loads = [base._load()]
    bopts = base.Options(0, 1, 1, opts.partitions, 0, opts.bootstrap, False)
    try:
        with (
            base._broker(bopts, root) as (bootstrap, _pid),
            base._spark(root) as spark,
            stop_on_ctrl_c(say, quiet_second=True) as stop,
        ):
            bench = ScaleBench(spark, root, bootstrap, opts, stop)
            result = Result()
            for i, size in enumerate(opts.sizes):
                result.runs += bench.size(i, size, say)
                loads.append(base._load())
            facts = {
                "changes_per_epoch": opts.changes,
                "epochs": opts.epochs,
                "mix": f"{UPDATES:.0%} updates, {INSERTS:.0%} inserts, "
                f"{1 - UPDATES - INSERTS:.0%} deletes",
                "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                "deletion_vectors": "on in every table" if opts.dv else "off (Delta's default)",
                "delta_engine": opts.engine,
                **base.machine_facts(opts.bootstrap is None),
                "load_average": " | ".join(loads),
            }
            return result, facts
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    from logstore_cli.errors import LogstoreError

    try:
        result, facts = measure(opts, say)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except LogstoreError as exc:
        say(f"error: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
        return 1
    except RuntimeError as exc:  # a run did not do all its work (see ScaleBench)
        say(f"error: {exc}")
        return 1
    if opts.json:
        print(json.dumps(report_json(result, facts)))
    else:
        print(format_report(result, facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
