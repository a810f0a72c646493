"""What a read does, decided before anything is read (docs/design.md §6.4, §6.5). Pure: no I/O.

Shared by every engine (the confluent-kafka consumer engine, the Spark data source, ``verify``):
where a log read starts (``--from``), the read level (``--consistent`` / ``--consistency``), the
changelog mode, the output, and the start of a hybrid read from a Delta snapshot's commit
metadata. The JSON line of one emitted change (``--output jsonl``) is here too, so every engine
prints the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, TypeAlias

from logstore_cli.catalog.epochs import EpochCommit, gone_offsets, usable_snapshots
from logstore_cli.errors import InvalidInputError, RecordsDeletedError
from logstore_cli.logformat.consistency import LEVELS, Emission, Level
from logstore_cli.logformat.wire import RowKind, RowSchema, encode_row
from logstore_cli.model import Consistency, LogStoreSpec, StartupMode

Mode: TypeAlias = Literal["file", "log"]
MODES: Final[tuple[Mode, ...]] = ("file", "log")
Changelog: TypeAlias = Literal["all-kinds", "append-only"]
CHANGELOG_MODES: Final[tuple[Changelog, ...]] = ("all-kinds", "append-only")
Engine: TypeAlias = Literal["spark", "consumer", "delta-rs"]
ENGINES: Final[tuple[str, ...]] = ("auto", "spark", "consumer", "delta-rs")
OutputKind: TypeAlias = Literal["table", "jsonl", "delta", "parquet"]

_TIMESTAMP: Final = re.compile(r"timestamp:(0|[1-9][0-9]{0,15})")
_SNAPSHOT: Final = re.compile(r"snapshot(?::(0|[1-9][0-9]{0,18}))?")
_START_HINT = "use --from earliest, latest, timestamp:<epoch millis> or snapshot[:<Delta version>]"
OUTPUTS_HINT = "use --output table, jsonl, jsonl:PATH, delta:PATH, parquet:PATH or a PATH"
# ``word:rest`` where ``rest`` is no URI authority (``s3a://…`` is a path Spark reads) and ``word``
# no drive letter (``c:/x``): a kind that was meant, not a file name; a path with a colon is
# written ./name:x or delta:name:x.
_KIND_PREFIX: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]+:(?!//)")


def choice(value: str, valid: Iterable[str], flag: str) -> str:
    options = tuple(valid)
    if value not in options:
        raise InvalidInputError(
            f"{flag} must be one of {', '.join(options)}, not {value!r}",
            hint=f"e.g. {flag} {options[0]}",
        )
    return value


# -- where a log read starts ---------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """``--from``: the log's earliest or latest offsets, the first offsets at or after a time, or
    a Delta snapshot (hybrid read: ``version`` None is the newest epoch commit whose offsets are
    still in the log)."""

    kind: Literal["earliest", "latest", "timestamp", "snapshot"]
    timestamp_ms: int | None = None
    version: int | None = None

    def describe(self) -> str:
        if self.kind == "timestamp":
            return f"timestamp:{self.timestamp_ms}"
        if self.kind == "snapshot" and self.version is not None:
            return f"snapshot:{self.version}"
        return self.kind


def parse_start(text: str) -> Start:
    """``--from`` as written: earliest | latest | timestamp:MS | snapshot | snapshot:VERSION."""
    value = text.strip()
    if value in ("earliest", "latest"):
        return Start(value)  # type: ignore[arg-type]
    if m := _TIMESTAMP.fullmatch(value):
        return Start("timestamp", timestamp_ms=int(m.group(1)))
    if m := _SNAPSHOT.fullmatch(value):
        return Start("snapshot", version=None if m.group(1) is None else int(m.group(1)))
    raise InvalidInputError(f"--from {text!r} is not a start position", hint=_START_HINT)


def default_start(log: LogStoreSpec, *, follow: bool) -> Start:
    """Without ``--from``: a bounded read shows the whole log (``earliest``: a read from ``latest``
    that stops at the end offsets would show nothing); a following read starts where the table's
    ``scan.startup.mode`` says (``latest`` unless configured; offsets of a consumer group are not
    logstore's, so ``group-offsets`` / ``specific-offsets`` start at ``earliest``)."""
    if not follow:
        return Start("earliest")
    if log.startup_mode is StartupMode.LATEST:
        return Start("latest")
    if log.startup_mode is StartupMode.TIMESTAMP and log.startup_timestamp_millis is not None:
        return Start("timestamp", timestamp_ms=log.startup_timestamp_millis)
    return Start("earliest")


# -- read level and changelog mode ----------------------------------------------------------------


def resolve_level(log: LogStoreSpec, *, consistent: bool, consistency: str | None) -> Level:
    """The read level: ``--consistency`` as given; ``--consistent`` the table's configured level,
    strengthened to ``committed`` when that is ``none``; neither: the table's level as configured."""
    if consistent and consistency is not None:
        raise InvalidInputError(
            "--consistent and --consistency cannot be combined",
            hint="--consistent is the table's own level (committed when it has none); "
            "--consistency names one",
        )
    if consistency is not None:
        return choice(consistency, LEVELS, "--consistency")  # type: ignore[return-value]
    configured = Consistency(log.consistency)
    if consistent and configured is Consistency.NONE:
        return "committed"
    return configured.value


def check_changelog(mode: str, level: Level) -> Changelog:
    """``--changelog-mode``; ``append-only`` keeps inserts only, so it cannot show ``eventual``'s
    retractions (a retraction of an insert is a delete)."""
    choice(mode, CHANGELOG_MODES, "--changelog-mode")
    if mode == "append-only" and level == "eventual":
        raise InvalidInputError(
            "--changelog-mode append-only cannot be combined with the eventual read level",
            hint="eventual retracts the records of a failed attempt with deletes, which an "
            "append-only changelog cannot carry: read with --consistency committed (the same "
            "rows, shown once their epoch commits), or with --changelog-mode all-kinds",
        )
    return mode  # type: ignore[return-value]


def keeps(kind: RowKind, changelog: Changelog) -> bool:
    """Whether a change of ``kind`` is part of the output in ``changelog`` mode."""
    return changelog == "all-kinds" or kind is RowKind.INSERT


# -- --as-of ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AsOf:
    """``--as-of`` for the delta-rs engine: a Delta version, or a time in epoch milliseconds."""

    version: int | None = None
    timestamp_ms: int | None = None


AS_OF_HINT: Final = (
    "give a version (3) or a timestamp: '2026-11-21', '2026-11-21 10:30:00', "
    "'2026-11-21T10:30:00Z', '2026-11-21T10:30:00+01:00' (without a zone: local time, as Spark "
    "takes it)"
)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def parse_as_of(text: str) -> AsOf:
    """A version (digits) or an ISO 8601 date or time; one without a zone is local time, as
    Spark's default session time zone (the machine's) takes it."""
    value = text.strip()
    if value.isdigit():
        return AsOf(version=int(value))
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(
            f"--as-of {text!r} is neither a Delta version nor a timestamp", hint=AS_OF_HINT
        ) from None
    return AsOf(timestamp_ms=(at.astimezone(UTC) - _EPOCH) // timedelta(milliseconds=1))


# -- output ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputSpec:
    """``--output``: a Rich table on a terminal, JSON lines on stdout or in a new file, or a Delta /
    Parquet path."""

    kind: OutputKind
    path: str | None = None

    @property
    def to_stdout(self) -> bool:
        return self.path is None

    @property
    def streamed(self) -> bool:
        """Changes written one by one as they come (stdout or a JSON lines file), which both
        engines do; Delta and Parquet are written by Spark at the end."""
        return self.kind in ("table", "jsonl")


def parse_output(text: str | None, *, stdout_is_terminal: bool) -> OutputSpec:
    """``table``, ``jsonl``, ``jsonl:PATH``, ``delta:PATH``, ``parquet:PATH`` or a bare PATH
    (Parquet when it ends in ``.parquet``, else Delta). Without ``--output``: a table on a terminal,
    JSON lines otherwise (a pipe or a file gets one object per line). A path is used exactly as
    typed (no ``~``, no variables expanded). Another ``KIND:`` prefix is an error naming the valid
    outputs: taken as a Delta path, it reached Spark as an unknown URI scheme."""
    if text is None:
        return OutputSpec("table" if stdout_is_terminal else "jsonl")
    if text in ("table", "jsonl"):
        return OutputSpec(text)  # type: ignore[arg-type]
    kind: OutputKind
    prefix, sep, rest = text.partition(":")
    if sep and prefix in ("jsonl", "delta", "parquet"):
        kind, path = prefix, rest  # type: ignore[assignment]
    elif _KIND_PREFIX.match(text):
        raise InvalidInputError(
            f"--output {text!r}: {prefix!r} is not an output kind",
            hint=f"{OUTPUTS_HINT} (a path holding ':' as ./{text} or delta:{text})",
        )
    else:
        path = text
        kind = "parquet" if text.lower().endswith(".parquet") else "delta"
    if not path.strip():
        raise InvalidInputError(f"--output {text!r} names no path", hint=OUTPUTS_HINT)
    if "\x00" in path:
        raise InvalidInputError("--output holds a NUL character", hint="give a plain path")
    return OutputSpec(kind, path)


# -- hybrid read ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HybridStart:
    """Where a hybrid read continues after the snapshot at Delta ``version``: the end offsets the
    epoch committed as that version recorded, and per writer the highest epoch the snapshot holds
    (those epochs are skipped at every level)."""

    version: int
    offsets: Mapping[int, int]
    committed_through: Mapping[str, int] = field(default_factory=dict)


def hybrid_start(
    commits: Iterable[EpochCommit],
    version: int | None,
    log_start: Mapping[int, int] | None = None,
) -> HybridStart:
    """The start of a hybrid read from snapshot ``version`` (None: the newest epoch commit whose
    offsets are all still in the log).

    ``commits`` are the table's epoch commits (``catalog.epochs.epoch_commits``, any order). The
    snapshot must be an epoch commit: only those record the log's offsets. ``log_start`` is the
    topic's earliest offset per partition (None: not checked); a snapshot whose recorded offsets
    retention deleted is refused (RecordsDeletedError, exit 1) before anything is read: reading
    on from the oldest record left would miss changes between the snapshot and it. Per writer, the
    highest epoch committed at or before the snapshot is resolved for the reader.
    """
    found = sorted(commits, key=lambda c: c.version, reverse=True)
    if not found:
        raise InvalidInputError(
            "the table has no ingest epoch in its Delta log to start a hybrid read from",
            hint="ingest into the table first, or read with --from earliest",
        )
    usable = found if log_start is None else usable_snapshots(found, log_start)
    if version is None:
        if not usable:
            raise _snapshot_gone(found[0], log_start or {}, None, default=True)
        at = usable[0]
    else:
        exact = [c for c in found if c.version == version]
        if not exact:
            near = ", ".join(str(c.version) for c in found[:5])
            raise InvalidInputError(
                f"Delta version {version} is not an ingest epoch's commit, so it records no "
                "log offsets to continue from",
                hint=f"start from one that is (newest first: {near}), or --from snapshot for the "
                "newest",
            )
        at = exact[0]
        if log_start is not None and at not in usable:
            raise _snapshot_gone(at, log_start, usable[-1] if usable else None)
    through: dict[str, int] = {}
    for commit in found:
        if commit.version <= at.version:
            writer = commit.epoch.writer
            through[writer] = max(through.get(writer, -1), commit.epoch.epoch)
    return HybridStart(at.version, dict(at.offsets), through)


def _snapshot_gone(
    at: EpochCommit,
    log_start: Mapping[int, int],
    oldest: EpochCommit | None,
    *,
    default: bool = False,
) -> RecordsDeletedError:
    gone = gone_offsets(at, log_start)
    where = "; ".join(
        f"partition {p} offset {o} (the log now starts at {log_start[p]})" for p, o in gone.items()
    )
    what = "the newest snapshot" if default else "the snapshot"
    message = (
        f"{what}, Delta version {at.version}, continues the log at offsets the topic's "
        f"retention deleted: {where}; a hybrid read from it would miss changes"
    )
    if oldest is not None:
        hint = (
            f"start from a snapshot the log still continues: versions {oldest.version} and newer "
            f"(--from snapshot:{oldest.version} is the oldest; --from snapshot picks the newest)"
        )
    else:
        hint = (
            "no snapshot's offsets are left in the log: read the Delta table (--mode file), or "
            "the log alone (--from earliest); give the topic a retention.ms longer than the "
            "time between ingests (alter-table --set 'log.topic.retention.ms=...')"
        )
    return RecordsDeletedError(message, hint=hint)


# -- one emitted change as a JSON line ------------------------------------------------------------


def change_json(
    kind: RowKind,
    row: Mapping[str, Any],
    schema: RowSchema,
    *,
    meta: Mapping[str, Any] | None = None,
) -> str:
    """``{"kind":"+I","row":{…}}`` plus metadata keys (``partition``, ``offset``, ``epoch``,
    ``version``, …) that consumers may ignore. The row is its wire-format JSON (the exact bytes
    the log holds for it); a ``-D`` may hold only the key columns."""
    body = encode_row(row, schema, partial=kind is RowKind.DELETE).decode("utf-8")
    text = f'{{"kind":"{kind.value}","row":{body}'
    for name, value in (meta or {}).items():
        text += f",{json.dumps(name)}:{json.dumps(value, separators=(',', ':'))}"
    return text + "}"


class ChangeLines:
    """``change_json`` for many changes of one table, with the column encoders built once."""

    def __init__(self, schema: RowSchema) -> None:
        from logstore_cli.read.fold import CanonicalRows

        self.schema = schema
        self._rows = CanonicalRows(schema)
        self._width = len(schema.names)
        self._names = schema.names

    def line(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
        if len(row) < self._width and kind is not RowKind.DELETE and set(row) <= set(self._names):
            # Decoded before the reader learnt of an added column: it has none, so null.
            row = {name: row.get(name) for name in self._names}
        if len(row) != self._width:  # a -D's key-only row image, or something to name the fault of
            return change_json(kind, row, self.schema, meta=meta)
        text = f'{{"kind":"{kind.value}","row":{self._rows.row(row).decode("utf-8")}'
        for name, value in meta.items():
            text += f',"{name}":{value}' if type(value) is int else f",{_json(name, value)}"
        return text + "}"


def _json(name: str, value: Any) -> str:
    return f"{json.dumps(name)}:{json.dumps(value, separators=(',', ':'))}"


def emission_meta(partition: int, emission: Emission) -> dict[str, Any]:
    """The metadata keys of an emitted log change."""
    epoch = emission.record.epoch
    meta: dict[str, Any] = {"partition": partition, "offset": emission.offset}
    meta["writer"], meta["epoch"] = epoch.writer, epoch.epoch
    if emission.retraction:
        meta["retraction"] = True
    return meta
