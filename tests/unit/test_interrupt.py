"""``logstore_cli.interrupt``: the first Ctrl-C asks to stop, the second stops at once."""

from __future__ import annotations

import signal
import threading

import pytest

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
