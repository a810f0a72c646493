"""``logstore optimize TABLE``: compact a table's small files (Delta OPTIMIZE), while an ingest runs
or not; see ``jobs/optimize.py``."""

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
    """Compact a table's small files (Delta OPTIMIZE); safe while an ingest runs."""
    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.jobs.optimize import optimize as run
    from logstore_cli.jobs.spark import SparkSettings, build_session

    if where is not None and not where.strip():
        raise InvalidInputError("--where is empty", hint="drop it to compact the whole table")
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    # a local table, or one on hdfs:// (s3:// is refused before: config_options)
    ref: wh.TableRef | wh.StoredTable = (
        wh.find_table_on(ctx.storage, table) if ctx.remote else wh.find_table(ctx.warehouse, table)
    )
    with out.status("starting Spark …"):
        spark = build_session(
            SparkSettings(
                master=ctx.config.spark.master,
                conf=ctx.config.spark.conf,
                app_name=f"logstore optimize {ref.name}",
                s3=ctx.spark_s3,
            )
        )
    try:
        with out.status(f"compacting {ref.name} …"):
            location = ref.storage if isinstance(ref, wh.StoredTable) else ref.path
            data = run(spark, ref.name, location, where).to_json()
    finally:
        spark.stop()
    out.emit(data, lambda console: _render(console, data))


def _render(console: Console, d: dict[str, Any]) -> None:
    where = f" ({d['where']})" if d["where"] else ""
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
