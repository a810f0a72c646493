"""``logstore status TABLE``: the writer lease, each writer's last committed epoch, the log's tail
against the last commit, and the quarantine (see ``catalog/status.py`` for what the numbers mean).

No Spark: the Delta log is read with delta-rs and as files, Kafka with the admin client. When Kafka
cannot be asked, the rest is still printed with a warning and the exit code is 0, as ``describe``
does: the table's own state was read, and ``--json`` carries the failure in ``log.error``.

``--watch`` refreshes every ``--interval`` seconds until Ctrl-C (exit 130): a live view on a
terminal, one plain snapshot per refresh without one, one JSON object per line with ``--json``
(the status, a ``timestamp`` and the rates of ``catalog/watch.py``). A refresh reads only the Delta
commits new since the last one and reuses one Kafka admin client; a failure after the first
refresh (the broker gone, the table unreadable) is a warning in the view, not an exit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from logstore_cli.cli.context import make_context
from logstore_cli.cli.options import JsonOpt, TableArg, config_options
from logstore_cli.cli.output import Output, clean, key_value_table, simple_table, text
from logstore_cli.config import Overrides, Uses
from logstore_cli.errors import InvalidInputError, LogstoreError

if TYPE_CHECKING:
    from logstore_cli.catalog.watch import Parser, Rates

TAIL_NOTE = (
    "after commit = records written since the last epoch commit's records: its commit marker (1 "
    "after a clean commit, 0 until the markers are out, more when a restart re-published them), "
    "then records of epochs not committed yet"
)
DEFAULT_INTERVAL_S = 2.0
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 3600.0


@config_options(Uses.WAREHOUSE, Uses.BROKERS, Uses.KAFKA)
def status(
    table: TableArg,
    json_: JsonOpt = False,
    no_topic: Annotated[
        bool,
        typer.Option("--no-topic", help="Do not contact Kafka: Delta, lease and quarantine only."),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            "-w",
            help="Refresh until Ctrl-C: a live view on a terminal, a snapshot per refresh "
            "otherwise, a JSON object per line with --json (with rows_per_s and a timestamp).",
        ),
    ] = False,
    interval: Annotated[
        float | None,
        typer.Option(
            "--interval",
            help=f"Seconds between refreshes with --watch [default: {DEFAULT_INTERVAL_S:g}].",
            show_default=False,
        ),
    ] = None,
    *,
    overrides: Overrides,
) -> None:
    """Show who writes a table and how far: lease, writers' last epochs, log tail, quarantine."""
    from logstore_cli.catalog import warehouse as wh
    from logstore_cli.catalog.status import CommitCache, TableStatus, table_status

    if interval is not None and not watch:
        raise InvalidInputError("--interval needs --watch", hint="add --watch, or drop --interval")
    every = DEFAULT_INTERVAL_S if interval is None else interval
    if not MIN_INTERVAL_S <= every <= MAX_INTERVAL_S:
        raise InvalidInputError(
            f"--interval must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds, "
            f"got {every:g}"
        )
    ctx = make_context(overrides)
    out = Output(json_mode=json_)
    found = (
        wh.find_table_on(ctx.storage, table) if ctx.remote else wh.find_table(ctx.warehouse, table)
    )

    def current(cache: CommitCache | None = None) -> TableStatus:
        return table_status(found, topics, default_bootstrap=ctx.default_bootstrap, commits=cache)

    if no_topic:
        topics = None
    else:
        from logstore_cli.cli.context import topic_stores

        topics = topic_stores(ctx)  # one admin client per broker, for every refresh
    try:
        if watch:
            cache = CommitCache()
            _watch(
                out,
                lambda: current(cache).to_json(),
                cache.cached,
                every,
                cache.epoch,
            )
            return
        result = current()
    finally:
        if topics is not None:
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
        parts.append(text(f"log store: {log['error']}"))
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
                    list(partition_columns(log)),
                    [(p["partition"], p["committed_offset"], p["end_offset"], p["after_commit"])
                     for p in log["partitions"]],
                )
            )  # fmt: skip
            if log["end_offsets_read"] and last:
                parts.append(Text(TAIL_NOTE, style="dim"))
        if not log["end_offsets_read"]:
            why = log["error"] or "not asked (--no-topic)"
            ends = "last message ids" if log.get("system") == "pulsar" else "end offsets"
            parts.append(text(f"topic {log['topic']}: {ends} unavailable: {why}", style="dim"))
    uncarried, unchecked = _outside_lines(d)
    if uncarried:
        parts.append(text(uncarried, style="yellow"))
    if unchecked:
        parts.append(text(unchecked, style="dim"))
    # soft_wrap off: the plain console (no terminal) soft-wraps, which crops text inside a panel
    console.print(
        Panel(Group(*parts), title=text(d["name"], style="bold"), title_align="left", expand=False),
        soft_wrap=False,
    )


def _outside_lines(d: dict[str, Any]) -> tuple[str | None, str | None]:
    """The writes made outside logstore that the log does not hold yet, and the commits not
    checked for such writes, as lines (None: nothing to say)."""
    outside = d.get("outside") or {"uncarried": [], "unchecked": 0}
    uncarried = None
    if outside["uncarried"]:
        listed = ", ".join(_outside_commit(c) for c in outside["uncarried"][:5])
        more = len(outside["uncarried"]) - 5
        uncarried = (
            f"written outside logstore, not in the log yet: {listed}"
            + (f" and {more} more" if more > 0 else "")
            + " (the next ingest carries them)"
        )
    unchecked = None
    if outside["unchecked"]:
        unchecked = f"{outside['unchecked']} older commits not checked for writes outside logstore"
    return uncarried, unchecked


def _outside_commit(c: dict[str, Any]) -> str:
    parts = [c["operation"] or "an unnamed operation"]
    if c["at"]:
        parts.append(f"at {c['at']}")
    return f"version {c['version']} ({' '.join(parts)})"


# -- status --watch ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchView:
    """What one refresh of ``status --watch`` shows, as text (rendered live or as plain lines)."""

    name: str
    at: str  # local time of the refresh
    facts: list[tuple[str, str]]
    writers: list[tuple[str, ...]]  # writer, epoch, attempt, Delta version, committed at
    topic: str | None  # the partitions' caption; None: no tail to show
    partitions: list[tuple[str, ...]]  # partition, committed offset, end offset, after commit
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    partition_columns: tuple[str, ...] = (
        "partition",
        "committed offset",
        "end offset",
        "after commit",
    )

    WRITER_COLUMNS = ("writer", "epoch", "attempt", "delta version", "committed at")


def partition_columns(log: dict[str, Any]) -> tuple[str, ...]:
    """The log tail's columns: Kafka's offsets, or Pulsar's message ids (the last one held)."""
    if log.get("system") == "pulsar":
        return ("partition", "committed id", "last id", "after commit")
    return ("partition", "committed offset", "end offset", "after commit")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def watch_view(d: dict[str, Any], rates: Rates, at: float, warnings: list[str]) -> WatchView:
    """The view of one refresh: the status ``d`` (its ``to_json``), the rates, the refresh time and
    the warnings to show (the status's own, and a failed refresh's)."""
    delta = d["delta"]
    q = d["quarantined"]
    facts = [
        ("delta version", str(delta["version"])),
        ("rows/s", _rate(rates.rows_per_s)),
        ("log records/s", _rate(rates.log_records_per_s)),
        ("lease", _lease_line(d["lease"])),
        ("quarantined", str(q["total"])),
    ]
    writers: list[tuple[str, ...]] = [
        (w["writer"], str(w["epoch"]), w["attempt"], str(w["delta_version"]),
         _cell(w["committed_at"]))
        for w in d["writers"]
    ]  # fmt: skip
    notes: list[str] = [] if d["writers"] else ["no epoch committed yet"]
    notes += [line for line in _outside_lines(d) if line is not None]
    log = d["log"]
    topic = None
    partitions: list[tuple[str, ...]] = []
    columns = partition_columns(log or {})
    if log is None:
        notes.append("log store: off")
    elif log["topic"] is not None:
        last = d["last_commit"]
        topic = f"topic {log['topic']}" + (
            f" after writer {last['writer']} epoch {last['epoch']}" if last else ""
        )
        partitions = [
            (str(p["partition"]), _cell(p["committed_offset"]), _cell(p["end_offset"]),
             _cell(p["after_commit"]))
            for p in log["partitions"]
        ]  # fmt: skip
    return WatchView(
        name=d["name"],
        at=datetime.fromtimestamp(at).strftime("%H:%M:%S"),
        facts=facts,
        writers=writers,
        topic=topic,
        partitions=partitions,
        notes=notes,
        warnings=list(warnings),
        partition_columns=columns,
    )


def render_plain(view: WatchView) -> list[str]:
    """One snapshot as plain lines (no terminal: a log file, a pipe)."""
    lines = [f"{view.name} at {view.at}: " + "; ".join(f"{k} {v}" for k, v in view.facts)]
    lines += [
        "  writer {} epoch {} attempt {} delta version {} committed at {}".format(*w)
        for w in view.writers
    ]
    if view.topic is not None and view.partitions:
        lines.append(f"  {view.topic}:")
        _, committed, end, after = view.partition_columns
        lines += [
            f"    partition {p}: {committed} {c}, {end} {e}, {after} {a}"
            for p, c, e, a in view.partitions
        ]
    lines += [f"  {note}" for note in view.notes]
    lines += [f"  warning: {w}" for w in view.warnings]
    return lines


def render_rich(view: WatchView) -> RenderableType:
    """One refresh as a panel for the live view."""
    parts: list[RenderableType] = [key_value_table(None, view.facts)]
    if view.writers:
        parts.append(simple_table("Writers (last committed epoch of each)",
                                  WatchView.WRITER_COLUMNS, view.writers))  # fmt: skip
    if view.topic is not None and view.partitions:
        parts.append(simple_table(view.topic, view.partition_columns, view.partitions))
    parts += [text(note, style="dim") for note in view.notes]
    parts += [Text.assemble(("warning:", "yellow"), " ", clean(w)) for w in view.warnings]
    parts.append(Text("Ctrl-C to stop", style="dim"))
    title = Text.assemble((clean(view.name), "bold"), f"  {view.at}")
    return Panel(Group(*parts), title=title, title_align="left", expand=False)


@dataclass
class _Refresher:
    """Takes a status and its rates per refresh; after the first, a failure becomes a warning."""

    read: Callable[[], dict[str, Any]]
    commits: Callable[[], list[tuple[int, dict[str, Any]]]]
    window_s: float
    parse: Parser | None = None
    last: dict[str, Any] | None = None

    def __call__(self) -> tuple[dict[str, Any], Rates, float, list[str]]:
        from logstore_cli.catalog.watch import rates, samples

        failed: list[str] = []
        try:
            self.last = self.read()
        except LogstoreError as exc:
            if self.last is None:
                raise  # nothing read yet: the table or the input is wrong, an error as without --watch
            failed = [f"refresh failed, showing the last status: {exc.message}"]
        now = time.time()
        commits = samples(self.commits(), since=now - self.window_s, parse=self.parse)
        found = rates(commits, now, self.window_s)
        return self.last, found, now, [*self.last["warnings"], *failed]


def _ticks(interval: float, stop: Callable[[float], bool]) -> Iterator[None]:
    """Yield at once, then every ``interval`` seconds from the last tick's start (a steady cadence
    whatever a refresh took; after one longer than that, at once), until ``stop(timeout)``, which
    waits up to ``timeout`` seconds, returns True."""
    next_at = time.monotonic()
    while True:
        yield
        next_at = max(next_at + interval, time.monotonic())
        if stop(next_at - time.monotonic()):
            return


def _watch(
    out: Output,
    read: Callable[[], dict[str, Any]],
    commits: Callable[[], list[tuple[int, dict[str, Any]]]],
    interval: float,
    parse: Parser | None = None,
) -> None:
    from rich.live import Live

    from logstore_cli.catalog.watch import DEFAULT_WINDOW_S
    from logstore_cli.interrupt import StopOnCtrlC

    refresh = _Refresher(read, commits, max(DEFAULT_WINDOW_S, 4 * interval), parse)
    # Nothing to finish after a Ctrl-C: the first one ends the wait between refreshes (a refresh in
    # progress completes first, bounded by kafka.timeout_s); a second one stops at once.
    with StopOnCtrlC(lambda _: None, "stopping") as stopper:
        ticks = _ticks(interval, stopper.requested.wait)
        if out.json_mode:
            shown: set[str] = set()
            for _ in ticks:
                d, r, now, warnings = refresh()
                for w in warnings:
                    if w not in shown:  # each warning once while it lasts, not once per refresh
                        out.warning(w)
                shown = set(warnings)
                out.event({**d, "timestamp": _iso(now), "rows_per_s": _round(r.rows_per_s),
                           "log_records_per_s": _round(r.log_records_per_s)})  # fmt: skip
        elif out.out.is_terminal:
            with Live(console=out.out, auto_refresh=False, transient=False) as live:
                for _ in ticks:
                    d, r, now, warnings = refresh()
                    live.update(render_rich(watch_view(d, r, now, warnings)), refresh=True)
        else:
            for _ in ticks:
                d, r, now, warnings = refresh()
                for line in render_plain(watch_view(d, r, now, warnings)):
                    out.out.print(text(line), soft_wrap=True)
                out.out.file.flush()
    interrupt = KeyboardInterrupt()
    interrupt.add_note("stopped watching")
    raise interrupt


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="milliseconds")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
