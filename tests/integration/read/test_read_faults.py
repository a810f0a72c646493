"""Fault tests of reads: the broker stopped (SIGTERM) and killed (SIGKILL) under following reads
and under an ingest.

Each test runs its own broker (``local_broker`` with a private state dir: its own ports and data),
never the session's, which other tests share; a restart brings it back on the same port with the
same data, as ``logstore broker stop`` / ``start`` do.

- Following reads of the consumer engine (``read_with_consumer`` in threads, and ``logstore read
  --follow`` as a subprocess) wait the outages out: every change comes out once, in offset order
  per partition, without restarting the read; what could not be written while the broker was down
  is written after it came back, and read too.
- An ingest running when the broker dies fails with a clear error (exit 1, the broker named, no
  traceback); re-run with its checkpoint it finishes the source: Delta equals the source, and the
  committed and eventual reads (bounded, and the following ones that ran throughout) equal Delta.

Run alone with ``pytest -m crash``.
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
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import StoredTable, load_table
from logstore_cli.errors import BrokerError
from logstore_cli.kafka import local_broker
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.consistency import decide_partitions
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    decode,
    encode_change,
    encode_marker,
)
from logstore_cli.read.service import ReadSummary, read_with_consumer
from tests.deltalog import write_epoch_commit
from tests.integration.jobs.ingest_support import (
    Change,
    ListSink,
    assert_log_reads_equal_delta,
    assert_offsets_once_in_order,
    changes,
    check_protocol,
    create_table,
    delta_state,
    fold,
    fold_changes,
    log_read_request,
    normalized,
    orders_ddl,
    read_log,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TABLE = "shop.orders"
PARTITIONS = 3
KAFKA_TIMEOUT_S = "5"  # the CLI's Kafka time-out: an outage is noticed within seconds
Emitted = list[tuple[RowKind, dict[str, Any], dict[str, Any]]]


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.1)  # poll interval of a condition with a deadline


class PrivateBroker:
    """A broker of this test alone, stopped, killed and started again over the same data."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.bootstrap = ""
        self.starts = 0

    def start(self) -> None:
        info = local_broker.start(self.state_dir)
        if self.starts:  # a restart: the same address, the same topics and records
            assert info.bootstrap == self.bootstrap and info.reused_data, info
        self.bootstrap = info.bootstrap
        self.starts += 1

    def stop(self) -> None:
        stopped = local_broker.stop(self.state_dir)
        assert stopped is not None and not stopped.forced, stopped

    def kill(self) -> None:
        info = local_broker.read_state(self.state_dir)
        assert info is not None and local_broker.is_running(info), info
        os.kill(info.pid, signal.SIGKILL)
        wait_for(lambda: _gone(info.pid), 30, f"the killed broker (pid {info.pid}) to exit")

    def close(self) -> None:
        local_broker.stop(self.state_dir, timeout_s=10)


def _gone(pid: int) -> bool:
    try:  # the broker is this process's child: reap it, or see it reaped
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    private = PrivateBroker(tmp_path_factory.mktemp("private-broker"))
    private.start()
    try:
        yield private
    finally:
        private.close()


def assert_cannot_write(bootstrap: str, topic: str) -> None:
    """While the broker is down a write fails (within its time-out), it is not queued for later:
    a record without logstore headers, which readers skip if it ever arrived."""
    with (
        LogProducer(bootstrap, {}, topic, timeout_s=2) as producer,
        pytest.raises(BrokerError) as info,
    ):
        producer.send(b'{"id":-1}', b"not a change", [], partition=0)
        producer.flush()
    assert bootstrap in info.value.message, info.value.message


class EpochWriter:
    """Writes epochs to the table's topic as the ingest job does (wire format 1: change records
    keyed, in the key's partition, then the epoch's Delta commit (metadata only: what confirms
    its markers), then one marker per partition), and remembers what each committed attempt sent
    to each partition, in order."""

    def __init__(self, bootstrap: str, topic: str, schema: RowSchema, table: Path) -> None:
        self.bootstrap, self.topic, self.schema, self.table = bootstrap, topic, schema, table
        self.writer = f"w-{uuid.uuid4().hex[:16]}"
        self.sent: dict[str, dict[int, list[tuple[RowKind, dict[str, Any]]]]] = {}
        self.committed: list[str] = []  # attempts whose markers went out, in order

    def produce(self, epoch: int, batch: Sequence[Change], *, rename: str = "") -> EpochId:
        """One attempt's change records (``rename`` marks its names: a failed attempt's rows differ
        from the retry's, so a reader that shows them cannot go unnoticed)."""
        eid = EpochId(self.writer, epoch, f"a-{uuid.uuid4().hex[:12]}")
        by_partition = self.sent.setdefault(eid.attempt, defaultdict(list))
        with LogProducer(self.bootstrap, {}, self.topic, timeout_s=15) as producer:
            for change in batch:
                row = {**change.row, "price": Decimal(change.row["price"])}
                row["name"] = rename + row["name"]
                kind = RowKind(change.op)
                key, value, headers = encode_change(
                    ChangeRecord(kind, {"id": row["id"]}, row, eid), self.schema
                )
                assert key is not None
                partition = partition_for(key, PARTITIONS)
                producer.send(key, value, headers, partition=partition)
                by_partition[partition].append((kind, normalized(row)))
            producer.flush()
        return eid

    def commit(self, eid: EpochId) -> None:
        version = max(int(p.stem) for p in (self.table / "_delta_log").glob("*.json")) + 1
        write_epoch_commit(self.table, version, eid)
        _, value, headers = encode_marker(CommitMarker(eid, version))
        with LogProducer(self.bootstrap, {}, self.topic, timeout_s=15) as producer:
            for partition in range(PARTITIONS):
                producer.send(None, value, headers, partition=partition)
            producer.flush()
        self.committed.append(eid.attempt)

    def epoch(self, epoch: int, batch: Sequence[Change]) -> None:
        self.commit(self.produce(epoch, batch))

    def expected_committed(self) -> dict[int, list[tuple[RowKind, dict[str, Any]]]]:
        """A committed read's output per partition: the committed attempts' records in order."""
        out: dict[int, list[tuple[RowKind, dict[str, Any]]]] = defaultdict(list)
        for attempt in self.committed:
            for partition, records in self.sent[attempt].items():
                out[partition].extend(records)
        return dict(out)


class FollowingRead:
    """``read_with_consumer`` of a following read in a thread, until ``finish``."""

    def __init__(self, stored: StoredTable, level: str) -> None:
        self.level = level
        self.sink = ListSink()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.summary: ReadSummary | None = None
        request = log_read_request(stored, level, follow=True, timeout_s=5.0)
        self.thread = threading.Thread(target=self._run, args=(request,), daemon=True)
        self.thread.start()

    def _run(self, request: Any) -> None:
        try:
            self.summary = read_with_consumer(request, self.sink, stop=self.stop.is_set)
        except BaseException as exc:  # handed to the test by finish() / wait()
            self.error = exc

    @property
    def emitted(self) -> Emitted:
        return self.sink.changes

    def wait(self, condition: Callable[[Emitted], bool], timeout_s: float, what: str) -> None:
        def check() -> bool:
            if self.error is not None or not self.thread.is_alive():
                pytest.fail(f"the {self.level} following read ended: {self.error!r}")
            return condition(self.emitted)

        wait_for(check, timeout_s, f"the {self.level} following read to show {what}")

    def finish(self) -> ReadSummary:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), f"the {self.level} read did not stop"
        if self.error is not None:
            raise self.error
        assert self.summary is not None
        return self.summary


class CliFollow:
    """``logstore read TABLE --mode log --consistent --follow -o jsonl`` as a user runs it."""

    def __init__(self, warehouse: Path, cwd: Path) -> None:
        self.stderr_path = cwd / "read-follow.stderr"
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        with self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logstore_cli", "read", TABLE, "--mode", "log",
                 "--consistent", "--follow", "--from", "earliest", "--output", "jsonl"],
                cwd=cwd, env=_cli_env(warehouse), stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip
        self.reader = threading.Thread(target=self._collect, daemon=True)
        self.reader.start()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(json.loads(line))

    def count(self) -> int:
        with self._lock:
            return len(self.lines)

    def finish(self) -> tuple[int, str]:
        """Ctrl-C, as a user ends a following read: exit 130 once the batch in hand is out."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("logstore read --follow did not stop on Ctrl-C")
        self.reader.join(timeout=10)
        return code, self.stderr_path.read_text()


def _cli_env(warehouse: Path, **more: str) -> dict[str, str]:
    return {**os.environ, "LOGSTORE_WAREHOUSE": str(warehouse),
            "LOGSTORE_KAFKA_TIMEOUT": KAFKA_TIMEOUT_S, **more}  # fmt: skip


def _state(log: Sequence[Change]) -> dict[int, dict[str, Any]]:
    """The table a changelog leaves, rows as ``normalized`` gives them."""
    return {k: normalized(v) for k, v in fold(log).items()}


def _per_partition(emitted: Emitted) -> dict[int, list[tuple[RowKind, dict[str, Any]]]]:
    out: dict[int, list[tuple[RowKind, dict[str, Any]]]] = defaultdict(list)
    for kind, row, meta in emitted:
        out[meta["partition"]].append((kind, normalized(row)))
    return dict(out)


def _located(emitted: Emitted) -> list[tuple[str, int, int, str]]:
    """What a read emitted, comparable across engines: kind, partition, offset, row id."""
    return [(k.value, m["partition"], m["offset"], str(r["id"])) for k, r, m in emitted]


def _reference(bootstrap: str, topic: str, schema: RowSchema, level: str) -> Emitted:
    """The pure decider over the whole log read in one go: what a read untroubled by outages
    emits, partition after partition."""
    items: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for r in read_log(bootstrap, topic):
        items[r.partition].append((r.offset, decode(r.key, r.value, r.headers, schema)))
    decided = decide_partitions(items, level)
    return [
        (e.kind, dict(e.row), {"partition": p, "offset": e.offset})
        for p in sorted(decided)
        for e in decided[p]
    ]


def _by_partition_located(emitted: Emitted) -> dict[int, list[tuple[str, int, int, str]]]:
    out: dict[int, list[tuple[str, int, int, str]]] = defaultdict(list)
    for item in _located(emitted):
        out[item[1]].append(item)
    return dict(out)


def test_following_reads_wait_out_a_stopped_and_a_killed_broker(
    spark: SparkSession, broker: PrivateBroker, tmp_path: Path, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    ddl = orders_ddl(TABLE, topic_name, broker.bootstrap, partitions=PARTITIONS)
    create_table(spark, warehouse, ddl)
    stored = load_table(warehouse, TABLE)
    schema = RowSchema.of(stored.spec)
    log = changes(5 * 40, keys=30, seed=11)
    batches = [log[i : i + 40] for i in range(0, len(log), 40)]
    writer = EpochWriter(broker.bootstrap, topic_name, schema, stored.ref.path)
    committed = FollowingRead(stored, "committed")
    eventual = FollowingRead(stored, "eventual")
    cli = CliFollow(warehouse, tmp_path)
    try:

        def caught_up(upto: int) -> None:
            want = _state([c for b in batches[:upto] for c in b])
            what = f"epochs 0-{upto - 1}"
            committed.wait(lambda e: _per_partition(e) == writer.expected_committed(), 60, what)
            eventual.wait(lambda e: fold_changes(e) == want, 60, what)
            count = len(committed.emitted)
            wait_for(lambda: cli.count() >= count, 60, f"logstore read -f to show {count} rows")

        writer.epoch(0, batches[0])
        caught_up(1)
        # Epoch 1's first attempt produces, then fails: eventual shows it at once, committed holds
        # it; the broker goes down with it standing.
        shown = len(eventual.emitted) + len(batches[1])
        writer.produce(1, batches[1], rename="failed-")
        eventual.wait(lambda e: len(e) == shown, 60, "the failed attempt's records")
        assert len(committed.emitted) == len(batches[0])

        broker.stop()
        assert_cannot_write(broker.bootstrap, topic_name)
        broker.start()
        writer.epoch(1, batches[1])  # the retry, committed
        writer.epoch(2, batches[2])
        caught_up(3)

        broker.kill()
        assert_cannot_write(broker.bootstrap, topic_name)
        broker.start()
        writer.epoch(3, batches[3])
        writer.epoch(4, batches[4])
        caught_up(5)
    finally:
        committed.stop.set()
        eventual.stop.set()
        try:
            code, stderr = cli.finish()
        finally:
            summaries = {r.level: r.finish() for r in (committed, eventual)}

    # committed: exactly the committed attempts' records, once each, in each partition's order
    assert _per_partition(committed.emitted) == writer.expected_committed()
    assert_offsets_once_in_order(committed.emitted)
    assert not [r for _, r, _ in committed.emitted if r["name"].startswith("failed-")]
    assert summaries["committed"].retractions == 0
    # ... the same, change for change, as the pure decider over the whole log read in one go
    reference = _reference(broker.bootstrap, topic_name, schema, "committed")
    assert _by_partition_located(committed.emitted) == _by_partition_located(reference)
    # eventual: the failed attempt shown, retracted once, and the state right
    assert fold_changes(eventual.emitted) == _state(log)
    assert summaries["eventual"].retractions == len(batches[1])
    assert len(eventual.emitted) == len(log) + 2 * len(batches[1])
    # the CLI's following read: per partition the same lines as the committed read in this
    # process (partitions interleave as their fetches come)
    assert code == 130, stderr
    assert "Traceback" not in stderr, stderr
    lost, back = "lost the connection to Kafka", "is reachable again; reading on"
    assert stderr.count(lost) == stderr.count(back) >= 1, stderr  # the outages were told
    cli_emitted = [
        (
            RowKind(line["kind"]),
            line["row"],
            {"partition": line["partition"], "offset": line["offset"]},
        )
        for line in cli.lines
    ]
    assert _by_partition_located(cli_emitted) == _by_partition_located(committed.emitted)


class Ingest:
    """``logstore ingest TABLE --source DIR`` as a script runs it, in its own process group (its
    JVM goes with it); output to files, so that a long run never blocks on a full pipe."""

    runs = 0

    def __init__(self, warehouse: Path, source: Path, cwd: Path, *flags: str) -> None:
        Ingest.runs += 1
        self.out = cwd / f"ingest-{Ingest.runs}.stdout"
        self.err = cwd / f"ingest-{Ingest.runs}.stderr"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logstore_cli", "ingest", TABLE, "--source", str(source),
                 "--source-option", "maxFilesPerTrigger=1", "--json", "--lease-ttl", "30",
                 *flags],
                cwd=cwd, env=_cli_env(warehouse), stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip

    def stderr(self) -> str:
        return self.err.read_text()

    def finish(self, timeout_s: float) -> tuple[int, str]:
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"the ingest did not end within {timeout_s:g}s:\n{self.stderr()[-3000:]}")
        return code, self.stderr()


def test_an_ingest_across_a_killed_broker_is_rerun_to_an_exact_table(
    spark: SparkSession, broker: PrivateBroker, tmp_path: Path, topic_name: str
) -> None:
    warehouse = tmp_path / "warehouse"
    ddl = orders_ddl(TABLE, topic_name, broker.bootstrap, partitions=PARTITIONS)
    create_table(spark, warehouse, ddl)
    stored = load_table(warehouse, TABLE)
    path = stored.ref.path
    per_file = 150
    log = changes(2 * per_file, keys=120, seed=23)
    files = [log[i : i + per_file] for i in range(0, len(log), per_file)]
    source = tmp_path / "in"
    write_files(source, files[:1])
    committed = FollowingRead(stored, "committed")
    eventual = FollowingRead(stored, "eventual")
    job = Ingest(warehouse, source, tmp_path, "--trigger", "1")
    try:

        def shown(emitted: Emitted) -> bool:
            if job.proc.poll() is not None:
                pytest.fail(f"the ingest ended early ({job.proc.returncode}):\n{job.stderr()}")
            return fold_changes(emitted) == _state(files[0])

        # The committed read shows epoch 0 once its markers are out: the job then waits for files.
        committed.wait(shown, 240, "the ingest's first epoch")
        broker.kill()
        write_files(source, files[1:2], start=1)  # an epoch that cannot reach the log now
        code, err = job.finish(timeout_s=120)
        assert code == 1, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        assert err.startswith("error:") and f"Kafka at {broker.bootstrap}" in err, err[-3000:]
        assert len(list(epochs.epoch_commits(path))) == 1  # the failed epoch committed nothing

        broker.start()
        # Re-run with the same checkpoint: the failed epoch runs again, to the end of the source.
        code, err = Ingest(warehouse, source, tmp_path, "--once").finish(300)
        assert code == 0, err[-3000:]

        expected = _state(log)
        assert delta_state(path) == expected
        counts = check_protocol(stored.spec, path, read_log(broker.bootstrap, topic_name))
        assert counts["epochs"] == len(files)
        assert_log_reads_equal_delta(warehouse, TABLE)
        # the following reads that ran throughout reach the same state, exactly once
        committed.wait(lambda e: fold_changes(e) == expected, 60, "the Delta table")
        eventual.wait(lambda e: fold_changes(e) == expected, 60, "the Delta table")
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
            job.proc.wait()
        for read in (committed, eventual):
            read.stop.set()
        for read in (committed, eventual):
            read.finish()
    assert_offsets_once_in_order(committed.emitted)
    schema = RowSchema.of(stored.spec)
    reference = _reference(broker.bootstrap, topic_name, schema, "committed")
    assert _by_partition_located(committed.emitted) == _by_partition_located(reference)
