"""The ``generate`` source on Spark: ``ingest/generate.py``'s change stream as a streaming
DataFrame, through Spark 4.0's Python data source API (``pyspark.sql.datasource``).

Offsets are change numbers (``{"change": n}``: the changes before ``n`` are planned). A micro-batch
``[start, end)`` is split into a few partitions, and each partition regenerates its changes from
``(seed, change number)``, so a retried batch gives the same records.

How many changes are available (``latestOffset``):

- paced (the default): ``rate`` changes per second since the stream started or resumed (the
  first second's at once), capped by ``total``; the query then idles until stopped.
- ``once``: every change up to ``total`` at once.

Both are capped per micro-batch by the source option ``maxChangesPerBatch`` (``--source-option
maxChangesPerBatch=N``) when it is given.

**--once and Trigger.AvailableNow.** Spark 4.0.1 gives Python streaming sources no admission
control: under ``trigger(availableNow=True)`` it wraps them (``AvailableNowDataStreamWrapper``),
asks ``latestOffset`` once when the query starts and runs everything up to that offset as *one*
micro-batch. So a ``once`` stream under availableNow processes exactly ``total`` changes in one
epoch, and must not be given ``maxChangesPerBatch`` (availableNow would stop after the first
batch). To run it in several epochs, use ``ONCE_TRIGGER`` (a processing-time trigger) with
``maxChangesPerBatch`` and end the query with ``finish_once``: it waits until every available
change is processed and committed, then stops the query. A *paced* stream under availableNow
would give only the first second's ``rate`` changes: ``--once`` must build the stream with
``once=True``.

**Resuming.** On a restart from a checkpoint Spark 4.0.1 first plans the last batch of its
offset log again (``partitions(end, end)`` when that batch was committed, ``partitions(start,
end)`` when it was not), before it asks ``latestOffset``: that is where the stream resumed, and
pacing counts from there. A fresh query asks ``latestOffset`` first: it starts at change 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import generate, plan
from logstore_cli.model import ColumnSpec, TableSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

SOURCE_NAME = "logstore_generate"
ARRIVAL_TYPE = "struct<change:bigint,record:int>"  # the change number, the record within it
SEQ_TYPE = "bigint"  # always null: arrival orders a generated key's changes
MAX_PER_BATCH_OPTION = "maxChangesPerBatch"
SOURCE_OPTIONS = (MAX_PER_BATCH_OPTION,)
ONCE_TRIGGER: dict[str, str] = {"processingTime": "0 seconds"}
MIN_CHANGES_PER_PARTITION = 2_000  # smaller ranges are not worth a task of their own
ARROW_CHUNK = 8_192  # records per Arrow record batch


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def stream_schema(table: TableSpec) -> str:
    """The stream's schema as DDL: the table's columns (nullable: Delta checks NOT NULL when it
    writes) followed by ``plan.META_COLUMNS``."""
    meta = {
        plan.KIND: "string",
        plan.SEQ: SEQ_TYPE,
        plan.ARRIVAL: ARRIVAL_TYPE,
        plan.ERROR: "string",
        plan.RAW: "string",
        plan.ORIGIN: "string",
    }
    columns = [f"{_quote(c.name)} {c.type}" for c in table.columns]
    columns += [f"{_quote(name)} {meta[name]}" for name in plan.META_COLUMNS]
    return ", ".join(columns)


# -- options: everything the source needs travels as text -----------------------------------------


def _encode_options(
    source: plan.GenerateSource,
    table: TableSpec,
    *,
    once: bool,
    max_per_batch: int | None,
    partitions: int,
) -> dict[str, str]:
    spec = {
        "table": {
            "database": table.database,
            "table": table.table,
            "columns": [[c.name, c.type, c.nullable] for c in table.columns],
            "primary_key": list(table.primary_key),
        },
        "source": {
            "rate": source.rate,
            "keys": source.keys,
            "total": source.total,
            "update_ratio": source.update_ratio,
            "delete_ratio": source.delete_ratio,
            "seed": source.seed,
        },
        "once": once,
        "max_per_batch": max_per_batch,
        "partitions": partitions,
    }
    return {"spec": json.dumps(spec, sort_keys=True)}


class _Settings:
    """The decoded options (plain attributes: the reader is pickled to the executors)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        spec = json.loads(options["spec"])
        t = spec["table"]
        self.table = TableSpec(
            database=t["database"],
            table=t["table"],
            columns=tuple(ColumnSpec(n, ty, nullable) for n, ty, nullable in t["columns"]),
            primary_key=tuple(t["primary_key"]),
            using=None,
            properties={},
            log_store=None,
        )
        self.source = plan.GenerateSource(**spec["source"])
        self.once: bool = spec["once"]
        self.max_per_batch: int | None = spec["max_per_batch"]
        self.partitions: int = spec["partitions"]


# -- the Python data source -------------------------------------------------------------------------


class ChangeRange(InputPartition):
    """Changes ``[start, end)`` of a micro-batch: one Spark task."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end


class GenerateStreamReader(DataSourceStreamReader):
    def __init__(self, settings: _Settings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema
        # Driver side only (the query's planner process): where and when the stream resumed.
        self._origin: int | None = None
        self._started = 0.0
        self._planned = 0

    def _resume(self, at: int) -> None:
        self._origin, self._planned = at, at
        self._started = time.monotonic()

    def initialOffset(self) -> dict[str, int]:
        return {"change": 0}

    def latestOffset(self) -> dict[str, int]:
        if self._origin is None:
            self._resume(0)  # a fresh query: Spark asks this before anything else
        assert self._origin is not None
        end = generate.latest_change(
            origin=self._origin,
            planned=self._planned,
            elapsed_s=time.monotonic() - self._started,
            source=self.settings.source,
            once=self.settings.once,
            max_per_batch=self.settings.max_per_batch,
        )
        return {"change": end}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, last = int(start["change"]), int(end["change"])
        if self._origin is None:
            self._resume(last)  # a restart replans its offset log's last batch first
        self._planned = max(self._planned, last)
        ranges = generate.split(
            first, last, self.settings.partitions, minimum=MIN_CHANGES_PER_PARTITION
        )
        return [ChangeRange(a, b) for a, b in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangeRange)
        encoder = _BatchEncoder(self.settings.table, self.schema)
        gen = generate.generator(self.settings.source, self.settings.table)
        records = gen.rows(partition.start, partition.end)  # one pass: it reuses row images
        while rows := list(islice(records, ARROW_CHUNK)):
            yield encoder.batch(rows)


class _BatchEncoder:
    """Generated records -> one Arrow record batch in the stream's schema, column by column."""

    def __init__(self, table: TableSpec, schema: StructType) -> None:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        self.pa = pa
        self.schema = to_arrow_schema(schema)
        self.width = len(table.columns)
        arrival = self.schema.field(plan.ARRIVAL).type
        self.arrival_fields = [arrival.field(n) for n in range(arrival.num_fields)]

    def batch(self, rows: list[generate.FlatRecord]) -> pa.RecordBatch:
        pa = self.pa
        n = len(rows)
        changes, records, kinds, values = zip(*rows, strict=True)
        types = self.schema.types
        arrays = [
            pa.array(column, type=types[c]) for c, column in enumerate(zip(*values, strict=True))
        ]
        arrays += [
            pa.array(kinds, pa.string()),
            pa.nulls(n, types[self.width + 1]),
            pa.StructArray.from_arrays(
                [pa.array(changes, pa.int64()), pa.array(records, pa.int32())],
                fields=self.arrival_fields,
            ),
            pa.nulls(n, pa.string()),
            pa.nulls(n, pa.string()),
            pa.array([generate.ORIGIN] * n, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class GenerateDataSource(DataSource):
    """``spark.readStream.format("logstore_generate").option("spec", ...)``; built by
    ``generate_stream``, which writes the options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return stream_schema(_Settings(self.options).table)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GenerateStreamReader(_Settings(self.options), schema)


# -- what the ingest job calls ----------------------------------------------------------------------


def register(spark: SparkSession) -> None:
    """Register the source on the session; again is harmless (the same class replaces itself)."""
    spark.dataSource.register(GenerateDataSource)


def _max_per_batch(options: Mapping[str, str]) -> int | None:
    unknown = sorted(set(options) - set(SOURCE_OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"--source-option {unknown[0]!r} is not an option of the generate source",
            hint=f"generate takes: {', '.join(SOURCE_OPTIONS)}",
        )
    text = options.get(MAX_PER_BATCH_OPTION)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInputError(
            f"--source-option {MAX_PER_BATCH_OPTION}={text!r}: expected a whole number of "
            "changes, at least 1"
        )
    return value


def generate_stream(spark: SparkSession, request: Any, *, once: bool | None = None) -> DataFrame:
    """The normalized change stream of a ``plan.GenerateSource`` (``request`` is a
    ``jobs.sources.SourceRequest``: ``spec``, ``table``, ``options``): the table's columns, then
    ``plan.META_COLUMNS`` (kind set, sequence null, arrival = change number and record index,
    no error or raw text, origin ``generate``).

    ``once`` (default: ``request.once`` when it has one, else False) makes every change up to
    ``total`` available at once; without ``total`` it is refused. The ingest job's ``--once``
    must set it: under Trigger.AvailableNow a paced stream gives only its first second.
    """
    source: plan.GenerateSource = request.spec
    table: TableSpec = request.table
    if once is None:
        once = bool(getattr(request, "once", False))
    generate.check_generate(source, table, once=once)
    max_per_batch = _max_per_batch(dict(getattr(request, "options", None) or {}))
    register(spark)
    options = _encode_options(
        source,
        table,
        once=once,
        max_per_batch=max_per_batch,
        partitions=max(1, spark.sparkContext.defaultParallelism),
    )
    return spark.readStream.format(SOURCE_NAME).options(**options).load()


def finish_once(query: StreamingQuery) -> None:
    """End a ``once`` query started with ``ONCE_TRIGGER``: wait until every available change is
    processed and committed (several micro-batches with ``maxChangesPerBatch``), then stop it."""
    query.processAllAvailable()
    query.stop()
