"""Table names: the one rule for database and table identifiers, in DDL and on the command line.

A table lives at ``<warehouse>/<database>/<table>``, so each of the two parts becomes a directory
name: only letters, digits, ``_`` and ``-`` (starting with a letter, digit or ``_``) are allowed,
which rules out path separators, ``.``/``..``, control characters and every other way out of the
warehouse. A third, leading part is a Flink/Spark catalog name: it is recorded, never part of the
path. Pure: no I/O.

Pulsar topic names (``PulsarTopicName``) live here too: the DDL checks Amoro's ``log-store.topic``
with the same rule the admin client (``pulsar/admin.py``) puts in its URL paths.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from typing import NamedTuple

from logstore_cli.errors import InvalidInputError

DEFAULT_DATABASE = "default"
MAX_IDENTIFIER = 128  # well below the 255-byte file-name limit, even in UTF-8
NAME_RULE = (
    "letters, digits, '_' and '-', starting with a letter, digit or '_' "
    f"(at most {MAX_IDENTIFIER} characters)"
)
_IDENTIFIER = re.compile(r"[^\W][\w-]*")  # \w: Unicode letters, digits and '_'


def identifier_problem(part: str, what: str) -> str | None:
    """Why ``part`` cannot be a ``what`` (database, table, catalog) name; None when it can."""
    if not part:
        return f"the {what} name is empty"
    if len(part) > MAX_IDENTIFIER:
        return f"the {what} name is longer than {MAX_IDENTIFIER} characters"
    if not _IDENTIFIER.fullmatch(part):
        # Printable characters as typed (é stays é); only control characters are escaped.
        shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in part)
        return f"the {what} name '{shown}' may only contain {NAME_RULE}"
    return None


def part_problems(parts: Sequence[str]) -> list[tuple[int, str]]:
    """``(index, message)`` for each part of a 1- to 3-part name that breaks the rule.

    For callers that point at the part itself (the DDL's diagnostics): each message says what the
    part is (catalog, database or table), what is wrong, and the rule. A name of more than three
    parts is the caller's to report: its parts have no roles.
    """
    roles = ("catalog", "database", "table")[3 - len(parts) :] if len(parts) <= 3 else ()
    found: list[tuple[int, str]] = []
    for index, (part, what) in enumerate(zip(parts, roles, strict=False)):
        problem = identifier_problem(part, what)
        if problem is not None:
            if NAME_RULE not in problem:
                problem += f"; names use only {NAME_RULE}"
            found.append((index, problem))
    return found


class TableName(NamedTuple):
    """A validated table name; ``catalog`` is recorded but plays no part in where the table lives."""

    database: str
    table: str
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        """``database.table``: the name a table is known by in the warehouse."""
        return f"{self.database}.{self.table}"

    def __str__(self) -> str:
        return self.qualified


def split_parts(text: str) -> list[str]:
    """``a.b.c`` -> parts, honouring backticks (```a.b`.c`` is two parts; ``````` is a quote)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and i + 1 < len(text) and text[i + 1] == "`":
                current.append("`")
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quoted:
        raise InvalidInputError(
            f"table name {text!r} has an unclosed backtick", hint="close the quote: `db`.`table`"
        )
    parts.append("".join(current))
    return parts


def table_name_from_parts(parts: list[str], *, shown: str | None = None) -> TableName:
    """A validated name from 1 to 3 parts (``table``, ``db.table``, ``catalog.db.table``)."""
    shown = shown if shown is not None else ".".join(parts)
    if not 1 <= len(parts) <= 3:
        raise InvalidInputError(
            f"table name '{shown}' has {len(parts)} parts; a name is table, database.table "
            "or catalog.database.table",
            hint="name the table as database.table",
        )
    padded: list[str | None] = [None] * (3 - len(parts)) + list(parts)
    catalog, database, table = padded
    database = DEFAULT_DATABASE if database is None else database
    for part, what in ((catalog, "catalog"), (database, "database"), (table, "table")):
        if part is None:
            continue
        problem = identifier_problem(part, what)
        if problem:
            raise InvalidInputError(
                f"invalid table name '{shown}': {problem}",
                hint=f"database and table names use only {NAME_RULE}",
            )
    assert table is not None
    return TableName(database, table, catalog)


def parse_table_name(text: str) -> TableName:
    """Parse a table name as typed on the command line: ``[[catalog.]database.]table``."""
    return table_name_from_parts(split_parts(text.strip()), shown=text.strip())


# Pulsar's own rule for tenant, namespace and topic names (NamedEntity: [-=:.\w]), without ':'
# (it reads as a port or a scheme in messages) and never '.' or '..' alone.
_PULSAR_SEGMENT = re.compile(r"[A-Za-z0-9_=.\-]{1,128}")
PULSAR_PARTITION_SUFFIX = "-partition-"
PULSAR_DEFAULT_NAMESPACE = ("public", "default")


class PulsarTopicName(NamedTuple):
    """``persistent://tenant/namespace/topic``, each part checked (it is put in URL paths)."""

    tenant: str
    namespace: str
    topic: str

    def __str__(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.topic}"

    def partition(self, index: int) -> str:
        return f"{self}{PULSAR_PARTITION_SUFFIX}{index}"

    @property
    def path(self) -> str:
        """The topic's path in the admin API (``/admin/v2/persistent/…``)."""
        quote = urllib.parse.quote
        return (
            f"/admin/v2/persistent/{quote(self.tenant)}/{quote(self.namespace)}/{quote(self.topic)}"
        )

    @classmethod
    def parse(cls, text: str) -> PulsarTopicName:
        """A full name, or a short one (``orders``: ``public/default``, as Pulsar's clients read
        it); only persistent topics (a log must survive a broker restart)."""
        rest = text
        if "://" in text:
            scheme, rest = text.split("://", 1)
            if scheme != "persistent":
                raise InvalidInputError(
                    f"Pulsar topic {text!r} is not persistent",
                    hint="a log must survive a restart: use persistent://tenant/namespace/topic",
                )
        parts = rest.split("/")
        if len(parts) == 1:
            parts = [*PULSAR_DEFAULT_NAMESPACE, parts[0]]
        if len(parts) != 3 or not all(_pulsar_segment(p) for p in parts):
            raise InvalidInputError(
                f"invalid Pulsar topic name {text!r}",
                hint="persistent://tenant/namespace/topic, or a topic alone (public/default); each "
                "part letters, digits and _ = . - (not '.' or '..' alone)",
            )
        if PULSAR_PARTITION_SUFFIX in parts[2]:
            raise InvalidInputError(
                f"Pulsar topic {text!r} names one partition of a topic",
                hint=f"name the partitioned topic itself, without '{PULSAR_PARTITION_SUFFIX}N'",
            )
        return cls(parts[0], parts[1], parts[2])


def _pulsar_segment(part: str) -> bool:
    return bool(_PULSAR_SEGMENT.fullmatch(part)) and part not in (".", "..")
