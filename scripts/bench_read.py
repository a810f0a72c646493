#!/usr/bin/env python3
"""Committed-read throughput against the raw confluent-kafka consumer, per engine, and
write-to-visible latency of following reads per read level, in one run.

**Throughput.** One topic is filled with ``--records`` change records (the generated changes of the
ingest benchmark: inserts, update pairs, deletes) in epochs of ``--epoch-records``, each followed
by its commit marker on every partition, written as the ingest job writes them (``LogProducer``,
``EpochEncoder``, records, flush, markers, flush; log-only markers, no Spark). Then, in
``--rounds`` rounds whose order rotates, each case reads the whole topic to its end offsets:

- **raw consumer**: what a user writes by hand: ``confluent_kafka.Consumer`` with default
  settings, ``assign`` every partition from its low watermark, ``consume`` batches,
  ``json.loads`` of each value, until the topic's record count is read;
- **consumer**: the consumer engine, ``LogReader(...).read(start, end)`` at ``committed``, what it
  emits counted (a no-op sink);
- **consumer jsonl**: ``read_with_consumer`` (what ``logstore read --engine consumer`` runs) to
  the CLI's JSON-lines sink writing to ``/dev/null``: the consumer engine plus the metadata of each
  change and its JSON line;
- **spark**: ``spark.read.format("logstore").option("consistency", "committed").load(name)`` and
  ``toArrow()`` (what ``logstore read --engine spark`` drains), on one session started once.

Start-up is timed apart from the read: raw = the consumer built and the watermarks asked; consumer
= the ``LogReader`` built and its start and end offsets; spark = ``load()`` (the table resolved on
the driver). The read runs from there to the last record; records/s = the topic's records
(markers included) over the read's seconds. ``consumer jsonl`` is timed whole (start-up included)
and compared with the raw consumer's whole time. The Spark session's start and its first read
(planning, Python workers started) are reported once, apart: a whole untimed round comes first.
Ratios are per round (the engine's records/s over the raw consumer's in the same round), and their
median is the headline.

**Latency.** A writer thread produces ``--rate`` epochs per second of ``--epoch-size`` inserts with
unique ids (records, flush, a marker per partition, flush: the ingest job's order), and a
following reader (``read_with_consumer`` with ``follow``, from ``latest``, in a thread of this
process) records when it emits each row. Write-to-visible = the emit time minus the time the
flush of the row's own records returned, so at ``committed`` it includes the marker's production.
Per level ``committed``, ``eventual``, ``none``: ``--samples`` rows, after the reader has shown
the first row of the warm-up epochs. The Spark engine's following read (micro-batches through
``foreachBatch``) is measured the same way, with ``--spark-samples`` rows per level.

The broker: ``--bootstrap``, else the local broker when ``logstore broker start`` runs one, else
one started for the run. The warehouse: ``--warehouse DIR`` (a path, with a ``/``: the run's
tables are dropped at the end, with their topics), else a temporary directory removed at the end,
also after an error or Ctrl-C.

``--warehouse local,s3,hdfs`` (or the flag repeated) runs the whole benchmark on each warehouse, one
after the other in one run and one Spark session: the project's own S3 server (versitygw) and HDFS
(a MiniDFSCluster) are started for the run on loopback, with their data in the run's directory
(``bench_warehouses.py``); the Spark engine's data source is given the warehouse's URI there. With several warehouses the report has one section each, then each case's median time and
each following read's p99 relative to the local warehouse's (to the first one named without it).

``--log kafka,pulsar`` (or the flag repeated) runs it on each log system the same way: Kafka (the
broker above) and Apache Pulsar (the project's standalone, ``logstore pulsar start``, started for
the run with its data in the run's directory; Amoro's ``'log-store.type' = 'pulsar'`` tables,
filled with the Pulsar producer the ingest job uses), one section each and each case's figure
relative to Kafka's. On Pulsar the cases are the raw consumer (what a user writes by hand with
pulsar-client: a reader per partition from the earliest message, values parsed as JSON) and
``consumer jsonl``, and the consumer engine's following reads; the ``consumer`` case (Kafka's
``LogReader``) and the Spark engine (not measured on Pulsar: its tasks read with the same
pulsar-client Readers) are left out, saying so,
and so is the throughput target. Several warehouses and several log systems in one run are
refused (one dimension at a time).

Usage: .venv/bin/python scripts/bench_read.py [--records N] [--partitions P] [--epoch-records E]
       [--rounds R] [--samples S] [--rate EPOCHS_PER_S] [--epoch-size K] [--spark-samples S]
       [--no-spark] [--bootstrap HOST:PORT] [--warehouse local|s3|hdfs,...|DIR]
       [--log kafka|pulsar,...] [--json]
Exit 0 when consumer / raw >= 0.7 (Kafka) and eventual p99 < 1 s (on every warehouse and log
system), 1 when not, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings: bench_warehouses, _logs
from bench_logs import base_log, log_systems, logs_named_once, pulsar_started
from bench_warehouses import (
    WAREHOUSES,
    base_warehouse,
    format_sections,
    json_sections,
    named_once,
    started,
    warehouse_kinds,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.catalog.tables import StoredTable, StoredTableOn
    from logstore_cli.model import TableSpec
    from logstore_cli.read.service import ReadRequest

RAW, CONSUMER, JSONL, SPARK = "raw consumer", "consumer", "consumer jsonl", "spark"
CASES: Final = (RAW, CONSUMER, JSONL, SPARK)
# The whole run's time (start-up included) is what the jsonl case can be timed by.
WHOLE_ONLY: Final = frozenset({JSONL})
LEVELS: Final = ("committed", "eventual", "none")
THROUGHPUT_TARGET: Final = 0.7  # issue 10: committed read at least 0.7x the raw consumer
LATENCY_TARGET_S: Final = 1.0  # issue 10: eventual p99 under 1 s
COLUMNS: Final = "id BIGINT, name STRING, qty INT, price DECIMAL(10,2)"
KEYS: Final = 10_000
UPDATE_RATIO, DELETE_RATIO, SEED = 0.5, 0.1, 0  # the CLI's defaults
KAFKA_TIMEOUT_S: Final = 30.0
WRITER_ID: Final = "w-bench-read"
CATCH_UP_S: Final = 120.0  # a following reader must show every sample within this after the last


# -- the pure parts: options, statistics, the report ----------------------------------------------


@dataclass(frozen=True)
class Options:
    records: int
    partitions: int
    epoch_records: int
    rounds: int
    samples: int
    rate: float
    epoch_size: int
    spark_samples: int
    spark: bool
    bootstrap: str | None
    warehouse: Path | None  # the local warehouse's directory (--warehouse DIR)
    json: bool
    warehouses: tuple[str, ...] = ("local",)
    logs: tuple[str, ...] = ("kafka",)

    @property
    def dimension(self) -> str:
        """What the run compares: the log systems when it names several, else the warehouses."""
        return "log" if len(self.logs) > 1 else "warehouse"

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.logs if self.dimension == "log" else self.warehouses


def cases_on(log: str, spark: bool) -> tuple[str, ...]:
    """The throughput cases on ``log``: on Pulsar the raw consumer and ``consumer jsonl`` (the
    ``consumer`` case is Kafka's ``LogReader``; the Spark engine is measured on Kafka only)."""
    if log != "kafka":
        return (RAW, JSONL)
    return tuple(c for c in CASES if spark or c != SPARK)


def _warehouse(text: str) -> list[str]:
    """``--warehouse``: warehouses (``warehouse_kinds``), or the local one's directory: a path
    with a ``/`` or an existing directory (so that a misspelt kind is an error, not a new one)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty")
    if text not in WAREHOUSES and ("/" in text or Path(text).is_dir()):
        return [text]
    return warehouse_kinds(text)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _not_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 10_000):
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 10000, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """The options; bad values exit 2 with argparse's message naming the flag."""
    ap = argparse.ArgumentParser(
        prog="bench_read.py",
        description="Committed-read throughput per engine against the raw consumer, and "
        "write-to-visible latency of following reads per read level.",
    )
    ap.add_argument("--records", type=_positive, default=200_000, help="change records to read")
    ap.add_argument("--partitions", type=_positive, default=4, help="partitions of the topic")
    ap.add_argument(
        "--epoch-records", type=_positive, default=5_000, help="change records per filled epoch"
    )
    ap.add_argument("--rounds", type=_positive, default=5, help="timed reads of each engine")
    ap.add_argument(
        "--samples", type=_positive, default=5_000, help="latency samples per read level"
    )
    ap.add_argument("--rate", type=_rate, default=200.0, help="epochs per second while following")
    ap.add_argument(
        "--epoch-size", type=_positive, default=5, help="records per epoch while following"
    )
    ap.add_argument(
        "--spark-samples",
        type=_not_negative,
        default=2_000,
        help="latency samples per read level of Spark's following read (0: none)",
    )
    ap.add_argument(
        "--no-spark",
        action="store_true",
        help="leave the Spark engine out (Spark still creates the tables)",
    )
    ap.add_argument(
        "--bootstrap",
        default=None,
        help="an existing broker (default: the local broker when it runs, else one started "
        "for the run)",
    )
    ap.add_argument(
        "--warehouse",
        type=_warehouse,
        action="append",
        default=None,
        help="local, s3, hdfs (servers started for the run; several, comma-separated or "
        "repeated, are measured one after the other, with ratios to local), or a directory (a "
        "path with a '/') for the local one's tables, dropped at the end (default: local, in a "
        "temporary directory)",
    )
    ap.add_argument(
        "--log",
        type=log_systems,
        action="append",
        default=None,
        help="the log system: kafka, pulsar (Pulsar's standalone started for the run); several "
        "(comma-separated or repeated) are measured one after the other, with ratios to kafka "
        "(default: kafka)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ns = ap.parse_args(argv)
    if ns.bootstrap is not None and not ns.bootstrap.strip():
        ap.error("argument --bootstrap: empty")
    given = [v for values in ns.warehouse or [] for v in values]
    dirs = [v for v in given if v not in WAREHOUSES]
    if len(dirs) > 1:
        ap.error(f"argument --warehouse: one directory at most, got {', '.join(dirs)}")
    kinds = named_once([["local" if v in dirs else v for v in given]] if given else None)
    logs = logs_named_once(ns.log)
    if len(kinds) > 1 and len(logs) > 1:
        ap.error(
            "argument --log: several log systems and several warehouses in one run: compare one "
            "at a time (e.g. --log kafka,pulsar on one warehouse)"
        )
    if ns.epoch_records > ns.records:
        ap.error(
            f"argument --epoch-records: {ns.epoch_records} is more than --records {ns.records}"
        )
    return Options(
        records=ns.records,
        partitions=ns.partitions,
        epoch_records=ns.epoch_records,
        rounds=ns.rounds,
        samples=ns.samples,
        rate=ns.rate,
        epoch_size=ns.epoch_size,
        spark_samples=0 if ns.no_spark else ns.spark_samples,
        spark=not ns.no_spark,
        bootstrap=ns.bootstrap,
        warehouse=Path(dirs[0]) if dirs else None,
        json=ns.json,
        warehouses=kinds,
        logs=logs,
    )


def round_order(round_no: int, cases: Sequence[str] = CASES) -> list[str]:
    """The cases of a round, rotated by one per round: none always runs first."""
    shift = round_no % len(cases)
    return [*cases[shift:], *cases[:shift]]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), interpolated between the two nearest ranks (numpy's
    default, ``statistics.quantiles(method="inclusive")``)."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Run:
    case: str
    round_no: int
    startup_s: float  # 0 for WHOLE_ONLY cases
    read_s: float  # the whole run for WHOLE_ONLY cases
    records: int  # the topic's records read (markers included)
    cpu: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.startup_s + self.read_s


@dataclass(frozen=True)
class CaseResult:
    case: str
    startup_s: float | None  # median; None when the case is timed whole
    read_s: float  # median (whole time for WHOLE_ONLY cases)
    total_s: float  # median
    records_per_s: float  # records over the median read (whole) time
    ratio: float  # median over the rounds of the per-round ratio to the raw consumer
    per_round: tuple[float, ...]  # the ratio round by round
    cpu: Mapping[str, float]  # median CPU seconds per run, per process group


@dataclass(frozen=True)
class Throughput:
    cases: tuple[CaseResult, ...]
    records: int

    def case(self, name: str) -> CaseResult:
        return next(c for c in self.cases if c.case == name)


def summarize(runs: Sequence[Run]) -> Throughput:
    """Medians per case and each engine's ratio to the raw consumer, round by round: records/s over
    the raw consumer's in the same round (read time; whole time for ``consumer jsonl``)."""
    by_case: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.round_no):
        by_case.setdefault(run.case, []).append(run)
    if RAW not in by_case:
        raise ValueError("need runs of the raw consumer")
    raw = {r.round_no: r for r in by_case[RAW]}
    results = []
    for case in CASES:
        found = by_case.get(case)
        if not found:
            continue
        whole = case in WHOLE_ONLY
        per_round = []
        for run in found:
            base = raw.get(run.round_no)
            if base is None:
                continue
            mine = run.total_s if whole else run.read_s
            theirs = base.total_s if whole else base.read_s
            per_round.append(
                (run.records / mine) / (base.records / theirs) if mine > 0 and theirs > 0 else 0.0
            )
        read = statistics.median(r.total_s if whole else r.read_s for r in found)
        results.append(
            CaseResult(
                case=case,
                startup_s=None if whole else statistics.median(r.startup_s for r in found),
                read_s=read,
                total_s=statistics.median(r.total_s for r in found),
                records_per_s=found[0].records / read if read > 0 else 0.0,
                ratio=statistics.median(per_round) if per_round else 0.0,
                per_round=tuple(per_round),
                cpu=_cpu_medians(found),
            )
        )
    return Throughput(tuple(results), by_case[RAW][0].records)


def _cpu_medians(runs: Sequence[Run]) -> dict[str, float]:
    names = sorted({k for r in runs for k in r.cpu if all(k in x.cpu for x in runs)})
    return {k: statistics.median(r.cpu[k] for r in runs) for k in names}


@dataclass(frozen=True)
class Latency:
    engine: str
    level: str
    samples: int
    p50_s: float
    p99_s: float
    max_s: float
    rate: float  # epochs per second the writer achieved


def latency(engine: str, level: str, seconds: Sequence[float], rate: float) -> Latency:
    """p50, p99 and the maximum of the write-to-visible times of one reader."""
    return Latency(
        engine,
        level,
        len(seconds),
        percentile(seconds, 50),
        percentile(seconds, 99),
        max(seconds),
        rate,
    )


def write_to_visible(
    emitted: Mapping[int, float], flushed: Sequence[float], epoch_size: int, first: int
) -> list[float]:
    """Per row id, emit time minus the flush time of its epoch's records. Ids count from
    ``first`` in epochs of ``epoch_size``; ``flushed[i]`` is epoch ``i``'s flush. Rows of other
    epochs (the warm-up) are left out."""
    out = []
    for row_id, seen in emitted.items():
        epoch = (row_id - first) // epoch_size
        if row_id >= first and epoch < len(flushed):
            out.append(seen - flushed[epoch])
    return out


@dataclass(frozen=True)
class Result:
    throughput: Throughput | None
    latencies: tuple[Latency, ...]

    def latency_of(self, engine: str, level: str) -> Latency | None:
        return next((x for x in self.latencies if (x.engine, x.level) == (engine, level)), None)

    @property
    def consumer_ratio(self) -> float | None:
        if self.throughput is None or CONSUMER not in {c.case for c in self.throughput.cases}:
            return None  # not measured (on Pulsar): no throughput target
        return self.throughput.case(CONSUMER).ratio

    @property
    def eventual_p99_s(self) -> float | None:
        found = self.latency_of(CONSUMER, "eventual")
        return None if found is None else found.p99_s

    @property
    def within_target(self) -> bool:
        ratio, p99 = self.consumer_ratio, self.eventual_p99_s
        return (ratio is None or ratio >= THROUGHPUT_TARGET) and (
            p99 is None or p99 < LATENCY_TARGET_S
        )


def _cell(value: float | None, fmt: str, width: int) -> str:
    return f" {'-':>{width}}" if value is None else f" {value:{width}{fmt}}"


def format_report(result: Result, facts: Mapping[str, object]) -> str:
    """The throughput table (one row per case), the latency table (one row per engine and level),
    the verdicts."""
    lines = [f"{k}: {v}" for k, v in facts.items()]
    tp = result.throughput
    if tp is not None:
        head = f"{'engine':15} {'start-up s':>10} {'read s':>7} {'records/s':>10} {'x raw':>6}"
        head += f" {'total s':>8}  per round"
        lines += ["", f"throughput, {tp.records:,} records, committed", head]
        for c in tp.cases:
            whole = c.case in WHOLE_ONLY
            row = f"{c.case:15}" + _cell(c.startup_s, ".3f", 10)
            row += _cell(None if whole else c.read_s, ".3f", 7)
            row += f" {c.records_per_s:10,.0f} {c.ratio:6.2f} {c.total_s:8.3f}  "
            row += " ".join(f"{r:.2f}" for r in c.per_round)
            lines.append(row + (" (whole run)" if whole else ""))
        names = sorted({k for c in tp.cases for k in c.cpu})
        if names:
            lines += ["", f"{'CPU s per run':15}" + "".join(f" {n:>8}" for n in names)]
            for c in tp.cases:
                lines.append(f"{c.case:15}" + "".join(_cell(c.cpu.get(n), ".2f", 8) for n in names))
    if result.latencies:
        lines += [
            "",
            "write-to-visible (ms), following reads",
            f"{'engine':9} {'level':10} {'samples':>7} {'p50':>8} {'p99':>8} {'max':>8} "
            f"{'epochs/s':>8}",
        ]
        for x in result.latencies:
            lines.append(
                f"{x.engine:9} {x.level:10} {x.samples:7d} {x.p50_s * 1000:8.1f} "
                f"{x.p99_s * 1000:8.1f} {x.max_s * 1000:8.1f} {x.rate:8.1f}"
            )
    lines.append("")
    if result.consumer_ratio is not None:
        ok = "OK" if result.consumer_ratio >= THROUGHPUT_TARGET else "BELOW TARGET"
        lines.append(
            f"consumer / raw consumer = {result.consumer_ratio:.2f} "
            f"(target >= {THROUGHPUT_TARGET}): {ok}"
        )
    if result.eventual_p99_s is not None:
        ok = "OK" if result.eventual_p99_s < LATENCY_TARGET_S else "ABOVE TARGET"
        lines.append(
            f"eventual p99 = {result.eventual_p99_s * 1000:.1f} ms "
            f"(target < {LATENCY_TARGET_S * 1000:.0f} ms): {ok}"
        )
    return "\n".join(lines)


def report_json(result: Result, facts: Mapping[str, object]) -> dict[str, Any]:
    tp = result.throughput
    return {
        **facts,
        "throughput": None
        if tp is None
        else {
            "records": tp.records,
            "cases": {
                c.case: {
                    "startup_median_s": None if c.startup_s is None else round(c.startup_s, 4),
                    "read_median_s": None if c.case in WHOLE_ONLY else round(c.read_s, 4),
                    "total_median_s": round(c.total_s, 4),
                    "records_per_s": round(c.records_per_s, 1),
                    "ratio_to_raw": round(c.ratio, 3),
                    "ratio_per_round": [round(r, 3) for r in c.per_round],
                    "cpu_median_s": {k: round(v, 3) for k, v in c.cpu.items()},
                }
                for c in tp.cases
            },
        },
        "latency": [
            {
                "engine": x.engine,
                "level": x.level,
                "samples": x.samples,
                "p50_ms": round(x.p50_s * 1000, 2),
                "p99_ms": round(x.p99_s * 1000, 2),
                "max_ms": round(x.max_s * 1000, 2),
                "epochs_per_s": round(x.rate, 1),
            }
            for x in result.latencies
        ],
        "targets": {"consumer_over_raw_min": THROUGHPUT_TARGET, "eventual_p99_max_s": 1.0},
        "within_target": result.within_target,
    }


def _base(kinds: Sequence[str], dimension: str) -> str:
    return base_log(kinds) if dimension == "log" else base_warehouse(kinds)


def ratios(
    results: Mapping[str, Result], dimension: str = "warehouse"
) -> dict[str, dict[str, float]]:
    """Each warehouse's median time of each throughput case (its whole time when it is timed
    whole) and p99 of each following read (``engine level p99``) over the base warehouse's; what
    the base warehouse did not measure, or measured as no time (a row can show before its
    writer's flush returns), is left out."""

    def times(result: Result) -> dict[str, float]:
        found: dict[str, float] = {}
        if result.throughput is not None:
            for c in result.throughput.cases:
                found[c.case] = c.total_s if c.case in WHOLE_ONLY else c.read_s
        for x in result.latencies:
            found[f"{x.engine} {x.level} p99"] = x.p99_s
        return found

    base = times(results[_base(list(results), dimension)])
    return {
        kind: {k: t / base[k] for k, t in times(r).items() if base.get(k, 0.0) > 0}
        for kind, r in results.items()
    }


def format_reports(
    results: Mapping[str, Result],
    facts: Mapping[str, object],
    where: Mapping[str, str],
    dimension: str = "warehouse",
) -> str:
    """One warehouse: its report as ever. Several (or several log systems): a section each, then
    the ratios' table."""
    return format_sections(
        results, facts, where, format_report, ratios(results, dimension), "", dimension,
        base_of=lambda kinds: _base(kinds, dimension),
    )  # fmt: skip


def reports_json(
    results: Mapping[str, Result],
    facts: Mapping[str, object],
    where: Mapping[str, str],
    dimension: str = "warehouse",
) -> dict[str, Any]:
    """One warehouse: its object as ever (with ``warehouse``). Several (warehouses or log
    systems, under ``warehouses`` or ``logs``): one each, and the ratios to the base one's."""
    return json_sections(
        results, facts, where, report_json, ratios(results, dimension), dimension,
        base_of=lambda kinds: _base(kinds, dimension),
    )  # fmt: skip


# -- the machine ----------------------------------------------------------------------------------


def _java_version() -> str:
    try:
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = (out.stderr or out.stdout).strip().splitlines()
    return first[0] if first else "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def machine_facts() -> dict[str, object]:
    from importlib.metadata import version

    import confluent_kafka

    return {
        "cpus": os.cpu_count(),
        "memory": _memory(),
        "python": platform.python_version(),
        "java": _java_version(),
        "spark": version("pyspark"),
        "confluent_kafka": f"{version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]})",
    }


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_tree(root: int | None) -> float | None:
    """CPU seconds so far of ``root``'s process tree (from /proc), None when it cannot be read."""
    if root is None or not Path("/proc/self/stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
        parent[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = sum(int(x) for x in fields[11:15]) / tick
    if root not in used:
        return None
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += used[pid]
        stack += children.get(pid, [])
    return total


def cpu_snapshot(roots: Mapping[str, int | None]) -> dict[str, float]:
    """CPU seconds so far of this process (``bench``: the engines on the driver, librdkafka's
    threads) and of each root's process tree."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    found = {"bench": usage.ru_utime + usage.ru_stime}
    for name, root in roots.items():
        seconds = _cpu_tree(root)
        if seconds is not None:
            found[name] = seconds
    return found


def cpu_used(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before if k in after}


# -- broker, Spark, tables ------------------------------------------------------------------------


@contextlib.contextmanager
def _pulsar(opts: Options, root: Path) -> Iterator[Any]:
    """The Pulsar standalone of the run, when it measures Pulsar; else None."""
    if "pulsar" not in opts.logs:
        yield None
        return
    with pulsar_started(root) as info:
        yield info


@contextlib.contextmanager
def _broker(opts: Options, root: Path) -> Iterator[tuple[str, int | None, str]]:
    """The bootstrap servers, the broker's pid when known, and where it came from ("" when the
    run uses no Kafka)."""
    if opts.bootstrap is not None:
        yield opts.bootstrap, None, "--bootstrap"
        return
    if "kafka" not in opts.logs:
        yield "", None, "not used"
        return
    from logstore_cli.kafka import local_broker
    from logstore_cli.paths import state_home

    info = local_broker.read_state(state_home())
    if info is not None and local_broker.is_running(info):
        yield info.bootstrap, info.pid, "the local broker (logstore broker start)"
        return
    state = root / "broker-state"
    started = local_broker.start(state)
    try:
        yield started.bootstrap, started.pid, "started for the run"
    finally:
        local_broker.stop(state)


@contextlib.contextmanager
def _spark(root: Path, s3: bool = False) -> Iterator[tuple[SparkSession, float]]:
    """The session and how long it took to start (with the s3a:// connector for an S3 run)."""
    from logstore_cli.jobs.spark import SparkSettings, build_session
    from logstore_cli.storage.s3 import S3Settings

    began = time.perf_counter()
    spark = build_session(
        SparkSettings(
            app_name="logstore bench_read",
            work_dir=root / "spark",
            conf={"spark.local.dir": str(root / "spark-local")},
            s3=S3Settings.from_env() if s3 else None,
        )
    )
    try:
        yield spark, time.perf_counter() - began
    finally:
        spark.stop()
        _end_gateway()


def _end_gateway() -> None:
    """Stop the JVM PySpark started, so that its files can go with the temporary directory."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None


class Tables:
    """The run's tables (a Delta table and its topic each), dropped with their topics at the end."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        bootstrap: str,
        partitions: int,
        pulsar: Any = None,  # the run's PulsarInfo: Amoro's Pulsar tables
    ):
        from logstore_cli import config as cfg

        self.spark = spark
        self.warehouse = warehouse  # a local directory, or an s3:// or hdfs:// URI
        self.remote = cfg.is_remote_warehouse(warehouse)
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.kafka = cfg.KafkaConfig(bootstrap_servers=bootstrap, timeout_s=KAFKA_TIMEOUT_S)
        self.tag = secrets.token_hex(4)  # a --warehouse or broker may hold earlier runs' tables
        self.created: list[TableSpec] = []
        self.pulsar = pulsar

    def _topics(self) -> Any:
        from logstore_cli.provision.kafka_topics import KafkaTopicStore

        if self.pulsar is None:
            return KafkaTopicStore(self.kafka)
        from logstore_cli import config as cfg
        from logstore_cli.provision.pulsar_topics import PulsarTopicStore

        return PulsarTopicStore(
            cfg.PulsarConfig(admin_url=self.pulsar.web_url), timeout_s=KAFKA_TIMEOUT_S
        )

    def _stores(self) -> Any:
        from logstore_cli.provision.delta_spark import SparkDeltaStore
        from logstore_cli.provision.service import Stores

        spark = self.spark
        local = Path(self.warehouse)
        return Stores(SparkDeltaStore(local, lambda: spark), self._topics())

    def storage(self) -> Any:
        from logstore_cli.storage import open_storage

        return open_storage(self.warehouse)

    def create(self, role: str) -> StoredTable | StoredTableOn:
        from logstore_cli.catalog.tables import load_table, load_table_on
        from logstore_cli.ddl import ParseOptions, parse_ddl
        from logstore_cli.provision import service

        name, topic = f"bench_read.{role}_{self.tag}", f"bench-read-{role}-{self.tag}"
        props = {
            "log-store.enabled": "true",
            "log-store.topic": topic,
            "log-store.address": self.bootstrap,
            "log.system.partitions": str(self.partitions),
        }
        if self.pulsar is not None:
            props |= {"log-store.type": "pulsar", "log-store.address": self.pulsar.service_url}
        body = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        ddl = f"CREATE TABLE {name} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ({body});"
        spec = parse_ddl(ddl, "bench.sql", ParseOptions())[0]
        if self.remote:  # as create-table does there: no Spark
            from logstore_cli.provision.on_storage import create_tables_on

            topics = self._topics()
            try:
                create_tables_on([spec], self.storage(), topics)
            finally:
                topics.close()
            self.created.append(spec)
            return load_table_on(self.storage(), name, default_bootstrap=self.bootstrap)
        stores = self._stores()
        try:
            service.create_tables([spec], Path(self.warehouse), stores)
        finally:
            stores.topics.close()
        self.created.append(spec)
        return load_table(Path(self.warehouse), name, default_bootstrap=self.bootstrap)

    def drop_all(self) -> None:
        from logstore_cli.catalog import warehouse as wh
        from logstore_cli.provision import service

        if self.remote:
            from logstore_cli.provision.on_storage import drop_table_on

            storage, topics = self.storage(), self._topics()
            try:
                for spec in self.created:
                    drop_table_on(
                        wh.find_table_on(storage, spec.name), spec, topics, warehouse=storage,
                        delete_topic=True, default_bootstrap=self.bootstrap,
                    )  # fmt: skip
            finally:
                topics.close()
            self.created.clear()
            return
        stores = self._stores()
        try:
            for spec in self.created:
                ref = wh.find_table(Path(self.warehouse), spec.name)
                service.drop_table(
                    ref, spec, stores, warehouse=Path(self.warehouse), delete_topic=True,
                    default_bootstrap=self.bootstrap,
                )  # fmt: skip
        finally:
            stores.topics.close()
        self.created.clear()


# -- filling the topic ----------------------------------------------------------------------------

Encoded = tuple[bytes | None, bytes, list[tuple[str, bytes]]]  # key, value, headers


def _marker(writer: str, epoch: int, attempt: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    from logstore_cli.logformat.wire import CommitMarker, EpochId, encode_marker

    # log-only emit's marker (no Delta commit behind it): the markers commit the epoch
    _, value, headers = encode_marker(CommitMarker(EpochId(writer, epoch, attempt), None))
    return value, headers


def _attempt(epoch: int) -> str:
    return f"a-{epoch:012x}"


class _PulsarWriter:
    """The Pulsar producer the ingest job uses, behind ``LogProducer``'s calls here: format 1's
    headers become message properties (``to_pulsar``), a marker goes to its partition."""

    def __init__(self, service_url: str, table: StoredTable | StoredTableOn) -> None:
        from logstore_cli.pulsar.admin import TopicName
        from logstore_cli.pulsar.producer import PulsarLogProducer, producer_name

        log = table.spec.log_store
        assert log is not None
        self.partitions = log.partitions
        name = producer_name(WRITER_ID, secrets.token_hex(6))
        topic = TopicName.parse(log.topic)
        self.producer = PulsarLogProducer(service_url, topic, log.partitions, name)

    def partition_count(self) -> int:
        return self.partitions

    def send(
        self, key: bytes | None, value: bytes, headers: Any, partition: int | None = None
    ) -> None:
        from logstore_cli.logformat.pulsar_form import to_pulsar

        text, payload, props = to_pulsar(key, value, headers)
        if partition is None:
            self.producer.send(text, payload, props)
        else:
            self.producer.send_marker(partition, payload, props)

    def flush(self) -> None:
        self.producer.flush()

    def __enter__(self) -> _PulsarWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.producer.close()


def _writer(table: StoredTable | StoredTableOn, bootstrap: str, pulsar: Any) -> Any:
    """A producer of ``table``'s log: Kafka's ``LogProducer``, or the Pulsar one behind its calls."""
    if pulsar is not None:
        return _PulsarWriter(pulsar.service_url, table)
    from logstore_cli.kafka.producer import LogProducer

    assert table.spec.log_store is not None
    return LogProducer(bootstrap, {}, table.spec.log_store.topic, timeout_s=KAFKA_TIMEOUT_S)


def fill(
    table: StoredTable | StoredTableOn, bootstrap: str, opts: Options, pulsar: Any = None
) -> tuple[int, int, float]:
    """Write ``opts.records`` generated change records in epochs of ``opts.epoch_records``, as the
    ingest job does: the epoch's records, flush, a marker to every partition, flush.
    ``(change records, markers, seconds)``."""
    from logstore_cli.ingest import generate, plan
    from logstore_cli.logformat.wire import EpochEncoder, EpochId, RowKind, RowSchema

    spec = table.spec
    assert spec.log_store is not None
    schema = RowSchema.of(spec)
    kinds = {k.value for k in plan.log_kinds(spec)}
    source = plan.GenerateSource(1000, KEYS, opts.records, UPDATE_RATIO, DELETE_RATIO, SEED)
    rows = (
        (RowKind(kind), values)
        for _, _, kind, values in generate.flat_records(source, spec, 0, opts.records)
        if kind in kinds
    )
    written = markers = 0
    began = time.perf_counter()
    with _writer(table, bootstrap, pulsar) as producer:
        partitions = producer.partition_count()
        epoch = 0
        while written < opts.records:
            encoder = EpochEncoder(schema, EpochId(WRITER_ID, epoch, _attempt(epoch)))
            for kind, values in rows:
                producer.send(encoder.key(values), encoder.value(values), encoder.headers(kind))
                written += 1
                if written % opts.epoch_records == 0 or written == opts.records:
                    break
            producer.flush()
            value, headers = _marker(WRITER_ID, epoch, _attempt(epoch))
            for partition in range(partitions):
                producer.send(None, value, headers, partition)
            producer.flush()
            markers += partitions
            epoch += 1
    return written, markers, time.perf_counter() - began


# -- throughput -----------------------------------------------------------------------------------


class Reads:
    """Reads the filled topic to its end with each case and times it."""

    def __init__(
        self,
        table: StoredTable | StoredTableOn,
        bootstrap: str,
        spark: SparkSession | None,
        changes: int,
        markers: int,
        cpu_roots: Mapping[str, int | None],
        warehouse: str = "",
        pulsar: Any = None,  # the run's PulsarInfo when the table is on Pulsar
    ) -> None:
        from logstore_cli.read.consumer import SourceConf

        assert table.spec.log_store is not None
        self.table = table
        self.warehouse = warehouse  # the data source's option: a directory or a URI
        self.bootstrap = bootstrap
        self.topic = table.spec.log_store.topic
        self.spark = spark
        self.changes = changes
        self.records = changes + markers
        self.cpu_roots = cpu_roots
        self.conf = SourceConf(bootstrap, {}, self.topic, KAFKA_TIMEOUT_S)
        self.pulsar = pulsar

    def run(self, case: str, round_no: int) -> Run:
        gc.collect()
        cpu0 = cpu_snapshot(self.cpu_roots)
        raw = self.raw if self.pulsar is None else self.raw_pulsar
        cases = {RAW: raw, CONSUMER: self.consumer, JSONL: self.jsonl, SPARK: self.spark_read}
        startup, read = cases[case]()
        cpu = cpu_used(cpu0, cpu_snapshot(self.cpu_roots))
        if case != SPARK:
            # Spark's idle Python workers exit meanwhile and take their CPU time out of the tree
            cpu.pop("spark", None)
        return Run(case, round_no, startup, read, self.records, cpu)

    def raw(self) -> tuple[float, float]:
        """What a user writes by hand: a consumer with default settings, every partition
        assigned, values parsed as JSON."""
        from confluent_kafka import Consumer, TopicPartition

        t0 = time.perf_counter()
        config = {"bootstrap.servers": self.bootstrap, "group.id": "bench-read-raw"}
        consumer = Consumer({**config, "enable.auto.commit": False})
        try:
            meta = consumer.list_topics(self.topic, timeout=KAFKA_TIMEOUT_S)
            parts = sorted(meta.topics[self.topic].partitions)
            marks = {
                p: consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=KAFKA_TIMEOUT_S
                )
                for p in parts
            }
            total = sum(high - low for low, high in marks.values())
            t1 = time.perf_counter()
            consumer.assign([TopicPartition(self.topic, p, marks[p][0]) for p in parts])
            seen = 0
            loads = json.loads
            while seen < total:
                # at most what is left: consume() waits its whole time-out for a batch to fill
                for msg in consumer.consume(min(1000, total - seen), 1.0):
                    if msg.error():
                        raise RuntimeError(f"raw consumer: {msg.error()}")
                    loads(msg.value())  # type: ignore[arg-type]  # never None: every record has one
                    seen += 1
            t2 = time.perf_counter()
        finally:
            consumer.close()
        if seen != self.records:
            raise RuntimeError(f"raw consumer: read {seen} records, expected {self.records}")
        return t1 - t0, t2 - t1

    def raw_pulsar(self) -> tuple[float, float]:
        """What a user writes by hand with pulsar-client: a reader per partition from the earliest
        message, values parsed as JSON, until each partition has none left."""
        import pulsar

        from logstore_cli.pulsar.admin import TopicName

        assert self.pulsar is not None and self.table.spec.log_store is not None
        topic = TopicName.parse(self.topic)
        t0 = time.perf_counter()
        client = pulsar.Client(
            self.pulsar.service_url,
            operation_timeout_seconds=int(KAFKA_TIMEOUT_S),
            logger=_quiet_pulsar_log(),
        )
        try:
            readers = [
                client.create_reader(topic.partition(p), pulsar.MessageId.earliest)
                for p in range(self.table.spec.log_store.partitions)
            ]
            t1 = time.perf_counter()
            seen = 0
            loads = json.loads
            for reader in readers:
                while reader.has_message_available():
                    loads(reader.read_next(timeout_millis=int(KAFKA_TIMEOUT_S * 1000)).data())
                    seen += 1
            t2 = time.perf_counter()
        finally:
            client.close()
        if seen != self.records:
            raise RuntimeError(f"raw consumer: read {seen} records, expected {self.records}")
        return t1 - t0, t2 - t1

    def consumer(self) -> tuple[float, float]:
        """The consumer engine at committed, its emissions counted (a no-op sink)."""
        from logstore_cli.read.consumer import LogReader
        from logstore_cli.read.plan import Start

        schema = self.table_schema()
        t0 = time.perf_counter()
        reader = LogReader(self.conf, schema, "committed")
        try:
            start = reader.start_offsets(Start("earliest"))
            end = reader.end_offsets()
            t1 = time.perf_counter()
            emitted = 0
            for batch in reader.read(start, end):
                emitted += len(batch)
            t2 = time.perf_counter()
            seen = reader.stats.records + reader.stats.markers
        finally:
            reader.close()
        if emitted != self.changes or seen != self.records:
            raise RuntimeError(
                f"consumer engine: emitted {emitted} of {self.changes} changes, read {seen} of "
                f"{self.records} records"
            )
        return t1 - t0, t2 - t1

    def jsonl(self) -> tuple[float, float]:
        """``read_with_consumer`` to the CLI's JSON-lines sink on /dev/null, timed whole."""
        from logstore_cli.cli.read import JsonLines
        from logstore_cli.read.service import read_with_consumer

        req = self.request()
        with open(os.devnull, "w", encoding="utf-8") as devnull:
            t0 = time.perf_counter()
            summary = read_with_consumer(req, JsonLines(req.schema, devnull))
            t1 = time.perf_counter()
        if summary.rows != self.changes:
            raise RuntimeError(f"read_with_consumer: {summary.rows} rows of {self.changes}")
        return 0.0, t1 - t0

    def spark_read(self) -> tuple[float, float]:
        """``format("logstore")`` at committed, drained to the driver as Arrow."""
        assert self.spark is not None
        from logstore_cli.jobs.datasource import register

        register(self.spark)
        t0 = time.perf_counter()
        frame = (
            self.spark.read.format("logstore")
            .option("warehouse", self.warehouse)
            .option("bootstrap", self.bootstrap)
            .option("consistency", "committed")
            .load(self.table.ref.name)
        )
        t1 = time.perf_counter()
        rows = frame.toArrow().num_rows
        t2 = time.perf_counter()
        if rows != self.changes:
            raise RuntimeError(f"spark engine: {rows} rows of {self.changes}")
        return t1 - t0, t2 - t1

    def table_schema(self) -> Any:
        from logstore_cli.logformat.wire import RowSchema

        return RowSchema.of(self.table.spec)

    def request(self, **changes: Any) -> ReadRequest:
        if self.pulsar is None:
            return read_request(self.table, self.bootstrap, **changes)
        # a Pulsar table's read: its service URL, and its admin API (as the CLI's read finds it)
        changes["admin_url"] = self.pulsar.web_url
        return read_request(self.table, self.pulsar.service_url, **changes)


def _quiet_pulsar_log() -> Any:
    """The C++ client's log, through Python's logging and warnings only (not on stdout)."""
    import logging

    log = logging.getLogger("bench_read.pulsar")
    log.setLevel(logging.WARNING)
    return log


def read_request(table: StoredTable | StoredTableOn, bootstrap: str, **changes: Any) -> ReadRequest:
    """A ``logstore read --mode log`` request, bounded, committed, from earliest, to JSON lines."""
    from dataclasses import replace

    from logstore_cli.read import plan
    from logstore_cli.read.service import ReadRequest

    req = ReadRequest(
        table, "log", "consumer", plan.OutputSpec("jsonl"), level="committed",
        start=plan.Start("earliest"), bootstrap=bootstrap, timeout_s=KAFKA_TIMEOUT_S,
    )  # fmt: skip
    return replace(req, **changes)


# -- latency --------------------------------------------------------------------------------------


class Recorder:
    """A sink that notes when each row id was emitted (the first time)."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}

    def change(self, kind: Any, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        self.seen.setdefault(row["id"], now)

    def flush(self) -> None:
        pass


class Follow:
    """A writer of small epochs at a steady rate (this thread) against a following reader (a
    thread), on the latency table."""

    def __init__(
        self,
        table: StoredTable | StoredTableOn,
        bootstrap: str,
        spark: SparkSession | None,
        opts: Options,
        pulsar: Any = None,  # the run's PulsarInfo when the table is on Pulsar
    ) -> None:
        self.table = table
        self.bootstrap = bootstrap
        self.spark = spark
        self.opts = opts
        self.pulsar = pulsar
        self.next_id = 0
        self.next_epoch = 0

    def measure(self, engine: str, level: str, samples: int) -> Latency:
        from logstore_cli.read import plan

        pulsar = {} if self.pulsar is None else {"admin_url": self.pulsar.web_url}
        source = self.bootstrap if self.pulsar is None else self.pulsar.service_url
        req = read_request(
            self.table, source, engine="spark" if engine == SPARK else "consumer",
            level=level, start=plan.Start("latest"), follow=True, **pulsar,
        )  # fmt: skip
        sink = Recorder()
        stop = threading.Event()
        failed: list[BaseException] = []

        def read() -> None:
            try:
                if engine == SPARK:
                    from logstore_cli.jobs import read as read_job

                    assert self.spark is not None
                    read_job.run(self.spark, req, sink, stop=stop.is_set)
                else:
                    from logstore_cli.read.service import read_with_consumer

                    read_with_consumer(req, sink, stop=stop.is_set)
            except BaseException as exc:  # handed to the main thread
                failed.append(exc)

        def check() -> None:
            if failed:
                raise RuntimeError(f"{engine} {level}: the following read failed: {failed[0]!r}")

        reader = threading.Thread(target=read, name=f"follow-{engine}-{level}", daemon=True)
        reader.start()
        try:
            with _writer(self.table, self.bootstrap, self.pulsar) as producer:
                partitions = producer.partition_count()
                # Until the reader shows a row, it may not be reading yet: one epoch every 50 ms.
                deadline = time.monotonic() + CATCH_UP_S
                while not sink.seen:
                    check()
                    if time.monotonic() >= deadline:
                        raise RuntimeError(f"{engine} {level}: the reader showed no row")
                    self._epoch(producer, partitions)
                    time.sleep(0.05)  # pacing the warm-up writes, not a synchronization
                # Then half a second at the rate, untimed, and the timed epochs.
                self._epochs(producer, partitions, max(1, int(self.opts.rate / 2)))
                first = self.next_id
                epochs = -(-samples // self.opts.epoch_size)
                flushed, rate = self._epochs(producer, partitions, epochs)
            wanted = range(first, self.next_id)
            deadline = time.monotonic() + CATCH_UP_S
            while any(i not in sink.seen for i in wanted):
                check()
                if time.monotonic() >= deadline:
                    missing = sum(1 for i in wanted if i not in sink.seen)
                    raise RuntimeError(f"{engine} {level}: {missing} rows never shown")
                time.sleep(0.05)  # polling the condition with a deadline
        finally:
            stop.set()
            reader.join(timeout=CATCH_UP_S)
        check()
        times = write_to_visible(sink.seen, flushed, self.opts.epoch_size, first)
        return latency(engine, level, times, rate)

    def _epoch(self, producer: Any, partitions: int) -> float:
        """One epoch of inserts with new ids: records, flush, markers, flush. When the records'
        flush returned."""
        from logstore_cli.logformat.wire import EpochEncoder, EpochId, RowKind, RowSchema

        epoch = self.next_epoch
        self.next_epoch += 1
        encoder = EpochEncoder(
            RowSchema.of(self.table.spec), EpochId(WRITER_ID, epoch, _attempt(epoch))
        )
        headers = encoder.headers(RowKind.INSERT)
        for _ in range(self.opts.epoch_size):
            values = (self.next_id, f"name-{self.next_id}", self.next_id % 100, None)
            self.next_id += 1
            producer.send(encoder.key(values), encoder.value(values), headers)
        producer.flush()
        flushed = time.perf_counter()
        value, marker_headers = _marker(WRITER_ID, epoch, _attempt(epoch))
        for partition in range(partitions):
            producer.send(None, value, marker_headers, partition)
        producer.flush()
        return flushed

    def _epochs(self, producer: Any, partitions: int, count: int) -> tuple[list[float], float]:
        """``count`` epochs at the rate (as fast as they go when behind it): each one's flush
        time, and the rate reached."""
        flushed = []
        began = time.perf_counter()
        for i in range(count):
            delay = began + i / self.opts.rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # pacing the writer, not a synchronization
            flushed.append(self._epoch(producer, partitions))
        took = time.perf_counter() - began
        return flushed, count / took if took > 0 else 0.0


# -- the run --------------------------------------------------------------------------------------


def measure(
    opts: Options, say: Callable[[str], None]
) -> tuple[dict[str, Result], dict[str, object], dict[str, str]]:
    """Each warehouse's result (in the order named), the run's facts, and where each one was."""
    root = Path(tempfile.mkdtemp(prefix="logstore-bench-read-"))
    loads = [_load()]
    try:
        with (
            _broker(opts, root) as (bootstrap, broker_pid, broker_source),
            _pulsar(opts, root) as pulsar,
            started(opts.warehouses, root, opts.warehouse) as where,
            _spark(root, s3="s3" in where) as (spark, spark_start_s),
        ):
            from pyspark import SparkContext

            jvm = getattr(SparkContext._gateway, "proc", None)
            results: dict[str, Result] = {}
            first_reads: dict[str, dict[str, float]] = {}
            fill_s: dict[str, float] = {}
            changes = markers = 0
            by_log = opts.dimension == "log"
            logs = {"kafka": bootstrap or "-"}
            if pulsar is not None:
                logs["pulsar"] = pulsar.service_url
            for kind in opts.kinds:
                if len(opts.kinds) > 1:
                    say(f"{opts.dimension} {kind}: {logs[kind] if by_log else where[kind]}")
                log = kind if by_log else opts.logs[0]
                wh_kind = opts.warehouses[0] if by_log else kind
                on_pulsar = pulsar if log == "pulsar" else None
                broker = broker_pid if on_pulsar is None else on_pulsar.pid  # the log's CPU
                cpu_roots = {"spark": getattr(jvm, "pid", None), "broker": broker}
                use_spark = opts.spark and log == "kafka"  # on every warehouse (a URI there)
                follow_spark = use_spark
                if opts.spark and not use_spark:
                    say(f"  the spark engine's cases left out on {kind}: measured on Kafka only "
                        "(its tasks read Pulsar with the same pulsar-client Readers)")  # fmt: skip
                if log != "kafka":
                    say(f"  the consumer case left out on {kind}: it is Kafka's LogReader")
                tables = Tables(spark, where[wh_kind], bootstrap, opts.partitions, on_pulsar)
                try:
                    say("creating the tables ...")
                    bulk = tables.create("bulk")
                    follow_table = tables.create("follow")
                    say(f"filling the topic with {opts.records:,} change records ...")
                    changes, markers, fill_s[kind] = fill(bulk, bootstrap, opts, on_pulsar)
                    session = spark if use_spark else None
                    reads = Reads(
                        bulk,
                        bootstrap,
                        session,
                        changes,
                        markers,
                        cpu_roots,
                        where[wh_kind],
                        on_pulsar,
                    )
                    cases = list(cases_on(log, use_spark))
                    say("warm-up: one untimed read of each engine ...")
                    first_read: dict[str, float] = {}
                    for case in cases:
                        run = reads.run(case, -1)
                        first_read[case] = run.total_s
                    first_reads[kind] = first_read
                    runs = []
                    for r in range(opts.rounds):
                        for case in round_order(r, cases):
                            run = reads.run(case, r)
                            say(f"{kind} round {r + 1}/{opts.rounds} {case}: {run.read_s:.3f} s")
                            runs.append(run)
                        loads.append(_load())
                    follow = Follow(follow_table, bootstrap, spark, opts, on_pulsar)
                    latencies = []
                    spark_samples = opts.spark_samples if follow_spark else 0
                    for engine, samples in ((CONSUMER, opts.samples), (SPARK, spark_samples)):
                        if not samples:
                            continue
                        for level in LEVELS:
                            say(
                                f"following read, {engine} engine, {level}: {samples:,} samples ..."
                            )
                            found = follow.measure(engine, level, samples)
                            p50, p99 = found.p50_s * 1000, found.p99_s * 1000
                            say(f"  p50 {p50:.1f} ms, p99 {p99:.1f} ms")
                            latencies.append(found)
                        loads.append(_load())
                finally:
                    tables.drop_all()
                results[kind] = Result(summarize(runs), tuple(latencies))
        one = len(opts.kinds) == 1
        first = opts.kinds[0]
        facts: dict[str, object] = {
            "records": changes + markers,
            "change_records": changes,
            "markers": markers,
            "partitions": opts.partitions,
            "epoch_records": opts.epoch_records,
            "rounds": opts.rounds,
            "fill_s": round(fill_s[first], 2)
            if one
            else {k: round(t, 2) for k, t in fill_s.items()},
            "spark_session_start_s": round(spark_start_s, 2),
            "first_read_s": {c: round(t, 3) for c, t in first_reads[first].items()}
            if one
            else {k: {c: round(t, 3) for c, t in f.items()} for k, f in first_reads.items()},
            "follow": f"{opts.rate:g} epochs/s of {opts.epoch_size} inserts",
            "broker": f"{bootstrap} ({broker_source})",
            **machine_facts(),
            "load_average": " | ".join(loads),
        }
        if pulsar is not None:
            facts["pulsar"] = f"{pulsar.service_url} (the standalone, started for the run)"
        if by_log:
            facts["warehouse"] = f"{opts.warehouses[0]}: {where[opts.warehouses[0]]}"
            return results, facts, logs
        if opts.logs != ("kafka",):
            facts["log"] = opts.logs[0]
        return results, facts, where
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    from logstore_cli.errors import LogstoreError

    try:
        results, facts, where = measure(opts, say)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except LogstoreError as exc:
        say(f"error: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
        return 1
    except RuntimeError as exc:  # a read did not read everything, or a reader failed
        say(f"error: {exc}")
        return 1
    if opts.json:
        print(json.dumps(reports_json(results, facts, where, opts.dimension)))
    else:
        print(format_reports(results, facts, where, opts.dimension))
    return 0 if all(r.within_target for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
