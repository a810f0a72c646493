"""The Spark engine of ``logstore read`` on a remote (``s3://``, ``hdfs://``) warehouse, checked the
same way on each backend (issue 19): what Spark reads from the table's Hadoop URI is what delta-rs
and the consumer engine read there (the reads other tests compare with the local copy)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable

Run = Callable[..., subprocess.CompletedProcess[str]]


def _lines(run: Run, *args: str) -> list[dict[str, Any]]:
    done = run("read", *args, "--json")
    assert done.returncode == 0, done.stderr
    # the engines order rows differently (Spark by its tasks): compared as sorted lines
    return [json.loads(line) for line in sorted(done.stdout.splitlines())]


def _written(run: Run, *args: str) -> dict[str, Any]:
    done = run("read", *args, "--json")
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    assert summary["engine"] == "spark", summary
    return summary


def check_spark_reads(run: Run, tmp: Path, table: str, *, rows: int, last: int) -> None:
    """``table`` has ``rows`` rows at Delta version ``last``, its newest, written by two epochs
    (versions ``last - 1`` and ``last``)."""
    # --mode file: a version and the Change Data Feed, the rows delta-rs reads there
    for args in (["--as-of", str(last - 1)], ["--changes", "--as-of", "1"]):
        spark = _lines(run, table, "--mode", "file", "--engine", "spark", *args)
        assert spark, args
        assert spark == _lines(run, table, "--mode", "file", *args), args

    # the snapshot (pinned by delta-rs with the storage options) to a local Parquet output
    snapshot = tmp / "snapshot.parquet"
    summary = _written(
        run, table, "--mode", "file", "--engine", "spark", "-o", f"parquet:{snapshot}"
    )
    assert summary["rows"] == rows and summary["snapshot"]["version"] == last
    ids = sorted(pq.read_table(snapshot).column("id").to_pylist())
    newest = _lines(run, table, "--mode", "file")
    assert ids == sorted(line["row"]["id"] for line in newest) and len(ids) == rows

    # --mode log, hybrid, to a local Delta output: the logstore data source on the remote
    # warehouse (its markers confirmed by the Delta log there), the consumer's rows
    start = f"snapshot:{last - 1}"
    copy = tmp / "log-copy"
    summary = _written(run, table, "--mode", "log", "--from", start, "-o", f"delta:{copy}")
    consumer = _lines(run, table, "--mode", "log", "--from", start)
    assert summary["rows"] == len(consumer) > 0 and summary["snapshot"]["version"] == last - 1
    written = DeltaTable(str(copy)).to_pyarrow_table().to_pylist()
    assert sorted((r["_ls_kind"], r["id"], r["name"]) for r in written) == sorted(
        (line["kind"], line["row"]["id"], line["row"]["name"]) for line in consumer
    )

    # an output is a local path: a URI is refused before anything starts
    for out in ("delta:s3a://elsewhere/out", "hdfs://nn:8020/out.parquet"):
        refused = run("read", table, "--mode", "file", "--engine", "spark", "-o", out)
        assert refused.returncode == 2 and "a URI: a read writes" in refused.stderr, out
