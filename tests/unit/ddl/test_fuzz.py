"""Property tests: whatever text comes in, only ``DDLError`` ever leaves ``parse_ddl``.

Valid DDL (the fixtures and a compact sample) is mutated by deleting, inserting, duplicating and
swapping pieces and by splicing in random characters and bytes; the parser must either return
tables that serialize, or raise ``DDLError`` whose diagnostics are well formed and render. A second
property builds random *valid* tables and checks they come back exactly as declared.
"""

# ruff: noqa: RUF001 - typographic quotes are what these tests are about
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.ddl.properties import resolve_log_store
from logstore_cli.errors import DDLError
from logstore_cli.names import part_problems
from tests.hypothesis_profiles import budget

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ddl"
SAMPLE = """CREATE TABLE IF NOT EXISTS `db`.t (
  id BIGINT NOT NULL COMMENT 'k', m MAP<STRING, ARRAY<INT>>, r ROW<a INT, b DECIMAL(5,2)>,
  PRIMARY KEY (id) NOT ENFORCED
) USING delta PARTITIONED BY (id) TBLPROPERTIES (
  'log-store.enabled' = 'true', "log-store.topic" = 't', 'log-store.address' = 'h:1',
  'properties.sasl.jaas.config' = 'x password="p";', a.b = 1, 'c' 'd'
);
-- comment
create table x (a int) with (“log.system“ = ‘kafka’, 'kafka.topic' = '…');
"""
BASES = [SAMPLE, *(p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.sql")))]
SQL_PIECES = [
    "CREATE", "TABLE", "IF NOT EXISTS", "PRIMARY KEY", "NOT", "NULL", "ENFORCED", "WITH",
    "USING", "TBLPROPERTIES", "OPTIONS", "PARTITIONED BY", "COMMENT", "LOCATION", "ARRAY<",
    "MAP<", "ROW(", "STRUCT<", "DECIMAL(", ">", ">>", "(", ")", ",", ";", ".", "...", "…", "=",
    "'", '"', "`", "“", "”", "‘", "’", "--", "/*", "*/", "/*+", "\n", "\t", " ", "\\",
    "'log-store.enabled'", "'log.system'", "'kafka'", "'true'", "TIMESTAMP(3) WITH LOCAL TIME ZONE",
    "WATERMARK FOR", "AS", "SELECT", "10L", "-1", "1e999", "0x1F", "X'0A'", "r'raw'", "$", "@",
]  # fmt: skip
_TOKEN = re.compile(r"\w+|\s+|.", re.DOTALL)

insert_text = st.one_of(
    st.sampled_from(SQL_PIECES),
    st.text(min_size=1, max_size=8),
    st.binary(min_size=1, max_size=8).map(lambda b: b.decode("latin-1")),
    st.lists(st.sampled_from(SQL_PIECES), min_size=1, max_size=4).map(" ".join),
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "swap", "duplicate", "replace"]))
        pos = draw(st.integers(0, len(text)))
        if op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 30)) :]
        elif op == "insert":
            text = text[:pos] + draw(insert_text) + text[pos:]
        elif op == "duplicate":
            text = text[:pos] + text[pos : pos + draw(st.integers(1, 40))] + text[pos:]
        elif op == "replace":
            text = text[:pos] + draw(insert_text) + text[pos + draw(st.integers(1, 5)) :]
        else:
            tokens = _TOKEN.findall(text)
            if len(tokens) >= 2:
                i = draw(st.integers(0, len(tokens) - 1))
                j = draw(st.integers(0, len(tokens) - 1))
                tokens[i], tokens[j] = tokens[j], tokens[i]
                text = "".join(tokens)
    return text


def _check(text: str, options: ParseOptions) -> None:
    try:
        tables = parse_ddl(text, "fuzz.sql", options)
    except DDLError as exc:
        assert exc.errors, "a DDLError must carry at least one error"
        lines = text.split("\n")
        for d in exc.diagnostics:
            assert d.message
            if d.line is not None:
                assert 1 <= d.line <= len(lines)
                assert d.col is not None and 1 <= d.col <= len(lines[d.line - 1]) + 1
            d.render()
        return
    assert tables
    for table in tables:
        json.dumps(table.to_json())
        repr(table)


@settings(
    max_examples=budget(3000),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=mutated(), with_default=st.booleans())
def test_mutated_ddl_raises_only_ddl_error(text: str, with_default: bool) -> None:
    options = ParseOptions(default_bootstrap_servers="localhost:9092" if with_default else None)
    _check(text, options)


@settings(max_examples=budget(300))
@given(text=st.text(max_size=200))
def test_arbitrary_text_raises_only_ddl_error(text: str) -> None:
    _check(text, ParseOptions())


# -- random valid tables come back as declared --------------------------------------------------

TYPES = {
    "INT": "int",
    "BIGINT": "bigint",
    "STRING": "string",
    "VARCHAR(7)": "string",
    "DOUBLE": "double",
    "DECIMAL(9,3)": "decimal(9,3)",
    "TIMESTAMP(3)": "timestamp",
    "ARRAY<BIGINT>": "array<bigint>",
    "MAP<STRING, INT>": "map<string,int>",
    "ROW<a INT, b STRING>": "struct<a:int,b:string>",
}
# Generators of *valid* input build it valid; they do not filter out what the parser rejects on
# purpose, which is easy to forget (a topic of dots only, '...', reads as an elided value).
# Words that start a column-list element other than a column:
names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n.upper() not in {"PRIMARY", "CONSTRAINT", "WATERMARK"}
)
# Kafka's topic characters, at least one of them not a dot ('.', '..' and '...' are rejected).
TOPIC_PATTERN = r"[A-Za-z0-9._-]{0,10}[A-Za-z0-9_-][A-Za-z0-9._-]{0,9}"
# Database and table names (logstore_cli/names.py): letters of any script, digits, '_', '-'.
_NAME_START = "A-Za-z0-9_äéÅßж"
NAME_PATTERN = f"[{_NAME_START}][{_NAME_START}-]{{0,15}}"
REJECTED_TOPICS = (".", "..", "...", "…", "a b", "a/b", "x" * 250)
REJECTED_NAMES = ("", ".", "..", "-a", "a/b", "a.b", "a\\b", "a b", "a\x01b", "×", "x" * 129)


@st.composite
def valid_table(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]], list[str], str, str, str]:
    database = draw(st.from_regex(NAME_PATTERN, fullmatch=True))
    name = draw(st.from_regex(NAME_PATTERN, fullmatch=True))
    cols = draw(st.lists(names, min_size=1, max_size=6, unique_by=str.lower))
    types = [draw(st.sampled_from(sorted(TYPES))) for _ in cols]
    pk = draw(st.lists(st.sampled_from(cols), max_size=2, unique=True))
    topic = draw(st.from_regex(TOPIC_PATTERN, fullmatch=True))
    flink = draw(st.booleans())
    body = ", ".join(f"{c} {t}" for c, t in zip(cols, types, strict=True))
    if pk:
        body += f", PRIMARY KEY ({', '.join(pk)})" + (" NOT ENFORCED" if flink else "")
    props = f"'log-store.enabled' = 'true', 'log-store.topic' = '{topic}'"
    tail = f"WITH ({props})" if flink else f"USING delta TBLPROPERTIES ({props})"
    sql = f"CREATE TABLE `{database}`.`{name}` ({body}) {tail};"
    return sql, list(zip(cols, types, strict=True)), pk, topic, database, name


@settings(max_examples=budget(300))
@given(case=valid_table())
def test_valid_tables_round_trip(
    case: tuple[str, list[tuple[str, str]], list[str], str, str, str],
) -> None:
    sql, cols, pk, topic, database, name = case
    (table,) = parse_ddl(sql, options=ParseOptions(default_bootstrap_servers="b:9092"))
    assert (table.database, table.table) == (database, name)
    assert [(c.name, c.type) for c in table.columns] == [(c, TYPES[t]) for c, t in cols]
    assert list(table.primary_key) == pk
    assert all(not c.nullable for c in table.columns if c.name in pk)
    assert table.log_store is not None
    assert (table.log_store.topic, table.log_store.address) == (topic, "b:9092")


@pytest.mark.parametrize("topic", REJECTED_TOPICS)
def test_topic_pattern_excludes_what_the_parser_rejects(topic: str) -> None:
    # The round trip above may only draw topics the parser accepts; these it rejects on purpose.
    assert re.fullmatch(TOPIC_PATTERN, topic) is None
    props = {"log-store.enabled": "true", "log-store.topic": topic, "log-store.address": "b:1"}
    with pytest.raises(DDLError):
        resolve_log_store(props, "t")


@pytest.mark.parametrize("name", REJECTED_NAMES)
def test_name_pattern_excludes_what_the_name_rule_rejects(name: str) -> None:
    assert re.fullmatch(NAME_PATTERN, name) is None
    assert part_problems(["db", name]) and part_problems([name, "t"])
