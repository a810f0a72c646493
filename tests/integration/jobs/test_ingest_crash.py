"""Crash tests: ``logstore ingest`` killed with SIGKILL (it and its JVM, as a machine failure would)
at each crash point of an epoch in turn and then at random times, each restart recovering from the
kill before it, then run until it finishes: one job, one table, one set-up.

At the end: the Delta table equals the source folded by key; no (writer, epoch) is committed
twice; every marker names the committed attempt; the committed log read folds to the Delta table,
and so do ``logstore read``'s committed and eventual reads (the consumer engine); ``verify`` finds
the log equal to Delta.

The first test runs on every warehouse backend (``backend``: local, S3, HDFS; the table, its lease,
Spark's checkpoint and the Delta log on that backend, every check reading the table there). On the
remote ones it kills at every crash point in turn and then once at a random time (not three
times: each Spark job there costs more, and one kill inside a running epoch already shows the
recovery from a random moment on that backend's Delta log store, lease and checkpoint; the local
case samples the timings more). It also runs with the table's log on Pulsar (``log``;
``local-pulsar``: Amoro's Pulsar DDL, a local warehouse), at every crash point in turn and
without random kills, for the reason given in its docstring.
Run alone with ``pytest -m crash``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.ingest.epoch import EPOCH_CRASH_POINTS as CRASH_POINTS
from logstore_cli.jobs.ingest import KILL_AT_ENV, PAUSE_AT_ENV, PAUSE_FILE_ENV
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import ChangeRecord, CommitMarker, decode
from logstore_cli.pulsar.local_standalone import PulsarInfo
from tests import jobrun
from tests.backends import BACKENDS, Backend

from .ingest_support import (
    LogRecord,
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
    create_table,
    delta_state,
    fold,
    normalized,
    orders_ddl,
    plain_debezium_fold,
    read_log,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.crash]

PER_FILE = 250  # changes per source file: one file per epoch (maxFilesPerTrigger=1)
KILLED = -signal.SIGKILL
SEED_ENV = "LOGSTORE_TEST_CRASH_SEED"  # replays the random kills' choices
RANDOM_FILES = 6  # epochs after the crash-point ones, for the random kills
RANDOM_RUNS = 3  # runs killed at random times, on a local warehouse
# On a remote warehouse: one run killed at a random time, inside the one epoch after the
# crash-point ones (what the run after the last kill commits on its own).
REMOTE_RANDOM_FILES = 1
REMOTE_RANDOM_RUNS = 1
# Without random kills (Pulsar): one epoch that the run after the last kill commits on its own.
EXTRA_FILES = 1
PARTITIONS = 3
# The cases of the first test: (warehouse backend, log system). Kafka on every backend; Pulsar on
# a local warehouse, marked so that the scheduler runs it with the standalone's other users.
CASES = [pytest.param(*b.values, "kafka", id=b.id, marks=b.marks) for b in BACKENDS] + [
    pytest.param("local", "pulsar", id="local-pulsar", marks=pytest.mark.pulsar)
]


@dataclass(frozen=True)
class CrashLog:
    """The table's log: a topic on the session's Kafka broker, or a partitioned topic on the
    Pulsar standalone (``pulsar`` set: Amoro's ``'log-store.type' = 'pulsar'``)."""

    address: str  # bootstrap servers, or Pulsar's pulsar:// service URL
    topic: str
    pulsar: PulsarInfo | None = None

    @property
    def admin_url(self) -> str | None:
        """Pulsar's admin REST API (what ``--pulsar-admin-url`` says to the CLI)."""
        return None if self.pulsar is None else self.pulsar.web_url

    @property
    def env(self) -> dict[str, str]:
        """What a CLI run needs to reach the log."""
        url = self.admin_url
        return {} if url is None else {"LOGSTORE_PULSAR_ADMIN_URL": url}

    def ddl(self) -> str:
        extra = None if self.pulsar is None else {"log-store.type": "pulsar"}
        return orders_ddl("shop.orders", self.topic, self.address, partitions=PARTITIONS,
                          extra=extra)  # fmt: skip

    def create_topic(self) -> None:
        """The topic as create-table provisions it (on Pulsar: retention set, deduplication on)."""
        if self.pulsar is None:
            with KafkaAdmin(self.address, timeout_s=15) as admin:
                admin.create_topic(self.topic, PARTITIONS, 1, {})
            return
        from logstore_cli import config as cfg
        from logstore_cli.ddl import ParseOptions, parse_ddl
        from logstore_cli.provision.pulsar_topics import PulsarTopicStore

        (spec,) = parse_ddl(self.ddl(), "t.sql", ParseOptions())
        assert spec.log_store is not None and spec.log_store.system == "pulsar"
        store = PulsarTopicStore(cfg.PulsarConfig(admin_url=self.pulsar.web_url), timeout_s=30)
        store.create(spec.log_store, PARTITIONS, None, {})

    def read(self) -> list[LogRecord]:
        """Every record, from the start of each partition: Kafka's consumer, or Pulsar's raw
        client (its properties in Kafka's header order, ``offset`` the index in the partition)."""
        if self.pulsar is None:
            return read_log(self.address, self.topic)
        from logstore_cli.pulsar.admin import TopicName
        from tests.integration.pulsar.test_pulsar_ingest import log_records, read_topic

        return log_records(read_topic(self.pulsar, TopicName.parse(self.topic)))


@pytest.fixture
def log(request: pytest.FixtureRequest, topic_name: str) -> CrashLog:
    """The parameter's log system; its server asked for at run time (``CASES``' marks)."""
    if request.param == "kafka":
        return CrashLog(request.getfixturevalue("kafka_bootstrap"), topic_name)
    assert request.param == "pulsar", request.param
    pulsar: PulsarInfo = request.getfixturevalue("pulsar")
    return CrashLog(pulsar.service_url, topic_name, pulsar)


def _ingest(
    warehouse: Path | str, source: Path, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """The CLI as a script runs it, in its own process group (the kill takes its JVM too)."""
    return jobrun.start(
        [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source", str(source),
         "--once", "--source-option", "maxFilesPerTrigger=1", "--json", "--lease-ttl", "30"],
        cwd=tmp, env={"LOGSTORE_WAREHOUSE": str(warehouse), **(env or {})},
    )  # fmt: skip


def _run_to_completion(
    warehouse: Path | str, source: Path, tmp: Path, env: dict[str, str] | None = None
) -> None:
    """One restart finishes the job: the dead job's lease is taken over at once (its holder's
    process is gone on this host), the checkpoint says where to go on."""
    code, _, err = jobrun.finish(_ingest(warehouse, source, tmp, env))
    assert code == 0, err[-3000:]


def _check(
    backend: Backend, expected: dict[int, dict[str, object]], log: CrashLog
) -> dict[str, int]:
    path = backend.table()
    assert delta_state(path) == {k: normalized(v) for k, v in expected.items()}
    table = backend.load().spec
    counts = check_protocol(table, path, log.read())
    reads = assert_log_reads_equal_delta(backend.warehouse, "shop.orders", admin_url=log.admin_url)
    return {**counts, **reads}


@pytest.fixture
def setup(
    backend: Backend, tmp_path: Path, log: CrashLog
) -> Callable[[int, int], tuple[TableLocation, Path, dict[int, dict[str, object]]]]:
    """The table on ``backend`` (without Spark: as create-table writes it), its topic on ``log``,
    and ``files`` source files of ``PER_FILE`` changes each."""

    def make(seed: int, files: int) -> tuple[TableLocation, Path, dict[int, dict[str, object]]]:
        path = backend.write(log.ddl())
        log.create_topic()
        written = changes(files * PER_FILE, keys=120, seed=seed)
        batches = [written[i : i + PER_FILE] for i in range(0, len(written), PER_FILE)]
        write_files(tmp_path / "in", batches)
        return path, tmp_path / "in", fold(written)

    return make


def _epoch_changes(log: list[LogRecord]) -> dict[int, dict[str, int]]:
    """epoch -> {attempt: its change records in ``log``}."""
    found: dict[int, dict[str, int]] = {}
    for r in log:
        item = decode(r.key, r.value, r.headers)
        if isinstance(item, ChangeRecord):
            per_attempt = found.setdefault(item.epoch.epoch, {})
            per_attempt[item.epoch.attempt] = per_attempt.get(item.epoch.attempt, 0) + 1
    return found


def _paused_unless_done(proc: subprocess.Popen[str], pause: Path) -> bool:
    """Until the job holds at its pause (True), or ends with exit 0 first (False): the epoch to
    hold never came, as the source ended in fewer epochs than files (see ``_one_file_per_epoch``)."""
    deadline = time.monotonic() + jobrun.JOB_TIMEOUT_S
    while not pause.exists():
        if proc.poll() == 0:
            return False
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the job ended (exit {proc.returncode}) before the pause:\n{err[-3000:]}")
        assert time.monotonic() < deadline, "the job did not reach the pause in time"
        time.sleep(0.05)  # poll interval of a condition with a deadline
    return True


def _one_file_per_epoch(per_epoch: dict[int, int], files: int) -> None:
    """The committed epochs are 0..n-1, each with one source file's changes, all files once: one
    file per epoch (maxFilesPerTrigger=1), except that a kill between Spark's source log and its
    offset log of a batch (the file chosen, the batch not yet planned) makes the restart's first
    batch take that file and the next one together (an epoch of two files)."""
    assert sorted(per_epoch) == list(range(len(per_epoch))), per_epoch
    assert all(n > 0 and n % PER_FILE == 0 for n in per_epoch.values()), per_epoch
    assert sum(per_epoch.values()) == files * PER_FILE, per_epoch


def _newest_epoch(path: TableLocation) -> int:
    """The newest epoch Delta committed (-1: none): the one whose markers a run's start-up
    re-publishes."""
    return max((c.epoch.epoch for c in epochs.epoch_commits(path)), default=-1)


@dataclass(frozen=True)
class RandomKills:
    """What ``_kill_at_random_times`` did: where the kills landed inside a running epoch, and the
    newest committed epoch as each run it started began (whose markers that run re-published)."""

    landed: list[str]
    starts: list[int]


def _kill_at_random_times(
    rnd: random.Random,
    seed: int,
    backend: Backend,
    source: Path,
    tmp: Path,
    last_epoch: int,
    runs: int,
) -> RandomKills:
    """Up to ``runs`` runs, each SIGKILLed a random time after a random epoch not committed yet
    passed its before-log pause (that epoch is then running); a kill counts as landed inside it
    when the run never reported that epoch done."""
    path, warehouse = backend.table(), backend.uri
    # How long an epoch runs after before-log (produce, commit, markers): 1 s until measured on
    # the reported epochs; the kill comes within 80% of it, so most kills land inside the epoch.
    rests = [1.0]
    landed: list[str] = []
    starts: list[int] = []
    for run in range(runs):
        # An epoch Delta has not committed yet: a committed one is only re-published (no pause).
        committed = {c.epoch.epoch for c in epochs.epoch_commits(path)}
        started_with = committed
        held = min(max(committed, default=-1) + 1 + rnd.randrange(2), last_epoch)
        if held in committed:
            break  # every epoch committed: nothing left to kill inside
        starts.append(max(committed, default=-1))
        pause = tmp / f"pause-{run}"
        env = {PAUSE_AT_ENV: f"before-log:{held}", PAUSE_FILE_ENV: str(pause)}
        with jobrun.killed_on_error(_ingest(warehouse, source, tmp, env)) as proc:
            if not _paused_unless_done(proc, pause):
                code, _, err = jobrun.finish(proc)  # no epoch `held`: the source is done
                assert code == 0, f"{SEED_ENV}={seed}, run {run}:\n{err[-3000:]}"
                break
            delay = rnd.uniform(0.0, 0.8 * sum(rests) / len(rests))
            pause.unlink()  # epoch `held` runs on; the kill lands a random moment later
            try:
                proc.wait(timeout=delay)
                killed = False
            except subprocess.TimeoutExpired:
                jobrun.kill(proc)
                killed = True
            code, out, err = jobrun.finish(proc)
        reported = {e["epoch"]: e for e in jobrun.epoch_events(out)}
        assert code == (KILLED if killed else 0), f"seed {seed}, run {run}:\n{err[-3000:]}"
        committed = {c.epoch.epoch for c in epochs.epoch_commits(path)}
        # the reports are read right: each epoch this run reported is in Delta, and at most the
        # one in flight at the kill is in Delta unreported
        ran = committed - started_with
        done = {e for e, r in reported.items() if not r["republished"]}
        assert done <= ran and len(ran - done) <= killed, (
            f"{SEED_ENV}={seed}, run {run}: {sorted(done)} reported, {sorted(ran)} committed"
        )
        if killed and held not in reported:
            phase = "after" if held in committed else "before"
            landed.append(f"run {run}: epoch {held}, {delay:.2f}s in, {phase} its Delta commit")
        measured = [e["phases"] for e in reported.values() if not e["republished"]]
        if measured:
            rests = [sum(p.get(k, 0.0) for k in ("log", "delta", "markers")) for p in measured]
    return RandomKills(landed, starts)


@pytest.mark.parametrize(("backend", "log"), CASES, indirect=True)
def test_killed_at_each_crash_point_in_turn_then_at_random_times(
    backend: Backend,
    log: CrashLog,
    setup: Callable[[int, int], tuple[TableLocation, Path, dict[int, dict[str, object]]]],
    tmp_path: Path,
) -> None:  # fmt: skip
    """One job on one table, killed again and again, then run to its end.

    First at every crash point in turn: the first run dies at ``CRASH_POINTS[0]`` in epoch 1, each
    restart recovers from the kill before it and dies at the next point in the next epoch. After
    each kill: the epochs Delta committed are those the point implies, the Delta table equals the
    committed files folded, and the protocol holds (at after-commit: the epoch is committed and no
    marker names it yet; the restart publishes them).

    Then at random times (``_kill_at_random_times``, the first run recovering from the kill at the
    last point): at least one kill must land inside a running epoch, or that part proved nothing.
    The seed is printed; ``LOGSTORE_TEST_CRASH_SEED=<seed>`` replays its choices (not the
    machine's timing).

    At the end (``_check``): Delta equals the source folded, the protocol holds, the reads and
    ``verify`` equal Delta; of the crash-point epochs only the after-log one has a failed attempt
    in the log; ``eventual`` retracted exactly the failed attempts' records.

    On S3 and HDFS the same, with one random kill (the run after the last crash point, killed at a
    random time in the one epoch after the crash-point ones).

    With the log on Pulsar (``local-pulsar``) the same, without the random kills too: what Pulsar
    changes is what each kill leaves in the log and how a restart writes after it (a failed
    attempt's records kept under its own producer name, markers re-published by a producer of the
    committed attempt's name that broker-side deduplication must not drop), which the crash points
    reach deterministically; where in the epoch a random kill lands is the job's timing, which the
    Kafka case samples, and each random run would cost another Spark start. Every check reads the
    log from Pulsar: the raw client for the protocol, logstore's consumer engine and ``verify``
    through the admin API."""
    seed = int(os.environ.get(SEED_ENV, time.time_ns() % 10_000))
    print(f"\n{SEED_ENV}={seed}")
    rnd = random.Random(seed)
    at_random = log.pulsar is None
    local = backend.name == "local"
    point_files = len(CRASH_POINTS) + 1  # epoch 0 commits first; epoch i + 1 dies at point i
    extra = EXTRA_FILES if not at_random else RANDOM_FILES if local else REMOTE_RANDOM_FILES
    files = point_files + extra
    path, source, expected = setup(100 + seed, files)
    warehouse = backend.uri
    written = changes(files * PER_FILE, keys=120, seed=100 + seed)  # setup's: one file per epoch
    table = backend.load().spec
    for i, point in enumerate(CRASH_POINTS):
        epoch = i + 1
        code, _, err = jobrun.finish(
            _ingest(warehouse, source, tmp_path, {**log.env, KILL_AT_ENV: f"{point}:{epoch}"})
        )
        assert code == KILLED, f"the fault hook did not kill the job at {point}:\n{err[-3000:]}"
        committed = {c.epoch.epoch for c in epochs.epoch_commits(path)}
        done = epoch + 1 if point in ("after-commit", "after-markers") else epoch
        assert committed == set(range(done)), (point, committed)
        assert delta_state(path) == {
            k: normalized(v) for k, v in fold(written[: done * PER_FILE]).items()
        }, point
        if point == "after-commit":  # committed, its markers not out yet
            assert epoch not in {
                item.epoch.epoch
                for r in log.read()
                for item in [decode(r.key, r.value, r.headers)]
                if isinstance(item, CommitMarker)
            }
        else:  # the restart recovered the kill before it (markers re-published, a failed attempt)
            check_protocol(table, path, log.read())

    # The newest committed epoch as each run after the crash points began (see the markers' copies)
    starts: list[int] = []
    if at_random:
        runs = RANDOM_RUNS if local else REMOTE_RANDOM_RUNS
        kills = _kill_at_random_times(rnd, seed, backend, source, tmp_path, files - 1, runs)
        print("kills inside a running epoch: " + ("; ".join(kills.landed) or "none"))
        assert kills.landed, f"{SEED_ENV}={seed}: no kill landed inside a running epoch"
        starts += kills.starts
    starts.append(_newest_epoch(path))
    _run_to_completion(warehouse, source, tmp_path, log.env)

    counts = _check(backend, expected, log)
    produced = _epoch_changes(log.read())
    committed_attempt = {c.epoch.epoch: c.epoch.attempt for c in epochs.epoch_commits(path)}
    assert counts["epochs"] == len(committed_attempt), f"seed {seed}"
    _one_file_per_epoch({e: produced[e][a] for e, a in committed_attempt.items()}, files)
    failed = {e: {a: n for a, n in per.items() if a != committed_attempt[e]}
              for e, per in produced.items()}  # fmt: skip
    # Killed after producing and before committing (after-log): the failed attempt's records stay
    # in the log (readers drop or retract them); every other crash-point epoch was produced once.
    after_log = CRASH_POINTS.index("after-log") + 1
    assert {e for e, f in failed.items() if f and e < point_files} == {after_log}, produced
    assert len(failed[after_log]) == 1, produced
    # eventual showed each failed attempt at once, then retracted each of its records
    retracted = sum(n for f in failed.values() for n in f.values())
    assert counts["eventual_retractions"] == retracted, (seed, counts, produced)
    # Every publish of an epoch's markers is in the log, in every partition: none was dropped (on
    # Pulsar, by the broker's deduplication taking a re-publish for a resend). An epoch's own run
    # publishes them once, unless killed after its commit (after-commit); the restart after a kill
    # re-publishes the latest committed epoch's (the start-up rule), and its replay of a batch
    # Delta committed re-publishes that epoch's once more. Killed in epoch i + 1 at point i:
    # epoch 0 (before-log in 1) 1 + 1, epoch 1 (after-log in 2) 1 + 1, epoch 2 once, epoch 3
    # (after-commit) 0 + 1 + 1, epoch 4 (after-markers) 1 + 1 (the first run after, replaying it),
    # and once more for each run after that began with epoch 4 the latest (the start-up rule).
    assert CRASH_POINTS == ("before-log", "after-log", "after-commit", "after-markers")
    copies = _marker_copies(log.read())
    assert {e: copies[e] for e in range(4)} == {0: 2, 1: 2, 2: 1, 3: 2}, copies
    assert starts[0] == 4 and copies[4] == 2 + starts.count(4), (seed, starts, copies)


def _marker_copies(log: list[LogRecord]) -> dict[int, int]:
    """epoch -> how many of its markers each partition holds (the same in every partition)."""
    per: dict[int, dict[int, int]] = {}
    for r in log:
        item = decode(r.key, r.value, r.headers)
        if isinstance(item, CommitMarker):
            in_epoch = per.setdefault(item.epoch.epoch, {})
            in_epoch[r.partition] = in_epoch.get(r.partition, 0) + 1
    out: dict[int, int] = {}
    for epoch, by_partition in per.items():
        assert len(by_partition) == PARTITIONS, (epoch, by_partition)
        assert len(set(by_partition.values())) == 1, (epoch, by_partition)
        out[epoch] = next(iter(by_partition.values()))
    return out


def test_a_debezium_json_topic_after_a_kill_mid_epoch_folds_to_delta_for_a_plain_consumer(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    """A debezium-json table's job killed after producing epoch 1 and before committing it
    (after-log), then restarted: the failed attempt's records stay in the topic. A plain consumer
    (no headers; null values skipped) folds the whole topic by key to the Delta table all the
    same, as the committed attempt writes every change of the epoch again; logstore's readers and
    verify equal Delta too."""
    warehouse = tmp_path / "warehouse"
    extra = {"log-store.data-format": "debezium-json"}
    create_table(spark, warehouse, orders_ddl("shop.orders", topic_name, kafka_bootstrap,
                                              partitions=3, extra=extra))  # fmt: skip
    log = changes(3 * PER_FILE, keys=60, seed=11)
    source = tmp_path / "in"
    write_files(source, [log[i : i + PER_FILE] for i in range(0, len(log), PER_FILE)])
    code, _, err = jobrun.finish(_ingest(warehouse, source, tmp_path, {KILL_AT_ENV: "after-log:1"}))
    assert code == KILLED, err[-3000:]
    _run_to_completion(warehouse, source, tmp_path)

    local = Backend("local", str(warehouse), local=warehouse)
    counts = _check(local, fold(log), CrashLog(kafka_bootstrap, topic_name))
    assert counts["epochs"] == 3
    produced = _epoch_changes(read_log(kafka_bootstrap, topic_name))
    assert len(produced[1]) == 2, produced  # the killed attempt's records are in the topic
    records = read_log(kafka_bootstrap, topic_name)
    assert {dict(r.headers)["logstore.format"] for r in records} == {b"debezium-json"}
    assert plain_debezium_fold(records) == delta_state(warehouse / "shop" / "orders")
