"""The table model every part of logstore works on: frozen, typed, free of I/O and of SQL syntax.

``logstore_cli.ddl`` builds it from DDL text; provisioning, jobs and the catalog consume it. Property
maps keep raw values (the Kafka client needs the real password); everything that leaves the process
as text (``to_json``, ``repr``) goes through ``redact`` so that no output ever shows a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import FrozenInstanceError, dataclass
from enum import StrEnum
from functools import cache, cached_property, lru_cache
from typing import Any, ClassVar, TypeVar, dataclass_transform

REDACTED = "***"

# Applied when logstore creates the topic and the DDL does not say (Paimon's defaults too).
DEFAULT_PARTITIONS = 1
# Paimon's "full compaction after this many commits": the ingest job's own compaction of the Delta
# table's small files, every this many epochs it commits (0: never).
COMPACTION_KEY = "full-compaction.delta-commits"
DEFAULT_COMPACTION_EPOCHS = 25
# The replication of a topic whose DDL does not say is the cluster's own default
# (``default.replication.factor``): 1 on one broker, 3 on a local three-node cluster.
BROKER_DEFAULT = "broker default"

# Words that make a property key secret wherever they occur in it (split on . - _).
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "token",
        "credential",
        "credentials",
        "jaas",
        "apikey",
        "privatekey",
        "userinfo",
    }
)
# "<qualifier>.key" is key material (ssl.key, fs.s3a.access.key, fs.azure.account.key.<acct>).
_KEY_QUALIFIERS = frozenset(
    {"access", "account", "api", "encryption", "master", "private", "secret", "signing", "ssl"}
)
_SECRET_SUFFIXES = ("password", "secret", "token")
# A value that carries a credential whatever its key is called (e.g. a JAAS line in a custom key).
_SECRET_VALUE = re.compile(r"(password|secret|token)\s*=", re.IGNORECASE)
# Whole keys that carry secrets without saying so (librdkafka's OIDC config holds client secrets).
_SECRET_KEYS = frozenset({"sasl.oauthbearer.config"})

# Near misses: a misspelt secret key must stay secret. Words of five letters and more are matched
# with one typo; shorter ones ("pwd", "jaas") and "passwd" (one typo from "passed") only exactly,
# but their usual keys are matched whole, where one or two typos are still unambiguous.
_FUZZY_WORDS = tuple(sorted(w for w in _SECRET_WORDS if len(w) >= 5 and w != "passwd"))
_FUZZY_SUFFIXES = ("password", "secret")  # "sslpasword"; "token" would catch "mistaken"
_FUZZY_KEYS = tuple(sorted({"sasl.jaas.config", *_SECRET_KEYS}))
_WORD = re.compile(r"[^._\-]+")


def _one_deletion(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _deletion_index(words: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each word and its one-deletion forms -> the words: two words one edit apart share a form
    (symmetric deletion), so a lookup finds the candidates without comparing every pair."""
    index: dict[str, set[str]] = {}
    for word in words:
        for form in {word} | _one_deletion(word):
            index.setdefault(form, set()).add(word)
    return {form: tuple(sorted(found)) for form, found in index.items()}


_WORD_INDEX = _deletion_index(_FUZZY_WORDS)


@cache
def _suffix_neighbours() -> dict[str, str]:
    """Every string one edit from a fuzzy suffix -> that suffix; built on first use (~1,100)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    found: dict[str, str] = {}
    for word in _FUZZY_SUFFIXES:
        n = len(word)
        forms = _one_deletion(word)
        forms |= {word[:i] + c + word[i + 1 :] for i in range(n) for c in alphabet}
        forms |= {word[:i] + c + word[i:] for i in range(n + 1) for c in alphabet}
        forms |= {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(n - 1)}
        forms.discard(word)
        for form in forms:
            found.setdefault(form, word)
    return found


def edit_distance(a: str, b: str, limit: int) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from ``a`` to ``b``, up to ``limit``.

    Returns ``limit + 1`` as soon as the distance is known to exceed ``limit``, so that comparing a
    key with many candidates stays cheap. Also the registry's measure for "did you mean".
    """
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    if a == b:
        return 0
    before: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = ca != cb
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], before[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        before, prev = prev, row
    return min(prev[-1], limit + 1)


@lru_cache(maxsize=4096)  # the same few keys recur in every table of a file
def is_secret_key(key: str) -> bool:
    """Whether a property key names a secret (passwords, keys, ``sasl.jaas.config``, tokens ...).

    The one rule for the whole tool: DDL output, table metadata and Kafka client messages use it.
    A near miss of a secret key (``sasl.jass.config``, ``ssl.keystore.pasword``) is secret too:
    a typo must not be what prints or stores a password.
    """
    return _names_a_secret(key) or misspelt_secret_key(key) is not None


def _is_secret_word(word: str) -> bool:
    return any(
        w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES)
        for w in (word, word.removesuffix("s"))  # also "secrets", "passwords", "tokens"
    )


def _names_a_secret(key: str) -> bool:
    if key.lower().endswith(tuple(_SECRET_KEYS)):
        return True
    words = [w for w in re.split(r"[._\-]+", key.lower()) if w]
    if not words or words[-1] == "provider" or words[-2:] == ["provider", "type"]:
        # "fs.s3a.aws.credentials.provider", "….sas.token.provider.type": a class that fetches the
        # credential, not one; printing it (spark-submit --conf) is what a credential provider is for.
        return False
    if any(_is_secret_word(w) for w in words):
        return True
    if words[-1] == "key" or ("user" in words and "info" in words):
        return True
    return any(
        w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words)
    )


@lru_cache(maxsize=4096)
def misspelt_secret_key(key: str) -> str | None:
    """``key`` with its misspelt secret word or key corrected, when it has one; else None.

    ``properties.sasl.jass.config`` -> ``properties.sasl.jaas.config``, ``kafka.ssl.key.pasword``
    -> ``kafka.ssl.key.password``. A key spelt right (secret or not) gives None.
    """
    lower = key.lower()
    spans = [(m.start(), m.end()) for m in _WORD.finditer(lower)]
    for start, end in spans:
        word = lower[start:end]
        if _is_secret_word(word):
            continue
        fixed = _near_word(word)
        if fixed is not None:
            return key[:start] + fixed + key[end:]
    words = [lower[s:e] for s, e in spans]
    for secret in _FUZZY_KEYS:
        parts = secret.split(".")
        if len(spans) < len(parts) or not set(parts) & set(words[-len(parts) :]):
            continue  # matched whole only with one of its words spelt right: cheap to rule out
        tail = ".".join(words[-len(parts) :])
        limit = 1 if len(secret) < 16 else 2
        if 0 < edit_distance(tail, secret, limit) <= limit:
            return key[: spans[-len(parts)][0]] + secret
    return None


def _near(word: str, index: Mapping[str, tuple[str, ...]]) -> str | None:
    """The word of ``index`` one edit away from ``word``, if any."""
    for form in {word} | _one_deletion(word):
        for candidate in index.get(form, ()):
            if edit_distance(word, candidate, 1) == 1:
                return candidate
    return None


def _near_word(word: str) -> str | None:
    """The secret word ``word`` is one typo away from (also as the end of a longer word)."""
    if (found := _near(word, _WORD_INDEX)) is not None:
        return found
    neighbours = _suffix_neighbours()
    for cut in range(5, min(10, len(word))):  # the suffixes' lengths, one more or less
        if (suffix := neighbours.get(word[-cut:])) is not None:
            return word[:-cut] + suffix
    return None


def is_secret_value(value: str) -> bool:
    return bool(_SECRET_VALUE.search(value))


def is_secret(key: str, value: str) -> bool:
    return is_secret_key(key) or is_secret_value(value)


def redact(props: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``props`` with every secret value replaced by ``***``."""
    return {k: REDACTED if is_secret(k, v) else v for k, v in props.items()}


class FrozenMap(Mapping[str, str]):
    """An immutable, hashable, insertion-ordered ``str -> str`` map whose repr hides secrets."""

    __slots__ = ("_data",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._data: dict[str, str] = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({redact(self._data)!r})"


_R = TypeVar("_R", bound=type)


@dataclass_transform(frozen_default=True)
def frozen_record(cls: _R) -> _R:
    """``@dataclass(init=False, repr=False, eq=False)`` for a ``FrozenRecord``: its fields become
    dataclass fields and nothing is compiled. Type checkers see a frozen dataclass (PEP 681's
    ``frozen_default``), so an assignment to a field is still a type error."""
    return dataclass(init=False, repr=False, eq=False)(cls)  # type: ignore[return-value]


class FrozenRecord:
    """What ``@dataclass(frozen=True)`` generates (``repr``, ``==``, ``hash``, no assignment),
    written once for the model's and the configuration's classes.

    A frozen dataclass compiles six methods of its own when its module is imported (0.4-1 ms a
    class), and every command loads these classes at start-up (issue 20). Each subclass is a
    ``@frozen_record`` dataclass (its fields stay dataclass fields, for
    ``dataclasses.replace`` and ``fields``) with a hand-written ``__init__`` that sets its fields
    with ``object.__setattr__``. Behaviour is the frozen dataclass's (tests/unit/test_model.py).
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__dataclass_fields__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__dataclass_fields__)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


class Consistency(StrEnum):
    """What a log reader sees (docs/design.md §6.4)."""

    COMMITTED = (
        "committed"  # exactly-once: only epochs the Delta commit confirmed (Paimon transactional)
    )
    EVENTUAL = "eventual"  # at once, retracting a failed attempt's records (Amoro's guarantee)
    NONE = "none"  # at once, no correction (at-least-once)


class ChangelogMode(StrEnum):
    """Which row kinds the log carries."""

    ALL_KINDS = "all-kinds"  # +I -U +U -D
    APPEND_ONLY = "append-only"  # +I only
    UPSERT = "upsert"  # no -U; readers normalize by primary key


class ReadMode(StrEnum):
    """The store a reader uses unless told otherwise."""

    FILE = "file"
    LOG = "log"


class EmitMode(StrEnum):
    """The stores a writer writes (``auto``: the file store, and the log store when it is on)."""

    AUTO = "auto"
    FILE = "file"
    LOG = "log"
    FILE_LOG = "file,log"


class StartupMode(StrEnum):
    """Where a log reader starts (Flink Kafka connector vocabulary)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    GROUP_OFFSETS = "group-offsets"
    SPECIFIC_OFFSETS = "specific-offsets"


@frozen_record
class ColumnSpec(FrozenRecord):
    """A column of a table: name, Spark SQL type, nullability and comment."""

    name: str
    type: str  # Spark SQL type string, lower case: "bigint", "decimal(10,2)", "struct<a:int>"
    nullable: bool = True
    comment: str | None = None

    def __init__(
        self, name: str, type: str, nullable: bool = True, comment: str | None = None
    ) -> None:
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "nullable", nullable)
        _set(self, "comment", comment)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "nullable": self.nullable,
            "comment": self.comment,
        }


@frozen_record
class LogStoreSpec(FrozenRecord):
    """The log store of a table, resolved from either vocabulary (Amoro ``log-store.*``, Paimon)."""

    system: str
    address: str  # Kafka bootstrap servers, host:port[,host:port...]
    topic: str
    consistency: Consistency
    changelog_mode: ChangelogMode
    partitions: int  # concrete: defaults were applied when the model was built
    replication: int | None  # None: the cluster's default.replication.factor
    client_properties: Mapping[str, str]  # Kafka client passthrough, prefix stripped, raw values
    data_format: str = "json"
    read_mode: ReadMode = ReadMode.FILE
    emit_mode: EmitMode = EmitMode.AUTO
    startup_mode: StartupMode = StartupMode.LATEST
    startup_timestamp_millis: int | None = None

    def __init__(
        self,
        system: str,
        address: str,
        topic: str,
        consistency: Consistency,
        changelog_mode: ChangelogMode,
        partitions: int,
        replication: int | None,
        client_properties: Mapping[str, str],
        data_format: str = "json",
        read_mode: ReadMode = ReadMode.FILE,
        emit_mode: EmitMode = EmitMode.AUTO,
        startup_mode: StartupMode = StartupMode.LATEST,
        startup_timestamp_millis: int | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "system", system)
        _set(self, "address", address)
        _set(self, "topic", topic)
        _set(self, "consistency", Consistency(consistency))
        _set(self, "changelog_mode", ChangelogMode(changelog_mode))
        _set(self, "partitions", partitions)
        _set(self, "replication", replication)
        _set(self, "client_properties", FrozenMap(client_properties))
        _set(self, "data_format", data_format)
        _set(self, "read_mode", ReadMode(read_mode))
        _set(self, "emit_mode", EmitMode(emit_mode))
        _set(self, "startup_mode", StartupMode(startup_mode))
        _set(self, "startup_timestamp_millis", startup_timestamp_millis)

    @property
    def system_title(self) -> str:
        """The log system as messages name it: ``Kafka``, ``Pulsar``."""
        return self.system.capitalize()

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "system": self.system,
            "address": self.address,
            "topic": self.topic,
            "consistency": self.consistency.value,
            "changelog_mode": self.changelog_mode.value,
            "partitions": self.partitions,
            "replication": self.replication,
            "client_properties": redact(self.client_properties),
            "data_format": self.data_format,
            "read_mode": self.read_mode.value,
            "emit_mode": self.emit_mode.value,
            "startup_mode": self.startup_mode.value,
            "startup_timestamp_millis": self.startup_timestamp_millis,
        }


@frozen_record
class TableSpec(FrozenRecord):
    """One table as declared: columns, keys, format, every property, and its log store."""

    database: str | None
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    using: str | None
    properties: Mapping[str, str]  # as written (keys and raw values), in written order
    log_store: LogStoreSpec | None
    catalog: str | None = None
    partitioned_by: tuple[str, ...] = ()
    comment: str | None = None
    location: str | None = None
    if_not_exists: bool = False
    or_replace: bool = False

    def __init__(
        self,
        database: str | None,
        table: str,
        columns: tuple[ColumnSpec, ...],
        primary_key: tuple[str, ...],
        using: str | None,
        properties: Mapping[str, str],
        log_store: LogStoreSpec | None,
        catalog: str | None = None,
        partitioned_by: tuple[str, ...] = (),
        comment: str | None = None,
        location: str | None = None,
        if_not_exists: bool = False,
        or_replace: bool = False,
    ) -> None:
        _set = object.__setattr__
        _set(self, "database", database)
        _set(self, "table", table)
        _set(self, "columns", tuple(columns))
        _set(self, "primary_key", tuple(primary_key))
        _set(self, "using", using)
        _set(self, "properties", FrozenMap(properties))
        _set(self, "log_store", log_store)
        _set(self, "catalog", catalog)
        _set(self, "partitioned_by", tuple(partitioned_by))
        _set(self, "comment", comment)
        _set(self, "location", location)
        _set(self, "if_not_exists", if_not_exists)
        _set(self, "or_replace", or_replace)

    @property
    def name(self) -> str:
        """``db.table`` as written (``catalog.db.table`` with a catalog, ``table`` alone without)."""
        return ".".join(p for p in (self.catalog, self.database, self.table) if p is not None)

    def column(self, name: str) -> ColumnSpec | None:
        """The column called ``name`` (case-insensitive, as Spark resolves names), if any."""
        return self._column_index.get(name.lower())

    @cached_property
    def _column_index(self) -> dict[str, ColumnSpec]:
        return {c.name.lower(): c for c in self.columns}

    def to_json(self) -> dict[str, Any]:
        """The object ``logstore validate --json`` prints for this table (secrets redacted)."""
        return {
            "name": self.name,
            "database": self.database,
            "table": self.table,
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
            "using": self.using,
            "log_store": self.log_store.to_json() if self.log_store else None,
            "properties": redact(self.properties),
            "catalog": self.catalog,
            "partitioned_by": list(self.partitioned_by),
            "comment": self.comment,
            "location": self.location,
            "if_not_exists": self.if_not_exists,
            "or_replace": self.or_replace,
        }
