"""The benchmarks' ``--warehouse local|s3|hdfs``: parsing the flag, and the warehouses of a run.

Shared by ``bench_ingest.py`` and ``bench_read.py`` (each puts this directory on ``sys.path``).
S3 and HDFS are the project's own servers (``logstore_cli.storage.s3_server``: versitygw;
``hdfs_server``: a MiniDFSCluster), started for the run on loopback with their data below the
run's directory and stopped at its end, also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

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
