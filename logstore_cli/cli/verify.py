"""``logstore verify TABLE``: the table's ``committed`` log, folded by key, against its Delta
snapshot at the newest epoch commit (see ``read/verify.py`` for what is read and in which order).

No Spark: the Delta snapshot is read with delta-rs, the log with one confluent-kafka consumer.
Exit 0 when they are equal, 1 when they are not or could not be compared (a writer's markers not
published, the log's beginning deleted); the reason is on stderr and in ``--json``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from logstore_cli.cli.context import make_context, pulsar_admin_url

if TYPE_CHECKING:
    from collections.abc import Callable

    from logstore_cli.read.pulsar_source import PulsarLogSource
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, key_value_table, simple_table, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import EXIT_FAILURE, InvalidInputError

_TITLES = {
    "missing": "Missing from the log (Delta holds them)",
    "extra": "Extra in the log (Delta does not hold them)",
    "different": "Different (the same key, other values)",
}


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def verify(
    table: TableArg,
    json_: JsonOpt = False,
    examples: Annotated[
        int,
        typer.Option(
            "--examples", min=0, max=1000, help="Examples shown of each kind of difference."
        ),
    ] = 5,
    *,
    overrides: Overrides,
) -> None:
    """Check that the table's committed log, folded by key, equals its Delta table.

    Compares at the newest epoch committed to Delta; exit 0 when equal, 1 when not.
    """
    from logstore_cli.logformat.wire import RowSchema
    from logstore_cli.read.consumer import LogSource, SourceConf
    from logstore_cli.read.verify import location, verify_table, writer_running

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    stored = ctx.load_any(table)
    log = stored.spec.log_store
    if log is None:
        raise InvalidInputError(
            f"table {stored.ref.name} has no log store to verify",
            hint="verify compares a table's log with its Delta table; this one writes Delta only",
        )
    client = dict(ctx.config.kafka.client)
    client.update(log.client_properties)
    timeout = ctx.config.kafka.timeout_s
    pulsar = log.system == "pulsar"
    conf = SourceConf(
        log.address, client, log.topic, timeout, system=log.system,
        admin_url=pulsar_admin_url(ctx, log) if pulsar else None,
    )  # fmt: skip
    source: LogSource | PulsarLogSource
    unknown_start = None
    record_at: Callable[[int], str] = _offset_at
    if pulsar:
        from logstore_cli.logformat.pulsar_form import position_text
        from logstore_cli.read.pulsar_source import UNKNOWN_START, PulsarLogSource

        source, unknown_start = PulsarLogSource(conf, RowSchema.of(stored.spec)), UNKNOWN_START
        record_at = _message_at
    else:
        source = LogSource(conf, RowSchema.of(stored.spec))
    with out.status(f"verifying {stored.ref.name}…"), source:
        result = verify_table(
            stored,
            source,
            examples=examples,
            writer_live=lambda: writer_running(location(stored)),
            marker_wait_s=timeout,
            unknown_start=unknown_start,
            record_at=record_at,
        )
    data = result.to_json()
    if pulsar:  # positions as Pulsar message ids, not the read engine's ordinals
        for name in ("start_offsets", "end_offsets"):
            data["log"][name] = {p: position_text(o) for p, o in data["log"][name].items()}
    out.emit(data, lambda c: _render(c, data))
    if result.reason is not None:
        out.error(result.reason, hint=result.hint)
    elif not result.equal:
        out.error(f"the log and the Delta table differ: {_counts(data)}")
    elif data["delta_version"] is None:
        out.success("nothing to verify yet: no ingest epoch committed to Delta")
    else:
        out.success(f"the committed log equals the Delta table at version {data['delta_version']}")
    if not result.equal:
        raise typer.Exit(EXIT_FAILURE)


def _offset_at(offset: int) -> str:
    return f"offset {offset}"


def _message_at(position: int) -> str:
    """A Pulsar record's place in verify's text: its message id, not the read engine's ordinal."""
    from logstore_cli.logformat.pulsar_form import position_text

    return f"message {position_text(position)}"


def _counts(d: dict[str, Any]) -> str:
    return ", ".join(f"{d[k]['count']:,} {k}" for k in ("missing", "extra", "different"))


def _row(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _render(console: Console, d: dict[str, Any]) -> None:
    log = d["log"]
    if d["delta_version"] is None:
        at = "none (no ingest epoch committed)"
    else:
        e = d["epoch"]
        at = (
            f"{d['delta_version']}: epoch {e['epoch']} of writer {e['writer']} (attempt "
            f"{e['attempt']})"
        )
        if d["latest_version"] != d["delta_version"]:
            at += f"; latest version {d['latest_version']}"
    by_partition = {p: f"{o:,}" if isinstance(o, int) else o for p, o in log["end_offsets"].items()}
    ends = ", ".join(f"{p}: {o}" for p, o in by_partition.items()) or "(no partitions)"
    if d["reason"] is not None:
        verdict = Text("could not compare", style="bold red")
    elif d["equal"]:
        verdict = Text("equal", style="bold green")
    else:
        verdict = Text("not equal", style="bold red")
    pairs: list[tuple[str, Any]] = [
        ("Delta version", at),
        ("topic", f"{log['topic']}: {log['partitions']} partitions, end offsets {ends}"),
        (
            "log read",
            f"{log['records']:,} change records, {log['markers']:,} markers"
            + (f", {log['skipped']:,} skipped" if log["skipped"] else "")
            + f"; {log['changes']:,} committed changes of {log['epochs']:,} epochs up to it"
            + (
                f"; {log['dropped']:,} records of attempts that never committed left out"
                if log["dropped"]
                else ""
            ),
        ),
    ]
    if d["missing"] is not None:
        pairs.append(("rows", f"Delta {d['delta']['rows']:,}, log {log['rows']:,}"))
        pairs.append(("differences", _counts(d)))
    pairs.append(("time", f"{d['seconds']:.2f} s"))
    parts: list[Any] = [verdict, key_value_table(None, pairs)]
    if d["reason"] is not None:
        parts.append(text(d["reason"]))
    for kind, title in _TITLES.items():
        found = d[kind]
        if not found or not found["count"]:
            continue
        headers = {"missing": ["key", "Delta row"], "extra": ["key", "log row"]}.get(
            kind, ["key", "log row", "Delta row", "columns"]
        )
        rows = []
        for ex in found["examples"]:
            key = "(no key)" if ex["key"] is None else _row(ex["key"])
            if "log_copies" in ex:
                key += f" (copies: log {ex['log_copies']}, Delta {ex['delta_copies']})"
            cells = {"key": key, "log row": _row(ex["log"]), "Delta row": _row(ex["delta"]),
                     "columns": ", ".join(ex.get("columns", []))}  # fmt: skip
            rows.append([cells[h] for h in headers])
        shown = f" ({len(rows)} of {found['count']:,} shown)" if rows else ""
        parts += [text(f"{title}{shown}", style="bold"), simple_table(None, headers, rows)]
    for note in d["notes"]:
        parts.append(text(f"note: {note}", style="dim"))
    # soft_wrap off: the plain console (no terminal) soft-wraps, which crops text inside a panel
    console.print(
        Panel(
            Group(*parts), title=text(d["table"], style="bold"), title_align="left", expand=False
        ),
        soft_wrap=False,
    )
