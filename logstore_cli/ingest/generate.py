"""The ``generate`` source: a synthetic change stream for demos and benchmarks. Pure: no I/O.

Change ``i`` (0-based) is a function of ``(seed, i)`` alone, so a retried micro-batch regenerates
exactly the same records, and any range of changes is computed without the changes before it.

**Keyed tables.** Changes touch the ``keys`` keys in rounds: round ``r`` (changes ``r*keys`` to
``(r+1)*keys - 1``) touches every key once, in an order that is a seeded permutation of the keys,
different in every round. So change ``i`` is touch ``j = i // keys`` of its key, and what a touch
does depends only on the touches just before it:

- touch 0 inserts the key (``+I``);
- an odd touch deletes the row (``-D``, with the row's last image) or updates it;
- an even touch re-inserts the key when the touch before deleted it, else updates it.

An update is **one change and two records**: ``-U`` with the row image before and ``+U`` with the
image after. ``total`` (``--total``) counts changes, not records.

The ratios weigh updates against deletes among the touches of a key that has a row: a share
``d/(u+d)`` of those are deletes (``u`` = ``update_ratio``, ``d`` = ``delete_ratio``). The shares of
the three kinds cannot be chosen freely: with a bounded key space every delete is followed by a
re-insert, so, once every key exists, inserts and deletes each make up ``d/(u+2d)`` of the
changes and updates ``u/(u+2d)`` (with the defaults 0.5 and 0.1: 1/7, 1/7 and 5/7). Deletes fall
on odd touches only, which is what keeps a key's state at touch ``j`` a function of touches ``j``
and ``j - 1``.

The key columns' values are derived from the key number (distinct numbers give distinct keys);
every other column's value is a hash of ``(seed, key, touch)``, and a nullable non-key column is
null in about one row of 16.

**Tables without a primary key** get ``+I`` rows only, row ``i`` a hash of ``(seed, i)``.

Values are what PySpark rows hold and ``logformat.values`` encodes: ``int``, exact binary
fractions for float and double (so a FLOAT column stores them exactly), ``Decimal`` at the
column's scale, ``str``, ``bytes``, ``date``, UTC-aware ``datetime`` for timestamp, naive for
timestamp_ntz, ``list`` for arrays, ``dict`` for maps and structs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest.plan import GenerateSource
from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.values import (
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    SqlType,
    StructType,
    parse_type,
)
from logstore_cli.logformat.wire import RowKind
from logstore_cli.model import ColumnSpec, TableSpec

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ORIGIN = "generate"  # the _ls_origin of every generated record

Row = dict[str, Any]
Record = tuple[RowKind, Row]
KeyedState = dict[tuple[Any, ...], Row]
# (change number, record index within the change, kind, column values in table order)
FlatRecord = tuple[int, int, str, tuple[Any, ...]]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(x: int) -> int:
    """SplitMix64's finalizer: a 64-bit hash of ``x`` (taken modulo 2**64)."""
    x &= _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


# Odd 64-bit factors: the high half of ``h * factor`` is a multiply-shift hash of ``h``, a quarter
# of the cost of mixing again (this is the hot loop).
_FACTORS = tuple(_mix(n + 1) | 1 for n in range(64))


def _sub(h: int, n: int) -> int:
    """The ``n``-th hash derived from the hash ``h`` (a row's column, an array's element)."""
    if n < len(_FACTORS):
        return h * _FACTORS[n] >> 64
    return _mix(h + (n + 1) * _GOLDEN)


# -- values by type --------------------------------------------------------------------------------

ValueGen = Callable[[int], Any]  # a 64-bit hash -> a value
KeyGen = Callable[[int], Any]  # a key number below the type's capacity -> a value


@dataclass(frozen=True)
class _TypeGen:
    value: ValueGen
    key: KeyGen  # distinct key numbers give distinct values
    capacity: int | None  # how many distinct key values the type has; None: unbounded


_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_INT_SPANS = {"tinyint": 100, "smallint": 10_000, "int": 1_000_000, "bigint": 10_000_000_000}
_DATE_BASE = date(2000, 1, 1).toordinal()
_DATE_SPAN = 11_000  # days: 2000 to 2030
_MAX_ORDINAL = date.max.toordinal()
_TS_BASE = datetime(2000, 1, 1, tzinfo=UTC)
_TS_NTZ_BASE = datetime(2000, 1, 1)
_TS_SPAN_US = _DATE_SPAN * 86_400_000_000
_TS_KEY_CAPACITY = (_MAX_ORDINAL - _DATE_BASE) * 86_400  # seconds up to 9999-12-31
_FLOAT_SPAN = 1 << 22  # quarters below 2**22 are exact in 24 bits (a FLOAT's significand)
_DOUBLE_SPAN = 4_000_000_000
_DECIMAL_DIGITS = 15  # non-key decimals use at most this many digits
_ARRAY_MAX = 3
_MAP_MAX = 2


def _int_gen(name: str) -> _TypeGen:
    bits = _INT_BITS[name]
    high = (1 << (bits - 1)) - 1
    span = _INT_SPANS[name]

    def key(k: int) -> int:
        return k if k <= high else high - k  # 0, 1, ... then -1, -2, ...

    return _TypeGen(lambda h: h % span, key, 1 << bits)


def _decimal_gen(t: DecimalType) -> _TypeGen:
    span = 10 ** min(t.precision, _DECIMAL_DIGITS)
    suffix = f"E-{t.scale}"

    def value(h: int) -> Decimal:
        return Decimal(f"{h % span}{suffix}")  # from text: exact at any precision

    return _TypeGen(value, lambda k: Decimal(f"{k}{suffix}"), 10**t.precision)


def _scalar_gen(name: str, label: str) -> _TypeGen:
    if name in _INT_BITS:
        return _int_gen(name)
    if name == "boolean":
        return _TypeGen(lambda h: bool(h & 1), lambda k: k == 1, 2)
    if name == "float":
        return _TypeGen(lambda h: (h % _FLOAT_SPAN) / 4, float, 1 << 24)
    if name == "double":
        return _TypeGen(lambda h: (h % _DOUBLE_SPAN) / 4, float, 1 << 53)
    if name == "string":
        prefix = f"{label}-"
        return _TypeGen(lambda h: f"{prefix}{h % 1_000_000}", lambda k: f"{prefix}{k}", None)
    if name == "binary":
        return _TypeGen(lambda h: h.to_bytes(8, "big"), lambda k: str(k).encode(), None)
    if name == "date":
        return _TypeGen(
            lambda h: date.fromordinal(_DATE_BASE + h % _DATE_SPAN),
            lambda k: date.fromordinal(1 + (_DATE_BASE - 1 + k) % _MAX_ORDINAL),
            _MAX_ORDINAL,
        )
    if name in ("timestamp", "timestamp_ntz"):
        base = _TS_BASE if name == "timestamp" else _TS_NTZ_BASE
        return _TypeGen(
            lambda h: base + timedelta(microseconds=h % _TS_SPAN_US),
            lambda k: base + timedelta(seconds=k),
            _TS_KEY_CAPACITY,
        )
    raise AssertionError(f"unhandled type {name}")  # parse_type knows no other scalar


def _hashable(value: Any) -> Any:
    """A map key as Python can hold it: arrays and structs become tuples (both encode alike)."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(_hashable(v) for v in value.values())
    return value


def _type_gen(t: SqlType, label: str, where: str) -> _TypeGen:
    if isinstance(t, ScalarType):
        return _scalar_gen(t.name, label)
    if isinstance(t, DecimalType):
        return _decimal_gen(t)
    if isinstance(t, ArrayType):
        element = _type_gen(t.element, label, f"{where} element")

        def array(h: int) -> list[Any]:
            return [element.value(_sub(h, e)) for e in range(h % (_ARRAY_MAX + 1))]

        return _TypeGen(array, lambda k: [element.key(k)], element.capacity)
    if isinstance(t, MapType):
        if isinstance(t.key, MapType):
            raise InvalidInputError(f"{where}: a map cannot have maps as keys")
        key_gen = _type_gen(t.key, label, f"{where} key")
        value_gen = _type_gen(t.value, label, f"{where} value")
        cap = key_gen.capacity
        most = _MAP_MAX if cap is None else min(_MAP_MAX, cap)
        spread = 1000 if cap is None else min(cap, 1000)

        def entries(h: int) -> dict[Any, Any]:
            first = (h >> 8) % spread
            keys = [(first + e) % spread for e in range(h % (most + 1))]
            return {
                _hashable(key_gen.key(k)): value_gen.value(_sub(h, e)) for e, k in enumerate(keys)
            }

        def key_map(k: int) -> dict[Any, Any]:
            return {_hashable(key_gen.key(k)): value_gen.value(k)}

        return _TypeGen(entries, key_map, cap)
    assert isinstance(t, StructType)
    fields = [(name, _type_gen(ft, name, f"{where}.{name}")) for name, ft in t.fields]
    caps = [g.capacity for _, g in fields]
    capacity = None if None in caps else max((c for c in caps if c is not None), default=1)

    def struct(h: int) -> dict[str, Any]:
        return {name: g.value(_sub(h, n)) for n, (name, g) in enumerate(fields)}

    def key_struct(k: int) -> dict[str, Any]:
        return {name: g.key(k if g.capacity is None else k % g.capacity) for name, g in fields}

    return _TypeGen(struct, key_struct, capacity)


# -- the generator ---------------------------------------------------------------------------------


def _column_type(column: ColumnSpec, table: TableSpec) -> SqlType:
    try:
        return parse_type(column.type)
    except WireFormatError as exc:
        raise InvalidInputError(
            f"table {table.name}: cannot generate values for column {column.name!r}: {exc}",
            hint="the generate source handles Spark SQL scalar, decimal, array, map and "
            "struct types",
        ) from None


def _delete_chance(update_ratio: float, delete_ratio: float) -> float:
    """The chance that an odd touch deletes: a share d/(u+d) of the touches of existing rows
    are deletes when odd touches delete with q = 2r/(1+r), r = d/(u+d) (even touches after a
    delete are inserts, so only odd touches and the even ones after an update count)."""
    weight = update_ratio + delete_ratio
    if weight <= 0:
        return 0.0
    r = delete_ratio / weight
    return 2 * r / (1 + r)


class Generator:
    """The compiled generator of one source for one table: per-column value functions built
    once, so that producing a row is a few function calls per column."""

    def __init__(self, source: GenerateSource, table: TableSpec) -> None:
        self.source = source
        self.table = table
        self.names = tuple(c.name for c in table.columns)
        key_columns: list[ColumnSpec] = []
        for name in table.primary_key:
            column = table.column(name)
            if column is None:
                raise InvalidInputError(
                    f"table {table.name}: primary key column {name!r} is not a column"
                )
            key_columns.append(column)
        self.key_columns = tuple(key_columns)
        self.keyed = bool(key_columns)
        key_index = {c.name: n for n, c in enumerate(key_columns)}
        self._keys: list[tuple[KeyGen, int | None]] = []
        for column in key_columns:
            gen = _type_gen(_column_type(column, table), column.name, f"column {column.name!r}")
            self._keys.append((gen.key, gen.capacity))
        caps = [cap for _, cap in self._keys]
        self.key_capacity: int | None = (
            None if None in caps else max((c for c in caps if c is not None), default=1)
        )
        self._slots: list[Callable[[tuple[Any, ...], int], Any]] = []
        for n, column in enumerate(table.columns):
            if column.name in key_index:
                self._slots.append(_key_slot(key_index[column.name]))
            else:
                gen = _type_gen(_column_type(column, table), column.name, f"column {column.name!r}")
                self._slots.append(_value_slot(gen.value, n, column.nullable))
        seed = source.seed
        self._row_salt = _mix(seed ^ 0x5EED_0001)
        self._delete_salt = _mix(seed ^ 0x5EED_0002)
        self._perm_salt = _mix(seed ^ 0x5EED_0003)
        chance = _delete_chance(source.update_ratio, source.delete_ratio)
        self._delete_below = min(1 << 64, math.floor(chance * (1 << 64)))
        self._perm_cache: tuple[int, int, int] = (-1, 1, 0)

    # -- the pieces of a change -----------------------------------------------------------------

    def key_values(self, k: int) -> tuple[Any, ...]:
        """The key columns' values (primary-key order) of key number ``k``."""
        return tuple([key(k if cap is None else k % cap) for key, cap in self._keys])

    def _image(self, kv: tuple[Any, ...], h: int) -> tuple[Any, ...]:
        return tuple([slot(kv, h) for slot in self._slots])

    def image(self, k: int, j: int) -> tuple[Any, ...]:
        """The row of key ``k`` after its touch ``j`` (an insert or an update), table order."""
        return self._image(self.key_values(k), self._touch_hash(k, j))

    def _touch_hash(self, k: int, j: int) -> int:
        return _mix(k * _GOLDEN + j * 0xC2B2AE3D27D4EB4F + self._row_salt)

    def _deletes(self, k: int, j: int) -> bool:
        """Whether odd touch ``j`` of key ``k`` deletes it (only asked for odd touches)."""
        return _mix(k * _GOLDEN + j * 0xD6E8FEB86659FD93 + self._delete_salt) < self._delete_below

    def permutation(self, r: int) -> tuple[int, int]:
        """Round ``r``'s order of the keys: position ``p`` touches key ``(a*p + b) % keys``."""
        cached_round, a, b = self._perm_cache
        if cached_round == r:
            return a, b
        keys = self.source.keys
        if keys == 1:
            a, b = 1, 0
        else:
            h = _mix(self._perm_salt + r * _GOLDEN)
            a = 1 + h % (keys - 1)
            while math.gcd(a, keys) != 1:
                a = a % (keys - 1) + 1  # reaches 1 at the latest, which is coprime
            b = (h >> 32) % keys
        self._perm_cache = (r, a, b)
        return a, b

    # -- ranges of changes ------------------------------------------------------------------------

    def rows(self, start: int, end: int) -> Iterator[FlatRecord]:
        """The records of changes ``[start, end)``: (change, index in the change, kind, values)."""
        if start < 0 or end < start:
            raise ValueError(f"not a range of changes: [{start}, {end})")
        if not self.keyed:
            salt, image, slots = self._row_salt, self._image, self._slots
            for i in range(start, end):
                h = _mix(i * _GOLDEN + salt)
                yield i, 0, INSERT, tuple([slot((), h) for slot in slots])
            return
        keys = self.source.keys
        i = start
        r, p = divmod(start, keys)
        image, touch_hash, deletes, key_values = (
            self._image, self._touch_hash, self._deletes, self.key_values
        )  # fmt: skip
        # The image a key's touch j - 1 made, when this range made it: an update's before-image
        # and a delete's last image are the after-image of the key's previous touch.
        made: dict[int, tuple[Any, ...]] = {}
        while i < end:
            a, b = self.permutation(r)
            last = min(keys, p + end - i)
            j = r
            odd = j & 1
            previous, made = made, {}
            for pos in range(p, last):
                k = (a * pos + b) % keys
                kv = key_values(k)
                if j == 0 or (not odd and deletes(k, j - 1)):
                    after = made[k] = image(kv, touch_hash(k, j))
                    yield i, 0, INSERT, after
                else:
                    before = previous.get(k)
                    if before is None:
                        before = image(kv, touch_hash(k, j - 1))
                    if odd and deletes(k, j):
                        yield i, 0, DELETE, before
                    else:
                        after = made[k] = image(kv, touch_hash(k, j))
                        yield i, 0, UPDATE_BEFORE, before
                        yield i, 1, UPDATE_AFTER, after
                i += 1
            r, p = r + 1, 0

    def keyed_state(self, n: int) -> KeyedState:
        """The table after changes ``[0, n)`` of a keyed table: key tuple -> row. O(keys)."""
        keys = self.source.keys
        state: KeyedState = {}
        if n <= 0:
            return state
        last_round = (n - 1) // keys
        touched = n - last_round * keys  # positions of the last round already touched
        a, b = self.permutation(last_round)
        if last_round == 0:  # only the first ``n`` positions were touched, each once
            last_touches = (((a * pos + b) % keys, 0) for pos in range(n))
        else:
            a_inv = pow(a, -1, keys) if keys > 1 else 1
            last_touches = (
                (k, last_round if ((k - b) * a_inv) % keys < touched else last_round - 1)
                for k in range(keys)
            )
        names, image, touch_hash = self.names, self._image, self._touch_hash
        for k, j in last_touches:
            if j & 1 and self._deletes(k, j):
                continue  # deleted by its last touch
            kv = self.key_values(k)
            state[tuple(map(frozen, kv))] = dict(
                zip(names, image(kv, touch_hash(k, j)), strict=True)
            )
        return state


def _key_slot(position: int) -> Callable[[tuple[Any, ...], int], Any]:
    def slot(kv: tuple[Any, ...], h: int) -> Any:
        return kv[position]

    return slot


def _value_slot(value: ValueGen, n: int, nullable: bool) -> Callable[[tuple[Any, ...], int], Any]:
    factor = _mix(n + 1_000_003) | 1  # not one of _FACTORS: nested values use those

    if not nullable:

        def slot(kv: tuple[Any, ...], h: int) -> Any:
            return value(h * factor >> 64)

        return slot

    def nullable_slot(kv: tuple[Any, ...], h: int) -> Any:
        hc = h * factor >> 64
        return None if hc & 15 == 0 else value(hc >> 4)

    return nullable_slot


@lru_cache(maxsize=64)
def generator(source: GenerateSource, table: TableSpec) -> Generator:
    """The compiled generator (cached: a source reads many ranges of one table)."""
    return Generator(source, table)


# -- the public functions --------------------------------------------------------------------------


def frozen(value: Any) -> Any:
    """A value as a hashable key part: arrays as tuples, maps and structs as tuples of
    (name, value) pairs; scalars as they are."""
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple((frozen(k), frozen(v)) for k, v in value.items())
    return value


def row_key(table: TableSpec, row: Row) -> tuple[Any, ...]:
    """The key of a generated row as ``expected_state`` gives it: the primary key columns'
    values in primary-key order (``frozen``: hashable also for arrays, maps and structs)."""
    return tuple(frozen(row[_column_name(table, name)]) for name in table.primary_key)


def _column_name(table: TableSpec, name: str) -> str:
    column = table.column(name)
    return column.name if column is not None else name


def check_generate(source: GenerateSource, table: TableSpec, *, once: bool = False) -> None:
    """Refuse a generate source that cannot run on ``table`` (InvalidInputError, exit 2), before
    Spark starts: bad numbers, ``--once`` without ``--total``, column types without generated
    values, a key space larger than the key columns can hold."""
    if once and source.total is None:
        raise InvalidInputError(
            "--once with --source generate needs --total",
            hint="a generated stream never ends by itself: give --total N (changes), "
            "or drop --once to run until Ctrl-C",
        )
    if source.rate < 1:
        raise InvalidInputError(f"--rate must be at least 1 change per second, got {source.rate}")
    if source.keys < 1:
        raise InvalidInputError(f"--keys must be at least 1, got {source.keys}")
    if source.total is not None and source.total < 0:
        raise InvalidInputError(f"--total must be 0 or more, got {source.total}")
    for flag, ratio in (
        ("--update-ratio", source.update_ratio),
        ("--delete-ratio", source.delete_ratio),
    ):
        if not 0.0 <= ratio <= 1.0:  # also NaN
            raise InvalidInputError(f"{flag} must be between 0 and 1, got {ratio}")
    gen = generator(source, table)
    if not gen.keyed:
        return
    if gen.key_capacity is not None and source.keys > gen.key_capacity:
        key = ", ".join(f"{c.name} {c.type}" for c in gen.key_columns)
        raise InvalidInputError(
            f"--keys {source.keys} is more than the primary key of {table.name} ({key}) can "
            f"hold: {gen.key_capacity} distinct values",
            hint=f"use --keys {gen.key_capacity} or fewer",
        )
    more_touches = source.total is None or source.total > source.keys
    if more_touches and source.update_ratio + source.delete_ratio <= 0:
        raise InvalidInputError(
            "--update-ratio and --delete-ratio are both 0, but a table with a primary key gets "
            "only one insert per key",
            hint=f"give a ratio above 0, or --total {source.keys} or fewer",
        )


def records(source: GenerateSource, table: TableSpec, start: int, end: int) -> Iterator[Record]:
    """The records of changes ``[start, end)``: (kind, row). An update gives two records."""
    gen = generator(source, table)
    names = gen.names
    for _, _, kind, values in gen.rows(start, end):
        yield RowKind(kind), dict(zip(names, values, strict=True))


def flat_records(
    source: GenerateSource, table: TableSpec, start: int, end: int
) -> Iterator[FlatRecord]:
    """``records`` for the Spark reader: (change, index in the change, kind, values in table
    order), without building a dict per row."""
    return generator(source, table).rows(start, end)


def expected_state(
    source: GenerateSource, table: TableSpec, n_changes: int
) -> KeyedState | list[Row]:
    """The table after the first ``n_changes`` changes: ``row_key`` -> row for a keyed table
    (computed per key, without replaying the changes: O(keys)), the rows for a table without a
    key."""
    gen = generator(source, table)
    if gen.keyed:
        return gen.keyed_state(n_changes)
    return [row for _, row in records(source, table, 0, n_changes)]


def split(start: int, end: int, parts: int, *, minimum: int = 1) -> list[tuple[int, int]]:
    """``[start, end)`` in at most ``parts`` contiguous ranges of at least ``minimum`` changes
    (the last may be shorter), in order; none for an empty range."""
    size = end - start
    if size <= 0:
        return []
    count = max(1, min(parts, size // max(1, minimum)))
    step, extra = divmod(size, count)
    ranges: list[tuple[int, int]] = []
    at = start
    for n in range(count):
        upto = at + step + (1 if n < extra else 0)
        ranges.append((at, upto))
        at = upto
    return ranges


def latest_change(
    *,
    origin: int,
    planned: int,
    elapsed_s: float,
    source: GenerateSource,
    once: bool,
    max_per_batch: int | None,
) -> int:
    """The end (exclusive) of the changes available now, for a stream that resumed at change
    ``origin`` ``elapsed_s`` seconds ago and has planned micro-batches up to ``planned``.

    Paced (``once`` false): ``rate`` changes per second since the stream resumed, the first
    second's at once (so that the first micro-batch is not empty). ``once``: every change up to
    ``total`` at once. Both capped by ``total`` and by ``max_per_batch`` changes past ``planned``,
    and never below ``planned``."""
    if once:
        available = source.total if source.total is not None else planned
    else:
        available = origin + math.floor(source.rate * (1.0 + max(0.0, elapsed_s)))
        if source.total is not None:
            available = min(available, source.total)
    if max_per_batch is not None:
        available = min(available, planned + max_per_batch)
    return max(planned, available)


def kind_shares(source: GenerateSource) -> dict[str, float]:
    """The long-run shares of inserts, updates and deletes among the changes of a keyed table
    (once every key exists): ``d/(u+2d)``, ``u/(u+2d)``, ``d/(u+2d)``."""
    q = _delete_chance(source.update_ratio, source.delete_ratio)
    return {"insert": q / 2, "update": 1 - q, "delete": q / 2}
