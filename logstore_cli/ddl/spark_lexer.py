"""sqlglot's Spark tokenizer, for the DDL the lexer's own scanner does not take (``lexer.py``).

Loaded on first use only: most DDL never needs it. sqlglot's tokenizer modules are imported without
the package's ``__init__`` (see ``_import_tokenizer_only``), and Spark's tokenizer settings are
declared here rather than imported with the dialects.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from functools import cache
from typing import TYPE_CHECKING, Any

from logstore_cli.ddl.lexer import Kind, LexResult, Token, lex_error

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token as SqlglotToken


def _import_tokenizer_only() -> None:
    """Import sqlglot's tokenizer modules without running ``sqlglot/__init__.py``.

    The package's ``__init__`` imports every expression, the parser, the generator and the
    dialects' registry (some 70 ms, more than Typer and Rich together) before any submodule can
    load; the tokenizer needs none of them (``tokens``, ``tokenizer_core``, ``errors``, ``helper``,
    ``trie``). A bare package object stands in for ``sqlglot`` while they load and is removed
    after, so a later ``import sqlglot`` runs the real ``__init__`` (which finds these modules
    already loaded: the same classes; they are not attributes of that package object then, so
    code that wants them imports them by name, as sqlglot's own modules do).
    """
    if "sqlglot" in sys.modules:  # the whole package is loaded already (its __init__ has run)
        return
    spec = importlib.util.find_spec("sqlglot")
    if spec is None or spec.submodule_search_locations is None:  # pragma: no cover - a dependency
        raise ModuleNotFoundError("sqlglot is not installed", name="sqlglot")
    stand_in = types.ModuleType("sqlglot")
    stand_in.__path__ = list(spec.submodule_search_locations)
    stand_in.__spec__ = spec
    sys.modules["sqlglot"] = stand_in
    try:
        import sqlglot.tokens  # noqa: F401
    finally:
        if sys.modules.get("sqlglot") is stand_in:
            del sys.modules["sqlglot"]


_import_tokenizer_only()

from sqlglot.errors import TokenError  # noqa: E402 - after the stand-in package above
from sqlglot.tokenizer_core import TokenType  # noqa: E402
from sqlglot.tokens import Tokenizer  # noqa: E402


class _SparkDialectSettings:
    """The settings of sqlglot's Spark *dialect* that its tokenizer reads (``Tokenizer._init_core``):
    Hive's, with the escapes every dialect that escapes with a backslash gets
    (``sqlglot.dialects.dialect.UNESCAPED_SEQUENCES`` merged with Hive's own).
    ``tests/unit/ddl/test_source_lexer.py`` checks them against the real dialect."""

    NUMBERS_CAN_BE_UNDERSCORE_SEPARATED = False
    IDENTIFIERS_CAN_START_WITH_DIGIT = True
    BYTE_STRING_IS_BYTES_TYPE = False
    UNESCAPED_SEQUENCES: dict[str, str] = {  # noqa: RUF012 - read only
        "\\a": "a",
        "\\b": "\b",
        "\\f": "f",
        "\\n": "\n",
        "\\r": "\r",
        "\\t": "\t",
        "\\v": "v",
        "\\\\": "\\",
        "\\0": "\0",
        "\\Z": "\x1a",
        "\\%": "\\%",
        "\\_": "\\_",
    }


class SparkTokenizer(Tokenizer):
    """sqlglot's Spark tokenizer (``sqlglot.dialects.spark.Spark.Tokenizer``, with what it inherits
    from Spark2's and Hive's), declared here so that the dialects need not be imported: the class
    attributes below are exactly those three classes' overrides, in their order."""

    # Hive
    DROP_UNKNOWN_ESCAPES = True
    LONE_SURROGATE_REPLACEMENT = "?"
    QUOTES = ["'", '"']  # noqa: RUF012 - sqlglot's class attributes
    IDENTIFIERS = ["`"]  # noqa: RUF012
    STRING_ESCAPES = ["\\"]  # noqa: RUF012
    SINGLE_TOKENS = {**Tokenizer.SINGLE_TOKENS, "$": TokenType.PARAMETER}  # noqa: RUF012
    KEYWORDS = {  # noqa: RUF012
        **Tokenizer.KEYWORDS,
        "ADD ARCHIVE": TokenType.COMMAND,
        "ADD ARCHIVES": TokenType.COMMAND,
        "ADD FILE": TokenType.COMMAND,
        "ADD FILES": TokenType.COMMAND,
        "ADD JAR": TokenType.COMMAND,
        "ADD JARS": TokenType.COMMAND,
        "MINUS": TokenType.EXCEPT,
        "MSCK REPAIR": TokenType.COMMAND,
        "REFRESH": TokenType.REFRESH,
        "SERDEPROPERTIES": TokenType.SERDE_PROPERTIES,
        # Spark2
        "TIMESTAMP": TokenType.TIMESTAMPTZ,
        # Spark
        "DECLARE": TokenType.DECLARE,
    }
    NUMERIC_LITERALS = {  # noqa: RUF012
        "L": "BIGINT",
        "S": "SMALLINT",
        "Y": "TINYINT",
        "D": "DOUBLE",
        "F": "FLOAT",
        "BD": "DECIMAL",
    }
    # Spark2
    HEX_STRINGS = [("X'", "'"), ("x'", "'")]  # noqa: RUF012
    # Spark
    NUMERIC_ESCAPES = {"u": (16, 4, 4, 0xFFFF), "U": (16, 8, 8, 0x10FFFF), "0": (8, 3, 3, 0x7F)}  # noqa: RUF012
    STRING_ESCAPES_ALLOWED_IN_RAW_STRINGS = False
    RAW_STRINGS = [(prefix + q, q) for q in ("'", '"') for prefix in ("r", "R")]  # noqa: RUF012

    def __init__(self) -> None:
        # Tokenizer.__init__ would look the dialect up in sqlglot's registry (importing them all)
        self.dialect: Any = _SparkDialectSettings
        self._core = self._init_core()


@cache
def _tokenizer() -> Tokenizer:
    return SparkTokenizer()


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
