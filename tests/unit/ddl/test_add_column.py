"""``alter-table --add-column``'s column definition: the CREATE TABLE column grammar, one column."""

from __future__ import annotations

import pytest

from logstore_cli.ddl.document import parse_column
from logstore_cli.ddl.render import add_columns_sql, widen_columns_sql
from logstore_cli.ddl.types import widening_allowed
from logstore_cli.errors import InvalidInputError
from logstore_cli.model import ColumnSpec


def test_a_column_with_type_and_comment() -> None:
    assert parse_column("Region STRING COMMENT 'it\\'s where'") == ColumnSpec(
        "Region", "string", comment="it's where"
    )
    assert parse_column("price DECIMAL(10, 2) NOT NULL") == ColumnSpec(
        "price", "decimal(10,2)", nullable=False
    )  # NOT NULL parses; the service refuses it with its reason


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a INTY", "unknown type 'INTY'; did you mean INT"),
        ("a INT, b INT", "expected one column definition"),
        ("a INT) TBLPROPERTIES ('x' = 'y'", "expected one column definition"),
        ("a", "--add-column 'a'"),
    ],
)
def test_anything_but_one_column_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as caught:
        parse_column(text)
    assert caught.value.exit_code == 2 and caught.value.hint


def test_spark_sql_of_the_spark_path() -> None:
    sql = add_columns_sql(
        "/wh/db/t", [ColumnSpec("a`b", "int", comment="x'y"), ColumnSpec("c", "string")]
    )
    assert (
        sql == "ALTER TABLE delta.`/wh/db/t` ADD COLUMNS (`a``b` int COMMENT 'x\\'y', `c` string)"
    )


def test_the_statement_form() -> None:
    from logstore_cli.ddl.document import parse_alter_add_columns

    name, columns = parse_alter_add_columns(
        "alter table shop.`orders` add columns (region STRING COMMENT 'w', n INT);"
    )
    assert name == "shop.orders"
    assert columns == [ColumnSpec("region", "string", comment="w"), ColumnSpec("n", "int")]
    assert parse_alter_add_columns("ALTER TABLE t ADD COLUMN n INT") == (
        "t",
        [ColumnSpec("n", "int")],
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ALTER TABLE t SET TBLPROPERTIES ('a' = 'b')", "only ALTER TABLE <name> ADD COLUMNS"),
        ("ALTER TABLE t DROP COLUMN a", "DROP is refused: logstore only adds and widens columns"),
        ("ALTER TABLE t RENAME COLUMN a TO b", "RENAME is refused"),
        ("ALTER TABLE t ADD COLUMNS (a INTY)", "unknown type 'INTY'"),
        ("ALTER TABLE t ADD COLUMNS (a INT", "unbalanced parentheses"),
        ("CREATE TABLE t (a INT)", "expected ALTER TABLE"),
        ("ALTER TABLE t ADD COLUMNS (a INT, PRIMARY KEY (a))", "column definitions only"),
    ],
)
def test_other_statements_are_refused(text: str, message: str) -> None:
    from logstore_cli.ddl.document import parse_alter_add_columns

    with pytest.raises(InvalidInputError, match=message) as caught:
        parse_alter_add_columns(text)
    assert caught.value.exit_code == 2 and caught.value.hint


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ("tinyint", "smallint", True),
        ("tinyint", "bigint", True),
        ("smallint", "int", True),
        ("int", "bigint", True),
        ("float", "double", False),  # the log's "0.1" is not float32 0.1 widened
        ("decimal(10,2)", "decimal(12,2)", True),
        ("decimal", "decimal(11,0)", True),
        ("bigint", "int", False),
        ("int", "int", False),
        ("int", "double", False),  # Delta takes it, but 5 would be written 5.0
        ("int", "decimal(20,0)", False),
        ("float", "decimal(10,2)", False),
        ("double", "float", False),
        ("decimal(10,2)", "decimal(12,3)", False),  # 1.50 would be written 1.500
        ("decimal(10,2)", "decimal(10,2)", False),
        ("decimal(12,2)", "decimal(10,2)", False),
        ("date", "timestamp_ntz", False),
        ("string", "binary", False),
    ],
)
def test_which_type_widenings_are_taken(old: str, new: str, allowed: bool) -> None:
    assert widening_allowed(old, new) is allowed


def test_spark_sql_of_a_widening() -> None:
    assert widen_columns_sql("/w/db/t", [ColumnSpec("q`ty", "bigint")]) == [
        "ALTER TABLE delta.`/w/db/t` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        "ALTER TABLE delta.`/w/db/t` CHANGE COLUMN `q``ty` TYPE bigint",
    ]


def test_the_statement_form_of_a_widening() -> None:
    from logstore_cli.ddl.document import parse_alter_statement

    assert parse_alter_statement("alter table shop.orders alter column `qty` type bigint;") == (
        "shop.orders", [], [ColumnSpec("qty", "bigint")],
    )  # fmt: skip
    assert parse_alter_statement("ALTER TABLE t CHANGE COLUMN p TYPE DECIMAL(12, 2)") == (
        "t", [], [ColumnSpec("p", "decimal(12,2)")],
    )  # fmt: skip
    assert parse_alter_statement("ALTER TABLE t ADD COLUMNS (n INT)") == (
        "t", [ColumnSpec("n", "int")], [],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ALTER TABLE t ALTER COLUMN q TYPE INTY", "unknown type 'INTY'"),
        ("ALTER TABLE t ALTER COLUMN q TYPE BIGINT NOT NULL", "takes a type only"),
        ("ALTER TABLE t ALTER COLUMN q COMMENT 'x'", "ALTER is refused"),
    ],
)
def test_other_alter_column_statements_are_refused(text: str, message: str) -> None:
    from logstore_cli.ddl.document import parse_alter_statement

    with pytest.raises(InvalidInputError, match=message) as caught:
        parse_alter_statement(text)
    assert caught.value.exit_code == 2 and caught.value.hint
