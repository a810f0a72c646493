"""Positions, typographic-quote repair and the sqlglot tokenizer wrapper."""

# ruff: noqa: RUF001 - typographic quotes are what these tests are about
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore_cli.ddl import parse_ddl, spark_lexer
from logstore_cli.ddl.lexer import COMMAND_WORDS, Kind, _scan_plain, tokenize
from logstore_cli.ddl.source import Issue, Source, Span, clean, repair_quotes
from tests.hypothesis_profiles import budget

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ("“a” = “b”", '"a" = "b"'),
        ("“a“ = “b“", '"a" = "b"'),  # same character at both ends (seed 001)
        ("‘a’ = ‘b’", "'a' = 'b'"),
        ("„a“", '"a"'),
        ('“say "hi"”', "'say \"hi\"'"),  # the ASCII quote that is not inside is used
        ("'it’s' = “x”", "'it’s' = \"x\""),  # inside an ASCII string: left alone
        ("-- it’s “fine”\n“k”", '-- it’s “fine”\n"k"'),  # comments: left alone
        ("/* ‘a’ */ ‘b’", "/* ‘a’ */ 'b'"),
        ("“open\n”", "“open\n”"),  # never across lines
        ("“both ' and \"”", "“both ' and \"”"),  # cannot be repaired: left for the lexer
        ("no quotes", "no quotes"),
    ],
)
def test_repair_quotes(text: str, repaired: str) -> None:
    assert repair_quotes(text) == repaired
    assert len(repair_quotes(text)) == len(text)


def test_typographic_property_list_parses() -> None:
    (t,) = parse_ddl(
        "create table t (a int) with (‘log-store.enabled’ = “true“, 'log-store.topic' = ‘x’, "
        "“log-store.address” = 'h:1');"
    )
    assert t.log_store is not None and t.log_store.topic == "x"


def test_source_positions_count_characters() -> None:
    src = Source("ab\n“é” x\n", "f.sql")
    assert src.line_col(0) == (1, 1)
    assert src.line_col(3) == (2, 1)
    assert src.line_col(7) == (2, 5)
    assert src.line_col(9) == (3, 1)
    d = src.diagnostic(Issue("m", Span(7, 8)))
    assert (d.line, d.col, d.end_col, d.source_line) == (2, 5, 6, "“é” x")


def test_masking_keeps_the_caret_aligned() -> None:
    src = Source("k = 'secret', bad\n", "f")
    d = src.diagnostic(Issue("m", Span(14, 17)), mask=[Span(4, 12)])
    assert d.excerpt() == ["k = ********, bad", "              ^~~"]


def test_tokens_keep_offsets_and_split_keyword_phrases() -> None:
    lexed = tokenize("PRIMARY\n  KEY (`a``b`) 'x\\'y' 12 ;")
    assert lexed.error is None
    assert [(t.kind, t.text, t.start, t.end) for t in lexed.tokens] == [
        (Kind.WORD, "PRIMARY", 0, 7),
        (Kind.WORD, "KEY", 10, 13),
        (Kind.SYMBOL, "(", 14, 15),
        (Kind.IDENT, "a`b", 15, 21),
        (Kind.SYMBOL, ")", 21, 22),
        (Kind.STRING, "x'y", 23, 29),
        (Kind.NUMBER, "12", 30, 32),
        (Kind.SYMBOL, ";", 33, 34),
    ]


def test_lex_error_keeps_the_tokens_before_it() -> None:
    lexed = tokenize("a b 'c")
    assert [t.text for t in lexed.tokens] == ["a", "b"]
    assert lexed.error == Issue("unterminated string: ' has no closing '", Span(4, 5))


def test_statements_before_a_lex_error_are_still_checked() -> None:
    from logstore_cli.ddl import parse_document

    result = parse_document("CREATE TABLE a (x FOO);\nCREATE TABLE b (y INT) WITH ('k' = 'v);")
    assert [(d.line, d.message) for d in result.errors] == [
        (1, "unknown type 'FOO'"),
        (2, "unterminated string: ' has no closing '"),
    ]


@pytest.mark.parametrize("sep", ["\ufeff", "\u200b", "\u00a0", "\u202f"])
def test_invisible_separators_from_documents(sep: str) -> None:
    text = f"{sep}CREATE{sep}TABLE t (a{sep}INT);"
    assert len(clean(text)) == len(text)
    (t,) = parse_ddl(text)
    assert t.columns[0].type == "int"


def test_crlf_line_endings() -> None:
    from logstore_cli.ddl import parse_document

    result = parse_document("CREATE TABLE t (\r\n a INT,\r\n b FOO\r\n);")
    (d,) = result.errors
    assert (d.line, d.col, d.source_line) == (3, 4, " b FOO")


# Pieces of DDL and of what the scanner must leave to sqlglot, glued with and without spaces.
_WORDS_AND_LITERALS = (
    "CREATE table t1 _x PRIMARY KEY NOT NULL ROW DOUBLE PRECISION ADD JAR show r N x e L BD é USER "
    "DEFINED SELECT 0 12 1.5 0x1F 10L 3e5 'a' 'it''s' \"q\" '' ' `a` `a``b` `` ` -- /* */ /*/"
)
_PIECES = st.sampled_from(
    [
        *_WORDS_AND_LITERALS.split(),
        *"(),;.=<>-+/*:!|&?$@#{}[]~%\\",
        *[
            "'b\\'c'",
            "'a\\nb'",
            '"\\u00e9"',
            "`a\\b`",
            "-- c",
            "/* c */",
            "/*+ h */",
            "\n",
            "\r",
            "\t",
            " ",
            "\u00a0",
        ],
    ]
)


@settings(
    max_examples=budget(3000),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(pieces=st.lists(st.tuples(_PIECES, st.sampled_from(["", " ", "\n"])), max_size=14))
def test_the_scanner_gives_sqlglots_tokens(pieces: list[tuple[str, str]]) -> None:
    """Where the scanner takes a text, sqlglot's Spark tokenizer reads it alike, error-free."""
    text = "".join(a + b for a, b in pieces)
    scanned = _scan_plain(text)
    if scanned is not None:
        assert spark_lexer.tokenize(text) == spark_lexer.LexResult(scanned, None)


def test_the_scanner_on_every_sqlglot_keyword() -> None:
    """Operators and keyword phrases (``<=>``, ``USER-DEFINED``, ``ADD JAR``) alone and in a
    statement: the scanner reads them as sqlglot does, or leaves them to it."""
    keywords = spark_lexer.tokenizer_class().KEYWORDS
    for keyword in keywords:
        for text in (keyword, f"a {keyword} b", f"a{keyword}b", f"(x){keyword}(y)", f"{keyword};x"):
            scanned = _scan_plain(text)
            if scanned is not None:
                assert spark_lexer.tokenize(text).tokens == scanned, text


def test_the_command_words_are_sqlglots() -> None:
    """The words that start what sqlglot reads as a command (the rest of the statement becomes one
    string) are all left to it."""
    tokenizer = spark_lexer.tokenizer_class()
    starts = {k.split(" ")[0] for k, v in tokenizer.KEYWORDS.items() if v in tokenizer.COMMANDS}
    assert starts == COMMAND_WORDS
    assert _scan_plain("SHOW x") is None and _scan_plain("a; add jar b") is None


def test_plain_ddl_needs_no_sqlglot() -> None:
    text = (
        "-- orders\nCREATE TABLE IF NOT EXISTS db.`t``x` (id BIGINT NOT NULL, m MAP<STRING, INT>,"
        " PRIMARY KEY (id) NOT ENFORCED) /* c */ WITH ('k' = \"v\", 'n' = '3');"
    )
    scanned = _scan_plain(text)
    assert scanned is not None
    assert [t.text for t in scanned][:8] == [
        "CREATE",
        "TABLE",
        "IF",
        "NOT",
        "EXISTS",
        "db",
        ".",
        "t`x",
    ]
    assert tokenize(text).tokens == scanned == spark_lexer.tokenize(text).tokens
    # what it leaves: escapes, operators, number suffixes, non-ASCII outside quotes, lex errors
    for other in ("'a\\'b'", "a <= b", "10L", "é", "'open", "/* open", "a/*+ h */"):
        assert _scan_plain(other) is None, other
