"""The take-over step of a job's start (``jobs.ingest.take_over``): the fences its lease owes are
committed before the job names its writer in the lease, so a job that dies in between passes them
on; a job that writes no Delta keeps them owed. A fake committer stands in for Delta (the real
fence: tests/integration/jobs/test_fence.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from logstore_cli.catalog.lease import Lease, read_lease
from logstore_cli.jobs import ingest
from logstore_cli.logformat.wire import Fence


def _owing(table: Path) -> Lease:
    """A lease taken over from an expired holder that named writer ``w-a``."""
    table.mkdir(parents=True)
    old = Lease.acquire(table, "a", 30, clock=lambda: 100.0, host="h1", pid=1)
    old.set_writer("w-a")
    new = Lease.acquire(table, "b", 30, clock=lambda: 200.0, host="h2", pid=2)
    assert new.info.unfenced == ("w-a",)
    return new


def _job(table: Path, *, file: bool) -> Any:
    return SimpleNamespace(
        stores=SimpleNamespace(file=file), table=SimpleNamespace(name="db.t"), location=table,
        paths=SimpleNamespace(job="b"),
    )  # fmt: skip


def test_the_owed_fences_come_before_the_writer_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    lease = _owing(table)
    calls: list[tuple[str, Any]] = []

    class FakeCommitter:
        def __init__(self, spec: Any, path: Path, spark: Any) -> None:
            assert path == table

        def unfence(self, writer: str) -> int | None:
            calls.append(("unfence", writer))
            return None

        def fence(self, fence: Fence) -> int | None:
            stored = read_lease(table)  # still owed, and no writer named, while fencing
            assert stored is not None and (stored.unfenced, stored.writer) == (("w-a",), None)
            calls.append(("fence", fence))
            return 9

    monkeypatch.setattr(ingest, "DeltaCommitter", FakeCommitter)
    assert ingest.take_over(None, _job(table, file=True), "w-b", lease) == [9]  # type: ignore[arg-type]
    assert calls == [("unfence", "w-b"), ("fence", Fence(2, "w-b", "w-a", "b"))]
    stored = read_lease(table)
    assert stored is not None and (stored.writer, stored.unfenced) == ("w-b", ())


def test_a_job_without_delta_names_its_writer_and_keeps_the_fences_owed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    lease = _owing(table)
    monkeypatch.setattr(ingest, "DeltaCommitter", None)  # never built
    assert ingest.take_over(None, _job(table, file=False), "w-b", lease) == []  # type: ignore[arg-type]
    stored = read_lease(table)
    assert stored is not None and (stored.writer, stored.unfenced) == ("w-b", ("w-a",))


def test_a_job_never_fences_its_own_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own checkpoint's earlier job died holding the lease: the same writer, nothing to fence."""
    table = tmp_path / "t"
    lease = _owing(table)
    fenced: list[Fence] = []

    class FakeCommitter:
        def __init__(self, spec: Any, path: Path, spark: Any) -> None:
            pass

        def unfence(self, writer: str) -> int | None:
            return None

        def fence(self, fence: Fence) -> int | None:
            fenced.append(fence)
            return 1

    monkeypatch.setattr(ingest, "DeltaCommitter", FakeCommitter)
    assert ingest.take_over(None, _job(table, file=True), "w-a", lease) == []  # type: ignore[arg-type]
    assert fenced == []
    stored = read_lease(table)
    assert stored is not None and (stored.writer, stored.unfenced) == ("w-a", ())
