"""A Delta table on S3 or HDFS read by a Spark session a user would build, not logstore's (issue 19:
the tables logstore writes there are plain Delta tables): run in a process of its own by
``start``, as the suite's shared JVM has no S3 jars and a running JVM cannot gain them.

The session has Delta's two documented settings (``spark.sql.extensions``,
``spark.sql.catalog.spark_catalog``) and its jars (``spark.jars``); on S3 the plain ``fs.s3a.*``
endpoint, region and path-style settings, the keys found by S3A's default chain in the standard
AWS variables of the environment (so none is on the JVM's command line). Reads a JSON request on
stdin (the table's Hadoop URI, the Delta version, the jars, the S3 endpoint and region or none)
and prints the version's rows as one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600


@dataclass
class PlainRead:
    """A read ``start`` began: its process and the files its output goes to (never a pipe, which
    a test that failed first would leave unread and the process block on)."""

    proc: subprocess.Popen[str]
    out: IO[str]
    err: IO[str]

    def rows(self) -> list[dict[str, Any]]:
        """The rows the process read (it must end with exit 0)."""
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        out, err = (_text(f) for f in (self.out, self.err))
        assert self.proc.returncode == 0, err[-4000:]
        result: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
        return result


def start(table: str, version: int, s3: dict[str, str] | None, env: dict[str, str]) -> PlainRead:
    """This script on ``table`` (an ``s3a://`` or ``hdfs://`` URI) at ``version``, started in the
    background (``PlainRead.rows`` waits for it): the read overlaps the test's own work, and ends
    on its own if the test fails first. ``s3``: ``endpoint`` and ``region``; ``env``: the
    process's environment."""
    from logstore_cli.jvm.deps import spark_jars

    jars = [str(j) for j in spark_jars(s3=s3 is not None)]
    # open while the process runs, past this call: closed when collected
    out = tempfile.TemporaryFile("w+")  # noqa: SIM115
    err = tempfile.TemporaryFile("w+")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.plain_spark_read"], stdin=subprocess.PIPE,
        stdout=out, stderr=err, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"table": table, "version": version, "jars": jars, "s3": s3}))
    proc.stdin.close()
    return PlainRead(proc, out, err)


def _text(file: IO[str]) -> str:
    file.seek(0)
    return file.read()


def _read(request: dict[str, Any]) -> list[dict[str, Any]]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a loopback-only test host
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("a plain Delta reader")
        .config("spark.jars", ",".join(request["jars"]))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    )
    s3 = request["s3"]
    if s3 is not None:
        builder = (
            builder.config("spark.hadoop.fs.s3a.endpoint", s3["endpoint"])
            .config("spark.hadoop.fs.s3a.endpoint.region", s3["region"])
            .config("spark.hadoop.fs.s3a.path.style.access", "true")
        )
    spark = builder.getOrCreate()
    try:
        table = spark.read.format("delta").option("versionAsOf", request["version"])
        return [r.asDict() for r in table.load(request["table"]).collect()]
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(_read(json.load(sys.stdin)), default=str))
