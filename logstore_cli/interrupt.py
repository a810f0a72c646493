"""Ctrl-C (SIGINT) and SIGTERM as requests to stop, honoured at every moment of a command.

Two modes, one handler for both signals:

- **at once** (the default, from the first line the CLI runs): the signal raises KeyboardInterrupt
  where the main thread is, as Python's own Ctrl-C does; the CLI's edge reports "interrupted" and
  exits 130. Used while nothing is in flight that must finish (start-up, a JVM starting, a prompt).
- **held** (inside ``held()``, a few lines long): the signal waits until the block ends, then acts
  as it would have. For a step that must not be cut in half, such as starting a process whose
  handle is the only way to stop it again.
- **at the next safe point** (inside ``StopOnCtrlC``): the first signal sets ``requested`` and says
  the caller's message; the caller's loop notices it at its next safe point (after the epoch in
  flight, at a read's batch boundary); a second signal raises KeyboardInterrupt at once.

Spark replaces the SIGINT handler when its context starts (its own cancels the running Spark jobs
from inside the signal handler, re-entering py4j). ``reassert()`` puts ours back, and a signal that
another handler caught meanwhile is not lost: the interpreter writes every caught signal's number to
a wake-up pipe, whichever Python handler runs, and ``Signals.seen()`` reads it. Entering
``StopOnCtrlC`` after such a signal raises KeyboardInterrupt at once: a stop asked while a job
started is honoured before its first epoch.

Stdlib only, so that commands that start no Spark can use it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def signal_name(signum: int | None) -> str:
    return _NAMES.get(signum, "a signal") if signum is not None else "a signal"  # type: ignore[call-overload]


class Signals:
    """The process's stop signals: our handler on SIGINT and SIGTERM, and the wake-up pipe that
    shows a stop signal caught by any handler (Spark's included). One per process, made by
    ``install()`` at the CLI's edge."""

    def __init__(self) -> None:
        self.received: list[int] = []  # stop signals our handler got, in order
        self._foreign = False  # a stop signal seen on the wake-up pipe (any handler)
        self._fds: tuple[int, int] | None = None
        self._previous_fd = -1
        self._previous: dict[int, Any] = {}
        self._deferring: list[StopOnCtrlC] = []
        self._holding = 0  # depth of ``held`` blocks
        self._held: list[int] = []  # stop signals that arrived inside them, in order

    # -- set-up ----------------------------------------------------------------------------------

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in STOP_SIGNALS:
            # A signal ignored when we start stays ignored (a shell's background job, nohup).
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self._handle)
        with contextlib.suppress(OSError, ValueError):
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            try:
                self._previous_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            except ValueError:
                os.close(r)
                os.close(w)
                raise
            self._fds = (r, w)

    def close(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()
        if self._fds is not None:
            signal.set_wakeup_fd(self._previous_fd)
            for fd in self._fds:
                os.close(fd)
            self._fds = None

    def reassert(self) -> None:
        """Put our handler back where another took its place (Spark's, when its context starts)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self._previous:
            if signal.getsignal(signum) != self._handle:
                signal.signal(signum, self._handle)

    # -- what arrived ----------------------------------------------------------------------------

    def seen(self) -> bool:
        """Whether a stop signal arrived since ``start``, whichever handler caught it."""
        if self._fds is not None and not self._foreign:
            try:
                while data := os.read(self._fds[0], 512):
                    self._foreign = self._foreign or any(s in data for s in STOP_SIGNALS)
            except BlockingIOError:
                pass
        return bool(self.received) or self._foreign

    @property
    def first(self) -> int | None:
        return self.received[0] if self.received else None

    def check(self) -> None:
        """At a point where a stop may have been swallowed by another handler: honour it now."""
        if self.seen():
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Stop signals that arrive inside the block act when it ends (KeyboardInterrupt, or a
        safe-point loop's request), not in the middle of it."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
        if self._holding == 0:
            held, self._held = self._held, []
            for signum in held:
                self._handle(signum, None)

    # -- the handler ---------------------------------------------------------------------------

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self._held.append(signum)
            return
        first = not self.received
        self.received.append(signum)
        deferring = self._deferring[-1] if self._deferring else None
        if deferring is not None and first and not deferring.requested.is_set():
            deferring.requested.set()
            deferring.say(deferring.message_for(signum))
            return
        if deferring is not None and deferring.quiet_second:
            # py4j and PySpark log the calls this cuts short. Never imported here (a signal
            # handler must not import): logging that was never loaded has logged nothing.
            logging = sys.modules.get("logging")
            if logging is not None:
                logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt


_signals: Signals | None = None


def install() -> Signals:
    """Our handler on SIGINT and SIGTERM, at once mode; the process's ``Signals``."""
    global _signals
    if _signals is None:
        _signals = Signals()
        _signals.start()
    return _signals


def uninstall() -> None:
    global _signals
    if _signals is not None:
        _signals.close()
        _signals = None


def current() -> Signals | None:
    return _signals


def held() -> contextlib.AbstractContextManager[None]:
    """``Signals.held`` of the installed handler; nothing to hold without one (or outside the main
    thread, where no signal handler runs)."""
    if _signals is None or threading.current_thread() is not threading.main_thread():
        return contextlib.nullcontext()
    return _signals.held()


def reassert() -> None:
    """After Spark started: our handler back on SIGINT, and a stop that Spark's handler caught
    meanwhile raised here (KeyboardInterrupt)."""
    if _signals is not None:
        _signals.reassert()
        _signals.check()


class StopOnCtrlC:
    """Ctrl-C or SIGTERM once: ``requested`` is set and ``say(message)`` called. Twice:
    KeyboardInterrupt. A stop that arrived before (while at once mode had no one to interrupt, or
    another handler caught it) raises KeyboardInterrupt on entry.

    Without ``install()`` (tests, the benchmark scripts) it installs its own handler for the
    duration; outside the main thread (where no signal arrives) it installs nothing."""

    def __init__(
        self, say: Callable[[str], None], message: str, *, quiet_second: bool = False
    ) -> None:
        self.say = say
        self.message = message
        self.quiet_second = quiet_second  # a second signal also silences the logs it cuts short
        self.requested = threading.Event()
        self._own: Signals | None = None
        self._signals: Signals | None = None

    def message_for(self, signum: int) -> str:
        return self.message if signum == signal.SIGINT else f"{signal_name(signum)}: {self.message}"

    def __enter__(self) -> Self:
        if threading.current_thread() is not threading.main_thread():
            return self
        signals = _signals
        if signals is None:
            signals = self._own = Signals()
            signals.start()
        else:
            signals.reassert()
            if signals.seen():  # asked before this safe-point loop began: stop now
                raise KeyboardInterrupt
        signals._deferring.append(self)
        self._signals = signals
        return self

    def __exit__(self, *exc: object) -> None:
        signals = self._signals
        if signals is None:
            return
        if signals._deferring and signals._deferring[-1] is self:
            signals._deferring.pop()
        self._signals = None
        if self._own is not None:
            self._own.close()
            self._own = None

    def check(self) -> None:
        """Between steps of a caller's own: end it as the second Ctrl-C would."""
        if self.requested.is_set():
            raise KeyboardInterrupt
