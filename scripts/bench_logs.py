"""The benchmarks' ``--log kafka|pulsar``: parsing the flag, and the Pulsar of a run.

Shared by the benchmarks (each puts this directory on ``sys.path``). Pulsar is the project's own
standalone (``logstore_cli.pulsar.local_standalone``, as ``logstore pulsar start`` runs it),
started for the run on loopback with its data below the run's directory and stopped at its end,
also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

LOGS = ("kafka", "pulsar")


def log_systems(text: str) -> list[str]:
    """``--log``'s value: one or more of ``LOGS``, comma-separated."""
    kinds = [k.strip() for k in text.split(",")]
    for kind in kinds:
        if kind not in LOGS:
            raise argparse.ArgumentTypeError(
                f"{kind!r} is not a log system the benchmark knows: use {', '.join(LOGS)} "
                "(several comma-separated, or the flag repeated)"
            )
    return kinds


def logs_named_once(values: Sequence[Sequence[str]] | None) -> tuple[str, ...]:
    """The systems of every ``--log`` given, each once in the order named; kafka by default."""
    return tuple(dict.fromkeys(k for kinds in values or [["kafka"]] for k in kinds))


def base_log(kinds: Sequence[str]) -> str:
    """The log system the others are compared with: kafka, else the first one named."""
    return "kafka" if "kafka" in kinds else kinds[0]


@contextlib.contextmanager
def pulsar_started(root: Path) -> Iterator[Any]:
    """A Pulsar standalone for the run (its ``PulsarInfo``: service and admin URLs, pid), its data
    in ``root/pulsar-state``; stopped at the end."""
    from logstore_cli.pulsar import local_standalone

    state = root / "pulsar-state"
    info = local_standalone.start(state, fresh=True)
    try:
        yield info
    finally:
        local_standalone.stop(state)
