"""Stage 2: tokens.

Plain DDL (words, numbers, quoted strings without backslashes, backtick identifiers, the symbols of
a CREATE TABLE, comments) is read by the scanner here: one regular expression, no import. Anything
else (escapes, raw, national and hex strings, hints, number suffixes, operators, non-ASCII outside
quotes, statements sqlglot reads as commands, lexical errors) goes to sqlglot's Spark tokenizer
(``spark_lexer.py``, the only module that imports sqlglot), for the whole text. The scanner gives
exactly the tokens that tokenizer gives for the text it takes (``tests/unit/ddl/test_source_lexer.py``
compares them), so the tokenizer in use is not visible.

sqlglot's *parser* is not used: it does not know Flink's ``ROW<…>`` or ``WITH (…)`` options in every
position, silently falls back to an opaque ``Command`` on syntax it does not know, and reports
errors as "Expecting )". The grammar we accept is small (CREATE TABLE), so ``parser.py`` parses
these tokens itself and says exactly what is wrong.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import NamedTuple

from logstore_cli.ddl.source import Issue, Span


class Kind(Enum):
    WORD = "word"  # bare identifier or keyword
    IDENT = "ident"  # `quoted identifier`; text is unquoted
    STRING = "string"  # text is the value, unquoted and unescaped
    NUMBER = "number"
    SYMBOL = "symbol"  # punctuation and anything else; text as in the source
    HINT = "hint"  # /*+ … */
    EOF = "eof"


class Token(NamedTuple):
    # A named tuple, not a dataclass: a large file has ~100k tokens and tuples build fastest.
    kind: Kind
    text: str
    start: int
    end: int  # exclusive
    upper: str  # text.upper() for words, "" otherwise: keyword tests are frequent

    @property
    def span(self) -> Span:
        return Span(self.start, self.end)

    def is_word(self, *words: str) -> bool:
        # ``upper`` is set for words only ("" otherwise, and no keyword is ""): called for most
        # tokens of a file, so no test of ``kind`` (an enum's attribute, slow to look up).
        return self.upper in words

    def is_symbol(self, symbol: str) -> bool:
        return self.text == symbol and self.kind is Kind.SYMBOL


class LexResult(NamedTuple):
    """The tokens of a text, and the lexical error that stopped them, if any."""

    tokens: list[Token]
    error: Issue | None  # tokens stop before it: the text after it was not read


_SPACE_OR_COMMENT = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)

# The plain DDL the scanner takes, one token per match. A word or number must end where sqlglot's
# would (before a space, a symbol below, a comment, the end); a symbol must not start one of
# sqlglot's operators (<=, <>, <->, >=, ==, =>). No /*+ (a hint), no /* inside a comment (nested).
_PLAIN = re.compile(
    r"""
    [ \t\n\r\f\v]+
    | --[^\n\r]*
    | /\*(?!\+)(?:[^*/]|\*(?!/)|/(?!\*))*\*/
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)(?=[ \t\n\r\f\v(),;.=<>]|--|/\*|\Z)
    | (?P<number>[0-9]+)(?=[ \t\n\r\f\v(),;=<>]|--|/\*|\Z)
    | '(?P<single>[^'\\]*)' | "(?P<double>[^"\\]*)"
    | `(?P<ident>(?:[^`\\]|``)*)`
    | (?P<symbol>[(),;.]|[=<>](?![=<>\-]))
    """,
    re.VERBOSE,
)
# Words sqlglot reads as the start of a command whose rest is one string (``SHOW …``, ``ADD JAR …``)
# at a statement's start: left to it, wherever they are. The test checks the list against sqlglot.
COMMAND_WORDS = frozenset(
    {"ADD", "CALL", "EXECUTE", "EXPLAIN", "FETCH", "MSCK", "OPTIMIZE", "PREPARE", "RENAME", "SHOW"}
    | {"VACUUM"}
)


def _scan_plain(text: str) -> list[Token] | None:
    """The tokens of ``text`` if it is plain DDL throughout (see ``_PLAIN``), else None."""
    out: list[Token] = []
    append = out.append
    match = _PLAIN.match
    word, number, string, ident, symbol = (
        Kind.WORD,
        Kind.NUMBER,
        Kind.STRING,
        Kind.IDENT,
        Kind.SYMBOL,
    )
    commands = COMMAND_WORDS
    pos, size = 0, len(text)
    while pos < size:
        m = match(text, pos)
        if m is None:
            return None
        end = m.end()
        group = m.lastgroup
        if group is None:  # space or a comment
            pass
        elif group == "word":
            w = m.group(group)
            upper = w.upper()
            if upper in commands:
                return None
            append(Token(word, w, pos, end, upper))
        elif group == "symbol":
            append(Token(symbol, m.group(group), pos, end, ""))
        elif group == "single" or group == "double":
            append(Token(string, m.group(group), pos, end, ""))
        elif group == "number":
            append(Token(number, m.group(group), pos, end, ""))
        else:  # ident
            append(Token(ident, m.group(group).replace("``", "`"), pos, end, ""))
        pos = end
    return out


def tokenize(text: str) -> LexResult:
    """Tokenize ``text``; on a lexical error, return the tokens before it and the error."""
    plain = _scan_plain(text)
    if plain is not None:
        return LexResult(plain, None)
    from logstore_cli.ddl import spark_lexer

    return spark_lexer.tokenize(text)


def lex_error(text: str, after: int) -> Issue:
    """Describe the lexical error at the first character sqlglot could not read after ``after``."""
    m = _SPACE_OR_COMMENT.match(text, after)
    at = m.end() if m else after
    if at >= len(text):
        return Issue("unexpected end of input", Span(len(text), len(text)))
    ch = text[at]
    if text.startswith("/*", at):
        return Issue("unterminated comment: '/*' has no closing '*/'", Span(at, at + 2))
    if ch in "'\"":
        return Issue(f"unterminated string: {ch} has no closing {ch}", Span(at, at + 1))
    if ch == "`":
        return Issue("unterminated quoted identifier: ` has no closing `", Span(at, at + 1))
    return Issue(f"cannot read the text here ({ch!r})", Span(at, at + 1))
