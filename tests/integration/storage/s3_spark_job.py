"""A Spark job of ``test_s3_spark.py``, run in a process of its own: one JVM started with the S3 jars
and the s3a settings by logstore's own session builder (the suite's shared ``spark`` JVM has neither,
and a running JVM cannot gain them).

Reads a JSON request on stdin (never argv: ``ps`` shows that) — the table's ``s3a://`` URI, Spark's
work directory, and ``keys`` (the server's AWS variables, passed to the session as S3 settings) or
none (the JVM finds the keys in its environment through the AWS SDK's default chain). Creates the
Delta table, MERGEs into it, reads it back and prints one JSON line: the rows, the Delta versions,
and the JVM's command line (which ``ps`` shows to every user of the host) and, when the keys
came as settings, its environment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from logstore_cli.jobs.spark import SparkSettings, build_session
from logstore_cli.storage.s3 import S3Settings


def run(request: dict[str, Any]) -> dict[str, Any]:
    keys = request.get("keys")
    s3 = S3Settings.from_env(keys) if keys is not None else S3Settings.from_env()
    spark = build_session(
        SparkSettings(
            master="local[2]",
            app_name="logstore-s3-test",
            work_dir=Path(request["work_dir"]),
            s3=s3,
        )
    )
    from delta.tables import DeltaTable
    from pyspark import SparkContext

    path = request["table"]
    spark.createDataFrame([(1, "a", 10), (2, "b", 20), (3, "c", 30)], "id INT, name STRING, qty INT") \
        .write.format("delta").save(path)  # fmt: skip
    changes = spark.createDataFrame([(2, "B", 21), (4, "d", 40)], "id INT, name STRING, qty INT")
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(changes.alias("c"), "t.id = c.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    )  # fmt: skip
    rows = [list(r) for r in spark.read.format("delta").load(path).orderBy("id").collect()]
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    jvm = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
    proc = Path(f"/proc/{jvm}")
    result = {
        "rows": rows,
        "operations": [[h["version"], h["operation"]] for h in history],
        "hadoop_conf": {
            k: spark.sparkContext._jsc.hadoopConfiguration().get(k)  # type: ignore[union-attr]
            for k in ("fs.s3a.endpoint", "fs.s3a.aws.credentials.provider")
        },
        "snapshot_partitions": spark.conf.get("spark.databricks.delta.snapshotPartitions"),
        "jvm_cmdline": proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(),
    }
    if keys is not None:  # otherwise the keys are in the environment by design: not printed
        result["jvm_environ"] = proc.joinpath("environ").read_bytes().replace(b"\0", b"\n").decode()
    spark.stop()
    return result


if __name__ == "__main__":
    print(json.dumps(run(json.load(sys.stdin))))
