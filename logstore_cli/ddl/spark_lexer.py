"""sqlglot's Spark tokenizer, for the DDL the lexer's own scanner does not take (``lexer.py``):
backslash escapes, operators, hints, number suffixes, commands, lexical errors.

Loaded on first use only (importing sqlglot costs more than Typer and Rich together), so plain DDL
never pays for it; everything else is lexed by sqlglot's real Spark dialect, not a copy of it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer

from logstore_cli.ddl.lexer import Kind, LexResult, Token, lex_error

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token as SqlglotToken


def tokenizer_class() -> type[Tokenizer]:
    """sqlglot's Spark tokenizer class (its keywords, quotes, escapes)."""
    from sqlglot.dialects.spark import Spark

    cls: type[Tokenizer] = Spark.Tokenizer
    return cls


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
        error = lex_error(text, raw[-1].end + 1 if raw else 0)
    return LexResult(_convert(text, raw), error)


# Token types by identity (an Enum's hash is a Python-level call: ~70k tokens in a large file).
_STRING, _RAW_STRING, _NATIONAL_STRING = (
    TokenType.STRING,
    TokenType.RAW_STRING,
    TokenType.NATIONAL_STRING,
)
_IDENTIFIER, _NUMBER, _HINT = TokenType.IDENTIFIER, TokenType.NUMBER, TokenType.HINT
_WORD = re.compile(r"\w+")


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
