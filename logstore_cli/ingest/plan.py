"""What an ingest job does, decided before Spark starts: the source, the stores it writes, the op
and sequence columns, the paths under the table. Pure: no I/O.

The Spark side (``jobs/sources.py``) turns every source into one *normalized change stream*, a
streaming DataFrame with the table's columns followed by the columns named here (``KIND`` …
``ORIGIN``); ``jobs/ingest.py`` writes it to the stores.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from logstore_cli.errors import InvalidInputError
from logstore_cli.logformat.wire import RowKind
from logstore_cli.model import (
    COMPACTION_KEY,
    DEFAULT_COMPACTION_EPOCHS,
    ChangelogMode,
    EmitMode,
    TableSpec,
)
from logstore_cli.names import identifier_problem

# -- the normalized change stream ---------------------------------------------------------------

KIND = "_ls_kind"  # '+I' '-U' '+U' '-D', or null: an upsert (the input has no op column)
SEQ = "_ls_seq"  # the sequence column's value (orders changes of a key within an epoch), or null
ARRIVAL = "_ls_arrival"  # a struct ordering records as they arrived (file, then line; offsets)
ERROR = "_ls_error"  # why the record is quarantined; null for a good record
RAW = "_ls_raw"  # the record as read (text), kept for quarantine; null for a good record
ORIGIN = "_ls_origin"  # where the record came from: a file path, kafka:topic/partition@offset
META_COLUMNS = (KIND, SEQ, ARRIVAL, ERROR, RAW, ORIGIN)

# Op values accepted in the op column: Flink's row kinds and Debezium's op codes.
OP_VALUES: Mapping[str, RowKind] = {
    "+I": RowKind.INSERT,
    "-U": RowKind.UPDATE_BEFORE,
    "+U": RowKind.UPDATE_AFTER,
    "-D": RowKind.DELETE,
    "c": RowKind.INSERT,
    "r": RowKind.INSERT,  # a snapshot read
    "u": RowKind.UPDATE_AFTER,
    "d": RowKind.DELETE,
}
DEFAULT_OP_COLUMN = "op"
# Kinds that remove the key's row from the table when they are its last change of an epoch.
REMOVING_KINDS = frozenset({RowKind.DELETE, RowKind.UPDATE_BEFORE})


def normalize_op(value: str | None) -> RowKind | None:
    """The row kind an op value means; None for a value that is not one (quarantined)."""
    if value is None:
        return None
    return OP_VALUES.get(value.strip())


# -- coercions ----------------------------------------------------------------------------------

# Values that would change on the way in. Each is quarantined unless ``--coerce`` names its rule;
# then it is stored changed and counted. docs/guide.md (Coercions) has the same list.
COERCIONS: Mapping[str, str] = {
    "invalid-utf8": "bytes that are not UTF-8 are stored as U+FFFD (JSON and kafka: sources)",
    "lone-surrogate": "a \\uD800-\\uDFFF escape without its pair is stored as '?' (JSON)",
    "decimal-round": "a number with more decimal places than its DECIMAL column is rounded "
    "half up (JSON, CSV)",
    "number-to-string": "a JSON number (also a bare NaN or Infinity) into a STRING column is "
    "stored as its text",
    "bool-to-string": "a JSON true/false into a STRING column is stored as the text",
    "json-to-string": "a JSON object or array into a STRING column is stored as its JSON text",
    "duplicate-key": "a record naming a field the job reads twice keeps the last value (JSON)",
}
ALL_COERCIONS = "all"
# The name of the streaming query's observed metrics holding the accepted coercions of each
# micro-batch, one count per rule (jobs/sources.py).
COERCION_METRICS = "logstore_coercions"


def parse_coercions(values: Sequence[str] | None) -> frozenset[str]:
    """``--coerce RULE[,RULE…]`` (repeatable; ``all`` for every rule): the coercions accepted."""
    found: set[str] = set()
    for value in values or ():
        for part in value.split(","):
            rule = part.strip().lower()
            if rule == ALL_COERCIONS:
                found.update(COERCIONS)
            elif rule in COERCIONS:
                found.add(rule)
            else:
                raise InvalidInputError(
                    f"unknown coercion {part.strip()!r} in --coerce {value!r}",
                    hint=f"valid values: {', '.join(COERCIONS)}, or {ALL_COERCIONS}",
                )
    return frozenset(found)


# -- sources ------------------------------------------------------------------------------------

FORMATS = ("json", "csv", "parquet")
_EXTENSIONS = {
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}


@dataclass(frozen=True)
class DirectorySource:
    """Files of one format in a directory; new files are picked up as they arrive."""

    path: str
    format: str | None  # None: inferred from the files' extensions when the job starts

    def describe(self) -> str:
        return f"directory {self.path}" + (f" ({self.format})" if self.format else "")


@dataclass(frozen=True)
class KafkaSource:
    """JSON values of a Kafka topic; brokers from --source-bootstrap, else the table's."""

    topic: str
    bootstrap: str | None

    def describe(self) -> str:
        return f"kafka:{self.topic}"


@dataclass(frozen=True)
class GenerateSource:
    """A synthetic change stream (demos, benchmarks): deterministic in the change's index."""

    rate: int  # changes per second (also the size of a micro-batch per trigger second)
    keys: int
    total: int | None  # stop after this many changes; None: until stopped
    update_ratio: float
    delete_ratio: float
    seed: int = 0

    def describe(self) -> str:
        total = f", {self.total} changes" if self.total is not None else ""
        return f"generated changes ({self.keys} keys, {self.rate}/s{total})"


SourceSpec = DirectorySource | KafkaSource | GenerateSource
_KAFKA_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def parse_source(
    text: str,
    *,
    format: str | None = None,
    source_bootstrap: str | None = None,
    generate: GenerateSource | None = None,
) -> SourceSpec:
    """``--source``: a directory, ``kafka:TOPIC`` or ``generate`` (options in ``generate``)."""
    if format is not None and format not in FORMATS:
        raise InvalidInputError(
            f"unknown --format {format!r}", hint=f"valid formats: {', '.join(FORMATS)}"
        )
    if text == "generate":
        if format is not None:
            raise InvalidInputError("--format applies to a directory source, not to 'generate'")
        return generate or GenerateSource(rate=1000, keys=100, total=None, update_ratio=0.5,
                                          delete_ratio=0.1)  # fmt: skip
    if text.startswith("kafka:"):
        topic = text.removeprefix("kafka:")
        if not _KAFKA_TOPIC.fullmatch(topic) or topic in {".", ".."}:
            raise InvalidInputError(
                f"--source {text!r}: not a Kafka topic name",
                hint="topic names use letters, digits, '.', '_' and '-' (at most 249)",
            )
        if format not in (None, "json"):
            raise InvalidInputError("a kafka: source reads JSON values; drop --format")
        return KafkaSource(topic, source_bootstrap)
    if not text or "\x00" in text:
        raise InvalidInputError(
            "--source is empty" if not text else "--source contains a NUL character",
            hint="give a directory, kafka:TOPIC or generate",
        )
    return DirectorySource(text, format)


def infer_format(names: Sequence[str]) -> str:
    """The format of a directory's files from their extensions; an error when they disagree or
    say nothing (hidden files and Spark's ``_``-prefixed files are not data)."""
    found: dict[str, str] = {}
    for name in names:
        base = PurePath(name).name
        if base.startswith((".", "_")):
            continue
        fmt = _EXTENSIONS.get(PurePath(base).suffix.lower())
        if fmt is not None:
            found.setdefault(fmt, base)
    if len(found) == 1:
        return next(iter(found))
    if not found:
        raise InvalidInputError(
            "cannot tell the source's format: no file with a known extension "
            f"({', '.join(sorted(_EXTENSIONS))})",
            hint="pass --format json|csv|parquet",
        )
    examples = ", ".join(f"{name} ({fmt})" for fmt, name in sorted(found.items()))
    raise InvalidInputError(
        f"the source directory mixes formats: {examples}", hint="pass --format to pick one"
    )


# -- stores and changelog -------------------------------------------------------------------------


@dataclass(frozen=True)
class Stores:
    """Which stores an ingest writes: the Delta table, the log, or both."""

    file: bool
    log: bool

    def describe(self) -> str:
        return ",".join(name for name, on in (("file", self.file), ("log", self.log)) if on)


EMIT_CHOICES = ("auto", "file", "log", "file,log")


def resolve_stores(table: TableSpec, emit: str | None) -> Stores:
    """The stores an ingest writes: ``--emit``, else the table's ``mixed-format.emit.mode``;
    ``auto`` is the file store, and the log store when the table has one (Paimon's ``log.system``
    tables always write both)."""
    choice = emit if emit is not None else (
        table.log_store.emit_mode.value if table.log_store else EmitMode.AUTO.value
    )  # fmt: skip
    normalized = ",".join(sorted(part.strip() for part in choice.split(",")))
    if normalized not in EMIT_CHOICES:
        raise InvalidInputError(
            f"unknown emit mode {choice!r}", hint=f"valid modes: {', '.join(EMIT_CHOICES)}"
        )
    stores = {
        "auto": Stores(file=True, log=table.log_store is not None),
        "file": Stores(file=True, log=False),
        "log": Stores(file=False, log=True),
        "file,log": Stores(file=True, log=True),
    }[normalized]
    if stores.log and table.log_store is None:
        raise InvalidInputError(
            f"table {table.name} has no log store, so it cannot emit to the log",
            hint="use --emit file, or turn the log store on with alter-table "
            "(log-store.enabled=true or log.system=kafka)",
        )
    return stores


def compact_every(table: TableSpec) -> int:
    """After how many committed epochs the job compacts the table (0: never); the DDL checked the
    value, so a table altered by hand to garbage falls back to the default."""
    value = table.properties.get(COMPACTION_KEY, "").strip()
    return int(value) if value.isdigit() else DEFAULT_COMPACTION_EPOCHS


def log_kinds(table: TableSpec) -> frozenset[RowKind]:
    """The kinds written to the log: ``upsert`` writes no ``-U`` (readers normalize by key)."""
    kinds = {RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE}
    if table.log_store is not None and table.log_store.changelog_mode is ChangelogMode.UPSERT:
        kinds.discard(RowKind.UPDATE_BEFORE)
    return frozenset(kinds)


def upsert_kind(table: TableSpec) -> RowKind:
    """The kind of a change read without an op column: an upsert (``+U``) on a table with a key,
    which readers fold by key like Paimon's upsert changelog; an insert on a table without one."""
    return RowKind.UPDATE_AFTER if table.primary_key else RowKind.INSERT


SEQUENCE_PROPERTY = "sequence.field"  # Paimon's name


@dataclass(frozen=True)
class Columns:
    """The op and sequence columns of the input. ``op_explicit``: named with --op-column, so it
    must exist in the source; the default ``op`` is used only when the source has it."""

    op: str | None
    op_explicit: bool
    sequence: str | None


def resolve_columns(table: TableSpec, op_column: str | None, sequence: str | None) -> Columns:
    """--op-column and --sequence-column (else the table's ``sequence.field``), checked against
    the table: the op column is not a table column; the sequence column may be either."""
    op: str | None
    if op_column is not None:
        if not op_column.strip():
            raise InvalidInputError("--op-column is empty")
        if table.column(op_column) is not None:
            raise InvalidInputError(
                f"--op-column {op_column!r} is a column of table {table.name}",
                hint="the op column says what a record does and is not stored; "
                "name the input's op column",
            )
        op, explicit = op_column, True
    else:
        op = DEFAULT_OP_COLUMN if table.column(DEFAULT_OP_COLUMN) is None else None
        explicit = False
    seq = sequence if sequence is not None else table.properties.get(SEQUENCE_PROPERTY)
    if seq is not None and not seq.strip():
        raise InvalidInputError("--sequence-column is empty")
    if seq is not None and seq == op:
        raise InvalidInputError(f"column {seq!r} cannot be both the op and the sequence column")
    return Columns(op, explicit, seq)


# -- the job's files under the table ------------------------------------------------------------

DEFAULT_JOB = "ingest"
STATE_DIR = "_logstore"  # under the Delta table; '_' keeps Delta's VACUUM out of it


def check_job_name(job: str) -> str:
    problem = identifier_problem(job, "job")
    if problem is not None:
        raise InvalidInputError(problem, hint="e.g. --job orders-cdc")
    return job


@dataclass(frozen=True)
class JobPaths:
    """Where one job of one table keeps its files, all under ``<table>/_logstore``."""

    table: str  # the table's directory (a path or a URI)
    job: str
    checkpoint_override: str | None = None

    @property
    def state(self) -> str:
        return f"{self.table.rstrip('/')}/{STATE_DIR}"

    @property
    def checkpoint(self) -> str:
        return self.checkpoint_override or f"{self.state}/checkpoints/{self.job}"

    @property
    def quarantine(self) -> str:
        return f"{self.state}/quarantine/{self.job}"

    @property
    def lease(self) -> str:
        return f"{self.state}/lease.json"
