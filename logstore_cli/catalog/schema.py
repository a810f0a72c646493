"""Delta protocol schema JSON <-> the model's Spark SQL type strings. Pure."""

from __future__ import annotations

from typing import Any

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
