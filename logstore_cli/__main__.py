"""The ``logstore`` command's entry point (console script and ``python -m logstore_cli``).

Stop signals get our handler before anything heavy is imported: a Ctrl-C or SIGTERM while Typer,
Rich and the commands load is "interrupted" and exit 130, never a traceback from an import.
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # No garbage collection while the CLI starts: Typer, Rich, the command's modules and their
    # classes are tens of thousands of objects that live as long as the process, and the collector
    # would scan them again and again while they load (some 40 passes, 5-7 ms of a 0.1 s start;
    # issue 20). The root command's callback freezes what start-up made and turns it back on
    # before the command runs (cli/app.py, ``resume_gc``); here, at the latest, on the way out
    # (frozen too: else the first collection after it would scan everything, at exit).
    gc.disable()
    try:
        _main()
    finally:
        if not gc.isenabled():
            gc.freeze()
            gc.enable()


def _main() -> None:
    from logstore_cli import interrupt

    interrupt.install()
    try:
        from logstore_cli.cli.app import main as run_app
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    try:
        run_app()
    except SystemExit as done:
        # hdfs_native is imported only once a command opened an hdfs:// warehouse (not by S3's),
        # _pulsar (pulsar-client's native module) once it made a Pulsar client.
        native = "hdfs_native" in sys.modules or "_pulsar" in sys.modules
        if native and "pyspark" not in sys.modules:
            _exit_before_teardown(done.code if isinstance(done.code, int) else 1)
        raise


def _exit_before_teardown(code: int) -> None:
    """End the process without the interpreter's teardown, once everything is written.

    A command that reached HDFS (delta-rs and hdfs-native run native threads of their own) was
    seen to abort at exit on a loaded machine after it had printed all its output and chosen its
    code ("terminate called without an active exception", exit -6): a native thread still running
    while the interpreter tore its modules down. pulsar-client's C++ client did the same after a
    failed ``verify`` (its admin API unreachable), one run in four. Nothing of logstore's is left to do then (its
    files are written and closed), so the code goes to the OS directly, the output and log
    handlers flushed first. Only here, in the process's own entry point (never in a caller's
    process), and never after Spark ran: its exit hooks stop the JVM.
    """
    import contextlib
    import logging
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to write
            stream.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    main()
