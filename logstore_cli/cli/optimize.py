"""``logstore optimize TABLE``: compact a table's small files (Delta OPTIMIZE), while an ingest runs
or not (on S3: while none runs, under the table's writer lease); see ``jobs/optimize.py``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from logstore_cli.cli.context import make_context
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import InvalidInputError


@config_options(Uses.WAREHOUSE, Uses.SPARK)
def optimize(
    table: TableArg,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            help="Compact only the partitions this Spark SQL condition on partition columns "
            "selects, e.g. \"day >= '2026-11-01'\".",
            metavar="CONDITION",
        ),
    ] = None,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Compact a table's small files (Delta OPTIMIZE); safe while an ingest runs.

    On an s3:// warehouse it takes the table's writer lease, so it is refused while an ingest
    runs there."""
    from contextlib import ExitStack

    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.catalog.lease import HeldLease
    from logstore_cli.jobs import optimize as job
    from logstore_cli.jobs.spark import SparkSettings, build_session
    from logstore_cli.storage import Storage

    if where is not None and not where.strip():
        raise InvalidInputError("--where is empty", hint="drop it to compact the whole table")
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    ref: wh.TableRef | wh.StoredTable = (
        wh.find_table_on(ctx.storage, table) if ctx.remote else wh.find_table(ctx.warehouse, table)
    )
    location = ref.storage if isinstance(ref, wh.StoredTable) else ref.path
    with ExitStack() as stack:
        # On S3 the table's writer lease, before Spark starts: a running ingest refuses it at once.
        lease: HeldLease | None = None
        if ctx.config.s3_warehouse and isinstance(location, Storage):
            lease = job.take_writer_lease(location, ref.name)
            stack.callback(lease.release)
        with out.status("starting Spark …"):
            spark = build_session(
                SparkSettings(
                    master=ctx.config.spark.master,
                    conf=ctx.config.spark.conf,
                    app_name=f"logstore optimize {ref.name}",
                    s3=ctx.spark_s3,
                )
            )
        stack.callback(spark.stop)
        with out.status(f"compacting {ref.name} …"):
            if lease is not None and isinstance(location, Storage):
                spec = lambda: ctx.load_table_on(ref.name).spec  # noqa: E731
                done = job.optimize_holding(spark, ref.name, location, where, lease, spec)
            else:
                done = job.optimize(spark, ref.name, location, where)
    data = done.to_json()
    out.emit(data, lambda console: _render(console, data))


def _render(console: Console, d: dict[str, Any]) -> None:
    where = f" ({d['where']})" if d["where"] else ""
    if d["fenced"]:
        versions = ", ".join(f"v{v}" for v in d["fenced"])
        console.print(
            text(f"fenced the writer(s) of an expired lease it took over (Delta {versions})")
        )
    if d["delta_version"] is None:
        console.print(text(f"{d['table']}{where}: nothing to compact"))
        return
    retried = (
        f" after {d['attempts'] - 1} lost race(s) to epoch commits" if d["attempts"] > 1 else ""
    )
    console.print(
        text(
            f"✓ {d['table']}{where}: compacted {d['files_removed']:,} files "
            f"({d['bytes_removed']:,} bytes) into {d['files_added']:,} "
            f"({d['bytes_added']:,} bytes) as Delta v{d['delta_version']}{retried}"
        )
    )
