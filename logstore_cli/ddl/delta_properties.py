"""Delta Lake's own table properties (``delta.*``), as far as logstore creates tables without Spark.

delta-rs stores any ``delta.*`` value it is given (garbage included) and does not lay out some
features Spark would (column mapping ids, constraints, row tracking): a table with such a property
made by delta-rs would be one delta-spark refuses or misreads. So the properties below, whose only
effect is a setting Spark reads back and that delta-rs writes as Spark would, are checked here the
way delta-spark 4.0.1 checks them (``DeltaConfigs``), and a table carrying any other ``delta.*``
key is created by Spark, which validates and lays it out itself. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

CDF = "delta.enableChangeDataFeed"
APPEND_ONLY = "delta.appendOnly"

# Spark's interval units (IntervalUtils) Delta accepts in a table property: months and years are
# refused by Delta (a retention must be a fixed length of time).
# Each one's length in milliseconds.
_UNIT_MS: dict[str, float] = {
    "week": 604_800_000, "day": 86_400_000, "hour": 3_600_000, "minute": 60_000,
    "second": 1_000, "millisecond": 1, "microsecond": 0.001,
}  # fmt: skip
_FIXED_UNITS = tuple(_UNIT_MS)
_CALENDAR_UNITS = ("month", "year")
_NUMBER = r"[+-]?\d+(?:\.\d+)?"
_UNIT = r"[a-z]+"
_PAIR = re.compile(rf"\s*({_NUMBER})\s+({_UNIT})\s*")


def _boolean(value: str) -> str | None:
    # Scala's String.toBoolean: exactly true or false, any case, no spaces.
    return None if value.lower() in ("true", "false") else "is not true or false"


def _int_at_least(minimum: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if not re.fullmatch(r"[+-]?\d+", value) or not -(2**31) <= int(value) < 2**31:
            return "is not a whole number"
        return None if int(value) >= minimum else f"must be at least {minimum}"

    return check


# Delta's defaults (DeltaConfigs) for the retentions logstore compares with a topic's.
LOG_RETENTION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
DEFAULT_LOG_RETENTION = "interval 30 days"
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"


def _parse_interval(value: str) -> tuple[str | None, float]:
    """Delta's ``parseCalendarInterval``: ``[interval] N unit [N unit ...]``, case-insensitive.
    ``(why it is invalid, None when valid; its length in milliseconds)``."""
    text = value.strip().lower()
    if not text:
        return "is empty", 0
    text = text.removeprefix("interval ").strip()
    pos, negative, units, total = 0, False, [], 0.0
    while pos < len(text):
        match = _PAIR.match(text, pos)
        if match is None:
            return "is not an interval", 0
        number, unit = match.groups()
        unit = unit.removesuffix("s")
        if unit in _CALENDAR_UNITS:
            return f"uses {unit}s, which have no fixed length; use days or weeks", 0
        if unit not in _FIXED_UNITS:
            return f"has an unknown unit {match.group(2)!r}", 0
        if "." in number and unit != "second":
            return f"has a fraction of a {unit}; only seconds may have one", 0
        negative = negative or number.startswith("-")
        units.append(unit)
        total += float(number) * _UNIT_MS[unit]
        pos = match.end()
    if not units:
        return "is not an interval", 0
    return ("is negative" if negative else None), total


def _interval(value: str) -> str | None:
    return _parse_interval(value)[0]


def interval_ms(value: str) -> int:
    """The length of a Delta interval property value (``'interval 7 days'``, ``'36 hours'``) in
    whole milliseconds; ValueError naming the problem when it is not a valid one."""
    problem, total = _parse_interval(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return int(total)


def retention_ms(configuration: Mapping[str, str | None], key: str) -> int:
    """A table's retention property ``key`` (Delta's default when unset), in milliseconds."""
    default = DEFAULT_LOG_RETENTION if key == LOG_RETENTION else DEFAULT_DELETED_FILE_RETENTION
    return interval_ms(configuration.get(key) or default)


_INTERVAL_HINT = "e.g. 'interval 7 days' or '36 hours'"


class DeltaProperty(NamedTuple):
    """A Delta table property logstore checks as delta-spark does, and how to fix a bad value."""

    key: str
    check: Callable[[str], str | None]
    hint: str


_KNOWN = {
    p.key: p
    for p in (
        DeltaProperty(CDF, _boolean, "true or false"),
        DeltaProperty(APPEND_ONLY, _boolean, "true or false"),
        DeltaProperty(LOG_RETENTION, _interval, _INTERVAL_HINT),
        DeltaProperty(DELETED_FILE_RETENTION, _interval, _INTERVAL_HINT),
        DeltaProperty("delta.checkpointRetentionDuration", _interval, _INTERVAL_HINT),
        DeltaProperty("delta.setTransactionRetentionDuration", _interval, _INTERVAL_HINT),
        DeltaProperty("delta.enableExpiredLogCleanup", _boolean, "true or false"),
        DeltaProperty("delta.checkpointInterval", _int_at_least(1), "a whole number, e.g. 10"),
        DeltaProperty(
            "delta.dataSkippingNumIndexedCols", _int_at_least(-1), "a whole number, -1 for all"
        ),
        DeltaProperty("delta.checkpoint.writeStatsAsJson", _boolean, "true or false"),
        DeltaProperty("delta.checkpoint.writeStatsAsStruct", _boolean, "true or false"),
        DeltaProperty("delta.randomizeFilePrefixes", _boolean, "true or false"),
        DeltaProperty("delta.randomPrefixLength", _int_at_least(1), "a whole number, e.g. 2"),
        DeltaProperty("delta.autoOptimize.optimizeWrite", _boolean, "true or false"),
        DeltaProperty("delta.autoOptimize.autoCompact", _boolean, "true or false"),
    )
}
# Features a protocol may already have; setting these keys needs them (else Spark upgrades it).
_NEEDS_FEATURE = {CDF: ("changeDataFeed", 4), APPEND_ONLY: ("appendOnly", 2)}


def value_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not valid for the Delta property ``key``; None when it is, or when ``key``
    is not one checked here (Spark checks those when it creates the table)."""
    prop = _KNOWN.get(key)
    if prop is None:
        return None
    problem = prop.check(value)
    if problem is None:
        return None
    return f"'{key}' = '{value}' {problem} (expected {prop.hint})"


def spark_only(keys: Iterable[str]) -> list[str]:
    """The ``delta.*`` keys among ``keys`` that only Spark creates a table with correctly."""
    return [k for k in keys if k.lower().startswith("delta.") and k not in _KNOWN]


# Writer features under which a commit that changes only metadata needs nothing more.
_PLAIN_COMMIT_FEATURES = frozenset(
    {
        "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
        "columnMapping", "identityColumns", "timestampNtz", "deletionVectors", "domainMetadata",
        "v2Checkpoint", "vacuumProtocolCheck", "variantType", "typeWidening",
    }
)  # fmt: skip


class Protocol(NamedTuple):
    """A Delta protocol action, as much of it as deciding an alter needs."""

    min_writer_version: int
    writer_features: tuple[str, ...] = ()

    def metadata_commit_safe(self) -> bool:
        """Whether a commit of a metaData action alone is a valid commit on this protocol: not
        when a writer feature asks more of every commit (in-commit timestamps, a commit
        coordinator, ...) or is one this list does not know."""
        return self.min_writer_version < 7 or set(self.writer_features) <= _PLAIN_COMMIT_FEATURES

    def supports(self, feature: str, legacy_version: int) -> bool:
        if self.min_writer_version >= 7:
            return feature in self.writer_features
        return self.min_writer_version >= legacy_version


def spark_only_change(
    set_: Mapping[str, str], unset: Iterable[str], protocol: Protocol
) -> list[str]:
    """The keys of a property change that only Spark makes correctly on a table of ``protocol``:
    unknown ``delta.*`` keys, and turning on a feature the protocol does not list yet (Spark adds
    it to the protocol; a metadata-only commit would leave the table inconsistent)."""
    out = spark_only([*set_, *unset])
    for key, value in set_.items():
        feature = _NEEDS_FEATURE.get(key)
        if feature and value.lower() == "true" and not protocol.supports(*feature):
            out.append(key)
    return out
