"""Table commands: create-table, describe, list, alter-table, drop-table.

Each command resolves the context, calls one service function and renders its result; heavy modules
(delta-rs, confluent-kafka, pyspark) are imported inside the commands, never at import time.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group

from logstore_cli.cli.context import Context, make_context, open_stores, open_topics, parse_pairs
from logstore_cli.cli.options import JsonOpt, complete_table, config_options
from logstore_cli.cli.options import TableArg as TableArg  # status.py imports it from here
from logstore_cli.cli.output import Output, first_line, key_value_table, simple_table, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import InvalidInputError
from logstore_cli.model import BROKER_DEFAULT

if TYPE_CHECKING:
    from logstore_cli.model import TableSpec
    from logstore_cli.provision.service import LiveWriter

DeleteTopicOpt = Annotated[
    bool, typer.Option("--delete-topic", help="Also delete the table's Kafka topic.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print the plan; create or change nothing.")
]
AdoptTopicOpt = Annotated[
    bool,
    typer.Option(
        "--adopt-topic",
        help="Accept an existing topic that already holds records as the table's log "
        "(where they end is recorded with the table: verify starts there, and readers skip "
        "records that are not logstore's).",
    ),
]


def _read_input(file: str | None, sql: str | None) -> tuple[str, str]:
    """(text, filename) from --sql, a file, or standard input ('-')."""
    from logstore_cli.cli.ddl import read_ddl

    if sql is not None:
        if file is not None:
            raise InvalidInputError("give either FILE or --sql, not both")
        return sql, "<sql>"
    if file is None:
        raise InvalidInputError(
            "no DDL given", hint="pass a file, '-' for standard input, or --sql 'CREATE TABLE …'"
        )
    return read_ddl(file)


def _parse(ctx: Context, text: str, filename: str) -> list[TableSpec]:
    from logstore_cli.ddl import ParseOptions, parse_ddl

    # A text without any CREATE TABLE is a DDLError of its own.
    return parse_ddl(text, filename, ParseOptions(default_bootstrap_servers=ctx.bootstrap_lookup))


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA, Uses.SPARK)
def create_table(
    file: Annotated[
        str | None, typer.Argument(help="DDL file, or '-' for standard input.", show_default=False)
    ] = None,
    sql: Annotated[str | None, typer.Option("--sql", help="DDL text instead of a file.")] = None,
    if_not_exists: Annotated[
        bool,
        typer.Option(
            "--if-not-exists", help="An existing identical table is a no-op, not an error."
        ),
    ] = False,
    dry_run: DryRunOpt = False,
    adopt_topic: AdoptTopicOpt = False,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Create the Delta table and, when the log store is on, its Kafka topic, for each CREATE TABLE."""
    from logstore_cli.provision.service import create_tables

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    specs = _parse(ctx, *_read_input(file, sql))
    if ctx.remote:
        from logstore_cli.provision.delta_log import SPARK_DEFAULTS_PREFIX
        from logstore_cli.provision.on_storage import create_tables_on

        defaults = [k for k in ctx.config.spark.conf if k.startswith(SPARK_DEFAULTS_PREFIX)]
        with out.status("provisioning …"), open_topics(ctx) as topics:
            plans = create_tables_on(
                specs, ctx.storage, topics, if_not_exists=if_not_exists, dry_run=dry_run,
                adopt_topic=adopt_topic, default_bootstrap=ctx.default_bootstrap,
                spark_defaults=defaults,
            )  # fmt: skip
    else:
        with (
            out.status("provisioning (the first Delta write starts Spark) …"),
            open_stores(ctx) as stores,
        ):
            plans = create_tables(
                specs, ctx.warehouse, stores, if_not_exists=if_not_exists, dry_run=dry_run,
                adopt_topic=adopt_topic, default_bootstrap=ctx.default_bootstrap,
            )  # fmt: skip
    from logstore_cli.provision.plan import retention_warnings

    rows = []
    for spec, p in zip(specs, plans, strict=True):
        warnings = retention_warnings(spec.properties, log_store=spec.log_store is not None)
        rows.append(p.to_json() | {"status": _status(p.is_noop, dry_run), "warnings": warnings})
    for row in rows:
        verb = {"planned": "would create", "created": "created", "exists": "exists, unchanged"}
        out.success(f"{row['table']}: {verb[row['status']]} ({row['path']})")
        for warning in row["warnings"]:
            out.warning(f"{row['table']}: {warning}")
    out.emit(rows, lambda c: c.print(_plan_table(rows, dry_run)))


def _status(noop: bool, dry_run: bool) -> str:
    return "exists" if noop else ("planned" if dry_run else "created")


def _plan_table(rows: list[dict[str, Any]], dry_run: bool) -> Any:
    def topic(r: dict[str, Any]) -> str:
        t = r["topic"]
        if t is None:
            return "(log store off)"
        return (
            f"{t['name']} ({t['action']}; {t['partitions']} partitions, replication "
            f"{t['replication'] or BROKER_DEFAULT}) @ {t['address']}"
        )

    return simple_table(
        "Plan (dry run)" if dry_run else "Tables",
        ["table", "status", "delta", "topic"],
        [(r["table"], r["status"], r["delta"], topic(r)) for r in rows],
    )


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def describe(
    table: TableArg,
    json_: JsonOpt = False,
    no_topic: Annotated[
        bool, typer.Option("--no-topic", help="Do not contact Kafka; Delta metadata only.")
    ] = False,
    *,
    overrides: Overrides,
) -> None:
    """Show a table: schema, key, properties (secrets redacted), Delta version, topic offsets."""
    from logstore_cli.catalog.tables import describe_table

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    stored = ctx.load_any(table)
    if no_topic:
        description = describe_table(stored, None)
    else:
        with open_topics(ctx) as topics:
            description = describe_table(stored, topics)
    if description.topic and description.topic.error:
        out.warning(f"topic {description.topic.name}: {description.topic.error}")
    data = description.to_json()
    out.emit(data, lambda c: _render_describe(c, data))


def _render_describe(console: Console, d: dict[str, Any]) -> None:
    from rich.panel import Panel  # here: 'list' and the other commands of this module draw none

    cols = simple_table(
        None, ["column", "type", "nullable", "key"],
        [(c["name"], c["type"], "yes" if c["nullable"] else "no",
          "PK" if c["name"] in d["primary_key"] else "") for c in d["columns"]],
    )  # fmt: skip
    head = key_value_table(
        None,
        [("path", d["path"]), ("delta version", d["delta"]["version"]),
         ("data files", d["delta"]["num_files"]), ("using", d["using"] or ""),
         ("partitioned by", ", ".join(d["partitioned_by"]) or "")],
    )  # fmt: skip
    parts: list[Any] = [head, cols]
    log = d["log_store"]
    if log:
        parts.append(
            key_value_table(
                "Log store",
                [(k.replace("_", " "), BROKER_DEFAULT if k == "replication" and v is None else v)
                 for k, v in log.items()
                 if k not in ("enabled", "client_properties")
                 and (v is not None or k == "replication")]
                + [("client properties", ", ".join(f"{k}={v}" for k, v in
                                                   log["client_properties"].items()))],
            )
        )  # fmt: skip
        topic = d["topic"]
        if topic and topic.get("exists"):
            parts.append(
                simple_table(
                    f"Topic {topic['name']} (replication {topic['replication']})",
                    ["partition", "end offset"],
                    [(p["partition"], p["end_offset"]) for p in topic["partitions"]],
                )
            )
    else:
        parts.append("[dim]log store: off[/dim]")
    if d["properties"]:
        parts.append(simple_table("Properties", ["key", "value"], list(d["properties"].items())))
    if d["secret_keys_not_stored"]:
        parts.append(
            text(
                "secrets not stored with the table (supply them in the config's [kafka.client]): "
                + ", ".join(d["secret_keys_not_stored"]),
                style="dim",
            )
        )
    # soft_wrap off: the plain console (no terminal) soft-wraps, which crops text inside a panel
    console.print(
        Panel(Group(*parts), title=text(d["name"], style="bold"), title_align="left", expand=False),
        soft_wrap=False,
    )


@config_options(Uses.WAREHOUSE, Uses.BROKERS)
def list_tables(
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """List the warehouse's tables with their log store status."""
    from logstore_cli.catalog.tables import list_tables as list_catalog

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    if ctx.remote:
        from logstore_cli.catalog.tables import list_tables_on

        where: object = ctx.config.warehouse
        rows = list_tables_on(ctx.storage, default_bootstrap=ctx.bootstrap_lookup)
    else:
        where = ctx.warehouse
        rows = list_catalog(ctx.warehouse, default_bootstrap=ctx.bootstrap_lookup)
    for row in rows:
        if row.error:
            out.warning(f"{row.name}: {first_line(row.error)}")  # --json has the whole text

    def render(console: Console) -> None:
        if not rows:
            console.print(text(f"no tables in {where}"))
            return
        console.print(
            simple_table(
                f"Tables in {where}",
                ["table", "version", "columns", "primary key", "log store"],
                [(r.name, r.version, r.columns, ", ".join(r.primary_key),
                  f"error: {first_line(r.error)}" if r.error else (
                      f"{r.log_store.topic} ({r.log_store.consistency.value})"
                      if r.log_store else "off")) for r in rows],
            )
        )  # fmt: skip

    out.emit([r.to_json() for r in rows], render)


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA, Uses.SPARK)
def alter_table(
    table: Annotated[
        str | None,
        typer.Argument(
            help="Table name: db.table (or table, in 'default'); optional with --sql.",
            metavar="TABLE",
            autocompletion=complete_table,
            show_default=False,
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Set a property KEY=VALUE (repeatable).", metavar="K=V"),
    ] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", help="Remove a property (repeatable).")
    ] = None,
    add_column: Annotated[
        list[str] | None,
        typer.Option(
            "--add-column",
            help="Add a nullable column \"NAME TYPE [COMMENT 'text']\" (repeatable); rows "
            "written before read it as null. Columns are never dropped, renamed or retyped.",
            metavar="COLUMN",
        ),
    ] = None,
    widen_column: Annotated[
        list[str] | None,
        typer.Option(
            "--widen-column",
            help='Widen a column\'s type "NAME TYPE" (repeatable): TINYINT → SMALLINT → INT → '
            "BIGINT, DECIMAL(p,s) → DECIMAL(p2,s) with p2 > p (Delta's type widening).",
            metavar="COLUMN",
        ),
    ] = None,
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            help="ALTER TABLE t ADD COLUMNS (…) or ALTER TABLE t ALTER COLUMN c TYPE t: the "
            "statement form of --add-column / --widen-column.",
            metavar="STATEMENT",
        ),
    ] = None,
    delete_topic: Annotated[
        bool,
        typer.Option(
            "--delete-topic",
            help="Delete the topic the table no longer uses (log store turned off, or topic "
            "renamed); never one another table uses.",
        ),
    ] = False,
    adopt_topic: AdoptTopicOpt = False,
    dry_run: DryRunOpt = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Change it even while an ingest job writes the table: that job's next commit "
            "conflicts and it stops.",
        ),
    ] = False,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Change table properties, validated like DDL; turning the log store on creates its topic;
    add nullable columns; widen a column's type.

    Columns are added to the Delta table; the log's records carry them from the next ingest job
    started on the table on."""
    from logstore_cli.provision.service import alter_table as alter_service

    changes, removals = parse_pairs(set_, "--set"), list(unset or [])
    columns = []
    if add_column:
        from logstore_cli.ddl.document import parse_column

        columns = [parse_column(text) for text in add_column]
    widened = []
    if widen_column:
        from logstore_cli.ddl.document import parse_column

        widened = [parse_column(text, "--widen-column") for text in widen_column]
    named = None  # the table --sql's statement alters
    if sql is not None:
        from logstore_cli.ddl.document import parse_alter_statement

        named, more, wider = parse_alter_statement(sql)
        columns += more
        widened += wider
    target = table if table is not None else named
    if target is None:
        raise InvalidInputError(
            "no table given", hint="pass TABLE, or --sql 'ALTER TABLE t ADD COLUMNS (…)'"
        )
    if not changes and not removals and not columns and not widened:
        raise InvalidInputError(
            "nothing to change",
            hint='pass --set KEY=VALUE, --unset KEY, --add-column "NAME TYPE" and/or '
            '--widen-column "NAME TYPE"',
        )
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    stored = ctx.load_any(target)
    if named is not None and ctx.load_any(named).ref.name != stored.ref.name:
        raise InvalidInputError(
            f"--sql alters table {named}, not {table}",
            hint="name one table: drop TABLE, or make it the statement's",
        )
    if ctx.remote:
        from logstore_cli.catalog.tables import StoredTableOn
        from logstore_cli.provision.on_storage import alter_table_on

        assert isinstance(stored, StoredTableOn)
        with out.status("changing the table …"), open_topics(ctx) as topics:
            result = alter_table_on(
                stored, topics, changes, removals, warehouse=ctx.storage,
                delete_topic=delete_topic, adopt_topic=adopt_topic,
                default_bootstrap=ctx.default_bootstrap, dry_run=dry_run, force=force,
                add_columns=columns, widen_columns=widened,
            )  # fmt: skip
    else:
        from logstore_cli.catalog.tables import StoredTable

        assert isinstance(stored, StoredTable)
        with out.status("changing the table (starts Spark) …"), open_stores(ctx) as stores:
            result = alter_service(
                stored, stores, changes, removals, warehouse=ctx.warehouse,
                delete_topic=delete_topic, adopt_topic=adopt_topic,
                default_bootstrap=ctx.default_bootstrap, dry_run=dry_run, force=force,
                add_columns=columns, widen_columns=widened,
            )  # fmt: skip
    if result.writer_stops and result.forced_past is not None:
        out.warning(
            f"{result.forced_past.info.holder} writes the table: it stops at the start of its "
            "next epoch (nothing lost); run it again to write the changed column(s) to both "
            "stores"
        )
    else:
        _warn_forced(out, result.forced_past, "altered")
    if columns:
        names = ", ".join(c.name for c in columns)
        out.success(f"{result.table}: {'would add' if dry_run else 'added'} column(s) {names}")
    if result.widened_columns:
        names = ", ".join(f"{c.name} to {c.type.upper()}" for c in result.widened_columns)
        out.success(f"{result.table}: {'would widen' if dry_run else 'widened'} {names}")
    elif widened:
        out.info(f"{result.table}: the column(s) already have the type(s) given")
    if changes or removals:
        out.success(f"{result.table}: {'would change' if dry_run else 'changed'} properties")
    for line in result.topic.describe() if result.topic else []:
        out.info(line)
    warnings = _altered_retention(ctx, stored, changes, removals, dry_run=dry_run)
    for warning in warnings:
        out.warning(f"{result.table}: {warning}")
    out.emit(result.to_json() | {"warnings": warnings})


def _altered_retention(
    ctx: Context, stored: Any, changes: dict[str, str], removals: list[str], *, dry_run: bool
) -> list[str]:
    """The retention warnings of the table as altered: read back, or for a dry run its properties
    with the change applied."""
    from logstore_cli.provision.plan import retention_warnings

    if not dry_run:
        spec = ctx.load_any(stored.ref.name).spec
        return retention_warnings(spec.properties, log_store=spec.log_store is not None)
    props = {k: v for k, v in stored.spec.properties.items() if k not in removals} | changes
    return retention_warnings(props, log_store=stored.spec.log_store is not None)


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def drop_table(
    table: TableArg,
    delete_topic: DeleteTopicOpt = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Drop it even while an ingest job writes the table: that job fails at its next "
            "commit.",
        ),
    ] = False,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Delete a table's Delta directory (and with --delete-topic its topic). Asks first.

    Also removes a table directory that an interrupted create-table left without a committed
    Delta version.
    """
    from logstore_cli.catalog.tables import load_ref
    from logstore_cli.catalog.warehouse import StoredTable, TableRef, find_table
    from logstore_cli.provision.service import check_droppable
    from logstore_cli.provision.service import drop_table as drop_service

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    ref: TableRef | StoredTable
    spec = None
    if ctx.remote:
        from logstore_cli.catalog.tables import spec_from_delta
        from logstore_cli.catalog.warehouse import find_table_on, read_delta_on

        ref = find_table_on(ctx.storage, table, uncommitted=True)
        if ref.committed:
            state = read_delta_on(ref.storage)
            spec = spec_from_delta(ref, state, ctx.default_bootstrap)
        where: object = ref.storage.uri
    else:
        ref = find_table(ctx.warehouse, table, uncommitted=True)
        if ref.committed:
            spec = load_ref(ref, default_bootstrap=ctx.default_bootstrap).spec
        where = ref.path
    what = f"table '{ref.name}' ({where})"
    if delete_topic and spec is not None and spec.log_store:
        what += f" and topic '{spec.log_store.topic}'"
    check_droppable(ref, force=force)  # before asking: a refusal needs no answer
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInputError(
                f"refusing to drop {what} without confirmation (not a terminal)",
                hint="pass --yes to drop without asking",
            )
        if not typer.confirm(f"Drop {what}? This deletes its data", default=False):
            out.info("nothing dropped")
            raise typer.Exit(1)
    if isinstance(ref, StoredTable):
        from logstore_cli.provision.on_storage import drop_table_on

        with open_topics(ctx) as topics:
            result = drop_table_on(
                ref, spec, topics, warehouse=ctx.storage, delete_topic=delete_topic,
                default_bootstrap=ctx.default_bootstrap, force=force,
            )  # fmt: skip
    else:
        with open_stores(ctx) as stores:  # dropping removes a directory: Spark never starts
            result = drop_service(
                ref, spec, stores, warehouse=ctx.warehouse, delete_topic=delete_topic,
                default_bootstrap=ctx.default_bootstrap, force=force,
            )  # fmt: skip
    _warn_forced(out, result.forced_past, "dropped")
    out.success(f"dropped {what}")
    out.emit(result.to_json())


def _warn_forced(out: Output, writer: LiveWriter | None, done: str) -> None:
    if writer is not None:
        out.warning(
            f"{done} while {writer.info.holder} writes the table (--force): that job fails at "
            "its next commit"
        )
