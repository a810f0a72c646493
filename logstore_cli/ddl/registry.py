"""The one registry of table properties logstore knows, in both vocabularies (docs/design.md §4).

The parser's validator, ``logstore properties`` and the property reference (docs/properties.md) all
read this list; ``scripts/gen_property_docs.py`` writes that page's table from ``markdown_table()``
and a unit test fails when the two differ.
"""

from __future__ import annotations

import difflib
import re
from enum import StrEnum
from functools import lru_cache
from typing import Any, NamedTuple

from logstore_cli.model import (
    COMPACTION_KEY,
    DEFAULT_COMPACTION_EPOCHS,
    DEFAULT_PARTITIONS,
    edit_distance,
)

# Keys under these prefixes must be known: a misspelling is an error, not a silently ignored key.
RESERVED_PREFIXES = ("log-store.", "log.", "mixed-format.", "arctic.")
# Keys under these prefixes are Kafka client settings passed through, prefix stripped.
PASSTHROUGH_PREFIXES = ("properties.", "kafka.")
# logstore's own extension: Kafka topic configs for the topic it creates (provision reads them).
TOPIC_CONFIG_PREFIX = "log.topic."
# The log's value formats (logformat.wire.LogFormat), as `log.format` / `log-store.data-format`
# spell them: a literal here, as ddl/ does not import logformat.
LOG_FORMATS = ("json", "debezium-json")
# logstore's managed keys in Delta metadata: close to "log-store." but not a misspelling of it.
MANAGED_PREFIX = "logstore."


class PropType(StrEnum):
    BOOLEAN = "boolean"
    INT = "int"
    STRING = "string"
    ENUM = "enum"
    PASSTHROUGH = "passthrough"


class Vocabulary(StrEnum):
    AMORO = "amoro"  # Apache Amoro / NetEase Arctic: log-store.*
    PAIMON = "paimon"  # Apache Paimon / Flink Table Store: log.system, kafka.*
    LOGSTORE = "logstore"  # this tool's own extensions


class PropertyDef(NamedTuple):
    """A table property logstore knows: its type, vocabulary, default and values."""

    key: str  # for PASSTHROUGH: the prefix followed by "*"
    type: PropType
    vocabulary: Vocabulary
    description: str
    default: str | None = None
    allowed: tuple[str, ...] = ()  # ENUM values (lower case)
    aliases: tuple[str, ...] = ()  # older names accepted for the same property
    minimum: int | None = None  # INT lower bound
    unsupported: tuple[str, ...] = ()  # values the source system has that logstore does not
    unsupported_hint: str = ""  # what to write instead of an unsupported value

    @property
    def prefix(self) -> str:
        return self.key.removesuffix("*")

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "aliases": list(self.aliases),
            "type": self.type.value,
            "default": self.default,
            "allowed": list(self.allowed),
            "vocabulary": self.vocabulary.value,
            "description": self.description,
        }


_A, _P = Vocabulary.AMORO, Vocabulary.PAIMON

_STARTUP_MODES = ("earliest", "latest", "timestamp", "group-offsets", "specific-offsets")
_SCAN_MODES = (
    "default",
    "latest-full",
    "full",
    "latest",
    "compacted-full",
    "from-timestamp",
    "from-file-creation-time",
    "from-snapshot",
    "from-snapshot-full",
    "incremental",
)

REGISTRY: tuple[PropertyDef, ...] = (
    # -- Amoro / Arctic ---------------------------------------------------------------------------
    PropertyDef(
        "log-store.enabled",
        PropType.BOOLEAN,
        _A,
        "Turn the log store on: every change is also written to a Kafka topic.",
        default="false",
        allowed=("true", "false"),
        aliases=("log-store.enable",),
    ),
    PropertyDef(
        "log-store.type",
        PropType.ENUM,
        _A,
        "Log system: `kafka`, or `pulsar` (Apache Pulsar; so far create-table, describe, "
        "alter-table and drop-table provision its partitioned topic and ingest writes it, "
        "issue 23).",
        default="kafka",
        allowed=("kafka", "pulsar"),
    ),
    PropertyDef(
        "log-store.address",
        PropType.STRING,
        _A,
        "Kafka bootstrap servers, `host:port[,host:port…]`; for `pulsar` the service URL "
        "`pulsar://host:6650[,host2:6650…]` (required). When no DDL gives a Kafka address, the "
        "default broker address ($LOGSTORE_KAFKA_BOOTSTRAP_SERVERS) is used; without it, an error.",
    ),
    PropertyDef(
        "log-store.topic",
        PropType.STRING,
        _A,
        "Topic of the log store. Required when the log store is on (no default). For `pulsar`: "
        "`persistent://tenant/namespace/topic`, or a name alone (in `public/default`).",
    ),
    PropertyDef(
        "log-store.data-format",
        PropType.ENUM,
        _A,
        "Record format of the log's values: `json` (wire format 1) or `debezium-json` (Flink's "
        "`debezium-json`, what Paimon's Kafka log wrote). See docs/design.md §7.",
        default="json",
        allowed=LOG_FORMATS,
    ),
    PropertyDef(
        "log-store.data-version",
        PropType.ENUM,
        _A,
        "Version of the record format.",
        default="v1",
        allowed=("v1",),
    ),
    PropertyDef(
        "log-store.consistency-guarantee.enabled",
        PropType.BOOLEAN,
        _A,
        "`true`: consistency `eventual` (readers retract the records of a failed write attempt); "
        "`false`: consistency `none`. Must agree with `log.consistency` when both are set.",
        default="false",
        allowed=("true", "false"),
    ),
    PropertyDef(
        "log.consumer.changelog.modes",
        PropType.ENUM,
        _A,
        "Row kinds in the log: `all-kinds` (+I -U +U -D) or `append-only` (+I only, for tables "
        "without a primary key).",
        default="all-kinds",
        allowed=("all-kinds", "append-only"),
    ),
    PropertyDef(
        "mixed-format.read.mode",
        PropType.ENUM,
        _A,
        "Store a reader uses by default: `file` (the Delta snapshot) or `log` (the Kafka topic).",
        default="file",
        allowed=("file", "log"),
        aliases=("arctic.read.mode",),
    ),
    PropertyDef(
        "mixed-format.emit.mode",
        PropType.ENUM,
        _A,
        "Stores a writer writes: `auto` (the file store, and the log store when it is on), "
        "`file`, `log` or `file,log`.",
        default="auto",
        allowed=("auto", "file", "log", "file,log"),
        aliases=("arctic.emit.mode",),
    ),
    PropertyDef(
        "scan.startup.mode",
        PropType.ENUM,
        _A,
        "Where a log reader starts. `timestamp` needs `scan.startup.timestamp-millis`.",
        default="latest",
        allowed=_STARTUP_MODES,
    ),
    PropertyDef(
        "scan.startup.timestamp-millis",
        PropType.INT,
        _A,
        "Start time of a log reader in `timestamp` mode, milliseconds since the epoch.",
        minimum=0,
    ),
    PropertyDef(
        "properties.*",
        PropType.PASSTHROUGH,
        _A,
        "Kafka client setting passed to producers and consumers, prefix stripped "
        "(`properties.security.protocol`). Secret values are never printed.",
    ),
    # -- Paimon / Flink Table Store ---------------------------------------------------------------
    PropertyDef(
        "log.system",
        PropType.ENUM,
        _P,
        "Log system: `kafka` turns the log store on, `none` leaves it off (Paimon's log is "
        "Kafka only; for Pulsar use Amoro's `log-store.type`).",
        default="none",
        allowed=("none", "kafka"),
        unsupported=("pulsar",),
        unsupported_hint="for a Pulsar log write Amoro's 'log-store.enabled' = 'true' and "
        "'log-store.type' = 'pulsar'",
    ),
    PropertyDef(
        "kafka.bootstrap.servers",
        PropType.STRING,
        _P,
        "Kafka bootstrap servers (same as `log-store.address`).",
    ),
    PropertyDef(
        "kafka.topic",
        PropType.STRING,
        _P,
        "Kafka topic of the log store (same as `log-store.topic`).",
    ),
    PropertyDef(
        "log.system.partitions",
        PropType.INT,
        _P,
        "Partitions of the topic when logstore creates it.",
        default=str(DEFAULT_PARTITIONS),
        minimum=1,
    ),
    PropertyDef(
        COMPACTION_KEY,
        PropType.INT,
        _P,
        "The ingest job compacts the Delta table's small files (files under 64 MiB into files of "
        "up to 128 MiB, Delta's auto-compaction sizes) after every this many epochs it commits; "
        "`0`: never. An epoch's MERGE writes a few files (up to the job's shuffle partitions): "
        "25 epochs make about Delta's own auto-compaction trigger, 50 small files.",
        default=str(DEFAULT_COMPACTION_EPOCHS),
        minimum=0,
    ),
    PropertyDef(
        "log.system.replication",
        PropType.INT,
        _P,
        "Replication factor of the topic when logstore creates it. Unset: the cluster's "
        "`default.replication.factor` (1 on a single broker, 3 on `logstore broker start "
        "--brokers 3`, whose `min.insync.replicas` is 2).",
        minimum=1,
    ),
    PropertyDef(
        "log.format",
        PropType.ENUM,
        _P,
        "Record format of the log (Paimon's name for `log-store.data-format`).",
        default="debezium-json",
        allowed=LOG_FORMATS,
    ),
    PropertyDef(
        "log.key.format",
        PropType.ENUM,
        _P,
        "Format of the record key (the primary key columns as a JSON object).",
        default="json",
        allowed=("json",),
    ),
    PropertyDef(
        "log.consistency",
        PropType.ENUM,
        _P,
        "`transactional`: consistency `committed` (readers see only what the Delta commit "
        "confirmed, exactly once); `eventual`: consistency `eventual`.",
        default="transactional",
        allowed=("transactional", "eventual"),
    ),
    PropertyDef(
        "log.changelog-mode",
        PropType.ENUM,
        _P,
        "Row kinds in the log: `all` (+I -U +U -D), `upsert` (no -U; needs a primary key) or "
        "`auto` (`upsert` with a primary key, else `all`).",
        default="auto",
        allowed=("auto", "all", "upsert"),
    ),
    PropertyDef(
        "streaming-read-mode",
        PropType.ENUM,
        _P,
        "Store a streaming reader uses (same as `mixed-format.read.mode`).",
        allowed=("file", "log"),
    ),
    PropertyDef(
        "scan.mode",
        PropType.ENUM,
        _P,
        "Where a reader starts; `latest` and `from-timestamp` (with `scan.timestamp-millis`) set "
        "the log start, the snapshot modes start from the Delta table.",
        default="default",
        allowed=_SCAN_MODES,
    ),
    PropertyDef(
        "scan.timestamp-millis",
        PropType.INT,
        _P,
        "Start time for `scan.mode` = `from-timestamp`, milliseconds since the epoch.",
        minimum=0,
    ),
    PropertyDef(
        "kafka.*",
        PropType.PASSTHROUGH,
        _P,
        "Kafka client setting passed to producers and consumers, prefix stripped "
        "(`kafka.security.protocol`). Secret values are never printed.",
    ),
    # -- logstore extensions ----------------------------------------------------------------------
    PropertyDef(
        TOPIC_CONFIG_PREFIX + "*",
        PropType.PASSTHROUGH,
        Vocabulary.LOGSTORE,
        "Kafka topic config of the table's topic (set by create-table, changed by alter-table), prefix stripped "
        "(`log.topic.retention.ms`). A Pulsar topic takes `retention.ms` (-1 or whole minutes) "
        "and `retention.bytes` (-1 or whole MiB), set as the topic's retention policy; unset: "
        "7 days and no size limit (Kafka's defaults).",
    ),
)

_BY_KEY: dict[str, PropertyDef] = {}
for _d in REGISTRY:
    if _d.type is not PropType.PASSTHROUGH:
        _BY_KEY[_d.key] = _d
        _BY_KEY.update(dict.fromkeys(_d.aliases, _d))


def lookup(key: str) -> PropertyDef | None:
    """The definition of ``key`` (a key or an alias, exactly as written), if it is a known one."""
    return _BY_KEY.get(key)


def get(key: str) -> PropertyDef:
    return _BY_KEY[key]


def passthrough_prefix(key: str) -> str | None:
    return next((p for p in PASSTHROUGH_PREFIXES if key.startswith(p)), None)


def is_reserved(key: str) -> bool:
    lower = key.lower()
    return any(lower.startswith(p) for p in RESERVED_PREFIXES)


def suggest(key: str) -> str | None:
    """The known key nearest to a misspelt one (or the key under a misspelt reserved prefix)."""
    depth = TOPIC_CONFIG_PREFIX.count(".")
    parts = key.lower().split(".")
    if len(parts) > depth:
        head, rest = ".".join(parts[:depth]) + ".", ".".join(parts[depth:])
        if rest and difflib.SequenceMatcher(None, head, TOPIC_CONFIG_PREFIX).ratio() >= 0.8:
            return TOPIC_CONFIG_PREFIX + rest
    matches = difflib.get_close_matches(key.lower(), list(_BY_KEY), n=1, cutoff=0.6)
    if not matches:
        return None
    found = _BY_KEY[matches[0]]
    return found.key if matches[0] in found.aliases else matches[0]


_WORD = re.compile(r"[^._\-]+")
_BY_WORD: dict[str, list[str]] = {}  # a word of a known key (split on . - _) -> the keys
for _k in _BY_KEY:
    for _w in set(_WORD.findall(_k)):
        _BY_WORD.setdefault(_w, []).append(_k)


@lru_cache(maxsize=1024)
def near_miss(key: str) -> str | None:
    """The known key that ``key`` is a typo of: one edit away (two for keys of 12 characters and
    more) with at least one of its words spelt right, whatever its prefix. Tight on purpose: it
    also judges keys outside the reserved prefixes (``scan.startup.mod``, ``log-stor.enabled``,
    ``kafka.topics``), which are otherwise kept as written."""
    lower = key.lower()
    candidates = {k for w in set(_WORD.findall(lower)) for k in _BY_WORD.get(w, ())}
    best: tuple[int, str] | None = None
    for known in sorted(candidates):
        limit = 1 if len(known) < 12 else 2
        distance = edit_distance(lower, known, limit)
        if 0 < distance <= limit and (best is None or distance < best[0]):
            best = (distance, known)
    return _BY_KEY[best[1]].key if best else None


def misspelt_reserved_prefix(key: str) -> str | None:
    """The reserved prefix ``key`` starts with a misspelling of (``log-stor.x`` -> ``log-store.``).

    Only the long prefixes: one typo from ``log.`` is too many ordinary words (``logs.``, ``lag.``).
    """
    head, dot, _ = key.lower().partition(".")
    if not dot or key.lower().startswith(MANAGED_PREFIX):
        return None
    for prefix in RESERVED_PREFIXES:
        name = prefix.removesuffix(".")
        if len(name) >= 6 and edit_distance(head, name, 1) == 1:
            return prefix
    return None


def normalize(defn: PropertyDef, value: str) -> str | None:
    """``value`` in canonical form for ``defn``, or None when it is not a valid value."""
    if defn.type in (PropType.BOOLEAN, PropType.ENUM):
        canon = value.lower()
        if "," in canon:  # a list of stores: order and spaces do not matter
            canon = ",".join(sorted({part.strip() for part in canon.split(",")}))
        return canon if canon in defn.allowed else None
    if defn.type is PropType.INT:
        if not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return None
        number = int(value)
        return str(number) if defn.minimum is None or number >= defn.minimum else None
    return value


def invalid_value_message(defn: PropertyDef, value: str, written_key: str) -> str:
    shown = value if len(value) <= 60 else value[:57] + "…"
    if value.lower() in defn.unsupported:
        text = (
            f"'{written_key}' = '{shown}' is not supported by logstore; "
            f"valid values: {', '.join(defn.allowed)}"
        )
        return f"{text}; {defn.unsupported_hint}" if defn.unsupported_hint else text
    if defn.type is PropType.INT:
        bound = f" ≥ {defn.minimum}" if defn.minimum is not None else ""
        return f"invalid value '{shown}' for '{written_key}': expected a whole number{bound}"
    return f"invalid value '{shown}' for '{written_key}'; valid values: {', '.join(defn.allowed)}"


def to_json() -> list[dict[str, Any]]:
    return [d.to_json() for d in REGISTRY]


def markdown_table() -> str:
    """The property reference of docs/properties.md (between ``<!-- properties:begin/end -->``)."""
    rows = [
        "| Property | Vocabulary | Type | Default | Values | Description |",
        "|---|---|---|---|---|---|",
    ]
    for d in REGISTRY:
        key = f"`{d.key}`"
        if d.aliases:
            key += " (alias " + ", ".join(f"`{a}`" for a in d.aliases) + ")"
        default = f"`{d.default}`" if d.default is not None else "—"
        values = ", ".join(f"`{v}`" for v in d.allowed)
        description = d.description.replace("|", "\\|")
        rows.append(
            f"| {key} | {d.vocabulary.value} | {d.type.value} | {default} | {values} | {description} |"
        )
    notes = (
        "Keys under `log-store.`, `log.`, `mixed-format.` and `arctic.` must be listed here (a "
        "misspelt one is an error with the nearest key suggested); any other key is kept as "
        "written, unless it is a typo of a listed key (`scan.startup.mod`, `log-stor.enabled`, "
        "`kafka.topics`) or starts with a misspelt reserved prefix (`log-stor.`): that is an "
        "error too, with the key or prefix suggested. Both vocabularies may "
        "appear in one table, but where they say the same thing they must agree. Values of "
        "secret keys (passwords, keys, tokens, `sasl.jaas.config`, and their misspellings such "
        "as `sasl.jass.config`) are shown as `***` in every output and never stored in the "
        "table's metadata."
    )
    defaults = (
        "Defaults when the log store is on: the topic has none (an error); the broker address "
        "comes from the DDL, else from $LOGSTORE_KAFKA_BOOTSTRAP_SERVERS, else it is an error; "
        f"partitions {DEFAULT_PARTITIONS} and the cluster's default replication. Consistency and "
        "changelog mode follow the vocabulary that turned the log store on: `log.system` gives "
        "`committed` and `auto`, `log-store.enabled` gives `none` and `all-kinds`."
    )
    return "\n".join([*rows, "", notes, "", defaults])


README_BEGIN = "<!-- properties:begin -->"
README_END = "<!-- properties:end -->"


def update_readme(readme: str) -> str:
    """``readme`` (docs/properties.md) with the text between the property markers replaced by
    ``markdown_table()``."""
    begin, end = readme.find(README_BEGIN), readme.find(README_END)
    if begin < 0 or end < begin:
        raise ValueError(f"the page needs the markers {README_BEGIN} and {README_END}, in order")
    head = readme[: begin + len(README_BEGIN)]
    return f"{head}\n{markdown_table()}\n{readme[end:]}"
