"""The benchmarks' ``--warehouse local|s3|hdfs``: parsing the flag, the warehouses of a run, and
the report of several side by side.

Shared by ``bench_ingest.py`` and ``bench_read.py`` (each puts this directory on ``sys.path``).
S3 and HDFS are the project's own servers (``logstore_cli.storage.s3_server``: versitygw;
``hdfs_server``: a MiniDFSCluster), started for the run on loopback with their data below the
run's directory and stopped at its end, also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

WAREHOUSES = ("local", "s3", "hdfs")
BUCKET = "logstore-bench"  # the S3 bucket, or the HDFS directory, of a remote run's tables


def warehouse_kinds(text: str) -> list[str]:
    """``--warehouse``'s value: one or more of ``WAREHOUSES``, comma-separated."""
    kinds = [k.strip() for k in text.split(",")]
    for kind in kinds:
        if kind not in WAREHOUSES:
            raise argparse.ArgumentTypeError(
                f"{kind!r} is not a warehouse the benchmark knows: use {', '.join(WAREHOUSES)} "
                "(several comma-separated, or the flag repeated)"
            )
    return kinds


def named_once(values: Sequence[Sequence[str]] | None) -> tuple[str, ...]:
    """The kinds of every ``--warehouse`` given, each once in the order named; local by default."""
    return tuple(dict.fromkeys(k for kinds in values or [["local"]] for k in kinds))


def base_warehouse(kinds: Sequence[str]) -> str:
    """The warehouse the others are compared with: local, else the first one named."""
    return "local" if "local" in kinds else kinds[0]


@contextlib.contextmanager
def started(
    kinds: Sequence[str], root: Path, local: Path | None = None
) -> Iterator[dict[str, str]]:
    """Each kind's warehouse for the run (``local`` or ``root/warehouse``; an ``s3://`` or
    ``hdfs://`` URI on a server started here). With S3, the server's standard AWS variables are
    this process's for the run (Spark, delta-rs and boto3 read them; never shown)."""
    where: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for kind in kinds:
            if kind == "local":
                where[kind] = str(local if local is not None else root / "warehouse")
            elif kind == "s3":
                from logstore_cli.storage import s3_server
                from logstore_cli.storage.s3 import S3Settings, make_client

                state = root / "s3-server"
                info = s3_server.start(state)
                stack.callback(s3_server.stop, state)
                stack.callback(_restore_env, {k: os.environ.get(k) for k in info.env()})
                os.environ.update(info.env())
                make_client(S3Settings.from_env(info.env())).create_bucket(Bucket=BUCKET)
                where[kind] = f"s3://{BUCKET}/warehouse"
            else:
                from logstore_cli.storage import hdfs_server

                state = root / "hdfs-server"
                hdfs = hdfs_server.start(state, fresh=True)
                stack.callback(hdfs_server.stop, state)
                where[kind] = f"{hdfs.uri}/{BUCKET}/warehouse"
        yield where


def _restore_env(saved: Mapping[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


R = TypeVar("R")


def format_sections(
    results: Mapping[str, R],
    facts: Mapping[str, object],
    where: Mapping[str, str],
    report: Callable[[R, Mapping[str, object]], str],
    ratios: Mapping[str, Mapping[str, float]],
    label: str,
    dimension: str = "warehouse",
    *,
    base_of: Callable[[Sequence[str]], str] | None = None,
) -> str:
    """One warehouse (or log system: ``dimension``): its ``report`` as ever, saying where.
    Several: the facts, a section each, then the ``ratios`` (kind -> row -> figure over the base
    one's, ``base_of`` the kinds; the base warehouse by default) as a table whose rows are the
    base's, ``-`` where another has none."""
    if len(results) == 1:
        ((kind, result),) = results.items()
        return report(result, {**facts, dimension: f"{kind}: {where[kind]}"})
    lines = [f"{k}: {v}" for k, v in facts.items()]
    for kind, result in results.items():
        lines += ["", f"== {dimension} {kind}: {where[kind]}", report(result, {})]
    kinds = list(results)
    base = (base_of or base_warehouse)(kinds)
    width = max([len(label), *(len(name) for name in ratios[base])])
    lines += ["", f"median seconds relative to {base}"]
    lines.append(f"{label:{width}}" + "".join(f" {k:>7}" for k in kinds))
    for name in ratios[base]:
        cells = [f" {ratios[k][name]:7.2f}" if name in ratios[k] else f" {'-':>7}" for k in kinds]
        lines.append(f"{name:{width}}" + "".join(cells))
    return "\n".join(lines)


def json_sections(
    results: Mapping[str, R],
    facts: Mapping[str, object],
    where: Mapping[str, str],
    report: Callable[[R, Mapping[str, object]], dict[str, Any]],
    ratios: Mapping[str, Mapping[str, float]],
    dimension: str = "warehouse",
    *,
    base_of: Callable[[Sequence[str]], str] | None = None,
) -> dict[str, Any]:
    """One warehouse (or log system: ``dimension``): its ``report`` as ever (with ``warehouse``
    and ``warehouse_uri``, or ``log`` and ``log_uri``). Several: one each (under ``warehouses``
    or ``logs``), the ``ratios`` and their ``ratio_base``."""
    if len(results) == 1:
        ((kind, result),) = results.items()
        return report(result, {**facts, dimension: kind, f"{dimension}_uri": where[kind]})
    sections = {k: {"uri": where[k], **report(r, {})} for k, r in results.items()}
    return {
        **facts,
        f"{dimension}s": sections,
        "ratio_base": (base_of or base_warehouse)(list(results)),
        "ratios": {k: {n: round(r, 3) for n, r in rows.items()} for k, rows in ratios.items()},
        "within_target": all(s.get("within_target", True) for s in sections.values()),
    }
