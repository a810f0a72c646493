"""The parser's output: what a CREATE TABLE statement says, with the position of every part.

Nothing here is validated beyond syntax; ``build.py`` turns it into the model and checks meaning.
"""

from __future__ import annotations

from typing import NamedTuple

from logstore_cli.ddl.source import Span


class Name(NamedTuple):
    """A name part as written, unquoted."""

    text: str  # unquoted
    span: Span


class ColumnDef(NamedTuple):
    """A column definition of a CREATE TABLE."""

    name: Name
    type: str  # Spark SQL type string
    not_null: bool
    comment: str | None
    primary_key: Span | None  # an inline "PRIMARY KEY" constraint


class PrimaryKeyDef(NamedTuple):
    """A table-level PRIMARY KEY (...) constraint."""

    columns: tuple[Name, ...]
    span: Span


class PropertyEntry(NamedTuple):
    """A 'key' = 'value' entry of a property list."""

    key: str
    value: str
    key_span: Span
    value_span: Span


class CreateTable(NamedTuple):
    """A CREATE TABLE statement as parsed, with the spans diagnostics point at."""

    span: Span  # the CREATE keyword
    name: tuple[Name, ...]  # [catalog.][database.]table
    columns: tuple[ColumnDef, ...]
    column_list: Span | None  # the "(" of the column list; None when there is none
    elided: Span | None  # a "..." standing for the columns, as in documentation
    primary_keys: tuple[PrimaryKeyDef, ...]  # table-level PRIMARY KEY (…) constraints
    using: Name | None
    properties: tuple[PropertyEntry, ...]  # TBLPROPERTIES, OPTIONS and WITH, in order
    partitioned_by: tuple[Name, ...]
    comment: str | None
    location: str | None
    if_not_exists: bool
    or_replace: bool
