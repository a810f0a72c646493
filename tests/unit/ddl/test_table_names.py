"""Table names in DDL: every part follows the one naming rule (``logstore_cli/names.py``), because
database and table become directories of the warehouse; the error points at the offending part."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import parse_ddl
from logstore_cli.errors import DDLError
from logstore_cli.names import NAME_RULE, part_problems

pytestmark = pytest.mark.unit


def name_errors(text: str) -> list[tuple[int | None, int | None, int | None, str]]:
    with pytest.raises(DDLError) as info:
        parse_ddl(text, "t.sql")
    return [(d.line, d.col, d.end_col, d.message) for d in info.value.errors]


@pytest.mark.parametrize(
    ("name", "col", "end_col", "what", "shown"),
    [
        ("`/abs/dir`.t", 14, 24, "database", "'/abs/dir'"),
        ("db.`a/b`", 17, 22, "table", "'a/b'"),
        ("db.`..`", 17, 21, "table", "'..'"),
        ("`c:\\x`.t", 14, 20, "database", "'c:"),
        ("db.`a\x01b`", 17, 22, "table", "'a\\x01b'"),
        ("db.`-t`", 17, 21, "table", "'-t'"),
        ("db.`t 1`", 17, 22, "table", "'t 1'"),
        ("`a/b`.db.t", 14, 19, "catalog", "'a/b'"),
        (f"db.{'t' * 129}", 17, 146, "table", "longer than 128 characters"),
    ],
)
def test_each_part_is_checked_at_its_position(
    name: str, col: int, end_col: int, what: str, shown: str
) -> None:
    ((line, c, end, message),) = name_errors(f"CREATE TABLE {name} (id INT);")
    assert (line, c, end) == (1, col, end_col)
    assert message.startswith(f"invalid table name: the {what} name ")
    assert shown in message
    assert NAME_RULE in message  # the rule itself, so that the fix is obvious


def test_both_parts_dots() -> None:
    found = name_errors("CREATE TABLE `.`.`.` (id INT);")
    assert [(col, end, m.split(" '")[0]) for _, col, end, m in found] == [
        (14, 17, "invalid table name: the database name"),
        (18, 21, "invalid table name: the table name"),
    ]


@pytest.mark.parametrize(
    ("name", "what", "col"), [("``.t", "database", 14), ("db.``", "table", 17)]
)
def test_empty_quoted_part_names_the_rule(name: str, what: str, col: int) -> None:
    ((_, c, end, message),) = name_errors(f"CREATE TABLE {name} (id INT);")
    assert (c, end) == (col, col + 2)
    assert message == f"invalid table name: the {what} name is empty; names use only {NAME_RULE}"


def test_control_characters_are_shown_not_sent_to_the_terminal() -> None:
    with pytest.raises(DDLError) as info:
        parse_ddl("CREATE TABLE db.`a\x1b[2Jb` (id INT);", "t.sql")
    rendered = info.value.errors[0].render()
    assert "\x1b" not in rendered
    source_line, caret = rendered.splitlines()[1:]
    assert source_line == "CREATE TABLE db.`a\u241b[2Jb` (id INT);"  # ␛: one column, as before
    assert caret == " " * 16 + "^" + "~" * 7


def test_valid_names_are_kept_with_the_catalog_recorded() -> None:
    tables = parse_ddl(
        "CREATE TABLE `my-cat`.`sales-eu`.orders_2024 (id INT);\n"
        "CREATE TABLE `Ümlaut`.`9lives` (id INT);\nCREATE TABLE t (id INT);"
    )
    assert [(t.catalog, t.database, t.table) for t in tables] == [
        ("my-cat", "sales-eu", "orders_2024"),
        (None, "Ümlaut", "9lives"),
        (None, None, "t"),
    ]


def test_four_parts_stay_one_error() -> None:
    ((_, col, _, message),) = name_errors("CREATE TABLE a.b.c.`d/e` (id INT);")
    assert col == 20 and message.startswith("a table name has at most three parts")


def test_part_problems_gives_roles_by_position() -> None:
    assert part_problems(["t"]) == []
    assert [i for i, _ in part_problems(["c/", "d/", "t/"])] == [0, 1, 2]
    assert "the catalog name" in part_problems(["c/", "d", "t"])[0][1]
    assert "the database name" in part_problems(["d/", "t"])[0][1]
    assert "the table name" in part_problems(["t/"])[0][1]
    assert part_problems(["a", "b", "c", "d/"]) == []  # four parts: the caller's error
