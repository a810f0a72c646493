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
        if "pyspark" not in sys.modules and any(name in sys.modules for name in NATIVE_CLIENTS):
            _exit_before_teardown(_exit_code(done.code))
        raise


# Native modules whose threads outlive a command's last call and can be mid-way through releasing
# a Python object when the interpreter tears down (``_exit_before_teardown``): imported only once a
# command used them — hdfs_native once it opened an hdfs:// warehouse (not by S3's), _pulsar
# (pulsar-client's) once it made a Pulsar client, deltalake's once it read or wrote a Delta table.
NATIVE_CLIENTS = ("hdfs_native", "_pulsar", "deltalake._internal")


def _exit_code(code: object) -> int:
    """The status ``SystemExit(code)`` ends a process with, as the interpreter computes it: None
    is 0, an int itself, anything else is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def _exit_before_teardown(code: int) -> None:
    """End the process without the interpreter's teardown, once everything is written.

    Native threads can still be at work when a command returns, and the teardown races them:
    Python ends a thread that asks for the GIL during finalization with ``pthread_exit``, and
    that thread's unwinding through a C++ destructor is ``std::terminate`` — the process aborts
    (exit -6, "terminate called without an active exception") after printing all its output and
    choosing its code. Seen: a ``read --mode file`` or ``verify`` of a table on S3 (one run in
    10 to 20 with three busy processes beside it), where an Arrow thread frees the Parquet
    reader's read-ahead cache after the scan, releasing buffers that delta-rs's Python file
    handler returned (its stack under gdb: ``PyBuffer::~PyBuffer`` → ``PyGILState_Ensure`` →
    ``pthread_exit`` → ``std::terminate``); HDFS reads (delta-rs and hdfs-native);
    pulsar-client's C++ client after a failed ``verify``.
    Nothing of logstore's is left to do then (its files are written and closed), so the code goes
    to the OS directly, the output and log handlers flushed first. Only here, in the process's
    own entry point (never in a caller's process), and never after Spark ran: its exit hooks stop
    the JVM.
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
