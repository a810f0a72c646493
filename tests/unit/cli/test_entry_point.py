"""The console entry point's exit: without the interpreter's teardown only after HDFS's,
Pulsar's or delta-rs's native code ran in the process (their threads were seen racing the
teardown), never after Spark."""

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


def _unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in entry.NATIVE_CLIENTS:
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("native", ["hdfs_native", "_pulsar", "deltalake._internal"])
def test_a_process_that_ran_a_native_client_ends_without_teardown(
    exits: list[int], monkeypatch: pytest.MonkeyPatch, native: str
) -> None:
    _unloaded(monkeypatch)
    monkeypatch.setitem(sys.modules, native, types.ModuleType(native))
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    with pytest.raises(_Exited):
        entry.main()
    assert exits == [3]


@pytest.mark.parametrize(
    "loaded",
    [(), ("hdfs_native", "pyspark"), ("_pulsar", "pyspark"), ("deltalake._internal", "pyspark")],
    ids=["no-native-client", "spark", "spark-on-pulsar", "spark-and-delta-rs"],
)
def test_other_processes_exit_normally(
    exits: list[int], monkeypatch: pytest.MonkeyPatch, loaded: tuple[str, ...]
) -> None:
    """A command that ran no native client (logstore_cli.storage.hdfs may be imported: the seam
    names it) and any process that ran Spark (its exit hooks stop the JVM) raise SystemExit as
    usual."""
    _unloaded(monkeypatch)
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    monkeypatch.setitem(sys.modules, "logstore_cli.storage.hdfs", types.ModuleType("x"))
    for name in loaded:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 3 and exits == []


@pytest.mark.parametrize(
    ("code", "status", "printed"),
    [(None, 0, ""), (0, 0, ""), (2, 2, ""), ("bad input", 1, "bad input\n")],
)
def test_the_status_without_teardown_is_the_interpreters(
    exits: list[int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    code: object,
    status: int,
    printed: str,
) -> None:
    """``SystemExit(None)`` is success and a message is printed and 1, as Python ends a process."""
    _unloaded(monkeypatch)
    monkeypatch.setitem(sys.modules, "hdfs_native", types.ModuleType("hdfs_native"))
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    monkeypatch.setattr("logstore_cli.cli.app.main", lambda: sys.exit(code))
    with pytest.raises(_Exited):
        entry.main()
    assert exits == [status] and capsys.readouterr().err == printed
