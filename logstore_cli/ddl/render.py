"""Render the few Spark SQL statements logstore issues itself (quoting lives with the SQL syntax)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logstore_cli.model import ColumnSpec


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def delta_path_table(path: str) -> str:
    return f"delta.{quote_identifier(path)}"


def alter_properties_sql(path: str, set_: Mapping[str, str], unset: Sequence[str]) -> list[str]:
    """``ALTER TABLE delta.`path` SET/UNSET TBLPROPERTIES`` statements for a property change."""
    table = delta_path_table(path)
    statements = []
    if set_:
        pairs = ", ".join(f"{quote_string(k)} = {quote_string(v)}" for k, v in set_.items())
        statements.append(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")
    if unset:
        keys = ", ".join(quote_string(k) for k in unset)
        statements.append(f"ALTER TABLE {table} UNSET TBLPROPERTIES IF EXISTS ({keys})")
    return statements


def add_columns_sql(path: str, columns: Sequence[ColumnSpec]) -> str:
    """``ALTER TABLE delta.`path` ADD COLUMNS (…)`` for nullable ``columns`` (the Spark path of
    ``alter-table --add-column``)."""
    parts = []
    for c in columns:
        comment = f" COMMENT {quote_string(c.comment)}" if c.comment is not None else ""
        parts.append(f"{quote_identifier(c.name)} {c.type}{comment}")
    return f"ALTER TABLE {delta_path_table(path)} ADD COLUMNS ({', '.join(parts)})"


def widen_columns_sql(path: str, columns: Sequence[ColumnSpec]) -> list[str]:
    """Delta 4.0's type widening of ``columns`` to their new types: the table feature first
    (a CHANGE COLUMN to a wider type is refused without it), then one CHANGE COLUMN each."""
    table = delta_path_table(path)
    statements = [f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"]
    for c in columns:
        statements.append(
            f"ALTER TABLE {table} CHANGE COLUMN {quote_identifier(c.name)} TYPE {c.type}"
        )
    return statements
