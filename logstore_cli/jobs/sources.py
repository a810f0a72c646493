"""An ingest source as the *normalized change stream* of ``ingest/plan.py``: a streaming DataFrame
with the table's columns (table order, table types) followed by ``plan.META_COLUMNS``.

How each source is read, and why:

- **JSON directories** are read as text (JSON Lines, UTF-8) and parsed with ``from_json`` in
  ``PERMISSIVE`` mode with a corrupt-record field: every quarantined record keeps its line exactly,
  also one that parses but breaks a rule (no primary key, an unknown op). Spark's own JSON source
  would parse about 1.3-1.5x faster (measured on 1M lines, 120 MB, 2 busy cores: 3.8-4.6 s against
  5.8-6.0 s for the whole normalized stream) but keeps the text only of records that do not parse.
  Fields the table does not name are ignored by the parser, as is anything after the first value
  on a line; the up-front check samples the files present for fields the table does not have.
- **CSV directories** use Spark's CSV source (columns matched by the header, quoted newlines with
  ``multiLine``) in ``PERMISSIVE`` mode: a row that does not parse (a value of the wrong type, too
  many or too few fields) keeps its line; one that parses but breaks a rule is rendered back as
  CSV (the same fields in the same order).
- **Parquet** is read with the types of the files present at start, cast to the table's types (an
  up-front check allows only casts that lose nothing); ``_ls_raw`` is the row rendered as JSON.
- **Kafka** values are parsed with ``from_json``; the value itself is the raw text.

Only a malformed record's text is parsed again, once per typed column, to name the column at
fault: good records pay nothing for the reasons.

Values that would change on the way in (``plan.COERCIONS``) are found with Spark expressions,
no Python per record: DECIMAL columns are parsed with every decimal place Spark holds and
compared with the column's type (a rounding), JSON's STRING columns are parsed as VARIANT (whose
type tells a string from a number, boolean or object), and the raw text is checked for bytes that
are not UTF-8 (``is_valid_utf8``), lone surrogate escapes (a regex, only on lines holding
``\\u``) and top-level names given twice (``json_object_keys``, one more pass over the line).
A record with one is quarantined unless ``--coerce`` accepts the rule; accepted ones are counted
per rule in the query's observed metrics.

``_ls_arrival`` orders the records of a micro-batch as they arrived: for files (modification time,
path, split start, position), the position being parquet's row index, or for JSON and CSV
``monotonically_increasing_id()``, which counts the rows of a task in the order the split is read.
Spark refuses that function in a streaming plan (its ids are not stable across batches, which this
ordering does not need), so JSON and CSV streams are built on a clone of the session with that one
check off: session confs set on ``spark`` after ``open_source`` do not reach the query.

Two traps of Spark 4.0.1's file source are closed here: paths with glob characters are refused (it
would read such files more than once, SPARK-58518), and ``maxFileAge`` defaults to 100 years
instead of 7 days (it skips, without a word, a file whose modification time is that much older
than the newest file it has seen, e.g. one copied in with its time kept).

The up-front sample opens no FIFO, socket or device (a FIFO would wait for a writer for ever; Spark's
own reader never opens them, as files of length 0), and a line nested too deeply for Python's JSON
parser is passed over there (the stream quarantines it, Jackson's nesting limit being lower).
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
    _parse_datatype_string,
)

from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.ingest import plan
from logstore_cli.ingest.plan import DirectorySource, GenerateSource, KafkaSource, SourceSpec
from logstore_cli.logformat.wire import RowKind
from logstore_cli.model import TableSpec

# logstore's own source option (not passed to Spark): drop source columns the table does not have
# instead of refusing to start.
IGNORE_UNKNOWN_COLUMNS = "ignoreUnknownColumns"
# The up-front look at a directory: the first files by name, the head of each.
SAMPLE_FILES = 16
SAMPLE_BYTES = 64 * 1024
MAX_LISTED = 2_000  # directory entries looked at, for the format and the sample
GOT_CHARS = 80  # a bad value is quoted in the reason up to this many characters

_CORRUPT = "_ls_corrupt_record"
# Intermediate columns, dropped before the stream is returned.
_OP = "__ls_op"
_MALFORMED = "__ls_malformed"
_BAD_TEXT = "__ls_bad_text"
_PARSED = "__ls_parsed"
_RAW = "__ls_raw"
_SOURCE = "__ls_source"  # the record's source columns as a struct, rendered for quarantine
_COERCE_ERR = "__ls_coerce_error"  # why a value would change on the way in (rules not accepted)
_ACCEPTED = "__ls_coerced_"  # + index: an accepted coercion happened to this record
_RESERVED_PREFIXES = ("_ls_", "__ls_")

# Options logstore sets itself (a user's value would change what the stream means), and why.
_QUARANTINE = "malformed records are quarantined, never dropped or fatal"
_OWN_FILE_OPTIONS = {
    "mode": _QUARANTINE,
    "columnnameofcorruptrecord": _QUARANTINE,
    "enforceschema": "CSV columns are matched by the names in the header",
    "path": "the directory is --source",
    "wholetext": "JSON is read line by line",
}
_OWN_KAFKA_OPTIONS = {
    "subscribe": "the topic is --source kafka:TOPIC",
    "subscribepattern": "the topic is --source kafka:TOPIC",
    "assign": "the topic is --source kafka:TOPIC",
    "kafka.bootstrap.servers": "the brokers are --source-bootstrap",
}
# Kafka client properties Spark's Kafka source refuses or that make no sense for a consumer it
# manages (serializers come with producer settings of the table's DDL; a group id meant for the
# table's log readers would make Spark's consumers share it: Spark makes its own per query).
_SKIPPED_KAFKA_CLIENT = {
    "bootstrap.servers",
    "group.id",
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "auto.offset.reset",
    "enable.auto.commit",
    "interceptor.classes",
}
_VALID_OPS = ", ".join(plan.OP_VALUES)
_GLOB_CHARS = frozenset("{}[]*?\\")
# Spark 4.0.1's file source (FileStreamSource.getBatch with globbing off) reads every file of a
# micro-batch once more for each file whose path holds a glob character: SPARK-58518.
_GLOB_BUG = "Spark 4.0.1 reads the files of such a source more than once (SPARK-58518)"
# Spark skips files whose modification time is older than this before the newest file it has seen
# (default 7 days: a file copied in with its old time would be dropped without a word).
_MAX_FILE_AGE = "36500d"
_NOT_IN_CSV = (ArrayType, MapType, StructType)


@dataclass(frozen=True)
class SourceRequest:
    """What ``open_source`` reads and for which table."""

    spec: SourceSpec  # plan.DirectorySource | plan.KafkaSource | plan.GenerateSource
    table: TableSpec
    columns: plan.Columns  # from plan.resolve_columns
    # --source-option K=V: options of Spark's reader (and of logstore: IGNORE_UNKNOWN_COLUMNS)
    options: Mapping[str, str] = field(default_factory=dict)
    kafka_bootstrap: str | None = None  # for a KafkaSource without its own brokers: the table's
    kafka_client: Mapping[str, str] = field(default_factory=dict)  # Java-style client properties
    once: bool = False  # --once: a generate source makes all its changes available at once
    coerce: frozenset[str] = frozenset()  # --coerce: plan.COERCIONS rules accepted (and counted)


def open_source(spark: SparkSession, request: SourceRequest) -> DataFrame:
    """The normalized change stream of ``request.spec``; raises InvalidInputError (before any
    query starts) when the source cannot fit the table."""
    spec = request.spec
    if isinstance(spec, GenerateSource):
        from logstore_cli.jobs.generate_source import generate_stream

        return generate_stream(spark, request)
    _check_table_names(request.table)
    if isinstance(spec, KafkaSource):
        return _open_kafka(spark, request, spec)
    return _open_directory(spark, request, spec)


# -- pure helpers -------------------------------------------------------------------------------

_INTEGRAL_DIGITS: dict[type[DataType], int] = {
    ByteType: 3,
    ShortType: 5,
    IntegerType: 10,
    LongType: 19,
}
_INTEGRAL_RANK: dict[type[DataType], int] = {ByteType: 1, ShortType: 2, IntegerType: 3, LongType: 4}
_TEXT_SOURCES = (
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
    TimestampNTZType,
)


def can_hold(source: DataType, target: DataType) -> bool:
    """Whether every value of ``source`` converts to ``target`` without loss (widening casts:
    integers to larger integers or to decimals with enough digits, float to double, decimals to
    decimals with at least as many digits on both sides of the point, dates to timestamps, and any
    scalar to string). Complex types must match exactly (field names included)."""
    if source.simpleString() == target.simpleString():
        return True
    s, t = type(source), type(target)
    if s in _INTEGRAL_RANK:
        if t in _INTEGRAL_RANK:
            return _INTEGRAL_RANK[s] <= _INTEGRAL_RANK[t]
        if isinstance(target, DecimalType):
            return target.precision - target.scale >= _INTEGRAL_DIGITS[s]
        if t is DoubleType:
            return s is not LongType  # a long has more digits than a double's 53 bits
        if t is FloatType:
            return s in (ByteType, ShortType)
    if s is FloatType and t is DoubleType:
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return (
            target.scale >= source.scale
            and target.precision - target.scale >= source.precision - source.scale
        )
    if s is DateType and t in (TimestampType, TimestampNTZType):
        return True
    return t is StringType and isinstance(source, _TEXT_SOURCES)


def sample_value_type(values: Iterable[object]) -> str:
    """The Spark type of an input-only sequence column from sampled values: ``bigint`` for whole
    numbers (also when nothing was sampled), ``double`` for other numbers, else ``string``."""
    kinds = {_value_kind(v) for v in values if v is not None}
    if kinds <= {"int"}:
        return "bigint"
    if kinds <= {"int", "float"}:
        return "double"
    return "string"


def _value_kind(value: object) -> str:
    if isinstance(value, bool):
        return "other"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d{1,18}", text):
            return "int"
        if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
            return "float"
    return "other"


def json_sample(data: bytes, *, complete: bool) -> list[dict[str, Any]]:
    """The JSON objects of the head of a JSON Lines file (the last line is dropped when the head
    is not the whole file: it may be cut). Lines that are not objects are skipped: the stream
    quarantines them."""
    lines = data.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()
    if not complete and lines:
        lines.pop()
    found: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # deep nesting: the stream quarantines the record
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


@dataclass(frozen=True)
class CsvDialect:
    """The CSV reader options that decide how a header line splits (Spark's defaults)."""

    sep: str = ","
    quote: str = '"'
    escape: str = "\\"
    encoding: str = "utf-8"

    @classmethod
    def of(cls, options: Mapping[str, str]) -> CsvDialect:
        quote, escape = option(options, "quote"), option(options, "escape")
        return cls(
            sep=option(options, "sep") or option(options, "delimiter") or cls.sep,
            quote=cls.quote if quote is None else quote,
            escape=cls.escape if escape is None else escape,
            encoding=option(options, "encoding") or option(options, "charset") or cls.encoding,
        )


def csv_rows(data: bytes, *, complete: bool, dialect: CsvDialect) -> list[list[str]]:
    """The rows of the head of a CSV file as Python's csv module reads them (for the header and
    a sample of values); the last line is dropped when the head is not the whole file, unless it
    is the only one."""
    try:
        text = data.decode(dialect.encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    lines = text.removeprefix("\ufeff").splitlines()
    if not complete and len(lines) > 1:
        lines.pop()
    if len(dialect.sep) != 1:  # Python's csv takes one character; Spark takes more
        return [line.split(dialect.sep) for line in lines if line.strip()]
    reader = csv.reader(
        io.StringIO("\n".join(lines)),
        delimiter=dialect.sep,
        quotechar=dialect.quote or None,
        escapechar=dialect.escape or None,
        quoting=csv.QUOTE_MINIMAL if dialect.quote else csv.QUOTE_NONE,
    )
    return [row for row in reader if row]


def glob_characters(text: str) -> str:
    """The characters of ``text`` Hadoop reads as a glob pattern (in order, once each)."""
    return "".join(dict.fromkeys(c for c in text if c in _GLOB_CHARS))


def option(options: Mapping[str, str], key: str) -> str | None:
    """A reader option by name, case-insensitive like Spark's."""
    wanted = key.lower()
    for name, value in options.items():
        if name.lower() == wanted:
            return value
    return None


def _is_true(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def _names(names: Iterable[str]) -> str:
    return ", ".join(names) or "(none)"


def _check_table_names(table: TableSpec) -> None:
    clashes = [c.name for c in table.columns if c.name.lower().startswith(_RESERVED_PREFIXES)]
    if clashes:
        raise InvalidInputError(
            f"table {table.name} has columns logstore reserves for its change stream: "
            f"{_names(clashes)}",
            hint="columns starting with '_ls_' cannot be ingested; rename them",
        )


def _check_own_options(options: Mapping[str, str], own: Mapping[str, str], what: str) -> None:
    taken = sorted(k for k in options if k.lower() in own)
    if taken:
        raise InvalidInputError(
            f"--source-option {taken[0]} cannot be set for a {what} source: logstore sets it "
            f"({own[taken[0].lower()]})",
            hint="drop the option",
        )


# -- what the source holds, mapped onto the table -------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """One column the reader parses: its name in the source and its type there."""

    name: str
    type: DataType
    label: str  # the type as a reason names it ("int", "decimal(5,2)")


@dataclass(frozen=True)
class _Layout:
    """The reader's schema (source order) and where the table, op and sequence columns are in it."""

    fields: tuple[_Field, ...]  # in the source's order (also columns kept only for its shape)
    table: tuple[tuple[str, DataType, str | None], ...]  # table column, its type, source field
    op: str | None  # the source field holding the op
    seq: str | None  # the source field holding the sequence value
    seq_type: DataType

    @property
    def schema(self) -> StructType:
        return StructType([StructField(f.name, f.type) for f in self.fields])


def _table_types(table: TableSpec) -> dict[str, DataType]:
    return {c.name: _parse_datatype_string(c.type) for c in table.columns}


def _seq_table_column(request: SourceRequest) -> str | None:
    seq = request.columns.sequence
    if seq is None:
        return None
    column = request.table.column(seq)
    return column.name if column is not None else None


def _canonical_layout(
    request: SourceRequest, types: Mapping[str, DataType], seq_type: str = "bigint"
) -> _Layout:
    """The layout when the source's columns are not known: the table's columns named as in the
    table, then the op column and an input-only sequence column."""
    table, cols = request.table, request.columns
    fields = [_Field(c.name, types[c.name], c.type) for c in table.columns]
    op = cols.op
    if op is not None:
        fields.append(_Field(op, StringType(), "string"))
    seq_col = _seq_table_column(request)
    seq: str | None = seq_col
    if cols.sequence is not None and seq_col is None:
        seq = cols.sequence
        fields.append(_Field(seq, _parse_datatype_string(seq_type), seq_type))
    return _layout(request, types, fields, op, seq)


def _layout(
    request: SourceRequest,
    types: Mapping[str, DataType],
    fields: Sequence[_Field],
    op: str | None,
    seq: str | None,
) -> _Layout:
    by_lower = {f.name.lower(): f.name for f in fields}
    exact = {f.name for f in fields}
    table: list[tuple[str, DataType, str | None]] = []
    for column in request.table.columns:
        source = column.name if column.name in exact else by_lower.get(column.name.lower())
        table.append((column.name, types[column.name], source))
    seq_type: DataType = LongType()
    if seq is not None:
        seq_col = _seq_table_column(request)
        seq_type = types[seq_col] if seq_col is not None else next(
            f.type for f in fields if f.name == seq
        )  # fmt: skip
        if isinstance(seq_type, MapType | VariantType):
            raise InvalidInputError(
                f"the sequence column {request.columns.sequence!r} has type "
                f"{seq_type.simpleString()}, which cannot be ordered",
                hint="pick a number, timestamp or string column with --sequence-column",
            )
    return _Layout(tuple(fields), tuple(table), op, seq, seq_type)


def _unknown_columns_error(
    request: SourceRequest, unknown: Sequence[str], where: str, note: str = ""
) -> InvalidInputError:
    table = request.table
    return InvalidInputError(
        f"the source has columns that table {table.name} does not have: {_names(unknown)} "
        f"(in {where}); the table's columns: {_names(c.name for c in table.columns)}{note}",
        hint=f"rename them in the source, name the op column with --op-column, or pass "
        f"--source-option {IGNORE_UNKNOWN_COLUMNS}=true to leave them out",
    )


def _missing_key_error(
    request: SourceRequest, missing: Sequence[str], where: str
) -> InvalidInputError:
    return InvalidInputError(
        f"the source has no primary-key column {_names(repr(m) for m in missing)} of table "
        f"{request.table.name} (in {where})",
        hint=f"every record needs the table's primary key: {', '.join(request.table.primary_key)}",
    )


def _missing_column_error(
    flag: str, name: str, have: Iterable[str], where: str
) -> InvalidInputError:
    return InvalidInputError(
        f"{flag} {name!r} is not a column of the source (in {where}); its columns: {_names(have)}",
        hint=f"check the spelling, or drop {flag}",
    )


def _header_layout(
    request: SourceRequest,
    types: Mapping[str, DataType],
    names: Sequence[tuple[str, DataType | None]],
    where: str,
    *,
    ignore_unknown: bool,
    keep_unknown: bool,
) -> _Layout:
    """The layout of a source whose columns are known (a CSV header, parquet's schema), matched
    case-insensitively as Spark matches them. ``names`` carries the source's own types where it has
    them (parquet). ``keep_unknown``: columns the table does not have stay in the reader's schema
    (as text), which CSV's header check needs."""
    table, cols = request.table, request.columns
    seq_col = _seq_table_column(request)
    op_lower = cols.op.lower() if cols.op is not None else None
    seq_lower = cols.sequence.lower() if cols.sequence is not None else None
    fields: list[_Field] = []
    unknown: list[str] = []
    op: str | None = None
    seq: str | None = seq_col
    seen: dict[str, str] = {}
    for name, own_type in names:
        lower = name.lower()
        if lower in seen:
            raise InvalidInputError(f"the source names column {name!r} twice (in {where})")
        seen[lower] = name
        column = table.column(name)
        if column is not None:
            target = types[column.name]
            if own_type is not None and not can_hold(own_type, target):
                raise InvalidInputError(
                    f"column {name!r} of the source has type {own_type.simpleString()}, which "
                    f"does not fit the table's {column.type} (in {where})",
                    hint="convert the files, or change the table's column type",
                )
            fields.append(_Field(name, own_type or target, column.type))
            if seq_col == column.name:
                seq = name
        elif lower == op_lower:
            op = name
            op_type = own_type or StringType()
            fields.append(_Field(name, op_type, op_type.simpleString()))
        elif lower == seq_lower:
            seq = name
            seq_type = own_type or LongType()
            fields.append(_Field(name, seq_type, seq_type.simpleString()))
        else:
            unknown.append(name)
            if keep_unknown:
                fields.append(_Field(name, StringType(), "string"))
    have = [n for n, _ in names]
    if unknown and not ignore_unknown:
        raise _unknown_columns_error(request, unknown, where)
    if cols.op_explicit and op is None:
        raise _missing_column_error("--op-column", str(cols.op), have, where)
    if cols.sequence is not None and seq is None:
        raise _missing_column_error("--sequence-column", cols.sequence, have, where)
    present = {f.name.lower() for f in fields}
    missing = [k for k in table.primary_key if k.lower() not in present]
    if missing:
        raise _missing_key_error(request, missing, where)
    return _layout(request, types, fields, op, seq)


# -- the directory, through Hadoop's file system (what Spark's file source sees) ------------------


@dataclass(frozen=True)
class _File:
    name: str
    path: str  # as Hadoop names it (a URI), for opening and for Spark


def _java_failure(exc: Exception) -> tuple[str, str] | None:
    """The class and message of the JVM exception behind a py4j error; None for other errors."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    try:
        return str(java.getClass().getName()), str(java.getMessage())
    except Exception:  # the JVM is gone: nothing more to tell
        return "", str(exc).splitlines()[0] if str(exc) else ""


def _io_error(message: str, failure: tuple[str, str]) -> LogstoreError:
    name = failure[0].rsplit(".", 1)[-1]
    detail = f"{name}: {failure[1]}"
    if "AccessControl" in name or "AccessDenied" in name:
        return InvalidInputError(f"{message}: permission denied", detail=detail)
    return LogstoreError(message, detail=detail)


class _Directory:
    def __init__(self, spark: SparkSession, path: str) -> None:
        self._jvm: Any = cast(Any, spark._jvm)
        self.path = path
        try:
            self._hpath = self._jvm.org.apache.hadoop.fs.Path(path)
            self._fs = self._hpath.getFileSystem(spark._jsc.hadoopConfiguration())
            self._local = str(self._fs.getUri().getScheme()) == "file"
        except Exception as exc:
            failure = _java_failure(exc)
            if failure is None:
                raise
            raise InvalidInputError(
                f"--source {path!r} is not a path Spark can read: {failure[1]}",
                hint="give a directory (a local path or a URI such as hdfs://… or s3a://…)",
            ) from None

    def check(self) -> None:
        """The path is an existing directory."""
        try:
            status = self._fs.getFileStatus(self._hpath)
        except Exception as exc:
            failure = _java_failure(exc)
            if failure is None:
                raise
            if failure[0].endswith("FileNotFoundException"):
                raise InvalidInputError(
                    f"the source directory {self.path} does not exist",
                    hint="create it, or check the path (it is used as given: no ~ or variables "
                    "are expanded)",
                ) from None
            raise _io_error(f"cannot read the source directory {self.path}", failure) from None
        if not status.isDirectory():
            raise InvalidInputError(
                f"the source {self.path} is not a directory",
                hint="give the directory that holds the files (new files are picked up as they "
                "arrive)",
            )
        self._check_not_in_a_table()

    def _check_not_in_a_table(self) -> None:
        """The source is no Delta table's directory nor inside one: Spark would read the table's
        data files (removed ones too) as input and write old values back. The CLI checks a local
        source before Spark starts (also for a table below it); this covers every file system."""
        try:
            qualified = self._fs.makeQualified(self._hpath)
            current = qualified
            while current is not None:
                if self._fs.exists(self._jvm.org.apache.hadoop.fs.Path(current, "_delta_log")):
                    where = (
                        "it holds a _delta_log"
                        if current.equals(qualified)
                        else f"it is inside the Delta table {current.toString()}"
                    )
                    raise InvalidInputError(
                        f"the source directory {self.path} holds a table's own files: {where}",
                        hint="ingest from a directory of input files outside any Delta table",
                    )
                current = current.getParent()
        except InvalidInputError:
            raise
        except Exception as exc:
            failure = _java_failure(exc)
            if failure is None:
                raise
            raise _io_error(f"cannot read the source directory {self.path}", failure) from None

    def files(self, *, recursive: bool, glob: str | None) -> list[_File]:
        """The files Spark's file source would read (hidden and ``_`` files are not data), by
        path; subdirectories only with recursiveFileLookup. At most MAX_LISTED entries are looked
        at: each costs a few py4j calls (~0.3 ms), and a sample is all the checks need."""
        found: list[_File] = []
        pending = [self._hpath]
        try:
            while pending and len(found) < MAX_LISTED:
                statuses = self._fs.listStatus(pending.pop())
                for i in range(min(len(statuses), MAX_LISTED - len(found))):
                    status = statuses[i]
                    path = status.getPath()
                    name = str(path.getName())
                    if name.startswith((".", "_")):
                        continue
                    if status.isDirectory():
                        if recursive:
                            pending.append(path)
                    elif (glob is None or fnmatch.fnmatchcase(name, glob)) and self._regular(path):
                        found.append(_File(name, str(path.toString())))
        except Exception as exc:
            failure = _java_failure(exc)
            if failure is None:
                raise
            raise _io_error(f"cannot list the source directory {self.path}", failure) from None
        return sorted(found, key=lambda f: f.path)

    def _regular(self, path: Any) -> bool:
        """Not a FIFO, socket or device: opening a FIFO waits for a writer for ever, in a JVM call
        Ctrl-C cannot interrupt (the CLI names them in a warning before Spark starts). Hadoop's
        status calls every such entry a file; only a local file system has them. Spark's own
        reader never opens them: it skips files of length 0, which they all have."""
        if not self._local:
            return True
        try:
            return stat.S_ISREG(os.stat(str(path.toUri().getPath())).st_mode)
        except OSError:  # gone meanwhile
            return False

    def head(self, file: _File) -> tuple[bytes, bool] | None:
        """The first SAMPLE_BYTES of a file and whether that is all of it; None for a file gone
        meanwhile."""
        try:
            hpath = self._jvm.org.apache.hadoop.fs.Path(file.path)
            status = self._fs.getFileStatus(hpath)
            stream = self._fs.open(hpath)
            try:
                data = bytes(stream.readNBytes(SAMPLE_BYTES))
            finally:
                stream.close()
        except Exception as exc:
            failure = _java_failure(exc)
            if failure is None:
                raise
            if failure[0].endswith("FileNotFoundException"):
                return None
            raise _io_error(f"cannot read {file.path}", failure) from None
        return data, int(status.getLen()) <= len(data)


# -- directories --------------------------------------------------------------------------------


def _open_directory(
    spark: SparkSession, request: SourceRequest, spec: DirectorySource
) -> DataFrame:
    options = dict(request.options)
    ignore_unknown = _is_true(option(options, IGNORE_UNKNOWN_COLUMNS), False)
    options = {k: v for k, v in options.items() if k.lower() != IGNORE_UNKNOWN_COLUMNS.lower()}
    if found := glob_characters(spec.path):
        raise InvalidInputError(
            f"the source path {spec.path} contains {' '.join(found)}: {_GLOB_BUG}",
            hint="rename the directory, or give a link to it whose path has none of { } [ ] * ? \\",
        )
    directory = _Directory(spark, spec.path)
    directory.check()
    files = directory.files(
        recursive=_is_true(option(options, "recursiveFileLookup"), False),
        glob=option(options, "pathGlobFilter"),
    )
    globbed = [f.name for f in files if glob_characters(f.path)]
    if globbed:
        raise InvalidInputError(
            f"files of the source have {{ }} [ ] * ? or \\ in their names: "
            f"{_names(globbed[:5])}{', …' if len(globbed) > 5 else ''}: {_GLOB_BUG}",
            hint="rename them; files that arrive later must not have such names either",
        )
    if option(options, "maxFileAge") is None:
        options["maxFileAge"] = _MAX_FILE_AGE
    fmt = spec.format
    if fmt is None:
        if not files:
            raise InvalidInputError(
                f"the source directory {spec.path} has no files yet, so its format cannot be told",
                hint="pass --format json|csv|parquet",
            )
        fmt = plan.infer_format([f.name for f in files])
    _check_own_options(options, _OWN_FILE_OPTIONS, fmt)
    types = _table_types(request.table)
    sample = files[:SAMPLE_FILES]
    path = spec.path
    if fmt == "json":
        layout = _json_layout(request, types, directory, sample, ignore_unknown=ignore_unknown)
        return _read_json_files(spark, request, layout, path, options)
    if fmt == "csv":
        layout = _csv_layout(request, types, directory, sample, options, ignore_unknown)
        return _read_csv_files(spark, request, layout, path, options)
    layout = _parquet_layout(spark, request, types, files, ignore_unknown)
    return _read_parquet_files(spark, request, layout, path, options)


def _ordered_session(spark: SparkSession) -> SparkSession:
    """A clone of ``spark`` (same confs) whose streaming queries may use
    ``monotonically_increasing_id()``; see the module docstring."""
    clone = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    clone.conf.set("spark.sql.streaming.unsupportedOperationCheck", "false")
    return clone


def _json_layout(
    request: SourceRequest,
    types: Mapping[str, DataType],
    directory: _Directory,
    sample: Sequence[_File],
    *,
    ignore_unknown: bool,
) -> _Layout:
    records: list[dict[str, Any]] = []
    for file in sample:
        head = directory.head(file)
        if head is not None:
            records.extend(json_sample(head[0], complete=head[1]))
    cols = request.columns
    seq_type = "bigint"
    if cols.sequence is not None and _seq_table_column(request) is None:
        seq_type = sample_value_type(r.get(cols.sequence) for r in records)
    layout = _canonical_layout(request, types, seq_type)
    if not records:
        return layout  # nothing to check against: records are checked one by one
    where = f"the first records of {_names(f.name for f in sample)}"
    keys: dict[str, None] = {}
    for record in records:
        keys.update(dict.fromkeys(record))
    known = {f.name for f in layout.fields}
    unknown = [k for k in keys if k not in known]
    if unknown and not ignore_unknown:
        lower = {n.lower() for n in known}
        note = (
            " (JSON field names must match the column names exactly, case included)"
            if any(k.lower() in lower for k in unknown)
            else ""
        )
        raise _unknown_columns_error(request, unknown, where, note)
    if cols.op_explicit and cols.op not in keys:
        raise _missing_column_error("--op-column", str(cols.op), keys, where)
    if (
        cols.sequence is not None
        and _seq_table_column(request) is None
        and cols.sequence not in keys
    ):
        raise _missing_column_error("--sequence-column", cols.sequence, keys, where)
    return layout


def _read_json_files(
    spark: SparkSession,
    request: SourceRequest,
    layout: _Layout,
    path: str,
    options: Mapping[str, str],
) -> DataFrame:
    """JSON Lines read as text and parsed with ``from_json``: the line is at hand for every record
    that is quarantined, also one that parses but breaks a rule (Spark's JSON source would only
    keep the text of one that does not parse)."""
    multi_line = _is_true(option(options, "multiLine"), False)
    encoding = (option(options, "encoding") or option(options, "charset") or "utf-8").lower()
    if multi_line or encoding.replace("-", "") not in ("utf8", "ascii", "usascii"):
        raise InvalidInputError(
            "a JSON source is read as JSON Lines in UTF-8: one record per line"
            + (" (--source-option multiLine=true is not supported)" if multi_line else
               f" (--source-option encoding={encoding} is not supported)"),
            hint="convert the files, e.g. jq -c '.[]' for a file holding one JSON array",
        )  # fmt: skip
    session = _ordered_session(spark)
    lines = session.readStream.format("text").options(**options).load(path)
    meta = lines.metadataColumn("_metadata")
    value = F.col("value")
    text = F.when(value.startswith("\ufeff"), F.expr("substr(value, 2)")).otherwise(value)
    schema = _reader_schema(layout, json=True)
    parse = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    parsed = lines.select(
        text.alias(_RAW),
        _file_arrival(meta, F.monotonically_increasing_id()).alias(plan.ARRIVAL),
        _file_origin(meta).alias(plan.ORIGIN),
    ).select("*", F.from_json(F.col(_RAW), schema, parse).alias(_PARSED))
    # A blank line is no record (Spark's JSON source skips it too); JSON's whitespace only.
    parsed = parsed.filter(F.btrim(F.col(_RAW), F.lit(" \t\r\n")) != "")
    record, raw = F.col(_PARSED), F.col(_RAW)
    malformed = F.when(
        record.isNull() | record.getField(_CORRUPT).isNotNull(), _json_blame(raw, layout, options)
    )
    return _normalize(
        parsed,
        request,
        layout,
        source=lambda name: record.getField(name),
        malformed=malformed,
        bad_text=raw,
        render=None,
        coercions=_json_coercions(raw, layout, lambda name: record.getField(name)),
        arrival=F.col(plan.ARRIVAL),
        origin=F.col(plan.ORIGIN),
    )


def _csv_layout(
    request: SourceRequest,
    types: Mapping[str, DataType],
    directory: _Directory,
    sample: Sequence[_File],
    options: Mapping[str, str],
    ignore_unknown: bool,
) -> _Layout:
    """Columns by the header of the files present (all the same, matched by name); without a
    header, or before the first file, by position: the table's columns, an explicit op column and
    an input-only sequence column, in that order."""
    unsupported = [
        c for c in request.table.columns if isinstance(types[c.name], _NOT_IN_CSV)
    ]  # fmt: skip
    if unsupported:
        raise InvalidInputError(
            f"a CSV source cannot fill column {unsupported[0].name!r} of type "
            f"{unsupported[0].type}",
            hint="use a JSON or parquet source for tables with array, map or struct columns",
        )
    dialect = CsvDialect.of(options)
    heads: list[tuple[_File, list[list[str]]]] = []
    for file in sample:
        head = directory.head(file)
        if head is not None and (rows := csv_rows(head[0], complete=head[1], dialect=dialect)):
            heads.append((file, rows))
    cols = request.columns
    extra_seq = cols.sequence if _seq_table_column(request) is None else None
    if not _is_true(option(options, "header"), True) or not heads:
        seq_type = "bigint"
        if extra_seq is not None and heads:
            i = len(request.table.columns) + (1 if cols.op_explicit else 0)
            seq_type = sample_value_type(r[i] for _, rows in heads for r in rows if len(r) > i)
        positional = plan.Columns(cols.op if cols.op_explicit else None, cols.op_explicit,
                                  cols.sequence)  # fmt: skip
        return _canonical_layout(
            SourceRequest(request.spec, request.table, positional), types, seq_type
        )
    first_file, first_rows = heads[0]
    names = [n.strip() for n in first_rows[0]]
    for file, rows in heads[1:]:
        other = [n.strip() for n in rows[0]]
        if [n.lower() for n in other] != [n.lower() for n in names]:
            raise InvalidInputError(
                f"the CSV files of the source have different headers: {first_file.name} has "
                f"{_names(names)}, {file.name} has {_names(other)}",
                hint="files of one source need the same columns in the same order",
            )
    own: list[tuple[str, DataType | None]] = []
    for i, name in enumerate(names):
        own_type: DataType | None = None
        if extra_seq is not None and name.lower() == extra_seq.lower():
            values = (r[i] for _, rows in heads for r in rows[1:] if len(r) > i)
            own_type = _parse_datatype_string(sample_value_type(values))
        own.append((name, own_type))
    return _header_layout(
        request,
        types,
        own,
        f"the header of {first_file.name}",
        ignore_unknown=ignore_unknown,
        keep_unknown=True,
    )


def _read_csv_files(
    spark: SparkSession,
    request: SourceRequest,
    layout: _Layout,
    path: str,
    options: Mapping[str, str],
) -> DataFrame:
    session = _ordered_session(spark)
    header = _is_true(option(options, "header"), True)
    schema = _reader_schema(layout, json=False)
    df = (
        session.readStream.format("csv")
        .schema(schema)
        .options(**{k: v for k, v in options.items() if k.lower() != "header"})
        .option("header", str(header).lower())
        .option("enforceSchema", "false")  # the header must name the schema's columns in order
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .load(path)
    )
    meta = df.metadataColumn("_metadata")
    bad_text = F.col(_CORRUPT)
    return _normalize(
        df,
        request,
        layout,
        source=_top_level,
        malformed=F.when(bad_text.isNotNull(), _csv_blame(bad_text, layout, options)),
        bad_text=bad_text,
        render=lambda record: F.to_csv(record, _csv_write_options(options)),
        arrival=_file_arrival(meta, F.monotonically_increasing_id()),
        origin=_file_origin(meta),
        coercions=_decimal_coercions(layout, _top_level),
    )


def _csv_write_options(options: Mapping[str, str]) -> dict[str, str]:
    keep = {"sep", "delimiter", "quote", "escape", "nullvalue", "timestampformat", "dateformat"}
    return {k: v for k, v in options.items() if k.lower() in keep}


def _parquet_layout(
    spark: SparkSession,
    request: SourceRequest,
    types: Mapping[str, DataType],
    files: Sequence[_File],
    ignore_unknown: bool,
) -> _Layout:
    if not files:
        return _canonical_layout(request, types)
    try:
        # Footers only, merged: files that disagree on a column's type are an error here.
        schema = spark.read.option("mergeSchema", "true").parquet(*(f.path for f in files)).schema
    except Exception as exc:  # AnalysisException or a failed footer read: say which
        raise InvalidInputError(
            f"cannot read the parquet schema of the files in {request.spec.describe()}",
            hint="the files must be parquet with the same type for each column",
            detail=str(exc).splitlines()[0] if str(exc) else None,
        ) from None
    return _header_layout(
        request,
        types,
        [(f.name, f.dataType) for f in schema.fields],
        f"the parquet files of {request.spec.describe()}",
        ignore_unknown=ignore_unknown,
        keep_unknown=False,
    )


def _read_parquet_files(
    spark: SparkSession,
    request: SourceRequest,
    layout: _Layout,
    path: str,
    options: Mapping[str, str],
) -> DataFrame:
    df = spark.readStream.format("parquet").schema(layout.schema).options(**options).load(path)
    meta = df.metadataColumn("_metadata")
    return _normalize(
        df,
        request,
        layout,
        source=_top_level,
        malformed=None,
        bad_text=None,
        render=_render_json,
        arrival=_file_arrival(meta, meta.getField("row_index")),
        origin=_file_origin(meta),
    )


def _file_arrival(meta: Column, position: Column) -> Column:
    return F.struct(
        meta.getField("file_modification_time").alias("time"),
        meta.getField("file_path").alias("file"),
        meta.getField("file_block_start").alias("block"),
        position.alias("pos"),
    )


def _file_origin(meta: Column) -> Column:
    """The file's path as the user knows it: Spark's URI decoded (``+`` is literal in a path, not
    a space), ``file:`` dropped for local files."""
    uri = meta.getField("file_path")
    decoded = F.coalesce(F.try_url_decode(F.replace(uri, F.lit("+"), F.lit("%2B"))), uri)
    return F.regexp_replace(decoded, r"^file:/+", "/")


# -- Kafka --------------------------------------------------------------------------------------


def _open_kafka(spark: SparkSession, request: SourceRequest, spec: KafkaSource) -> DataFrame:
    bootstrap = spec.bootstrap or request.kafka_bootstrap
    if not bootstrap:
        raise InvalidInputError(
            f"no Kafka brokers to read the source kafka:{spec.topic} from",
            hint="pass --source-bootstrap HOST:PORT (or give the table a log store address)",
        )
    options = {
        k: v for k, v in request.options.items() if k.lower() != IGNORE_UNKNOWN_COLUMNS.lower()
    }
    _check_own_options(options, _OWN_KAFKA_OPTIONS, "kafka")
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", spec.topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in request.kafka_client.items():
        if key.lower() not in _SKIPPED_KAFKA_CLIENT:
            reader = reader.option(f"kafka.{key}", value)
    df = reader.options(**options).load()
    layout = _canonical_layout(request, _table_types(request.table))
    raw = F.col("value").cast("string")
    schema = _reader_schema(layout, json=True)
    parse_options = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    parsed = df.select(
        F.from_json(raw, schema, parse_options).alias(_PARSED),
        raw.alias(_RAW),
        "topic",
        "partition",
        "offset",
    )
    record, text = F.col(_PARSED), F.col(_RAW)
    malformed = (
        F.when(text.isNull(), F.lit("the record has no value (a tombstone)"))
        .when(record.isNull(), F.lit("empty value"))
        .when(record.getField(_CORRUPT).isNotNull(), _json_blame(text, layout, options))
    )
    return _normalize(
        parsed,
        request,
        layout,
        source=lambda name: record.getField(name),
        malformed=malformed,
        bad_text=text,
        render=None,
        coercions=_json_coercions(text, layout, lambda name: record.getField(name)),
        arrival=F.struct(F.col("partition"), F.col("offset")),
        origin=F.concat(
            F.lit("kafka:"),
            F.col("topic"),
            F.lit("/"),
            F.col("partition").cast("string"),
            F.lit("@"),
            F.col("offset").cast("string"),
        ),
    )


# -- coercions: values that would change on the way in (plan.COERCIONS) --------------------------


@dataclass(frozen=True)
class _Coercion:
    """A record whose value would change: ``rule`` (None: never accepted), when, and why."""

    rule: str | None
    when: Column
    reason: Column


# A \\uXXXX escape of a surrogate without its pair (an even run of backslashes before it: an
# escaped backslash followed by "u" is text). Jackson keeps it as a lone UTF-16 unit, which
# becomes '?' when Spark encodes the string as UTF-8.
_LONE_SURROGATE = (
    r"(?<!\\)(?:\\\\)*(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
_MAX_PRECISION = 38


def _wide_decimal(dtype: DecimalType) -> DecimalType:
    """The type a DECIMAL(p,s) column is parsed as: the same integer digits, every decimal place
    Spark can hold, so that the cast to the column's type shows a rounding (the JSON and CSV
    parsers would round half up without a word)."""
    whole = dtype.precision - dtype.scale
    return DecimalType(_MAX_PRECISION, _MAX_PRECISION - whole)


def _reader_schema(layout: _Layout, *, json: bool) -> StructType:
    """The schema a JSON or CSV reader parses with: decimal table columns widened, and for JSON
    the STRING table columns as VARIANT (Spark's parser would turn any JSON value into text; the
    variant keeps what it was)."""
    kinds = {src: dtype for _, dtype, src in layout.table if src is not None}
    fields: list[StructField] = []
    for f in layout.fields:
        dtype = kinds.get(f.name)
        if isinstance(dtype, DecimalType) and isinstance(f.type, DecimalType):
            fields.append(StructField(f.name, _wide_decimal(dtype)))
        elif json and isinstance(dtype, StringType) and isinstance(f.type, StringType):
            fields.append(StructField(f.name, VariantType()))
        else:
            fields.append(StructField(f.name, f.type))
    return StructType([*fields, StructField(_CORRUPT, StringType())])


def _only_if(cheap: Column, costly: Column) -> Column:
    """``cheap AND costly``, with ``costly`` computed only where ``cheap`` holds: as a CASE
    branch, Spark's common-subexpression elimination does not hoist it for every row (an AND of
    the two would parse every line once more)."""
    return F.when(cheap, costly).otherwise(F.lit(False))


def _accepts(rule: str) -> str:
    return f"--coerce {rule} accepts it"


def _decimal_coercions(layout: _Layout, source: Callable[[str], Column]) -> list[_Coercion]:
    """DECIMAL columns read wide (``_wide_decimal``): a value with more decimal places rounds,
    and one that rounds up past the column's digits does not fit at all."""
    found: list[_Coercion] = []
    for name, dtype, src in layout.table:
        if src is None or not isinstance(dtype, DecimalType):
            continue
        wide = source(src)
        narrow = wide.try_cast(dtype)
        text = _decimal_text(wide)
        label = dtype.simpleString()
        found.append(_Coercion(None, wide.isNotNull() & narrow.isNull(), F.concat(
            F.lit(f"column '{name}': expected {label}, got "), text,
            F.lit(" (rounded, it has too many digits)"))))  # fmt: skip
        found.append(_Coercion("decimal-round", wide.isNotNull() & (wide != narrow), F.concat(
            F.lit(f"column '{name}': {label} holds {dtype.scale} decimal places, got "), text,
            F.lit(" (it would be stored as "), narrow.cast("string"),
            F.lit(f"; {_accepts('decimal-round')})"))))  # fmt: skip
    return found


def _json_coercions(
    raw: Column, layout: _Layout, source: Callable[[str], Column]
) -> list[_Coercion]:
    """What Spark's JSON parsing would change without a word: bytes that are not UTF-8, lone
    surrogates, a field named twice, non-strings into STRING columns (read as VARIANT by
    ``_reader_schema``), and decimal rounding."""
    # Only names the stream reads matter (a repeat of another changes nothing stored), and only a
    # line holding one of them twice as text is parsed once more for its keys.
    read = [n for n in (*(src for _, _, src in layout.table), layout.op, layout.seq) if n]
    names = list(dict.fromkeys(read))
    twice = [
        F.position(F.lit(q), raw, F.position(F.lit(q), raw) + 1) > 0
        for q in (json.dumps(n, ensure_ascii=False) for n in names)
    ]
    keys = F.json_object_keys(raw)  # top-level names in order, repeats kept; null if no object
    repeated = _only_if(_any(twice), F.size(F.array_distinct(keys)) < F.size(keys))
    suspects = F.concat_ws(
        ", ", *[F.when(t, F.lit(f"'{n}'")) for t, n in zip(twice, names, strict=True)]
    )
    found = [
        _Coercion("invalid-utf8", ~F.is_valid_utf8(raw), F.lit(
            "not valid UTF-8 (the bad bytes would be stored as U+FFFD; "
            f"{_accepts('invalid-utf8')})")),
        _Coercion("lone-surrogate", raw.contains("\\u") & raw.rlike(_LONE_SURROGATE), F.lit(
            "a \\uD800-\\uDFFF escape without its pair is not a character (it would be "
            f"stored as '?'; {_accepts('lone-surrogate')})")),
        _Coercion("duplicate-key", repeated, F.concat(
            F.lit("a field given more than once, of "), suspects,
            F.lit(f" (the last value would be kept; {_accepts('duplicate-key')})"))),
    ]  # fmt: skip
    for name, dtype, src in layout.table:
        if src is None or not isinstance(dtype, StringType):
            continue
        value = source(src)  # a VARIANT
        kind = F.schema_of_variant(value)
        got = F.concat(F.lit(f"column '{name}': expected a string, got "),
                       _quoted(F.to_json(value)))  # fmt: skip
        for rule, when, what in (
            ("bool-to-string", kind == "BOOLEAN", "the text"),
            ("json-to-string", kind.startswith("OBJECT") | kind.startswith("ARRAY"), "its JSON text"),
            ("number-to-string", ~kind.isin("STRING", "BOOLEAN", "VOID") & ~kind.startswith("OBJECT")
             & ~kind.startswith("ARRAY"), "its text"),
        ):  # fmt: skip
            found.append(_Coercion(rule, value.isNotNull() & when, F.concat(
                got, F.lit(f" (it would be stored as {what}; {_accepts(rule)})"))))  # fmt: skip
    return [*found, *_decimal_coercions(layout, source)]


# -- the normalized stream ----------------------------------------------------------------------


def _any(conditions: Sequence[Column]) -> Column:
    found = conditions[0]
    for condition in conditions[1:]:
        found = found | condition
    return found


def _to_column_type(value: Column, dtype: DataType) -> Column:
    """A source value as the table column's type. Decimals are read wider (``_wide_decimal``) and
    one that does not fit is a null here and a reason in ``_decimal_coercions``, never a failed
    cast (ANSI mode)."""
    return value.try_cast(dtype) if isinstance(dtype, DecimalType) else value.cast(dtype)


def _as_read(value: Column, dtype: DataType) -> Column:
    """A source value as a rendered record shows it: a decimal read wide (``_wide_decimal``) in
    the column's type, unless that would round it (then the digits as read)."""
    if not isinstance(dtype, DecimalType):
        return value
    narrow = value.try_cast(dtype)
    return F.when(value == narrow, narrow.cast("string")).otherwise(_decimal_text(value))


def _decimal_text(wide: Column) -> Column:
    """A decimal read wide as its digits, without the zeros the wide type adds."""
    return F.regexp_replace(wide.cast("string"), r"\.?0+$", "")


def _top_level(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _render_json(record: Column) -> Column:
    return F.to_json(record)


def _quoted(value: Column) -> Column:
    """A bad value as a reason quotes it: JSON text, cut at GOT_CHARS."""
    return F.when(F.length(value) > GOT_CHARS, F.concat(F.substring(value, 1, GOT_CHARS), F.lit("…"))
                  ).otherwise(value)  # fmt: skip


def _json_blame(raw: Column, layout: _Layout, options: Mapping[str, str]) -> Column:
    """Why a JSON record did not parse: its syntax, or each column whose value does not fit (the
    record parsed again per typed column; only malformed records get here)."""
    parse = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    problems: list[Column] = []
    for f in layout.fields:
        if isinstance(f.type, StringType):
            continue  # any JSON value reads as text
        probe = F.from_json(raw, StructType([StructField(f.name, f.type),
                                             StructField(_CORRUPT, StringType())]), parse)  # fmt: skip
        value = F.from_json(raw, StructType([StructField(f.name, VariantType())]), options)
        problems.append(
            F.when(
                probe.getField(_CORRUPT).isNotNull(),
                F.concat(
                    F.lit(f"column '{f.name}': expected {f.label}, got "),
                    _quoted(F.to_json(value.getField(f.name))),
                ),
            )
        )
    columns = F.nullif(F.concat_ws("; ", *problems), F.lit("")) if problems else F.lit(None)
    return (
        F.when(
            F.json_object_keys(raw).isNull(),
            F.when(F.try_parse_json(raw).isNull(), F.lit("not valid JSON")).otherwise(
                F.lit("not a JSON object")
            ),
        )
        .otherwise(F.coalesce(columns, F.lit("does not match the table's column types")))
        .cast("string")
    )


def _csv_blame(raw: Column, layout: _Layout, options: Mapping[str, str]) -> Column:
    """Why a CSV row did not parse: its number of fields, or each column whose text does not
    convert to the column's type."""
    parse = {k: v for k, v in options.items() if k.lower() not in {"header", "multiline"}}
    parse.update(mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT)
    n = len(layout.fields)
    texts = F.from_csv(
        raw, ", ".join([*(f"f{i} STRING" for i in range(n)), f"{_CORRUPT} STRING"]), parse
    )
    problems: list[Column] = []
    for i, f in enumerate(layout.fields):
        if isinstance(f.type, StringType):
            continue
        text = texts.getField(f"f{i}")
        problems.append(
            F.when(
                _top_level(f.name).isNull() & text.isNotNull(),
                F.concat(
                    F.lit(f"column '{f.name}': expected {f.label}, got "),
                    _quoted(F.to_json(text.cast("variant"))),
                ),
            )
        )
    columns = F.nullif(F.concat_ws("; ", *problems), F.lit("")) if problems else F.lit(None)
    expected = f"wrong number of fields: expected {n} ({', '.join(f.name for f in layout.fields)})"
    return F.when(texts.getField(_CORRUPT).isNotNull(), F.lit(expected)).otherwise(
        F.coalesce(columns, F.lit("malformed CSV record"))
    )


def _normalize(
    df: DataFrame,
    request: SourceRequest,
    layout: _Layout,
    *,
    source: Callable[[str], Column],
    malformed: Column | None,
    bad_text: Column | None,
    render: Callable[[Column], Column] | None,
    arrival: Column,
    origin: Column,
    coercions: Sequence[_Coercion] = (),
) -> DataFrame:
    """The table's columns and the meta columns from a parsed source. ``malformed`` is the reason a
    record did not parse (null when it did), ``bad_text`` its raw text (for Kafka: every record's),
    ``render`` turns the struct of a record's source columns into text, for a record that parsed
    but breaks a rule. ``coercions``: values that would change; a record with one is quarantined
    unless ``request.coerce`` accepts its rule, and accepted ones are counted per rule in the
    query's observed metrics ``plan.COERCION_METRICS``. Each step is its own projection, so that
    Spark computes a value once."""
    table, cols = request.table, request.columns
    names = [name for name, _, _ in layout.table]
    op_text = source(layout.op).cast("string") if layout.op else F.lit(None).cast("string")
    refused = [c for c in coercions if c.rule is None or c.rule not in request.coerce]
    accepted: dict[str, list[Column]] = {}
    for c in coercions:
        if c.rule is not None and c.rule in request.coerce:
            accepted.setdefault(c.rule, []).append(F.coalesce(c.when, F.lit(False)))
    flags = [
        _any(conditions).alias(f"{_ACCEPTED}{i}") for i, conditions in enumerate(accepted.values())
    ]
    coerce_error = (
        F.nullif(F.concat_ws("; ", *[F.when(c.when, c.reason) for c in refused]), F.lit(""))
        if refused
        else F.lit(None)
    )
    typed = df.select(
        *[
            (
                _to_column_type(source(src), dtype) if src is not None else F.lit(None).cast(dtype)
            ).alias(name)
            for name, dtype, src in layout.table
        ],
        F.btrim(op_text, F.lit(" \t\r\n\f\v")).alias(_OP),
        (
            _to_column_type(source(layout.seq), layout.seq_type)
            if layout.seq
            else F.lit(None).cast(LongType())
        ).alias(plan.SEQ),
        arrival.alias(plan.ARRIVAL),
        origin.alias(plan.ORIGIN),
        (malformed if malformed is not None else F.lit(None)).cast("string").alias(_MALFORMED),
        (bad_text if bad_text is not None else F.lit(None)).cast("string").alias(_BAD_TEXT),
        (
            F.struct(*[_as_read(source(f.name), f.type).alias(f.name) for f in layout.fields])
            if render
            else F.lit(None)
        ).alias(_SOURCE),
        coerce_error.cast("string").alias(_COERCE_ERR),
        *flags,
    )

    op = F.col(_OP)
    kind: Column = F.lit(None).cast("string")
    for row_kind in (RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE):
        values = [v for v, k in plan.OP_VALUES.items() if k is row_kind]
        kind = F.when(op.isin(values), F.lit(row_kind.value)).otherwise(kind)
    kinded = typed.select("*", kind.alias(plan.KIND))

    kind = F.col(plan.KIND)
    checks: list[tuple[Column, str | Column]] = []
    if layout.op is not None:
        unknown = F.concat(F.lit("unknown op '"), op, F.lit(f"' (valid: {_VALID_OPS})"))
        checks.append((op.isNotNull() & kind.isNull(), unknown))
        if cols.op_explicit:
            checks.append((op.isNull(), f"no op: column '{layout.op}' is missing or null"))
        if not table.primary_key:
            retracting = F.concat(
                F.lit("op '"),
                op,
                F.lit(
                    f"' removes a row, which needs a primary key: table {table.name} has none "
                    "(it takes inserts and updates: +I, +U, c, r, u)"
                ),
            )
            checks.append(
                (kind.isin(RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value), retracting)
            )
    for key in table.primary_key:
        checks.append((F.col(key).isNull(), f"missing primary-key column '{key}' (absent or null)"))
    if refused:
        checks.append((F.col(_COERCE_ERR).isNotNull(), F.col(_COERCE_ERR)))
    error: Column = F.col(_MALFORMED)
    if checks:
        broken = checks[0][0]
        for condition, _ in checks[1:]:
            broken = broken | condition
        reasons = [F.when(c, m if isinstance(m, Column) else F.lit(m)) for c, m in checks]
        error = F.coalesce(error, F.when(broken, F.concat_ws("; ", *reasons)))
    checked = kinded.select(
        *[F.col(n) for n in names],
        plan.KIND,
        plan.SEQ,
        plan.ARRIVAL,
        error.alias(plan.ERROR),
        plan.ORIGIN,
        _BAD_TEXT,
        _SOURCE,
        *[f"{_ACCEPTED}{i}" for i in range(len(accepted))],
    )
    if accepted:  # good records only: a quarantined record is stored nowhere
        good = F.col(plan.ERROR).isNull()
        checked = checked.observe(
            plan.COERCION_METRICS,
            *[F.count_if(F.col(f"{_ACCEPTED}{i}") & good).alias(rule)
              for i, rule in enumerate(accepted)],
        )  # fmt: skip

    rendered = render(F.col(_SOURCE)) if render is not None else F.lit(None)
    raw = F.when(F.col(plan.ERROR).isNotNull(), F.coalesce(F.col(_BAD_TEXT), rendered))
    return checked.select(
        *[F.col(n) for n in names],
        plan.KIND,
        plan.SEQ,
        plan.ARRIVAL,
        plan.ERROR,
        raw.cast("string").alias(plan.RAW),
        plan.ORIGIN,
    )
