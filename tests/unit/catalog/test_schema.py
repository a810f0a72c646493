from __future__ import annotations

import pytest

from logstore_cli.catalog.delta_actions import delta_schema
from logstore_cli.catalog.schema import columns_from_delta_schema, delta_type_to_sql
from logstore_cli.model import ColumnSpec


@pytest.mark.parametrize(
    ("delta", "sql"),
    [
        ("integer", "int"),
        ("long", "bigint"),
        ("short", "smallint"),
        ("byte", "tinyint"),
        ("decimal(10, 2)", "decimal(10,2)"),
        ("timestamp", "timestamp"),
        ({"type": "array", "elementType": "string", "containsNull": True}, "array<string>"),
        (
            {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
            "map<string,bigint>",
        ),
        (
            {
                "type": "struct",
                "fields": [
                    {"name": "a", "type": "integer", "nullable": True, "metadata": {}},
                    {"name": "b", "type": {"type": "array", "elementType": "double"}},
                ],
            },
            "struct<a:int,b:array<double>>",
        ),
    ],
)
def test_delta_types_become_spark_sql_types(delta: object, sql: str) -> None:
    assert delta_type_to_sql(delta) == sql


def test_columns_keep_nullability_and_comments() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": False, "metadata": {}},
            {"name": "n", "type": "string", "nullable": True, "metadata": {"comment": "the name"}},
        ],
    }
    cols = columns_from_delta_schema(schema)
    assert [(c.name, c.type, c.nullable, c.comment) for c in cols] == [
        ("id", "bigint", False, None),
        ("n", "string", True, "the name"),
    ]


@pytest.mark.parametrize(
    "sql_type",
    [
        "bigint", "int", "smallint", "tinyint", "boolean", "float", "double", "string",
        "binary", "date", "timestamp", "timestamp_ntz", "decimal(38,0)", "decimal(10,2)",
        "array<string>", "map<string,array<int>>", "struct<city:string,zip:string>",
        "array<struct<a:bigint,b:map<string,decimal(5,1)>>>",
    ],
)  # fmt: skip
def test_a_column_type_round_trips_through_the_delta_schema(sql_type: str) -> None:
    columns = (
        ColumnSpec("k", "bigint", nullable=False),
        ColumnSpec("v", sql_type, comment="the 'value'"),
    )
    schema = delta_schema(columns)
    assert columns_from_delta_schema(schema) == columns
    assert schema["fields"][1]["metadata"] == {"comment": "the 'value'"}
    assert schema["fields"][0]["metadata"] == {}


def test_the_delta_schema_uses_delta_s_names_as_spark_writes_them() -> None:
    schema = delta_schema((ColumnSpec("a", "map<string,array<tinyint>>"),))
    assert schema["fields"][0]["type"] == {
        "type": "map",
        "keyType": "string",
        "valueType": {"type": "array", "elementType": "byte", "containsNull": True},
        "valueContainsNull": True,
    }
