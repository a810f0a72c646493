"""A stop is never lost: Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM (to
the CLI alone, as ``timeout``, a supervisor or a cluster manager sends it) at each moment of an
ingest job's life.

| moment | how the test finds it | what must happen |
|---|---|---|
| before Spark starts | the test-only pause hook holds the job right before the JVM launch | exit 130 at once, no JVM, nothing written, the lease released |
| while the JVM starts | a JVM below the CLI exists | exit 130 as soon as Spark can be stopped, no epoch |
| after Spark, before the query | the pause hook holds the job before the query starts | exit 130, no epoch, "before the query started" |
| the query runs, no epoch yet | the checkpoint's metadata exists; the source is empty | exit 130, "before the first epoch", nothing committed |
| mid-epoch | the pause hook holds epoch 0 after its records went to the log | epoch 0 finishes (commit + markers), exit 130, "after epoch 0", verify equal |

The bug these catch: a stop that came while the job started was swallowed, and the job ran for
minutes (179 epochs) until a second Ctrl-C. The last two moments run on an ``s3://`` warehouse too
(the S3 server: Spark's checkpoint, the Delta table and the lease there, released by a conditional
put; the table read through the storage seam). Each run ends within ``EXIT_DEADLINE_S`` of its signal
or the test fails; the time it took is printed, not asserted (it is a load-dependent figure).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.ingest.plan import STATE_DIR
from logstore_cli.jobs.ingest import PAUSE_AT_ENV, PAUSE_FILE_ENV
from tests import jobrun
from tests.backends import LOCAL, S3, Backend
from tests.e2e.cli_support import keyed_ddl
from tests.e2e.test_interrupt import _alive, _cmdline, _descendants
from tests.plugins.backends import open_backend

pytestmark = pytest.mark.stop

START_DEADLINE_S = 240.0  # a JVM and a streaming query start slowly on a loaded 2-core machine
EXIT_DEADLINE_S = 300.0  # after the signal: an epoch in flight finishes first (a minute at load 10)


@dataclass(frozen=True)
class Table:
    """``db.orders`` (``keyed_ddl``) and its topic of two partitions, on ``backend``."""

    backend: Backend
    table: TableLocation  # its directory, or its ``Storage`` on a remote warehouse
    bootstrap: str
    topic: str

    def has(self, relative: str) -> bool:
        """Whether the table holds ``relative`` (a file, or a non-empty directory or prefix)."""
        if isinstance(self.table, Path):
            return (self.table / relative).exists()
        listing = self.table.list(relative)
        return self.table.exists(relative) or bool(listing.files or listing.dirs)


class Job:
    """One ``logstore ingest`` run in its own session (process group), as a shell would start it."""

    def __init__(self, tmp: Path, writer: Table, source: Path, pause: str | None) -> None:
        self.tmp, self.writer, self.source = tmp, writer, source
        self.pause_file = tmp / "paused"
        env = {**os.environ, "LOGSTORE_WAREHOUSE": writer.backend.uri,
               "LOGSTORE_STATE_DIR": str(tmp / "state")}  # fmt: skip
        env.pop("LOGSTORE_CONFIG", None)
        if pause is not None:
            env |= {PAUSE_AT_ENV: pause, PAUSE_FILE_ENV: str(self.pause_file)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logstore_cli", "ingest", "db.orders", "--source", str(source),
             "--format", "json", "--trigger", "1", "--json"],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self.started: set[int] = set()

    def checkpoint_has(self, relative: str = "") -> bool:
        """Whether the job's default checkpoint (beside the table) holds ``relative``."""
        return self.writer.has(f"{STATE_DIR}/checkpoints/ingest{'/' if relative else ''}{relative}")

    def jvms(self) -> set[int]:
        self.started |= _descendants(self.proc.pid)
        return {p for p in self.started if b"java" in _cmdline(p) and _alive(p)}

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_DEADLINE_S
        while not condition():
            self.jvms()
            if self.proc.poll() is not None:
                pytest.fail(f"the job ended (exit {self.proc.returncode}) before {what}:\n"
                            f"{self.proc.stderr.read() if self.proc.stderr else ''}")  # fmt: skip
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {START_DEADLINE_S:g}s waiting for {what}")
            time.sleep(0.02)  # poll interval of a condition with a deadline

    def stop(
        self, signum: int, *, then: Callable[[], None] = lambda: None
    ) -> tuple[str, str, float]:
        """Send ``signum`` (SIGINT to the group, SIGTERM to the CLI alone), run ``then``, and wait
        for the exit; (stdout, stderr, seconds from the signal to the exit)."""
        sent = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            os.kill(self.proc.pid, signum)
        then()
        try:
            out, err = self.proc.communicate(timeout=EXIT_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            pytest.fail(f"the job did not end within {EXIT_DEADLINE_S:g}s of its "
                        f"{signal.Signals(signum).name}: the stop was lost\n{err[-3000:]}")  # fmt: skip
        took = time.monotonic() - sent
        print(f"{signal.Signals(signum).name}: exit {self.proc.returncode} {took:.1f}s after it")
        return out, err, took

    def kill(self) -> None:
        for pid in [self.proc.pid, *self.started]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self.kill()
        self.proc.wait()
        self.pause_file.unlink(missing_ok=True)


@pytest.fixture
def table(
    request: pytest.FixtureRequest, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> Table:
    """The table on a local warehouse, or on the backend its test gives (``indirect``)."""
    backend = open_backend(request, getattr(request, "param", "local"), tmp_path)
    ddl = keyed_ddl("db.orders", topic_name, kafka_bootstrap)
    location = backend.create(ddl, kafka_bootstrap, topic_name, 2)
    return Table(backend, location, kafka_bootstrap, topic_name)


# The moments whose run on S3 adds what a local run cannot show: Spark's checkpoint and an epoch's
# commit on s3a://, and the lease released by a conditional put.
ON_S3 = pytest.mark.parametrize("table", [LOCAL, S3], indirect=True)


def _events(out: str, kind: str) -> list[dict[str, object]]:
    found = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [e for e in found if e.get("event") == kind]


def _source(tmp: Path, rows: int) -> Path:
    src = tmp / "src"
    src.mkdir()
    if rows:
        lines = [json.dumps({"id": i, "name": f"n{i}"}) for i in range(rows)]
        (src / "part-0.json").write_text("\n".join(lines) + "\n")
    return src


def _delta_versions(table: TableLocation) -> int:
    return len(epochs.commit_versions(table))


def _assert_interrupted(err: str, code: int, signum: int, said: str) -> None:
    assert code == 130, err
    last = "error: interrupted (SIGTERM)" if signum == signal.SIGTERM else "error: interrupted"
    lines = err.splitlines()
    assert last in lines, err
    assert said in err, err
    assert "Traceback" not in err and "py4j" not in err.lower(), err


def _assert_nothing_written(job: Job, versions_before: int) -> None:
    assert _delta_versions(job.writer.table) == versions_before  # no epoch committed
    assert job.writer.backend.lease() is None  # released
    ends = _end_offsets(job)
    assert ends == {0: 0, 1: 0}, ends  # no record, no marker


def _end_offsets(job: Job) -> dict[int, int]:
    from logstore_cli.kafka.admin import KafkaAdmin

    with KafkaAdmin(job.writer.bootstrap, timeout_s=15) as admin:
        return admin.end_offsets(job.writer.topic)


def _wait_jvms_gone(job: Job) -> None:
    deadline = time.monotonic() + EXIT_DEADLINE_S
    while job.jvms():
        assert time.monotonic() < deadline, "a JVM the job started outlived it"
        time.sleep(0.05)


SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_stop_before_spark_starts_ends_the_job_at_once(
    tmp_path: Path, table: Table, signum: int
) -> None:
    before = _delta_versions(table.table)
    job = Job(tmp_path, table, _source(tmp_path, 10), pause="before-spark")
    try:
        job.wait_for(job.pause_file.exists, "the pause before Spark")
        assert not job.jvms()
        out, err, _ = job.stop(signum)  # the pause file stays: the signal alone must end it
        _assert_interrupted(err, job.proc.returncode, signum, "before Spark started")
        assert not job.started, "a process was started after the stop"
        assert not job.checkpoint_has()
        _assert_nothing_written(job, before)
        assert _events(out, "epoch") == []
    finally:
        job.close()


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_stop_while_the_jvm_starts_ends_the_job_without_an_epoch(
    tmp_path: Path, table: Table, signum: int
) -> None:
    before = _delta_versions(table.table)
    job = Job(tmp_path, table, _source(tmp_path, 10), pause=None)
    try:
        job.wait_for(lambda: bool(job.jvms()), "the JVM to be launched")
        out, err, _ = job.stop(signum)
        # Whether the JVM was still starting or had just started when the signal was handled,
        # no epoch may run: one of the start-up notes says which.
        said = [n for n in ("while Spark started", "before the query started",
                            "before the first epoch") if n in err]  # fmt: skip
        assert said, err
        _assert_interrupted(err, job.proc.returncode, signum, said[0])
        _wait_jvms_gone(job)
        _assert_nothing_written(job, before)
        assert _events(out, "epoch") == []
    finally:
        job.close()


def test_a_stop_after_spark_started_and_before_the_query_starts_runs_no_epoch(
    tmp_path: Path, table: Table
) -> None:
    before = _delta_versions(table.table)
    job = Job(tmp_path, table, _source(tmp_path, 10), pause="before-query")
    try:
        job.wait_for(job.pause_file.exists, "the pause before the query")
        out, err, _ = job.stop(signal.SIGTERM, then=job.pause_file.unlink)
        _assert_interrupted(err, job.proc.returncode, signal.SIGTERM, "before the query started")
        assert _events(out, "start") == [] and _events(out, "epoch") == []
        _wait_jvms_gone(job)
        assert not job.checkpoint_has("offsets")  # the query never started
        # The start-up rule ran (no epoch commit to re-publish on a new table): nothing in the log.
        _assert_nothing_written(job, before)
    finally:
        job.close()


@ON_S3
@pytest.mark.parametrize("signum", SIGNALS)
def test_a_stop_once_the_query_runs_and_before_its_first_epoch_commits_nothing(
    tmp_path: Path, table: Table, signum: int
) -> None:
    before = _delta_versions(table.table)
    job = Job(tmp_path, table, _source(tmp_path, 0), pause=None)  # empty: no epoch can begin
    try:
        job.wait_for(lambda: job.checkpoint_has("metadata"), "the query to start")
        out, err, _ = job.stop(signum)
        _assert_interrupted(err, job.proc.returncode, signum, "before the first epoch")
        assert len(_events(out, "start")) == 1 and _events(out, "epoch") == []
        assert "stopping after the epoch in flight" in err
        _assert_nothing_written(job, before)
    finally:
        job.close()


@ON_S3
def test_sigterm_mid_epoch_finishes_the_epoch_then_stops(tmp_path: Path, table: Table) -> None:
    before = _delta_versions(table.table)
    job = Job(tmp_path, table, _source(tmp_path, 25), pause="after-log:0")
    try:
        job.wait_for(job.pause_file.exists, "epoch 0 to be held after its records")
        out, err, _ = job.stop(signal.SIGTERM, then=job.pause_file.unlink)
        _assert_interrupted(err, job.proc.returncode, signal.SIGTERM, "stopped after epoch 0")
        assert "SIGTERM: stopping after the epoch in flight" in err
        epochs = _events(out, "epoch")
        assert [(e["epoch"], e["rows"]) for e in epochs] == [(0, 25)], out
        assert _delta_versions(table.table) == before + 1  # epoch 0, whole
        verify = jobrun.cli(tmp_path, table.backend.uri, "verify", "db.orders", "--json")
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert json.loads(verify.stdout)["equal"] is True
    finally:
        job.close()
