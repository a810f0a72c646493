"""``logstore_cli.interrupt``: the first Ctrl-C asks to stop, the second stops at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

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
