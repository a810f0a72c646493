"""``logstore_cli.interrupt``: Ctrl-C and SIGTERM stop at once outside a safe-point loop; inside one the
first asks to stop and the second stops at once; a stop caught by another handler is not lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from logstore_cli import interrupt
from logstore_cli.errors import EXIT_INTERRUPTED
from logstore_cli.interrupt import StopOnCtrlC


def test_first_ctrl_c_asks_the_second_raises_and_the_handler_is_restored() -> None:
    said: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with StopOnCtrlC(said.append, "stopping soon") as stop:
        signal.raise_signal(signal.SIGINT)  # the handler runs before raise_signal returns
        assert stop.requested.is_set() and said == ["stopping soon"]
        with pytest.raises(KeyboardInterrupt):
            stop.check()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert said == ["stopping soon"]
    assert signal.getsignal(signal.SIGINT) is before


def test_check_passes_until_asked() -> None:
    with StopOnCtrlC(lambda m: None, "x") as stop:
        stop.check()
        assert not stop.requested.is_set()


def test_outside_the_main_thread_it_installs_nothing() -> None:
    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def enter() -> None:
        with StopOnCtrlC(lambda m: None, "x"):
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=enter)
    t.start()
    t.join()
    assert seen == [before]


@pytest.fixture
def installed() -> Iterator[interrupt.Signals]:
    signals = interrupt.install()
    try:
        yield signals
    finally:
        interrupt.uninstall()


def test_sigterm_is_a_request_to_stop_like_ctrl_c() -> None:
    said: list[str] = []
    with StopOnCtrlC(said.append, "stopping soon") as stop:
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested.is_set() and said == ["SIGTERM: stopping soon"]
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # the second stop signal, whichever it is


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_installed_a_stop_signal_interrupts_at_once_outside_a_safe_point_loop(
    installed: interrupt.Signals, signum: int
) -> None:
    assert signal.getsignal(signal.SIGTERM) == installed._handle
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signum)
    assert installed.seen() and installed.first == signum


def test_a_stop_that_came_before_the_loop_is_honoured_when_it_begins(
    installed: interrupt.Signals,
) -> None:
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGTERM)  # while a job started (at once mode)
    entered = False
    with pytest.raises(KeyboardInterrupt), StopOnCtrlC(lambda m: None, "x"):
        entered = True
    assert not entered


def test_a_stop_swallowed_by_another_handler_is_not_lost(installed: interrupt.Signals) -> None:
    """What Spark does: its context puts its own SIGINT handler in; a Ctrl-C it catches (and, say,
    a py4j call swallows) must still stop the job: seen through the wake-up pipe."""
    swallowed: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: swallowed.append(signum))
    signal.raise_signal(signal.SIGINT)
    assert swallowed == [signal.SIGINT] and installed.received == []
    with pytest.raises(KeyboardInterrupt):
        interrupt.reassert()  # as build_session does once Spark started
    assert signal.getsignal(signal.SIGINT) == installed._handle
    with pytest.raises(KeyboardInterrupt), StopOnCtrlC(lambda m: None, "x"):
        pass


def test_inside_the_loop_the_first_signal_asks_and_the_second_raises(
    installed: interrupt.Signals,
) -> None:
    said: list[str] = []
    with StopOnCtrlC(said.append, "stopping after the epoch") as stop:
        signal.raise_signal(signal.SIGINT)
        assert stop.requested.is_set() and said == ["stopping after the epoch"]
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
    # Back in at once mode after the loop, with our handler still in place.
    assert signal.getsignal(signal.SIGINT) == installed._handle


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_inside_a_held_block_acts_when_the_block_ends(
    installed: interrupt.Signals, signum: int
) -> None:
    """What starting the JVM needs: the stop must not cut Popen between its fork and its return."""
    finished = False
    with pytest.raises(KeyboardInterrupt), interrupt.held():
        signal.raise_signal(signum)
        with interrupt.held():  # nested: only the outer block's end acts
            signal.raise_signal(signum)
        finished = True
    assert finished and installed.first == signum and installed._held == []


def test_a_stop_held_inside_a_safe_point_loop_is_its_request(installed: interrupt.Signals) -> None:
    said: list[str] = []
    with StopOnCtrlC(said.append, "stopping after the epoch") as stop:
        with interrupt.held():
            signal.raise_signal(signal.SIGINT)
            assert not stop.requested.is_set()
        assert stop.requested.is_set() and said == ["stopping after the epoch"]


def test_nothing_is_held_without_an_installed_handler() -> None:
    assert interrupt.current() is None
    with pytest.raises(KeyboardInterrupt), interrupt.held():
        signal.raise_signal(signal.SIGINT)  # Python's own handler: at once
        pytest.fail("not interrupted at once")


def test_uninstall_restores_the_handlers() -> None:
    before = {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS}
    interrupt.install()
    interrupt.uninstall()
    assert {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS} == before


# -- Ctrl-C while the CLI loads (issue 18, item 11) ------------------------------------------------

_WHILE_LOADING = """
import os, runpy, signal, sys

class CtrlCWhileLoading:
    # Sends the Ctrl-C as Python looks the status command's module up: the CLI is loading.
    def find_spec(self, name, path, target=None):
        if name == "logstore_cli.cli.status":
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlCWhileLoading())
sys.argv = ["logstore", "status", "db.orders", "--watch"]
runpy.run_module("logstore_cli", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_while_the_cli_loads_is_interrupted_not_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    env.update(LOGSTORE_WAREHOUSE=str(tmp_path / "wh"), LOGSTORE_STATE_DIR=str(tmp_path / "st"))
    result = subprocess.run(
        [sys.executable, "-c", _WHILE_LOADING], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == EXIT_INTERRUPTED, result.stderr
    assert result.stderr == "error: interrupted\n"  # before the command ran: no table looked up
    assert result.stdout == ""


def test_a_signal_ignored_at_start_stays_ignored() -> None:
    """A shell's background job (``cmd &``) starts with SIGINT ignored: Ctrl-C at the terminal is
    not for it, and installing our handler must not change that."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        signals = interrupt.install()
        try:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == signals._handle
            interrupt.reassert()
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        finally:
            interrupt.uninstall()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
