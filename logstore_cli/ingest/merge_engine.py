"""Which engine commits an epoch's MERGE to Delta: delta-rs in the job's Python process, or
Spark's MERGE. Pure: what the table and the epoch are in, a choice and its reason out.

delta-rs merges an epoch of 20,000 changes into a 100,000-row table in ~0.1 s where Spark's MERGE
takes ~2.8 s, and into 10M rows in ~2.7 s against ~10 s (``scripts/bench_merge_engines.py``):
Spark's MERGE pays a fixed cost of planning and several jobs, and with an insert clause rewrites
every touched file through a full outer join that shuffles all its rows. But delta-rs runs in one
process: it takes an epoch the driver can hold, into a table whose files it can read, with only
the table features it writes. Anything else, and every table a user asks Spark for, goes through
Spark, as before. Both commit with the same transaction id, metadata and checks (design.md §8).
A table without a key appends its epochs' rows, by delta-rs too under the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

AUTO: Final = "auto"
SPARK: Final = "spark"
DELTA_RS: Final = "delta-rs"
CHOICES: Final = (AUTO, SPARK)  # what a user may ask for (``--delta-engine``)

# The epoch's MERGE source (or a keyless table's appended rows) is collected to the driver (Arrow)
# for delta-rs: a bound on its rows.
MAX_ROWS: Final = 1_000_000
# delta-rs reads the files the epoch touches in this process: a bound on the table's bytes (the
# files a random-key epoch touches are all of them). Past it a cluster's executors do the work.
MAX_TABLE_BYTES: Final = 1 << 30

# The writer features delta-rs 1.6 writes as Delta does (logstore's tables have the first three;
# a TIMESTAMP_NTZ column adds timestampNtz). A table with any other one (deletion vectors, column
# mapping, row tracking, identity columns, clustering, …) goes through Spark.
WRITER_FEATURES: Final = frozenset(
    {"invariants", "changeDataFeed", "appendOnly", "checkConstraints", "timestampNtz"}
)
READER_FEATURES: Final = frozenset({"timestampNtz"})
# A column name delta-rs takes between backticks as it is (no dot: a dot names a nested field).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class TableFacts:
    """What the choice needs to know of the table, from its Delta log (delta-rs reads it)."""

    min_reader: int
    min_writer: int
    reader_features: frozenset[str] | None  # None below the table-features protocol (3 / 7)
    writer_features: frozenset[str] | None
    generated_columns: bool  # a column carries a generation or identity expression
    table_bytes: int


@dataclass(frozen=True)
class Choice:
    engine: str  # SPARK or DELTA_RS
    reason: str  # why, for a log line: "" when delta-rs writes it

    @property
    def delta_rs(self) -> bool:
        return self.engine == DELTA_RS


def parse_choice(text: str) -> str:
    """``--delta-engine``'s value; ValueError naming the valid ones."""
    value = text.strip().lower()
    if value not in CHOICES:
        raise ValueError(f"unknown Delta engine {text!r}: use one of {', '.join(CHOICES)}")
    return value


def spark_regardless(requested: str) -> str | None:
    """Why Spark commits every epoch of this job, decided before the table is opened; None when
    delta-rs may (``choose`` then decides each epoch)."""
    if requested == SPARK:
        return "asked for (--delta-engine spark)"
    return None


def choose(*, columns: Sequence[str], rows: int, table: TableFacts, append: bool = False) -> Choice:
    """The engine of one epoch's commit, once ``spark_regardless`` said delta-rs may: delta-rs when
    it can write this table and epoch, else Spark, saying why. ``append``: a table without a key,
    whose epoch is appended (no file of the table is read: its size does not matter)."""
    odd = [c for c in columns if not _PLAIN_NAME.fullmatch(c)]
    if odd:
        return Choice(SPARK, f"column {odd[0]!r} is not a plain name delta-rs takes as it is")
    unknown = _unwritten_features(table)
    if unknown:
        return Choice(SPARK, f"delta-rs does not write table feature(s) {', '.join(unknown)}")
    if table.generated_columns:
        return Choice(SPARK, "the table has generated or identity columns")
    if rows > MAX_ROWS:
        return Choice(SPARK, f"the epoch's {rows:,} changes are more than {MAX_ROWS:,}")
    if not append and table.table_bytes > MAX_TABLE_BYTES:
        return Choice(SPARK, f"the table's files hold {table.table_bytes:,} bytes, more than 1 GiB")
    return Choice(DELTA_RS, "")


def _unwritten_features(table: TableFacts) -> list[str]:
    """The table's features delta-rs does not write, sorted; legacy protocols by their versions."""
    found: set[str] = set()
    if table.reader_features is not None:
        found |= set(table.reader_features) - READER_FEATURES
    elif table.min_reader >= 2:
        found.add("columnMapping")  # reader version 2: column mapping
    if table.writer_features is not None:
        found |= set(table.writer_features) - WRITER_FEATURES
    elif table.min_writer >= 5:
        found.add("columnMapping" if table.min_writer == 5 else "identityColumns")
    return sorted(found)


def has_generated_columns(fields: Iterable[object]) -> bool:
    """Whether a Delta schema's top-level fields (its JSON ``fields``) carry a generation or an
    identity expression in their metadata."""
    for field in fields:
        meta = field.get("metadata") if isinstance(field, dict) else None
        if isinstance(meta, dict) and any(
            k == "delta.generationExpression" or k.startswith("delta.identity.") for k in meta
        ):
            return True
    return False
