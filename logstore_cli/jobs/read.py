"""The Spark engine of ``logstore read``: the Delta table (snapshot, time travel, Change Data Feed)
and the log through the ``logstore`` data source (``jobs/datasource.py``), to a sink on the driver
or to a Delta / Parquet path.

Rows reach the driver as Arrow (``DataFrame.toArrow``), not as ``Row`` objects: Arrow keeps
timestamps in UTC and decimals exact, the same values the ingest job encodes, so a row prints
the same JSON whichever engine read it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.logformat.wire import RowKind
from logstore_cli.paths import private_dir, state_home
from logstore_cli.read.consumer import SourceConf
from logstore_cli.read.fold import ArrowRows
from logstore_cli.read.hybrid import resolve_hybrid
from logstore_cli.read.service import ReadRequest, ReadSummary, Sink, check_new_path

KIND = "_ls_kind"
VERSION = "_ls_version"
LOG_META = ("_ls_partition", "_ls_offset", "_ls_writer", "_ls_epoch")
# Change Data Feed change types as row kinds; the rank orders a key's pre-image before its post-image.
_CDF_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}
_CDF_RANK = {"update_preimage": 0, "update_postimage": 1, "delete": 2, "insert": 3}
_FOLLOW_POLL_S = 0.1


def run(
    spark: SparkSession, req: ReadRequest, sink: Sink | None, *, stop: Callable[[], bool]
) -> ReadSummary:
    """One read: bounded (to the sink or the path) or following (to the sink, until ``stop``)."""
    began = time.monotonic()
    summary = ReadSummary(req.name, req.mode, "spark", req.level)
    if not req.output.streamed and req.output.path is not None:
        check_new_path(req.output.path)  # a JSON lines file is the sink, created by the caller
    if req.mode == "log" and req.follow:
        if sink is None:
            raise InvalidInputError(
                "--follow writes changes as they come: a Delta or Parquet output is for "
                "bounded reads",
                hint="drop --follow to write what the log holds now, or --output jsonl[:PATH]",
            )
        _follow(spark, req, sink, summary, stop)
    else:
        frame = (
            _file_frame(spark, req, summary)
            if req.mode == "file"
            else _log_frame(spark, req, summary)
        )
        if req.limit is not None:
            frame = frame.limit(req.limit)
        if not req.output.streamed and req.output.path is not None:
            frame.write.format(req.output.kind).mode("errorifexists").save(req.output.path)
            summary.rows = spark.read.format(req.output.kind).load(req.output.path).count()
        else:
            assert sink is not None
            summary.rows = _drain(frame, req, sink, summary)
            summary.limited = req.limit is not None and summary.rows >= req.limit
    summary.seconds = time.monotonic() - began
    return summary


# -- Delta --------------------------------------------------------------------------------------


def _as_of(reader: Any, as_of: str, *, changes: bool) -> Any:
    if as_of.isdigit():
        return reader.option("startingVersion" if changes else "versionAsOf", int(as_of))
    return reader.option("startingTimestamp" if changes else "timestampAsOf", as_of)


def _file_frame(spark: SparkSession, req: ReadRequest, summary: ReadSummary) -> DataFrame:
    path = req.spark_path  # the local directory, or s3a://…, hdfs://… on a remote warehouse
    names = list(req.schema.names)
    reader = spark.read.format("delta")
    if req.changes:
        reader = _as_of(reader.option("readChangeFeed", "true"), req.as_of or "0", changes=True)
        frame = _guard(lambda: reader.load(path))
        kind = F.create_map(*(F.lit(x) for pair in _CDF_KINDS.items() for x in pair))
        rank = F.create_map(*(F.lit(x) for pair in _CDF_RANK.items() for x in pair))
        keys = [F.col(k) for k in req.spec.primary_key]
        return frame.orderBy(F.col("_commit_version"), *keys, rank[F.col("_change_type")]).select(
            *names,
            kind[F.col("_change_type")].alias(KIND),
            F.col("_commit_version").alias(VERSION),
        )
    if req.as_of is not None:
        reader = _as_of(reader, req.as_of, changes=False)
        if req.as_of.isdigit():  # the version read is known: rows carry it, as delta-rs's do
            summary.snapshot_version = int(req.as_of)
    else:
        from deltalake import DeltaTable

        from logstore_cli.catalog.delta_log import delta_rs_args

        uri, options = delta_rs_args(req.location)
        # pin it: the version printed is the one read
        version = DeltaTable(uri, storage_options=options).version()
        reader = reader.option("versionAsOf", version)
        summary.snapshot_version = version
    frame = _guard(lambda: reader.load(path))
    return frame.select(*names, F.lit("+I").alias(KIND))


_VERSION_ERRORS = ("TIME_TRAVEL", "VERSION", "TIMESTAMP", "CDC", "CHANGE_DATA", "CDF")


def _guard(load: Callable[[], DataFrame]) -> DataFrame:
    """Delta's own errors for a version or timestamp it does not have, as input errors."""
    from pyspark.errors import PySparkException

    try:
        return load()
    except PySparkException as exc:
        text = str(exc).splitlines()[0]
        condition = (exc.getCondition() or "").upper()
        if any(s in condition for s in _VERSION_ERRORS) or "time travel" in text:
            raise InvalidInputError(
                f"Delta cannot read that version: {text}",
                hint="give a version or timestamp the table has (logstore status shows the "
                "latest version)",
            ) from None
        raise LogstoreError(f"cannot read the Delta table: {text}") from exc


# -- the log ------------------------------------------------------------------------------------


def _log_reader(spark: SparkSession, req: ReadRequest, start: str, stream: bool) -> Any:
    from logstore_cli.jobs.datasource import register

    register(spark)
    assert req.level is not None
    reader = spark.readStream if stream else spark.read
    found = (
        reader.format("logstore")
        .option("warehouse", req.warehouse)
        .option("consistency", req.level)
        .option("changelogMode", req.changelog)
        .option("from", start)
        .option("kafkaTimeout", str(req.timeout_s))
    )
    # A Pulsar table's admin API as the CLI resolved it (--pulsar-admin-url, the config file)
    return found if req.admin_url is None else found.option("pulsarAdminUrl", req.admin_url)


def _log_start(req: ReadRequest, summary: ReadSummary) -> tuple[str, int | None]:
    """The data source's ``from`` and, for a hybrid read, the snapshot version."""
    assert req.start is not None
    if req.start.kind != "snapshot":
        return req.start.describe(), None
    log = req.spec.log_store
    assert log is not None
    conf = SourceConf(
        req.bootstrap or log.address, req.client_properties, log.topic, req.timeout_s,
        system=log.system, admin_url=req.admin_url,
    )  # fmt: skip
    hybrid = resolve_hybrid(req.location, conf, req.start.version)
    summary.snapshot_version = hybrid.version
    return f"snapshot:{hybrid.version}", hybrid.version


def _log_frame(spark: SparkSession, req: ReadRequest, summary: ReadSummary) -> DataFrame:
    start, version = _log_start(req, summary)
    log: DataFrame = _log_reader(spark, req, start, stream=False).load(req.name)
    if version is None:
        return log
    snapshot = spark.read.format("delta").option("versionAsOf", version).load(req.spark_path)
    snap = snapshot.select(
        *req.schema.names,
        F.lit("+I").alias(KIND),
        *(F.lit(None).cast(log.schema[c].dataType).alias(c) for c in LOG_META),
    )
    # Snapshot first, then the log in partition and offset order (a union keeps its inputs' order).
    return snap.unionByName(log.select(*req.schema.names, KIND, *LOG_META))


# -- rows to the sink ---------------------------------------------------------------------------


def _rows(frame: DataFrame) -> Iterator[dict[str, Any]]:
    table = frame.toArrow()
    for batch in table.to_batches(max_chunksize=8192):
        yield from batch.to_pylist()


def _meta(row: Mapping[str, Any], summary: ReadSummary) -> dict[str, Any]:
    if row.get("_ls_partition") is not None:
        return {
            "partition": row["_ls_partition"],
            "offset": row["_ls_offset"],
            "writer": row["_ls_writer"],
            "epoch": row["_ls_epoch"],
        }
    if row.get(VERSION) is not None:
        return {"version": row[VERSION]}
    if summary.snapshot_version is not None:
        return {"version": summary.snapshot_version}
    return {}


def _drain(frame: DataFrame, req: ReadRequest, sink: Sink, summary: ReadSummary) -> int:
    names = req.schema.names
    arrow = ArrowRows(req.schema)
    count = 0
    for row in _rows(frame):
        data = arrow({n: row[n] for n in names})
        sink.change(RowKind(row[KIND]), data, _meta(row, summary))
        count += 1
    sink.flush()
    return count


def _follow(
    spark: SparkSession,
    req: ReadRequest,
    sink: Sink,
    summary: ReadSummary,
    stop: Callable[[], bool],
) -> None:
    start, version = _log_start(req, summary)
    if version is not None:
        snapshot = _file_frame(spark, _at(req, version), summary)
        summary.snapshot_rows = _drain(snapshot, req, sink, summary)
    names = list(req.schema.names)
    lock = threading.Lock()
    state = {"rows": summary.snapshot_rows, "limited": False}

    arrow = ArrowRows(req.schema)

    def batch(frame: DataFrame, batch_id: int) -> None:
        with lock:
            for row in _rows(frame.select(*names, KIND, *LOG_META)):
                if state["limited"]:
                    return
                data = arrow({n: row[n] for n in names})
                sink.change(RowKind(row[KIND]), data, _meta(row, summary))
                state["rows"] += 1
                if req.limit is not None and state["rows"] >= req.limit:
                    state["limited"] = True
            sink.flush()

    temp: Path | None = None
    if req.checkpoint is not None:
        location = str(req.checkpoint)
    else:
        temp = Path(tempfile.mkdtemp(prefix="read-", dir=private_dir(state_home() / "spark")))
        location = str(temp)
    query = (
        _log_reader(spark, req, start, stream=True)
        .load(req.name)
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", location)
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while query.isActive and not stop() and not state["limited"]:
            query.awaitTermination(_FOLLOW_POLL_S)
        error = query.exception()
        if error is not None:
            raise LogstoreError(f"the following read failed: {str(error).splitlines()[0]}")
    finally:
        query.stop()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    summary.rows = int(state["rows"])
    summary.limited = bool(state["limited"])


def _at(req: ReadRequest, version: int) -> ReadRequest:
    from dataclasses import replace

    return replace(req, mode="file", as_of=str(version), changes=False)
