"""DDL text → ``TableSpec``: the only part of logstore that knows SQL syntax.

Stages, each in its own module: ``source`` (text, positions, invisible characters and typographic quotes) → ``lexer``
(plain DDL scanned itself, the rest by sqlglot's Spark tokenizer) → ``parser`` (statements, CREATE TABLE grammar) → ``build``
(names, keys, columns) with ``properties`` (registry-driven property checks and log-store
resolution, also usable without DDL); ``document`` runs them over one text. No I/O: callers pass
the text in.

The parsing entry points load on first use (``__getattr__``): a command that needs only the
property registry or ``resolve_log_store`` (``list``, ``describe``, ``properties``) does not pay for
importing the parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logstore_cli.ddl.options import BOOTSTRAP_SERVERS_ENV, ParseOptions
from logstore_cli.errors import DDLError

if TYPE_CHECKING:
    from logstore_cli.ddl.document import ParseResult, parse_ddl, parse_document

__all__ = [
    "BOOTSTRAP_SERVERS_ENV",
    "DDLError",
    "ParseOptions",
    "ParseResult",
    "parse_ddl",
    "parse_document",
]
_LAZY = frozenset({"ParseResult", "parse_ddl", "parse_document"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from logstore_cli.ddl import document

        return getattr(document, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
