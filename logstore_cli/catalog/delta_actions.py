"""The Delta log commits logstore writes itself: a table's version 0 and a change of its properties.

What delta-spark 4.0.1 writes for the same statement, action for action: the protocol it picks for
a logstore table (writer version 7 listing ``invariants`` and ``appendOnly``, the legacy features
every new table gets, and ``changeDataFeed``; ``timestampNtz`` for reader and writer when a column
needs it), the metadata, and a ``commitInfo`` naming the operation. delta-rs 1.6.6 was tried first:
it lists ``changeDataFeed`` and ``timestampNtz`` without ``invariants`` for a table with a NOT NULL
column and a TIMESTAMP_NTZ one, which delta-spark then refuses to read
(DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH); and it cannot remove a property. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from logstore_cli.logformat.values import (
    ArrayType,
    DecimalType,
    MapType,
    ScalarType,
    SqlType,
    StructType,
    parse_type,
)
from logstore_cli.model import ColumnSpec, TableSpec

# Spark's order, so that a table made here and one made by Spark have the same protocol action.
_WRITER_FEATURES = ("invariants", "changeDataFeed", "appendOnly")
_NTZ = "timestampNtz"


def _has_ntz(t: SqlType) -> bool:
    if isinstance(t, ScalarType):
        return t.name == "timestamp_ntz"
    if isinstance(t, ArrayType):
        return _has_ntz(t.element)
    if isinstance(t, MapType):
        return _has_ntz(t.key) or _has_ntz(t.value)
    if isinstance(t, StructType):
        return any(_has_ntz(ft) for _, ft in t.fields)
    return False


def protocol(spec: TableSpec) -> dict[str, Any]:
    """The protocol action of a new logstore table (Change Data Feed on, no other table feature
    asked for: tables that ask for more are created by Spark)."""
    if any(_has_ntz(parse_type(c.type)) for c in spec.columns):
        return {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": [_NTZ],
            "writerFeatures": [_NTZ, *_WRITER_FEATURES],
        }
    return {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": list(_WRITER_FEATURES)}


def create_table(
    spec: TableSpec,
    configuration: Mapping[str, str],
    *,
    table_id: str,
    txn_id: str,
    now_ms: int,
    engine: str,
) -> list[dict[str, Any]]:
    """Version 0 of ``spec``'s Delta table: commitInfo, metaData, protocol."""
    metadata: dict[str, Any] = {"id": table_id}
    if spec.comment is not None:
        metadata["description"] = spec.comment
    metadata.update(
        {
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _compact(delta_schema(spec.columns)),
            "partitionColumns": list(spec.partitioned_by),
            "configuration": dict(configuration),
            "createdTime": now_ms,
        }
    )
    info = {
        "timestamp": now_ms,
        "operation": "CREATE TABLE",
        "operationParameters": {
            "partitionBy": _compact(list(spec.partitioned_by)),
            "clusterBy": "[]",
            "description": spec.comment,
            "isManaged": "false",
            "properties": _compact(dict(configuration)),
        },
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": engine,
        "txnId": txn_id,
    }
    return [{"commitInfo": info}, {"metaData": metadata}, {"protocol": protocol(spec)}]


def change_properties(
    metadata: Mapping[str, Any],
    set_: Mapping[str, str],
    unset: Sequence[str],
    *,
    txn_id: str,
    now_ms: int,
    engine: str,
) -> list[dict[str, Any]]:
    """A commit replacing the table's ``metadata`` (its current metaData action) with one whose
    configuration has ``set_`` set and ``unset`` removed: both in one commit, so that a change is
    never half made (Spark makes one commit per statement)."""
    configuration = {k: v for k, v in metadata["configuration"].items() if k not in unset}
    configuration.update(set_)
    params: dict[str, Any] = {}
    if set_:
        params["properties"] = _compact(dict(set_))
    if unset:
        params["unsetProperties"] = _compact(list(unset))
    info = {
        "timestamp": now_ms,
        "operation": "SET TBLPROPERTIES" if set_ else "UNSET TBLPROPERTIES",
        "operationParameters": params,
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": engine,
        "txnId": txn_id,
    }
    return [{"commitInfo": info}, {"metaData": {**metadata, "configuration": configuration}}]


def commit_text(actions: Sequence[Mapping[str, Any]]) -> str:
    """A commit file's text: one action per line, as every Delta writer writes it."""
    return "".join(_compact(a) + "\n" for a in actions)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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


def add_columns(
    metadata: Mapping[str, Any],
    columns: Sequence[ColumnSpec],
    *,
    txn_id: str,
    now_ms: int,
    engine: str,
) -> list[dict[str, Any]]:
    """A commit replacing the table's ``metadata`` with one whose schema has ``columns`` appended
    (nullable, checked by ``check_new_columns``): all in one commit, as Spark's ``ALTER TABLE …
    ADD COLUMNS`` makes it. Rows already written read the new columns as null."""
    schema = json.loads(metadata["schemaString"])
    fields = delta_schema(columns)["fields"]
    schema = {**schema, "fields": [*schema["fields"], *fields]}
    info = {
        "timestamp": now_ms,
        "operation": "ADD COLUMNS",
        "operationParameters": {"columns": _compact([{"column": f} for f in fields])},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": engine,
        "txnId": txn_id,
    }
    return [{"commitInfo": info}, {"metaData": {**metadata, "schemaString": _compact(schema)}}]


def needs_ntz(columns: Sequence[ColumnSpec]) -> bool:
    """Whether any of ``columns`` needs the ``timestampNtz`` table feature."""
    return any(_has_ntz(parse_type(c.type)) for c in columns)
