"""The console entry point's exit: without the interpreter's teardown only after HDFS's or
Pulsar's native client ran in the process (their threads were seen racing the teardown), never
after Spark."""

from __future__ import annotations

import sys
import types

import pytest

from logstore_cli import __main__ as entry

pytestmark = pytest.mark.unit


class _Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The codes ``os._exit`` was called with (raised instead, so the test process lives on)."""
    called: list[int] = []

    def fake_exit(code: int) -> None:
        called.append(code)
        raise _Exited(code)

    monkeypatch.setattr("os._exit", fake_exit)
    monkeypatch.setattr(
        "logstore_cli.interrupt.install", lambda: None
    )  # the runner's handlers stay
    monkeypatch.setattr("logstore_cli.cli.app.main", lambda: sys.exit(3))
    return called


@pytest.mark.parametrize("native", ["hdfs_native", "_pulsar"])
def test_a_process_that_ran_a_native_client_ends_without_teardown(
    exits: list[int], monkeypatch: pytest.MonkeyPatch, native: str
) -> None:
    monkeypatch.delitem(sys.modules, "hdfs_native", raising=False)
    monkeypatch.delitem(sys.modules, "_pulsar", raising=False)
    monkeypatch.setitem(sys.modules, native, types.ModuleType(native))
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    with pytest.raises(_Exited):
        entry.main()
    assert exits == [3]


@pytest.mark.parametrize(
    "loaded",
    [(), ("hdfs_native", "pyspark"), ("_pulsar", "pyspark")],
    ids=["s3-or-local", "spark", "spark-on-pulsar"],
)
def test_other_processes_exit_normally(
    exits: list[int], monkeypatch: pytest.MonkeyPatch, loaded: tuple[str, ...]
) -> None:
    """An S3 or local command (logstore_cli.storage.hdfs may be imported: the seam names it) and
    any process that ran Spark (its exit hooks stop the JVM) raise SystemExit as usual."""
    monkeypatch.delitem(sys.modules, "hdfs_native", raising=False)
    monkeypatch.delitem(sys.modules, "_pulsar", raising=False)
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    monkeypatch.setitem(sys.modules, "logstore_cli.storage.hdfs", types.ModuleType("x"))
    for name in loaded:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 3 and exits == []
