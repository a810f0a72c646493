#!/usr/bin/env python3
"""A keyed table after a day of small epochs: its file count with the ingest job's compaction and
without it, and the time of a ``read --mode file`` of each, side by side in one run.

The changes are a change stream of recent keys: an initial load (``--rows`` inserts, epoch 0),
then ``--epochs`` epochs of ``--changes`` changes each — 60% inserts of new keys, 30% updates and
10% deletes of live keys among the newest ``--recent`` — or, with ``--inserts-only``, new keys
only (the key-range bound then skips every older file and each MERGE only appends: the stream
that leaves small files). Two tables take the same changes: one with the job's compaction every
25 epochs (logstore's default, ``full-compaction.delta-commits``), one with it off, for
``--contrast-epochs`` epochs (fewer: an epoch costs a Spark MERGE, about two seconds). Each is
ingested by the real CLI, one file per epoch (``--source-option maxFilesPerTrigger=1 --once``),
in a temporary warehouse removed at the end.

Reported per table: epochs and seconds per epoch of the ingest, the snapshot's data files after
the last epoch, the most it held after any commit, the compactions (OPTIMIZE commits), and the
median time of ``logstore read --mode file -o jsonl`` (delta-rs, the default engine; every round
interleaves the tables, a warm-up round untimed) with the rows it printed checked against the
changes.

    .venv/bin/python scripts/bench_epoch_files.py [--epochs 1000] [--contrast-epochs 200]
        [--rows 10000] [--changes 100] [--recent 2000] [--inserts-only] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench_read_file import _run as timed_run  # beside this script

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = "id BIGINT NOT NULL, name STRING, qty INT, price DECIMAL(10,2)"
COMPACT_EVERY = 25  # logstore's default full-compaction.delta-commits
MIX = (("+I", 6), ("+U", 3), ("-D", 1))  # inserts, updates, deletes per 10 changes
INSERTS_ONLY = (("+I", 10), ("+U", 0), ("-D", 0))  # --inserts-only: new keys only


# -- the pure parts: options, the changes, the Delta log's file history --------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--epochs", type=int, default=1000, help="epochs with compaction (1000)")
    ap.add_argument("--contrast-epochs", type=int, default=200,
                    help="epochs of the table without compaction (200; 0: none)")  # fmt: skip
    ap.add_argument("--rows", type=int, default=10_000, help="rows of the initial load (10,000)")
    ap.add_argument("--changes", type=int, default=100, help="changes per epoch (100)")
    ap.add_argument("--recent", type=int, default=2000,
                    help="updates and deletes pick among the newest this many keys (2000)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="timed read rounds (3)")
    ap.add_argument("--inserts-only", action="store_true",
                    help="every change inserts a new key (the stream that leaves small files)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    for name in ("epochs", "rows", "changes", "recent", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if args.contrast_epochs < 0:
        ap.error("--contrast-epochs must be 0 or more")
    if args.changes < 10:
        ap.error("--changes must be at least 10 (the mix is in tenths)")
    return args


def epoch_changes(
    rows: int,
    changes: int,
    epochs: int,
    recent: int,
    seed: int = 0,
    mix: tuple[tuple[str, int], ...] = MIX,
) -> tuple[list[list[dict[str, Any]]], int]:
    """Epoch 0 (``rows`` inserts, ids 0..rows-1) and ``epochs`` epochs of ``changes`` changes in
    ``mix`` (``MIX`` or ``INSERTS_ONLY``, in tenths): inserts of new ids, updates and deletes of distinct keys among the newest
    ``recent`` live ones at the epoch's start. Each key at most once an epoch. The epochs and
    the rows left after them."""
    rnd = random.Random(seed)
    live = list(range(rows))  # the live keys, ascending: the newest at the end
    next_id = rows
    out: list[list[dict[str, Any]]] = [[_row(i, "+I", rnd) for i in live]]
    counts = {op: changes * weight // 10 for op, weight in mix}
    counts["+I"] += changes - sum(counts.values())
    for _ in range(epochs):
        batch: list[dict[str, Any]] = []
        window = live[-recent:]
        touched = rnd.sample(window, min(len(window), counts["+U"] + counts["-D"]))
        for key in touched[: counts["+U"]]:
            batch.append(_row(key, "+U", rnd))
        gone = set(touched[counts["+U"] :])
        for key in touched[counts["+U"] :]:
            batch.append(_row(key, "-D", rnd))
        if gone:
            live = [k for k in live if k not in gone]
        for _ in range(counts["+I"]):
            batch.append(_row(next_id, "+I", rnd))
            live.append(next_id)
            next_id += 1
        out.append(batch)
    return out, len(live)


def _row(key: int, op: str, rnd: random.Random) -> dict[str, Any]:
    return {"id": key, "name": f"n-{key}-{rnd.randrange(1000)}", "qty": rnd.randrange(100),
            "price": f"{rnd.randrange(100000) / 100:.2f}", "op": op}  # fmt: skip


@dataclass
class FileHistory:
    files: int  # data files of the snapshot after the last commit
    peak: int  # the most after any commit
    commits: int
    compactions: int  # OPTIMIZE commits


def file_history(commits: Iterable[Iterable[dict[str, Any]]]) -> FileHistory:
    """Replay the Delta log's commits (each its actions, in version order)."""
    live: set[str] = set()
    peak = count = optimized = 0
    for actions in commits:
        count += 1
        for action in actions:
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
            elif action.get("commitInfo", {}).get("operation") == "OPTIMIZE":
                optimized += 1
        peak = max(peak, len(live))
    return FileHistory(len(live), peak, count, optimized)


def read_log(table: Path) -> FileHistory:
    log = table / "_delta_log"
    versions = sorted(p for p in log.glob("*.json") if p.stem.isdigit())
    return file_history(
        [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]
        for p in versions
    )


# -- the run --------------------------------------------------------------------------------------


@dataclass
class TableRun:
    name: str
    compact_every: int
    epochs: int
    ingest_s: float
    history: FileHistory
    expected_rows: int
    read_s: list[float]

    def summary(self) -> dict[str, Any]:
        return {
            "table": self.name, "compact_every": self.compact_every, "epochs": self.epochs,
            "s_per_epoch": round(self.ingest_s / (self.epochs + 1), 3),
            **asdict(self.history), "rows": self.expected_rows,
            "read_s": round(statistics.median(self.read_s), 3),
        }  # fmt: skip


def _cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "logstore_cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        sys.exit(
            f"logstore {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def _timed_read(env: dict[str, str], cwd: Path, table: str) -> float:
    cmd = [sys.executable, "-m", "logstore_cli", "read", table, "--mode", "file", "-o", "jsonl"]
    return timed_run(cmd, env, cwd)  # stdout to /dev/null, timed from start to exit


def run_table(env: dict[str, str], tmp: Path, name: str, compact_every: int, epochs: int,
              opts: argparse.Namespace, say: Any) -> TableRun:  # fmt: skip
    mix = INSERTS_ONLY if opts.inserts_only else MIX
    batches, rows = epoch_changes(opts.rows, opts.changes, epochs, opts.recent, seed=7, mix=mix)
    props = f"'full-compaction.delta-commits' = '{compact_every}'"
    _cli(env, tmp, "create-table", "--sql",
         f"CREATE TABLE {name} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ({props});")  # fmt: skip
    source = tmp / "changes" / name
    source.mkdir(parents=True)
    now = time.time()
    for i, batch in enumerate(batches):
        path = source / f"part-{i:05d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in batch), encoding="utf-8")
        # Spark's file source takes files oldest first by modification time (ties in no set
        # order): a second apart, the epochs run in the order written.
        stamp = now - (len(batches) - i)
        os.utime(path, (stamp, stamp))
    say(
        f"{name}: {epochs + 1} epochs, compaction "
        + (f"every {compact_every}" if compact_every else "off")
        + " ..."
    )
    start = time.perf_counter()
    out = _cli(env, tmp, "ingest", name, "--source", str(source), "--format", "json",
               "--source-option", "maxFilesPerTrigger=1", "--once", "--emit", "file", "--json")  # fmt: skip
    elapsed = time.perf_counter() - start
    summary = json.loads(out.strip().splitlines()[-1])
    ran = int(summary.get("epochs", -1))
    if ran != epochs + 1:
        sys.exit(f"{name}: the job ran {ran} epochs, expected {epochs + 1}: {summary}")
    history = read_log(Path(env["LOGSTORE_WAREHOUSE"]) / name.replace(".", "/"))
    printed = _cli(env, tmp, "read", name, "--mode", "file", "-o", "jsonl").count("\n")
    if printed != rows:
        sys.exit(f"{name}: read printed {printed} rows, expected {rows}")
    return TableRun(name, compact_every, epochs, elapsed, history, rows, [])


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(text: str) -> None:
        if not opts.json:
            print(text, flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-epoch-files-") as name:
        tmp = Path(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
        env |= {"LOGSTORE_WAREHOUSE": str(tmp / "warehouse"),
                "LOGSTORE_STATE_DIR": str(tmp / "state"), "PYTHONPATH": str(ROOT)}  # fmt: skip
        runs = [run_table(env, tmp, "bench.compacted", COMPACT_EVERY, opts.epochs, opts, say)]
        if opts.contrast_epochs:
            runs.append(
                run_table(env, tmp, "bench.uncompacted", 0, opts.contrast_epochs, opts, say)
            )
        for run in runs:  # untimed: bytecode and page cache warm
            _timed_read(env, tmp, run.name)
        for _ in range(opts.rounds):
            for run in runs:
                run.read_s.append(_timed_read(env, tmp, run.name))

    report = {
        "rows": opts.rows, "changes_per_epoch": opts.changes, "recent": opts.recent,
        "inserts_only": opts.inserts_only,
        "rounds": opts.rounds, "tables": [run.summary() for run in runs],
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }  # fmt: skip
    if opts.json:
        print(json.dumps(report))
        return 0
    shape = ("inserts of new keys" if opts.inserts_only else
             f"60% inserts, 30% updates, 10% deletes of the newest {opts.recent} keys")  # fmt: skip
    print(f"\n{opts.changes} changes an epoch ({shape}) on {opts.rows:,} loaded rows; read: "
          f"median of {opts.rounds}")  # fmt: skip
    print(f"{'table':<20} {'epochs':>6} {'s/epoch':>8} {'files':>6} {'peak':>5} "
          f"{'compactions':>11} {'rows':>7} {'read s':>7}")  # fmt: skip
    for t in report["tables"]:
        print(f"{t['table']:<20} {t['epochs']:>6} {t['s_per_epoch']:>8.2f} {t['files']:>6} "
              f"{t['peak']:>5} {t['compactions']:>11} {t['rows']:>7} {t['read_s']:>7.3f}")  # fmt: skip
    print(f"load average: {report['load_average']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
