"""How the driver loop ends a run: the epoch's own domain error, never Spark's wrapper; a stop
between epochs; closers always run. Fakes stand in for the query (no JVM)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from logstore_cli.errors import BrokerError, LogstoreError
from logstore_cli.jobs import ingest


class FakeQuery:
    def __init__(self, *, fail: Exception | None = None, ends_after: int | None = None) -> None:
        self.fail = fail
        self.calls = 0
        self.ends_after = ends_after
        self.stopped = False
        self.lastProgress = None

    def awaitTermination(self, timeout: int) -> bool:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.ends_after is not None and self.calls >= self.ends_after

    def exception(self) -> Exception | None:
        return self.fail

    def stop(self) -> None:
        self.stopped = True


class FakeWriter:
    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.stop_requested = threading.Event()
        self.in_flight = threading.Lock()
        self.summary = ingest.RunSummary("w-1")
        self.job: Any = type(
            "J", (), {"max_epochs": None, "source": type("S", (), {"spec": None})}
        )()


def _run(query: FakeQuery, writer: FakeWriter, closed: list[str]) -> Any:
    return ingest.IngestRun(query, writer, None, None, [lambda: closed.append("x")])  # type: ignore[arg-type]


def test_the_epochs_own_error_surfaces_not_sparks() -> None:
    closed: list[str] = []
    spark_error = RuntimeError("[STREAM_FAILED] Query terminated with exception\n at org.apache…")
    run = _run(
        FakeQuery(fail=spark_error), FakeWriter(BrokerError("cannot reach Kafka at h:1")), closed
    )
    with pytest.raises(BrokerError, match="cannot reach Kafka at h:1"):
        ingest.wait(run, stop=lambda: False)
    assert closed == ["x"]


def test_a_foreign_failure_is_one_line_with_a_hint() -> None:
    closed: list[str] = []
    spark_error = RuntimeError("[STREAM_FAILED] boom\nJVM stacktrace:\n\tat org.apache.spark…")
    run = _run(FakeQuery(fail=spark_error), FakeWriter(), closed)
    with pytest.raises(LogstoreError) as caught:
        ingest.wait(run, stop=lambda: False)
    assert caught.value.message == "the ingest query failed: [STREAM_FAILED] boom"
    assert "restarted" in (caught.value.hint or "") and closed == ["x"]


def test_a_stop_request_stops_between_epochs() -> None:
    closed: list[str] = []
    query, writer = FakeQuery(), FakeWriter()
    summary = ingest.wait(_run(query, writer, closed), stop=lambda: True)
    assert query.stopped and writer.stop_requested.is_set() and summary.stopped_by_user
    assert closed == ["x"]


def test_a_query_that_ends_by_itself_ends_the_run() -> None:
    closed: list[str] = []
    query = FakeQuery(ends_after=3)
    summary = ingest.wait(_run(query, FakeWriter(), closed), stop=lambda: False)
    assert query.calls == 3 and not query.stopped and not summary.stopped_by_user
