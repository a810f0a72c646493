"""A table's state folded from changes, and two states compared (what ``verify`` checks).

Pure: no I/O. Rows are held and compared as their canonical wire-format JSON
(``logformat.wire.encode_row``: one text per value, whatever Python type held it), so a row read
from the log and the same row read from Delta by delta-rs compare equal exactly when their values
are equal. Arrow's Python values differ from the decoded log's in one way the encoder does not
accept (a map is a list of pairs), and a ``timestamp`` Arrow returns without a zone is UTC (Delta
stores UTC instants): ``from_arrow`` fixes both before a Delta row is folded.

- A table with a primary key folds by key: ``+I``/``+U`` put the row, ``-U``/``-D`` remove the
  key (a ``-U`` then ``+U`` pair is an update).
- A table without one folds as a multiset of rows: ``+I``/``+U`` add one copy, ``-U``/``-D``
  remove one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from logstore_cli.logformat.values import (
    ArrayType,
    MapType,
    ScalarType,
    SqlType,
    StructType,
    json_string,
    value_encoder,
)
from logstore_cli.logformat.wire import RowKind, RowSchema, encode_row

EXAMPLES: Final = 5  # examples of each kind of difference a comparison keeps by default

_PUTTING: Final = frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER})
_REMOVING: Final = frozenset({RowKind.UPDATE_BEFORE, RowKind.DELETE})


# -- Arrow's Python values -------------------------------------------------------------------------


def _arrow_fix(t: SqlType) -> Callable[[Any], Any] | None:
    """The conversion of one column's Arrow value to what the wire format encodes; None when the
    value is fine as it is."""
    if isinstance(t, MapType):
        key, value = _arrow_fix(t.key), _arrow_fix(t.value)

        def to_dict(v: Any) -> Any:
            if v is None:
                return None
            pairs = v.items() if isinstance(v, Mapping) else v
            return {_hashable(key(k) if key else k): (value(x) if value else x) for k, x in pairs}

        return to_dict
    if isinstance(t, ArrayType):
        element = _arrow_fix(t.element)
        if element is None:
            return None
        return lambda v: None if v is None else [element(x) for x in v]
    if isinstance(t, StructType):
        inner = {name: _arrow_fix(f) for name, f in t.fields}
        if not any(inner.values()):
            return None

        def fix_struct(v: Any) -> Any:
            if not isinstance(v, Mapping):
                return v  # None, or a shape the encoder reports itself
            return {n: (inner[n](x) if inner.get(n) else x) for n, x in v.items()}  # type: ignore[misc]

        return fix_struct
    if isinstance(t, ScalarType) and t.name == "timestamp":
        return _utc
    return None


def _utc(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)  # Delta's timestamp is a UTC instant; naive is not local here
    return v


def _hashable(key: Any) -> Any:
    """A map key Arrow gives as a list (an array-typed key) as the tuple a dict can hold."""
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


class ArrowRows:
    """Rows as Arrow's ``to_pylist`` gives them (delta-rs, ``DataFrame.toArrow``) -> rows the wire
    format encodes, with the same values."""

    def __init__(self, schema: RowSchema) -> None:
        self._fixes = [(n, f) for n in schema.names if (f := _arrow_fix(schema.type_of(n)))]

    def __call__(self, row: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(row)
        for name, fix in self._fixes:
            if name in out:
                out[name] = fix(out[name])
        return out


def from_arrow(row: Mapping[str, Any], schema: RowSchema) -> dict[str, Any]:
    """One Arrow row made encodable (``ArrowRows`` builds the conversions once for many rows)."""
    return ArrowRows(schema)(row)


# -- folding ---------------------------------------------------------------------------------------


class CanonicalRows:
    """``encode_row``'s bytes of a row and of its key, with the per-column encoders built once
    (verify encodes every row of the log and of the table); anything unusual goes through
    ``encode_row`` itself, which names the column at fault."""

    def __init__(self, schema: RowSchema) -> None:
        self.schema = schema
        self._columns = [self._column(n) for n in schema.names]
        self._key = [self._column(n) for n in schema.primary_key]

    def _column(self, name: str) -> tuple[str, str, Callable[[Any], str]]:
        return name, json_string(name) + ":", value_encoder(self.schema.type_of(name))

    def row(self, row: Mapping[str, Any]) -> bytes:
        if len(row) == len(self._columns):
            try:
                return ("{" + ",".join([p + e(row[n]) for n, p, e in self._columns]) + "}").encode()
            except Exception:  # encode_row below raises the error worth showing
                pass
        return encode_row(row, self.schema)

    def key(self, row: Mapping[str, Any]) -> bytes:
        """The key columns as canonical JSON (a ``-D`` may carry only those)."""
        try:
            return ("{" + ",".join([p + e(row[n]) for n, p, e in self._key]) + "}").encode()
        except Exception:  # as above
            pass
        key = {n: row[n] for n in self.schema.primary_key if n in row}
        return encode_row(key, self.schema, partial=True)


@dataclass
class FoldStats:
    changes: int = 0  # changes applied
    absent_removals: int = 0  # a -U/-D of a key (or row) the state did not hold


class FoldedState:
    """A table's rows, folded from changes (the log) or added one by one (a Delta snapshot).

    Keys and rows are held as canonical wire JSON bytes. A keyed state holds one row per key;
    ``add`` (a snapshot's rows) keeps a second row of a key too, so that a table holding a key
    twice does not compare equal to anything.
    """

    def __init__(self, schema: RowSchema) -> None:
        self.schema = schema
        self.keyed = bool(schema.primary_key)
        self._rows: dict[bytes, bytes] = {}  # keyed: key -> row
        self._copies: dict[bytes, list[bytes]] = {}  # keyed, snapshots: key -> further rows
        self._bag: Counter[bytes] = Counter()  # keyless: row -> copies
        self._canonical = CanonicalRows(schema)
        self.stats = FoldStats()

    def apply(self, kind: RowKind, row: Mapping[str, Any]) -> None:
        """Fold one change."""
        if kind not in _PUTTING and kind not in _REMOVING:
            raise ValueError(f"a {kind} is not a change of a row")
        self.stats.changes += 1
        canonical = self._canonical
        if self.keyed:
            key = canonical.key(row)
            if kind in _PUTTING:
                self._rows[key] = canonical.row(row)
                self._copies.pop(key, None)
            elif self._rows.pop(key, None) is None:
                self.stats.absent_removals += 1
            else:
                self._copies.pop(key, None)
            return
        image = canonical.row(row)
        if kind in _PUTTING:
            self._bag[image] += 1
        elif self._bag.get(image, 0) > 1:
            self._bag[image] -= 1
        elif self._bag.pop(image, None) is None:
            self.stats.absent_removals += 1

    def add(self, row: Mapping[str, Any]) -> None:
        """A row of a snapshot: inserted, and kept beside a row of the same key already held."""
        image = self._canonical.row(row)
        if not self.keyed:
            self._bag[image] += 1
            return
        key = self._canonical.key(row)
        if key in self._rows:
            self._copies.setdefault(key, []).append(image)
        else:
            self._rows[key] = image

    def fold(self, changes: Iterable[tuple[RowKind, Mapping[str, Any]]]) -> FoldedState:
        for kind, row in changes:
            self.apply(kind, row)
        return self

    def __len__(self) -> int:
        """The rows held (copies included)."""
        if self.keyed:
            return len(self._rows) + sum(len(c) for c in self._copies.values())
        return sum(self._bag.values())

    @property
    def duplicate_keys(self) -> int:
        """Keys held more than once (only ``add`` can make them)."""
        return len(self._copies)

    def _images(self, key: bytes) -> list[bytes]:
        """Every row held for ``key``, sorted (keyed states only)."""
        first = self._rows.get(key)
        return [] if first is None else sorted([first, *self._copies.get(key, ())])


# -- comparing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One difference: the key (None for a table without one), the row image on each side (None:
    absent), how many copies each side holds, and the columns whose values differ."""

    key: bytes | None
    log: bytes | None
    delta: bytes | None
    log_copies: int
    delta_copies: int
    columns: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": None if self.key is None else json_value(self.key),
            "log": None if self.log is None else json_value(self.log),
            "delta": None if self.delta is None else json_value(self.delta),
        }
        if self.columns:
            out["columns"] = list(self.columns)
        if self.key is None or self.log_copies > 1 or self.delta_copies > 1:
            out["log_copies"], out["delta_copies"] = self.log_copies, self.delta_copies
        return out


@dataclass
class Differences:
    """Differences of one kind: how many, and up to a limit of examples."""

    count: int = 0
    examples: list[Example] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": [e.to_json() for e in self.examples]}


@dataclass
class Diff:
    """Delta against the log. ``missing``: keys (rows, without a key) Delta holds and the log does
    not; ``extra``: the log holds and Delta does not; ``different``: the same key with other rows
    on each side (or a key Delta holds more than once). A table without a key has no
    ``different``: a row that differs is one missing and one extra."""

    missing: Differences = field(default_factory=Differences)
    extra: Differences = field(default_factory=Differences)
    different: Differences = field(default_factory=Differences)
    delta_rows: int = 0
    log_rows: int = 0

    @property
    def equal(self) -> bool:
        return not (self.missing.count or self.extra.count or self.different.count)


def compare(delta: FoldedState, log: FoldedState, *, examples: int = EXAMPLES) -> Diff:
    """What differs between the Delta snapshot and the folded log (both of one schema). Examples
    come in key (row) order, so a run gives the same ones every time."""
    if delta.schema != log.schema:
        raise ValueError("the states to compare have different schemas")
    diff = Diff(delta_rows=len(delta), log_rows=len(log))

    def note(bucket: Differences, example: Example, count: int = 1) -> None:
        bucket.count += count
        if len(bucket.examples) < examples:
            bucket.examples.append(example)

    if delta.keyed:
        for key in sorted(delta._rows.keys() | log._rows.keys()):
            ours, theirs = log._images(key), delta._images(key)
            if ours == theirs:
                continue
            left, right = (ours[0] if ours else None), (theirs[0] if theirs else None)
            columns = _differing(left, right, delta.schema)
            example = Example(key, left, right, len(ours), len(theirs), columns)
            if not ours:
                note(diff.missing, example)
            elif not theirs:
                note(diff.extra, example)
            else:
                note(diff.different, example)
        return diff
    for image in sorted(delta._bag.keys() | log._bag.keys()):
        in_log, in_delta = log._bag.get(image, 0), delta._bag.get(image, 0)
        if in_log == in_delta:
            continue
        example = Example(
            None, image if in_log else None, image if in_delta else None, in_log, in_delta
        )
        note(diff.missing if in_delta > in_log else diff.extra, example, abs(in_delta - in_log))
    return diff


def _differing(log: bytes | None, delta: bytes | None, schema: RowSchema) -> tuple[str, ...]:
    """The columns whose canonical values differ between two row images of one key."""
    if log is None or delta is None:
        return ()
    a, b = _columns(log), _columns(delta)
    return tuple(n for n in schema.names if a.get(n) != b.get(n))


def _columns(image: bytes) -> dict[str, str]:
    """Each column's canonical JSON text in a row image (compared as text: exact)."""
    parsed = json.loads(image, parse_float=str, parse_int=str, parse_constant=str)
    return {k: json.dumps(v, sort_keys=True, ensure_ascii=False) for k, v in parsed.items()}


def json_value(image: bytes) -> Any:
    """A canonical JSON text as a value ``json.dumps`` writes back: numbers stay numbers where a
    float holds them exactly as written, else they become their text (a decimal(38,0) ``1e37+1``)
    so that nothing shown is rounded."""
    return json.loads(image, parse_float=_number)


def _number(text: str) -> float | str:
    value = float(text)
    return value if Decimal(repr(value)) == Decimal(text) else text
