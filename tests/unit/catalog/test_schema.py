from __future__ import annotations

import pytest

from logstore_cli.catalog.schema import columns_from_delta_schema, delta_type_to_sql


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
