"""Delta protocol schema JSON <-> the model's Spark SQL type strings. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from logstore_cli.logformat.values import (
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    SqlType,
    parse_type,
)
from logstore_cli.model import ColumnSpec

# Delta primitive type names -> Spark SQL type names used in ColumnSpec.type.
_PRIMITIVES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "boolean": "boolean",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}


def delta_type_to_sql(t: Any) -> str:
    """One Delta schema type (a name or a nested object) as a Spark SQL type string."""
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        if t.startswith("decimal"):
            return t.replace(" ", "")
        return t
    kind = t.get("type")
    if kind == "array":
        return f"array<{delta_type_to_sql(t['elementType'])}>"
    if kind == "map":
        return f"map<{delta_type_to_sql(t['keyType'])},{delta_type_to_sql(t['valueType'])}>"
    if kind == "struct":
        inner = ",".join(f"{f['name']}:{delta_type_to_sql(f['type'])}" for f in t["fields"])
        return f"struct<{inner}>"
    raise ValueError(f"unsupported Delta type {t!r}")


def columns_from_delta_schema(schema: dict[str, Any]) -> tuple[ColumnSpec, ...]:
    cols = []
    for f in schema["fields"]:
        comment = (f.get("metadata") or {}).get("comment")
        cols.append(
            ColumnSpec(
                name=f["name"],
                type=delta_type_to_sql(f["type"]),
                nullable=bool(f.get("nullable", True)),
                comment=comment if isinstance(comment, str) else None,
            )
        )
    return tuple(cols)


# Spark SQL type names -> the Delta protocol's primitive names, where they differ.
_DELTA_PRIMITIVES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte"}


def sql_type_to_delta(t: SqlType) -> Any:
    """One column type as the Delta schema writes it (nested values nullable, as Spark makes them
    from a DDL type string)."""
    if isinstance(t, ScalarType):
        return _DELTA_PRIMITIVES.get(t.name, t.name)
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, ArrayType):
        return {"type": "array", "elementType": sql_type_to_delta(t.element), "containsNull": True}
    if isinstance(t, MapType):
        return {
            "type": "map",
            "keyType": sql_type_to_delta(t.key),
            "valueType": sql_type_to_delta(t.value),
            "valueContainsNull": True,
        }
    return {
        "type": "struct",
        "fields": [
            {"name": name, "type": sql_type_to_delta(ft), "nullable": True, "metadata": {}}
            for name, ft in t.fields
        ],
    }


def delta_schema(columns: Sequence[ColumnSpec]) -> dict[str, Any]:
    """The Delta schema of ``columns``, field for field what delta-spark 4.0.1 writes for the
    same columns (a column comment in the field's metadata)."""
    return {
        "type": "struct",
        "fields": [
            {
                "name": c.name,
                "type": sql_type_to_delta(parse_type(c.type)),
                "nullable": c.nullable,
                "metadata": {"comment": c.comment} if c.comment is not None else {},
            }
            for c in columns
        ],
    }
