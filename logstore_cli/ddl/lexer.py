"""Stage 2: tokens. The only module of logstore that imports sqlglot.

sqlglot's Spark tokenizer does the lexing (quote styles, backslash escapes, backtick identifiers,
``--`` and ``/* */`` comments, numbers) and keeps offsets. Its *parser* is not used: it does not
know Flink's ``ROW<…>`` or ``WITH (…)`` options in every position, silently falls back to an opaque
``Command`` on syntax it does not know, and reports errors as "Expecting )". The grammar we accept is
small (CREATE TABLE), so ``parser.py`` parses these tokens itself and says exactly what is wrong.

Tokens are converted at once into our own ``Token`` so that no sqlglot type leaks out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import NamedTuple

from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token as SqlglotToken
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer

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


@dataclass(frozen=True)
class LexResult:
    tokens: list[Token]
    error: Issue | None  # tokens stop before it: the text after it was not read


# Token types by identity (an Enum's hash is a Python-level call: ~70k tokens in a large file).
_STRING, _RAW_STRING, _NATIONAL_STRING = (
    TokenType.STRING,
    TokenType.RAW_STRING,
    TokenType.NATIONAL_STRING,
)
_IDENTIFIER, _NUMBER, _HINT = TokenType.IDENTIFIER, TokenType.NUMBER, TokenType.HINT
_WORD = re.compile(r"\w+")
_SPACE_OR_COMMENT = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)


@cache
def _tokenizer() -> Tokenizer:
    from sqlglot.dialects.spark import Spark

    dialect = Spark()
    tokenizer: Tokenizer = dialect.tokenizer_class(dialect=dialect)
    return tokenizer


def tokenize(text: str) -> LexResult:
    """Tokenize ``text``; on a lexical error, return the tokens before it and the error."""
    tokenizer = _tokenizer()
    try:
        raw = tokenizer.tokenize(text)
        error = None
    except TokenError:
        raw = list(tokenizer.tokens)
        error = _lex_error(text, raw[-1].end + 1 if raw else 0)
    return LexResult(_convert(text, raw), error)


def _convert(text: str, raw: list[SqlglotToken]) -> list[Token]:
    out: list[Token] = []
    append = out.append
    word, string, symbol = Kind.WORD, Kind.STRING, Kind.SYMBOL
    ident, number, hint = Kind.IDENT, Kind.NUMBER, Kind.HINT
    last_end = 0
    for tok in raw:
        start, end = tok.start, tok.end + 1
        if start < last_end:
            # sqlglot expands some literals (Spark's 10L) into several tokens over the same text;
            # keep the text once, as a symbol nothing in our grammar accepts.
            prev = out.pop()
            append(Token(symbol, text[prev.start : last_end], prev.start, last_end, ""))
            continue
        last_end = end
        tt = tok.token_type
        if tt is _STRING or tt is _RAW_STRING or tt is _NATIONAL_STRING:
            append(Token(string, tok.text, start, end, ""))
        elif tt is _IDENTIFIER:
            append(Token(ident, tok.text, start, end, ""))
        elif tt is _NUMBER:
            append(Token(number, text[start:end], start, end, ""))
        elif tt is _HINT:
            append(Token(hint, text[start:end], start, end, ""))
        else:
            src = tok.text  # for single words, exactly the source text
            if src.isidentifier() or _WORD.fullmatch(src):
                append(Token(word, src, start, end, src.upper()))
            elif " " in src and all(_WORD.fullmatch(w) for w in src.split(" ")):
                # Multi-word keywords ("PRIMARY KEY", "PARTITIONED BY") become one token in
                # sqlglot, with the text normalized; split the source back into words.
                for m in _WORD.finditer(text, start, end):
                    w = m.group()
                    append(Token(word, w, m.start(), m.end(), w.upper()))
            else:
                append(Token(symbol, text[start:end], start, end, ""))
    return out


def _lex_error(text: str, after: int) -> Issue:
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
