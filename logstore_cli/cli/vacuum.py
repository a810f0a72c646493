"""``logstore vacuum TABLE``: Delta VACUUM with delta-rs (no JVM) that keeps the files a hybrid read
can still need; see ``catalog/vacuum.py``. Asks the log (Kafka, or Pulsar's admin API and a reader)
where it starts only for a table with a log store."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from logstore_cli.catalog.tables import StoredTableOn
from logstore_cli.cli.context import make_context, pulsar_admin_url
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import InvalidInputError

MAX_LISTED = 20


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def vacuum(
    table: TableArg,
    retain: Annotated[
        int | None,
        typer.Option(
            "--retain",
            help="Delete data files removed more than HOURS ago [default: the table's "
            "delta.deletedFileRetentionDuration, 168 unless set].",
            metavar="HOURS",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the files a vacuum would delete; delete none.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Vacuum even when snapshots a hybrid read can start from lose files, or "
            "--retain is shorter than the table's delta.deletedFileRetentionDuration.",
        ),
    ] = False,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Delete data files old Delta versions referenced, keeping what hybrid reads still need."""
    from logstore_cli.catalog.vacuum import vacuum as run

    if retain is not None and retain < 0:
        raise InvalidInputError(f"--retain must be 0 or more hours, got {retain}")
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    stored = ctx.load_any(table)  # local, or on the warehouse's storage (s3://, hdfs://)
    log_start = None
    log = stored.spec.log_store
    if log is not None and log.system == "pulsar":
        # Where each partition's log now starts, in the read engine's ordered positions, as the
        # commit metadata's message ids become for a hybrid read (read.hybrid).
        from logstore_cli.read.consumer import SourceConf
        from logstore_cli.read.hybrid import log_start_offsets

        conf = SourceConf(
            log.address, {}, log.topic, ctx.config.kafka.timeout_s,
            system=log.system, admin_url=pulsar_admin_url(ctx, log),
        )  # fmt: skip
        log_start = log_start_offsets(conf)
    elif log is not None:
        from logstore_cli.provision.kafka_topics import KafkaTopicStore

        topics = KafkaTopicStore(ctx.config.kafka)
        try:
            log_start = topics.start_offsets(log)
        finally:
            topics.close()
    with out.status(f"vacuuming {stored.ref.name}"):
        result = run(
            stored.ref.storage if isinstance(stored, StoredTableOn) else stored.ref.path,
            stored.ref.name,
            retain_hours=retain,
            dry_run=dry_run,
            force=force,
            log_start=log_start,
        )
    data = result.to_json()
    out.emit(data, lambda console: _render(console, data))


def _render(console: Console, d: dict[str, Any]) -> None:
    verb = "would delete" if d["dry_run"] else "deleted"
    console.print(
        text(
            f"{d['table']}: {verb} {d['files']:,} file(s), {d['bytes']:,} bytes "
            f"(removed more than {d['retain_hours']} hours ago)"
        )
    )
    if d["dry_run"]:
        for path in d["paths"][:MAX_LISTED]:
            console.print(text(f"  {path}", style="dim"))
        if d["files"] > MAX_LISTED:
            console.print(text(f"  … and {d['files'] - MAX_LISTED:,} more (--json lists all)"))
    hybrid = d["hybrid_from"]
    if hybrid:
        console.print(
            text(
                f"hybrid reads can start from versions {hybrid[-1]} to {hybrid[0]}"
                + ("" if d["forced"] else ": their files are kept"),
                style="dim",
            )
        )
