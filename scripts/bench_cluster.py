#!/usr/bin/env python3
"""Ingest on a cluster: ``local[*]`` against a Spark standalone cluster, one Kafka broker against
three (acks=all, replication 3, min.insync.replicas 2), side by side in one run.

Four configurations ingest the same generated changes (``logstore ingest --source generate --total
N --once --json``, seed 0) into a fresh table each, every one through the CLI as a user runs it:

- ``local[*], 1 broker`` — the reference every ratio divides by;
- ``local[*], 3 brokers``;
- ``standalone, 1 broker`` — ``--master spark://…`` of a master and ``--workers`` workers;
- ``standalone, 3 brokers``.

Everything is started for the run with the project's own commands (``logstore broker start``,
``logstore broker start --brokers 3``, ``logstore spark start --workers N``), each with its own
state directory inside one temporary directory, stopped and removed at the end, also after an error
or Ctrl-C (exit 130). The tables are created up front with one ``create-table`` (not timed).

A run's time (``job s``) is from the job's ``start`` event to its ``done`` event as read from its
stdout: the micro-batches, without the JVM's start and the Spark session's set-up, which ``wall s``
(the process's whole life) includes. Rounds rotate the order by one configuration each, so that the
machine's noise (the first run of a round tends to be slow) hits all alike; the ratios are of
medians over the rounds, measured in the same run. The two-core development machine runs the
master, the workers, the executors, the driver and up to three brokers at once: the ratios say what
the cluster costs there, not what it gains on real machines (see docs/cluster.md, "Sizing").

Usage: .venv/bin/python scripts/bench_cluster.py [--changes N] [--keys K] [--rounds R]
       [--partitions P] [--workers W] [--json]
Exit 0 when every run ingested the same rows (the same seed), 1 when not (or a start failed), 2 for bad arguments,
130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = "id BIGINT NOT NULL, name STRING, qty INT, price DECIMAL(10,2)"
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Config:
    name: str
    standalone: bool  # else local[*]
    brokers: int  # 1 or 3


CONFIGS = (
    Config("local[*], 1 broker", False, 1),
    Config("local[*], 3 brokers", False, 3),
    Config("standalone, 1 broker", True, 1),
    Config("standalone, 3 brokers", True, 3),
)
REFERENCE = CONFIGS[0]


# -- the pure parts: options, statistics, the report ----------------------------------------------


@dataclass(frozen=True)
class Options:
    changes: int
    keys: int
    rounds: int
    partitions: int
    workers: int
    json: bool


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """The options; bad values exit 2 with argparse's message naming the flag."""
    ap = argparse.ArgumentParser(
        prog="bench_cluster.py",
        description="Ingest on local[*] and a Spark standalone cluster, one and three brokers.",
    )
    ap.add_argument("--changes", type=_positive, default=100_000, help="changes per run")
    ap.add_argument("--keys", type=_positive, default=10_000, help="distinct keys")
    ap.add_argument("--rounds", type=_positive, default=2, help="timed runs of each configuration")
    ap.add_argument("--partitions", type=_positive, default=3, help="partitions of each topic")
    ap.add_argument(
        "--workers", type=_positive, default=2, help="workers of the standalone cluster"
    )
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ns = ap.parse_args(argv)
    return Options(ns.changes, ns.keys, ns.rounds, ns.partitions, ns.workers, ns.json)


def round_order(round_no: int) -> list[Config]:
    """The configurations of a round, rotated by one per round: none always runs first."""
    shift = round_no % len(CONFIGS)
    return [*CONFIGS[shift:], *CONFIGS[:shift]]


@dataclass(frozen=True)
class Run:
    config: str
    round_no: int
    job_s: float  # the job's start event to its done event
    wall_s: float  # the process's life: JVM start, session, job, exit
    epochs: int
    rows: int
    records: int  # log records the epochs wrote (markers not counted)


@dataclass(frozen=True)
class ConfigResult:
    config: str
    runs: tuple[float, ...]
    median_s: float
    wall_median_s: float
    rows: int
    records: int
    epochs: int
    rows_per_s: float
    ratio: float  # median_s / the reference's median_s
    wall_ratio: float


def summarize(runs: Sequence[Run]) -> tuple[ConfigResult, ...]:
    """Medians per configuration and their ratios to the reference's, in ``CONFIGS`` order."""
    by_config: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.round_no):
        by_config.setdefault(run.config, []).append(run)
    if REFERENCE.name not in by_config:
        raise ValueError(f"no run of the reference configuration ({REFERENCE.name})")
    base = statistics.median(r.job_s for r in by_config[REFERENCE.name])
    base_wall = statistics.median(r.wall_s for r in by_config[REFERENCE.name])
    results = []
    for config in CONFIGS:
        found = by_config.get(config.name)
        if not found:
            continue
        median = statistics.median(r.job_s for r in found)
        wall = statistics.median(r.wall_s for r in found)
        results.append(
            ConfigResult(
                config=config.name,
                runs=tuple(r.job_s for r in found),
                median_s=median,
                wall_median_s=wall,
                rows=found[0].rows,
                records=found[0].records,
                epochs=found[0].epochs,
                rows_per_s=found[0].rows / median if median > 0 else 0.0,
                ratio=median / base if base > 0 else float("inf"),
                wall_ratio=wall / base_wall if base_wall > 0 else float("inf"),
            )
        )
    return tuple(results)


def format_report(results: Sequence[ConfigResult], facts: Mapping[str, object]) -> str:
    lines = [f"{k}: {v}" for k, v in facts.items()]
    head = f"{'configuration':24} {'job s':>8} {'x ref':>6} {'wall s':>8} {'x ref':>6}"
    head += f" {'rows/s':>9} {'epochs':>6}  runs (job s)"
    lines += ["", head]
    for r in results:
        runs = " ".join(f"{s:.1f}" for s in r.runs)
        lines.append(
            f"{r.config:24} {r.median_s:8.2f} {r.ratio:6.2f} {r.wall_median_s:8.2f}"
            f" {r.wall_ratio:6.2f} {r.rows_per_s:9,.0f} {r.epochs:6}  {runs}"
        )
    lines += ["", f"ratios: median over the rounds, against '{REFERENCE.name}'"]
    return "\n".join(lines)


def report_json(results: Sequence[ConfigResult], facts: Mapping[str, object]) -> dict[str, Any]:
    return {
        **facts,
        "reference": REFERENCE.name,
        "configurations": {
            r.config: {
                "median_s": round(r.median_s, 3),
                "runs_s": [round(s, 3) for s in r.runs],
                "ratio": round(r.ratio, 3),
                "wall_median_s": round(r.wall_median_s, 3),
                "wall_ratio": round(r.wall_ratio, 3),
                "rows": r.rows,
                "records": r.records,
                "epochs": r.epochs,
                "rows_per_s": round(r.rows_per_s, 1),
            }
            for r in results
        },
    }


def table_ddl(name: str, topic: str, bootstrap: str, partitions: int) -> str:
    """A keyed table whose topic is created with the cluster's default replication."""
    props = {
        "log.system": "kafka",
        "kafka.bootstrap.servers": bootstrap,
        "kafka.topic": topic,
        "log.system.partitions": str(partitions),
    }
    body = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    return f"CREATE TABLE {name} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ({body});"


def table_name(config: Config, round_no: int) -> str:
    return f"bench.c{CONFIGS.index(config)}_r{round_no}"


@dataclass(frozen=True)
class Events:
    """What a run's ``--json`` lines said, with the time each was read."""

    start_at: float | None
    done_at: float | None
    done: Mapping[str, Any] | None
    epochs: int
    rows: int
    records: int


def collect(lines: Iterator[tuple[float, str]]) -> Events:
    start_at = done_at = None
    done: dict[str, Any] | None = None
    epochs = rows = records = 0
    for at, line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "start":
            start_at = at
        elif kind == "epoch":
            epochs += 1
            rows += int(event.get("rows") or 0)
            records += int(event.get("log_records") or 0)
        elif kind == "done":
            done_at, done = at, event
    return Events(start_at, done_at, done, epochs, rows, records)


# -- the machine and the processes ----------------------------------------------------------------


def machine_facts() -> dict[str, object]:
    from importlib.metadata import version

    java = "unknown"
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = ((out.stderr or out.stdout).strip().splitlines() or ["unknown"])[0]
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "java": java,
        "spark": version("pyspark"),
        "delta_spark": version("delta-spark"),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


class Failed(RuntimeError):
    pass


class Bench:
    def __init__(self, root: Path, opts: Options, say: Callable[[str], None]) -> None:
        self.root, self.opts, self.say = root, opts, say
        self.logstore = str(Path(sys.executable).with_name("logstore"))
        self.warehouse = root / "warehouse"
        self.started: list[tuple[str, list[str], dict[str, str]]] = []  # to stop, in reverse

    def env(self, state: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
        env |= {"LOGSTORE_STATE_DIR": str(self.root / state),
                "LOGSTORE_WAREHOUSE": str(self.warehouse)}  # fmt: skip
        return env

    def cli(self, args: Sequence[str], state: str, timeout: float = START_TIMEOUT_S) -> Any:
        """Run ``logstore ARGS --json`` and parse its stdout; fail with its stderr."""
        proc = subprocess.run(
            [self.logstore, *args, "--json"],
            env=self.env(state),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise Failed(f"logstore {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def start_broker(self, brokers: int) -> str:
        state = f"state-kafka-{brokers}"
        args = ["broker", "start"] + (["--brokers", str(brokers)] if brokers > 1 else [])
        self.say(f"starting {brokers} Kafka broker(s) ...")
        info = self.cli(args, state)
        self.started.append((f"{brokers} broker(s)", ["broker", "stop"], self.env(state)))
        bootstrap = info.get("bootstrap") if isinstance(info, dict) else None
        if not isinstance(bootstrap, str) or not bootstrap:
            raise Failed(f"'logstore broker start' printed no bootstrap address: {info!r}")
        return bootstrap

    def start_spark(self) -> str:
        self.say(f"starting a Spark standalone master and {self.opts.workers} worker(s) ...")
        info = self.cli(["spark", "start", "--workers", str(self.opts.workers)], "state-spark")
        self.started.append(("the Spark cluster", ["spark", "stop"], self.env("state-spark")))
        master = info.get("master_url") if isinstance(info, dict) else None
        if not isinstance(master, str) or not master.startswith("spark://"):
            raise Failed(f"'logstore spark start' printed no spark:// master: {info!r}")
        return master

    def stop_all(self) -> None:
        for what, args, env in reversed(self.started):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc = subprocess.run(
                    [self.logstore, *args], env=env, capture_output=True, text=True, timeout=120
                )
                if proc.returncode != 0:
                    self.say(f"warning: stopping {what} failed: {proc.stderr.strip()}")
        self.started.clear()

    def create_tables(self, bootstraps: Mapping[int, str]) -> None:
        ddl = []
        for r in range(self.opts.rounds):
            for config in CONFIGS:
                name = table_name(config, r)
                topic = name.replace(".", "-")
                ddl.append(table_ddl(name, topic, bootstraps[config.brokers], self.opts.partitions))
        path = self.root / "tables.sql"
        path.write_text("\n".join(ddl) + "\n", encoding="utf-8")
        self.say(f"creating {len(ddl)} tables (untimed) ...")
        self.cli(["create-table", str(path)], "state-jobs", timeout=600)

    def ingest(self, config: Config, round_no: int, master: str) -> Run:
        args = [
            self.logstore, "ingest", table_name(config, round_no),
            "--source", "generate", "--total", str(self.opts.changes),
            "--keys", str(self.opts.keys), "--seed", "0", "--once", "--json",
            "--master", master if config.standalone else "local[*]",
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            args,
            env=self.env("state-jobs"),
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the bench, which stops the group itself
        )
        assert proc.stdout is not None and proc.stderr is not None
        try:
            events = collect((time.perf_counter(), line) for line in proc.stdout)
            err = proc.stderr.read()
            code = proc.wait(timeout=RUN_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        if code != 0 or events.start_at is None or events.done_at is None:
            raise Failed(f"{config.name}: ingest exited {code}:\n{err.strip()}")
        return Run(config.name, round_no, events.done_at - events.start_at, wall,
                   events.epochs, events.rows, events.records)  # fmt: skip


def measure(
    opts: Options, say: Callable[[str], None]
) -> tuple[tuple[ConfigResult, ...], dict[str, object]]:
    root = Path(tempfile.mkdtemp(prefix="logstore-bench-cluster-"))
    bench = Bench(root, opts, say)
    facts: dict[str, object] = {"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    try:
        bootstraps = {1: bench.start_broker(1), 3: bench.start_broker(3)}
        master = bench.start_spark()
        bench.create_tables(bootstraps)
        runs = []
        for r in range(opts.rounds):
            for config in round_order(r):
                run = bench.ingest(config, r, master)
                say(f"round {r + 1}/{opts.rounds} {config.name}: {run.job_s:.2f} s "
                    f"(wall {run.wall_s:.2f} s)")  # fmt: skip
                runs.append(run)
        # the same seed generates the same changes: every run must have ingested as many rows
        counts = {(r.config, r.round_no): r.rows for r in runs}
        if len(set(counts.values())) != 1:
            raise Failed(f"the runs ingested different numbers of rows: {counts}")
        facts |= {
            "changes": opts.changes,
            "keys": opts.keys,
            "partitions": opts.partitions,
            "rounds": opts.rounds,
            "workers": opts.workers,
            **machine_facts(),
        }
        return summarize(runs), facts
    finally:
        bench.stop_all()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        results, facts = measure(opts, say)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except (Failed, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        say(f"error: {exc}")
        return 1
    if opts.json:
        print(json.dumps(report_json(results, facts)))
    else:
        print(format_report(results, facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
