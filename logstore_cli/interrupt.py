"""Ctrl-C as a request to stop at the next safe point, for the commands that run until stopped.

The first SIGINT sets ``requested`` and says ``message`` (the caller's loop notices it at its next
safe point: after the epoch in flight, at a read's batch boundary); the second raises
KeyboardInterrupt at once. Stdlib only, so that commands that start no Spark can use it too.

It replaces, while active, whatever SIGINT handler was there: also PySpark's own (installed when
its context starts), which cancels the running Spark jobs, so enter it after Spark has started.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Self


class StopOnCtrlC:
    """Ctrl-C once: ``requested`` is set and ``say(message)`` called. Twice: KeyboardInterrupt.

    Outside the main thread (where no signal arrives) it installs nothing."""

    def __init__(
        self, say: Callable[[str], None], message: str, *, quiet_second: bool = False
    ) -> None:
        self.say = say
        self.message = message
        self.quiet_second = quiet_second  # a second Ctrl-C also silences the logs it cuts short
        self.requested = threading.Event()
        self.previous: Any = None

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested.is_set():
            if self.quiet_second:  # py4j and PySpark log the calls this cuts short, with traces
                logging.disable(logging.CRITICAL)
            raise KeyboardInterrupt
        self.requested.set()
        self.say(self.message)

    def check(self) -> None:
        """Between steps of a caller's own: end it as the second Ctrl-C would."""
        if self.requested.is_set():
            raise KeyboardInterrupt
