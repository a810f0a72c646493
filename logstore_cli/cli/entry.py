"""The ``logstore`` command's entry point: Ctrl-C while the CLI loads is an interrupt like any other.

Loading Typer, Rich and every command takes a few hundred milliseconds. A Ctrl-C in that window
raised KeyboardInterrupt inside an import, before ``app.run`` (which turns every outcome into a
message and an exit code) was there to catch it: a Python traceback. Here a SIGINT during the
import is only recorded, then reported as ``error: interrupted``, exit 130, before the command
starts. Stdlib only: nothing slow may load before the guard is in place.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

EXIT_INTERRUPTED = 130  # errors.EXIT_INTERRUPTED, not imported: this module loads nothing else


def main() -> None:
    """Load the CLI with SIGINT recorded, then run it (``app.run``) unless it came."""
    arrived = threading.Event()

    def record(signum: int, frame: FrameType | None) -> None:
        arrived.set()

    previous = signal.getsignal(signal.SIGINT)
    # Only over Python's own handler: a SIGINT the parent ignores (a shell's background job) stays
    # ignored, and a caller's handler is not ours to replace.
    guard = previous is signal.default_int_handler and (
        threading.current_thread() is threading.main_thread()
    )
    if guard:
        signal.signal(signal.SIGINT, record)
    try:
        from logstore_cli.cli.app import run
    finally:
        if guard:
            signal.signal(signal.SIGINT, previous)
    if arrived.is_set():
        sys.stderr.write("error: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(run())
