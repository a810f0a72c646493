"""``logstore status TABLE``: the writer lease, each writer's last committed epoch, the log's tail
against the last commit, and the quarantine (see ``catalog/status.py`` for what the numbers mean).

No Spark: the Delta log is read with delta-rs and as files, Kafka with the admin client. When Kafka
cannot be asked, the rest is still printed with a warning and the exit code is 0, as ``describe``
does: the table's own state was read, and ``--json`` carries the failure in ``log.error``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from logstore_cli.cli.context import make_context
from logstore_cli.cli.options import JsonOpt, config_options
from logstore_cli.cli.output import Output, key_value_table, simple_table
from logstore_cli.cli.tables import TableArg
from logstore_cli.config import Overrides, Uses

TAIL_NOTE = (
    "after commit = records written since the last epoch commit's records: its commit marker (1 "
    "after a clean commit, 0 until the markers are out, more when a restart re-published them), "
    "then records of epochs not committed yet"
)


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def status(
    table: TableArg,
    json_: JsonOpt = False,
    no_topic: Annotated[
        bool,
        typer.Option("--no-topic", help="Do not contact Kafka: Delta, lease and quarantine only."),
    ] = False,
    *,
    overrides: Overrides,
) -> None:
    """Show who writes a table and how far: lease, writers' last epochs, log tail, quarantine."""
    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.catalog.status import table_status

    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    ref = wh.find_table(ctx.warehouse, table)
    if no_topic:
        result = table_status(ref, None, default_bootstrap=ctx.default_bootstrap)
    else:
        from logstore_cli.provision.kafka_topics import KafkaTopicStore

        topics = KafkaTopicStore(ctx.config.kafka)
        try:
            result = table_status(ref, topics, default_bootstrap=ctx.default_bootstrap)
        finally:
            topics.close()
    for warning in result.warnings:
        out.warning(warning)
    data = result.to_json()
    out.emit(data, lambda c: _render(c, data))


def _lease_line(lease: dict[str, Any] | None) -> str:
    if lease is None:
        return "free (no job holds it)"
    if "error" in lease:
        return f"unreadable: {lease['error']}"
    holder = f"job '{lease['job']}' on {lease['host']}, pid {lease['pid']}"
    if lease["expired"]:
        ago = -lease["expires_in_s"]
        return f"expired at {lease['expires_at']} ({ago:g} s ago; free to take), was {holder}"
    gone = " (its process has exited: a job started on this host takes over at once)"
    return (
        f"held by {holder}{gone if lease['holder_running'] is False else ''}; expires at "
        f"{lease['expires_at']} (in {lease['expires_in_s']:g} s)"
    )


def _render(console: Console, d: dict[str, Any]) -> None:
    q = d["quarantined"]
    delta = d["delta"]
    history = (
        ""
        if delta["history_from"] in (None, 0)
        else f" (commits kept from {delta['history_from']})"
    )
    head = key_value_table(
        None,
        [
            ("path", d["path"]),
            ("delta version", f"{delta['version']}{history}"),
            ("lease", _lease_line(d["lease"])),
            ("quarantined", f"{q['total']}" + (
                " (" + ", ".join(f"{job}: {n}" for job, n in q["jobs"].items()) + ")"
                if q["jobs"] else "")),
        ],
    )  # fmt: skip
    parts: list[Any] = [head]
    if d["writers"]:
        parts.append(
            simple_table(
                "Writers (last committed epoch of each)",
                ["writer", "epoch", "attempt", "delta version", "committed at"],
                [(w["writer"], w["epoch"], w["attempt"], w["delta_version"], w["committed_at"])
                 for w in d["writers"]],
            )
        )  # fmt: skip
    else:
        parts.append(Text("no epoch committed yet", style="dim"))
    log = d["log"]
    if log is None:
        parts.append(Text("log store: off", style="dim"))
    elif log["topic"] is None:
        parts.append(Text(f"log store: {log['error']}"))
    else:
        last = d["last_commit"]
        since = (
            f" against writer {last['writer']} epoch {last['epoch']} (Delta version "
            f"{last['delta_version']})" if last else ""
        )  # fmt: skip
        if log["partitions"]:
            parts.append(
                simple_table(
                    f"Topic {log['topic']}{since}",
                    ["partition", "committed offset", "end offset", "after commit"],
                    [(p["partition"], p["committed_offset"], p["end_offset"], p["after_commit"])
                     for p in log["partitions"]],
                )
            )  # fmt: skip
            if log["end_offsets_read"] and last:
                parts.append(Text(TAIL_NOTE, style="dim"))
        if not log["end_offsets_read"]:
            why = log["error"] or "not asked (--no-topic)"
            parts.append(Text(f"topic {log['topic']}: end offsets unavailable: {why}", style="dim"))
    console.print(
        Panel(Group(*parts), title=Text(d["name"], style="bold"), title_align="left", expand=False)
    )
