"""``logstore read`` as a shell script runs it: one table ingested once (three epochs of generated
inserts, updates and deletes) and read every way a user can — the log at each read level, from a
middle snapshot (hybrid), the Delta snapshot, time travel and change feed, into a path, cut short by
``--limit`` or ``| head`` — bad input, and a following read stopped with Ctrl-C and resumed from
its checkpoint.

``--mode file`` reads with delta-rs (no JVM) unless ``--engine spark`` says otherwise; log reads
to stdout use the consumer engine (no JVM), log reads to a path Spark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from logstore_cli.catalog.epochs import EpochCommit, epoch_commits
from logstore_cli.catalog.tables import load_table
from logstore_cli.logformat.wire import EpochId, RowKind, RowSchema
from tests.deltalog import write_epoch_commit, write_table
from tests.e2e.cli_support import create_tables
from tests.integration.jobs.ingest_support import normalized, orders_ddl
from tests.integration.read.log_support import LogWriter, create_topic, end_offsets

pytestmark = pytest.mark.integration

TABLE = "shop.orders"
PARTITIONS = 2
TOTAL = 600  # changes, in epochs of 200: versions 1, 2 and 3 (version 0 is create-table)
KINDS = {"+I", "-U", "+U", "-D"}

Line = dict[str, Any]
State = dict[int, dict[str, Any]]


def _env(root: Path) -> dict[str, str]:
    """The developer's environment without logstore's own settings (module fixtures run before the
    per-test isolation), with this module's warehouse and state directory."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LOGSTORE_") or k == "LOGSTORE_HOME" or k.startswith("LOGSTORE_TEST_")}  # fmt: skip
    env.update(LOGSTORE_WAREHOUSE=str(root / "wh"), LOGSTORE_STATE_DIR=str(root / "state"),
               LOGSTORE_KAFKA_TIMEOUT="10")  # fmt: skip
    return env


def _cli(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args], cwd=root, env=_env(root),
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _lines(stdout: str) -> list[Line]:
    return [json.loads(line, parse_float=Decimal) for line in stdout.splitlines()]


def _summary(stderr: str) -> dict[str, Any]:
    """The ``--json`` summary on stderr: one line of its own (other messages around it)."""
    for line in stderr.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if isinstance(obj, dict) and obj.get("event") == "summary":
                return obj
    raise AssertionError(f"no summary line on stderr:\n{stderr}")


def _fold(lines: list[Line], state: State | None = None) -> State:
    """Changes applied by key: a -U or -D removes a row that must be there."""
    state = {} if state is None else state
    for line in lines:
        assert line["kind"] in KINDS, line
        key = int(line["row"]["id"])
        if line["kind"] in ("-U", "-D"):
            assert key in state, f"{line} removes a row the read never showed"
            del state[key]
        else:
            state[key] = normalized(line["row"])
    return state


def _delta(path: Path, version: int | None = None) -> State:
    rows = DeltaTable(str(path), version=version).to_pyarrow_table().to_pylist()
    state = {int(r["id"]): normalized(r) for r in rows}
    assert len(state) == len(rows)
    return state


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


@dataclass(frozen=True)
class Ingested:
    root: Path
    path: Path
    topic: str
    bootstrap: str
    records: int  # change records the ingest wrote to the log
    commits: list[EpochCommit]  # oldest first


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Ingested:
    root = tmp_path_factory.mktemp("read-cli")
    topic = f"t-{uuid.uuid4().hex[:12]}"
    create_tables(root / "wh", orders_ddl(TABLE, topic, kafka_bootstrap, partitions=PARTITIONS))
    ingest = _ok(_cli(root, "ingest", TABLE, "--source", "generate", "--total", str(TOTAL),
                      "--keys", "80", "--delete-ratio", "0.3", "--seed", "7", "--once", "--json",
                      "--source-option", "maxChangesPerBatch=200"))  # fmt: skip
    events = [json.loads(line) for line in ingest.stdout.splitlines()]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    path = root / "wh" / "shop" / "orders"
    commits = sorted(epoch_commits(path), key=lambda c: c.version)
    assert [c.version for c in commits] == [1, 2, 3]
    return Ingested(root, path, topic, kafka_bootstrap, sum(e["log_records"] for e in epochs),
                    commits)  # fmt: skip


def _read(t: Ingested, *args: str) -> tuple[list[Line], subprocess.CompletedProcess[str]]:
    result = _ok(_cli(t.root, "read", TABLE, *args))
    return _lines(result.stdout), result


def _log_meta(lines: list[Line]) -> None:
    """Log rows carry where they came from, in offset order per partition."""
    last: dict[int, int] = {}
    for line in lines:
        assert {"partition", "offset", "writer", "epoch"} <= set(line), line
        assert line["offset"] > last.get(line["partition"], -1), line
        last[line["partition"]] = line["offset"]


# -- the log --------------------------------------------------------------------------------------


def test_a_consistent_log_read_folds_to_the_delta_table_and_sums_up(table: Ingested) -> None:
    lines, result = _read(table, "--mode", "log", "--consistent", "--output", "jsonl", "--json")
    assert Counter(line["kind"] for line in lines).keys() == KINDS  # updates and deletes too
    _log_meta(lines)
    assert _fold(lines) == _delta(table.path)
    assert len(lines) == table.records  # a clean ingest: every record committed

    summary = _summary(result.stderr)
    assert summary["consistency"] == "committed" and summary["engine"] == "consumer"
    assert summary["rows"] == len(lines) and summary["retractions"] == 0
    assert summary["snapshot"] is None and summary["limited"] is False
    assert summary["log"]["records"] == table.records
    assert summary["log"]["markers"] == len(table.commits) * PARTITIONS
    assert summary["log"]["pending_epochs"] == 0 and summary["log"]["skipped"] == 0
    ends = end_offsets(table.bootstrap, table.topic)
    assert summary["log"]["end_offsets"] == {str(p): o for p, o in ends.items()}


def test_none_holds_every_record_and_append_only_only_inserts(table: Ingested) -> None:
    everything, _ = _read(table, "--mode", "log", "--consistency", "none")
    assert len(everything) == table.records
    assert len({(x["partition"], x["offset"]) for x in everything}) == table.records
    _log_meta(everything)

    inserts, _ = _read(table, "--mode", "log", "--consistent", "--changelog-mode", "append-only")
    assert inserts and {x["kind"] for x in inserts} == {"+I"}
    _log_meta(inserts)
    # Partitions interleave in whatever order the broker answers; order is promised per partition.
    assert sorted(inserts, key=_at) == sorted((x for x in everything if x["kind"] == "+I"), key=_at)


def test_a_hybrid_read_from_a_middle_epoch_continues_where_the_snapshot_ends(
    table: Ingested,
) -> None:
    middle = table.commits[1]
    lines, result = _read(table, "--mode", "log", "--consistent", "--from",
                          f"snapshot:{middle.version}", "--json")  # fmt: skip
    snapshot = [x for x in lines if "partition" not in x]
    log = lines[len(snapshot) :]
    assert snapshot and log and lines[: len(snapshot)] == snapshot  # the snapshot comes first
    assert all(x["kind"] == "+I" and x["version"] == middle.version for x in snapshot)
    _log_meta(log)
    assert _fold(snapshot) == _delta(table.path, middle.version)
    # No epoch the snapshot holds is read again from the log.
    assert {(x["writer"], x["epoch"]) for x in log} == {
        (c.epoch.writer, c.epoch.epoch) for c in table.commits if c.version > middle.version
    }
    full, _ = _read(table, "--mode", "log", "--consistent", "--from", "earliest")
    assert _fold(lines) == _fold(full) == _delta(table.path)

    summary = _summary(result.stderr)
    assert summary["snapshot"] == {"version": middle.version, "rows": len(snapshot)}
    assert summary["rows"] == len(lines)


def test_limit_and_a_closed_pipe(table: Ingested) -> None:
    five, _ = _read(table, "--mode", "log", "--consistency", "none", "--limit", "5")
    assert len(five) == 5

    # stdout closed after one line: the read ends quietly (pipefail off: head's status)
    command = (f"{sys.executable} -m logstore_cli read {TABLE} --mode log --consistency none "
               "| head -1")  # fmt: skip
    piped = subprocess.run(["bash", "-c", command], cwd=table.root, env=_env(table.root),
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert len(piped.stdout.splitlines()) == 1 and json.loads(piped.stdout)["kind"] in KINDS
    assert "Traceback" not in piped.stderr and "Error" not in piped.stderr, piped.stderr


# -- the Delta table (delta-rs; Spark when asked) -----------------------------------------------


def test_file_mode_snapshot_and_changes(table: Ingested) -> None:
    latest = table.commits[-1].version
    snapshot, _ = _read(table, "--mode", "file", "--output", "jsonl")
    assert {x["kind"] for x in snapshot} == {"+I"} and {x["version"] for x in snapshot} == {latest}
    assert _fold(snapshot) == _delta(table.path)

    changes, _ = _read(table, "--mode", "file", "--changes")
    assert {x["kind"] for x in changes} == KINDS
    versions = [x["version"] for x in changes]
    assert versions == sorted(versions) and set(versions) == {c.version for c in table.commits}
    assert _fold(changes) == _delta(table.path)


def test_file_mode_to_a_jsonl_file_with_the_spark_engine(table: Ingested) -> None:
    # -o jsonl:PATH used to be taken as a Delta path 'jsonl:…': a Java stack trace (issue 18).
    target = table.root / "out" / "snapshot.jsonl"
    target.parent.mkdir(exist_ok=True)
    result = _ok(_cli(table.root, "read", TABLE, "--mode", "file", "--engine", "spark", "-o",
                      f"jsonl:{target}"))  # fmt: skip
    assert result.stdout == "" and "spark engine" in result.stderr
    assert _fold(_lines(target.read_text())) == _delta(table.path)


def test_time_travel_to_a_path_written_once_and_never_overwritten(table: Ingested) -> None:
    target = table.root / "out" / "orders-v1.parquet"
    first = _delta(table.path, 1)
    assert first != _delta(table.path)
    result = _ok(_cli(table.root, "read", TABLE, "--mode", "file", "--as-of", "1", "--output",
                      str(target), "--json"))  # fmt: skip
    assert json.loads(result.stdout)["rows"] == len(first)  # the summary goes to stdout
    rows = pq.read_table(target).to_pylist()
    assert len(rows) == len(first) and {int(r["id"]): normalized(r) for r in rows} == first

    before = {p: p.stat().st_mtime_ns for p in target.rglob("*")}
    again = _cli(table.root, "read", TABLE, "--mode", "file", "--output", str(target))
    assert again.returncode == 2, again.stderr
    assert "already exists" in again.stderr and "Traceback" not in again.stderr
    assert {p: p.stat().st_mtime_ns for p in target.rglob("*")} == before


# -- bad input ------------------------------------------------------------------------------------


def test_bad_input_exits_2_with_the_reason(table: Ingested) -> None:
    write_table(table.root / "wh",
                "CREATE TABLE shop.plain (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)")  # fmt: skip
    cases = [
        ([TABLE, "--mode", "file", "--follow"], "--follow"),
        ([TABLE, "--mode", "log", "--consistency", "eventual", "--changelog-mode", "append-only"],
         "append-only"),
        ([TABLE, "--mode", "log", "--from", "snapshot:999"], "999"),
        ([TABLE, "--mode", "log", "--from", "yesterday"], "yesterday"),
        (["shop.plain", "--mode", "log"], "no log store"),
    ]  # fmt: skip
    for args, named in cases:
        result = _cli(table.root, "read", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert named in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
        assert result.stdout == "", args

    missing = _cli(table.root, "read", "shop.ordres", "--mode", "log")
    assert missing.returncode == 1, missing.stderr  # docs/guide.md: a table not found is exit 1
    assert "shop.ordres" in missing.stderr and "shop.orders" in missing.stderr  # the nearest name
    assert "Traceback" not in missing.stderr


# -- following, Ctrl-C, resuming ------------------------------------------------------------------


class Follower:
    """``logstore read … --follow`` in the background; its stdout lines collected as they come."""

    def __init__(self, root: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logstore_cli", "read", *args], cwd=root, env=_env(root),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[Line] = []
        self.stderr = ""
        self._out = threading.Thread(target=self._collect, daemon=True)
        self._err = threading.Thread(target=self._collect_err, daemon=True)
        self._out.start()
        self._err.start()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line, parse_float=Decimal))

    def _collect_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_for(self, count: int, timeout: float = 60) -> list[Line]:
        deadline = time.monotonic() + timeout
        while len(self.lines) < count:
            assert self.proc.poll() is None, f"the read ended early:\n{self._drain()}"
            assert time.monotonic() < deadline, f"{len(self.lines)} of {count} lines"
            time.sleep(0.05)
        return list(self.lines)

    def interrupt(self, signum: int = signal.SIGINT) -> int:
        self.proc.send_signal(signum)
        code = self.proc.wait(timeout=60)
        self._drain()
        return code

    def _drain(self) -> str:
        self._out.join(timeout=30)
        self._err.join(timeout=30)
        return self.stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _rows(n: int, start: int = 0, tag: str = "") -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}{tag}", "qty": i, "price": Decimal(f"{i}.50")}
            for i in range(start, start + n)]  # fmt: skip


def test_follow_stops_on_ctrl_c_and_resumes_from_its_checkpoint(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    table = write_table(tmp_path / "wh", orders_ddl("shop.live", topic_name, kafka_bootstrap,
                                                    partitions=PARTITIONS))  # fmt: skip
    create_topic(kafka_bootstrap, topic_name, PARTITIONS)
    schema = RowSchema.of(load_table(tmp_path / "wh", "shop.live").spec)
    w = "w-feedfacefeedface"
    checkpoint = tmp_path / "reader.json"
    args = ("shop.live", "--mode", "log", "--consistent", "--follow", "--from", "earliest",
            "--checkpoint", str(checkpoint), "--output", "jsonl")  # fmt: skip
    with LogWriter(kafka_bootstrap, topic_name, schema) as log:

        def epoch(n: int, attempt: str, changes: list[tuple[RowKind, dict[str, Any]]],
                  commit: bool = True) -> int:  # fmt: skip
            sent = log.changes(EpochId(w, n, attempt), changes)
            if commit:  # as the job does: the Delta commit, then the markers naming it
                write_epoch_commit(table, n + 1, EpochId(w, n, attempt))
                log.marker(EpochId(w, n, attempt), delta_version=n + 1)
            return sent

        first = epoch(0, "a-0", [(RowKind.INSERT, r) for r in _rows(10)])
        reader = Follower(tmp_path, *args)
        try:
            reader.wait_for(first)
            # While it follows: updates and deletes of epoch 1, then a failed attempt of epoch 2.
            updates = [(k, r) for old, new in zip(_rows(4), _rows(4, tag="'"), strict=True)
                       for k, r in ((RowKind.UPDATE_BEFORE, old), (RowKind.UPDATE_AFTER, new))]  # fmt: skip
            second = epoch(1, "a-1", [*updates, (RowKind.DELETE, _rows(1, 9)[0])])
            run1 = reader.wait_for(first + second)
            epoch(2, "a-2-failed", [(RowKind.INSERT, r) for r in _rows(3, 100)], commit=False)
            assert reader.interrupt() == 130, reader.stderr
        finally:
            reader.kill()
        assert "Traceback" not in reader.stderr and "interrupted" in reader.stderr
        assert checkpoint.is_file()
        assert reader.lines == run1  # nothing of the failed attempt was shown
        # While stopped: the retry of epoch 2 commits, and epoch 3.
        third = epoch(2, "a-2", [(RowKind.INSERT, r) for r in _rows(3, 200)])
        fourth = epoch(3, "a-3", [(RowKind.DELETE, _rows(1, 200)[0])])

        again = Follower(tmp_path, *args)
        try:
            again.wait_for(third + fourth)
            # A supervisor's SIGTERM stops a following read as Ctrl-C does: checkpoint saved.
            assert again.interrupt(signal.SIGTERM) == 130, again.stderr
        finally:
            again.kill()
        assert "SIGTERM: stopping the read" in again.stderr, again.stderr
        assert "interrupted (SIGTERM)" in again.stderr and "Traceback" not in again.stderr
    run2 = again.lines
    assert len(run2) == third + fourth  # only the new changes
    assert {(x["epoch"], x["row"]["id"]) for x in run2} == {(2, 200), (2, 201), (2, 202), (3, 200)}

    # Both runs together are exactly one uninterrupted read of the log.
    whole = _lines(_ok(_cli(tmp_path, "read", "shop.live", "--mode", "log", "--consistent",
                            "--output", "jsonl")).stdout)  # fmt: skip
    assert sorted(run1 + run2, key=_at) == sorted(whole, key=_at)
    assert len(whole) == first + second + third + fourth


def _at(line: Mapping[str, Any]) -> tuple[int, int]:
    return line["partition"], line["offset"]
