"""The whole pipeline over one document: ``parse_document`` and ``parse_ddl`` (see the package's
docstring for the stages)."""

from __future__ import annotations

import re
from typing import NamedTuple

from logstore_cli.ddl.build import build_table
from logstore_cli.ddl.lexer import Kind, Token, tokenize
from logstore_cli.ddl.options import ParseOptions
from logstore_cli.ddl.parser import parse_statements
from logstore_cli.ddl.source import Issue, Source, Span, clean
from logstore_cli.errors import DDLError, Diagnostic, InvalidInputError
from logstore_cli.model import ColumnSpec, TableSpec, is_secret_key, is_secret_value
from logstore_cli.names import DEFAULT_DATABASE


class ParseResult(NamedTuple):
    """The tables a DDL text declares, and what is wrong with it."""

    tables: tuple[TableSpec, ...]
    diagnostics: tuple[Diagnostic, ...]  # errors and warnings, in source order

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")


def parse_ddl(
    text: str, filename: str = "<string>", options: ParseOptions | None = None
) -> list[TableSpec]:
    """Every table the CREATE TABLE statements in ``text`` declare; ``DDLError`` on any error."""
    result = parse_document(text, filename, options)
    if result.errors:
        raise DDLError(result.diagnostics)
    return list(result.tables)


def parse_document(
    text: str, filename: str = "<string>", options: ParseOptions | None = None
) -> ParseResult:
    """Parse and validate ``text``, returning the tables and all diagnostics (never raises)."""
    options = options or ParseOptions()
    source = Source(text, filename)
    lexed = tokenize(clean(text))
    tokens = lexed.tokens
    issues: list[Issue] = []
    if lexed.error is not None:
        issues.append(lexed.error)
        # The statement the error is in was cut short: parse only the complete ones before it.
        last_semicolon = max((i for i, t in enumerate(tokens) if t.is_symbol(";")), default=-1)
        tokens = tokens[: last_semicolon + 1]
    mask = _secret_spans(lexed.tokens, text, lexed.error)
    nodes, parse_issues = parse_statements(tokens, {s.start for s in mask})
    issues += parse_issues

    tables: list[TableSpec] = []
    seen: dict[str, int] = {}
    for node in nodes:
        table, build_issues = build_table(node, options)
        issues += build_issues
        # Where the table lives decides: `t` is `default.t`, and a catalog is no part of the path.
        parts = [n.text for n in node.name]
        database = parts[-2] if len(parts) >= 2 else DEFAULT_DATABASE
        name = f"{database}.{parts[-1]}".lower()
        if name in seen:
            line = source.line_col(seen[name])[0]
            issues.append(
                Issue(f"table {name} is declared twice (first on line {line})", node.name[0].span)
            )
        seen.setdefault(name, node.span.start)
        if table is not None:
            tables.append(table)
    if not nodes and not any(i.severity == "error" for i in issues):
        issues.append(Issue("no CREATE TABLE statement found", None))

    issues.sort(key=lambda i: i.span.start if i.span else len(text) + 1)
    diagnostics = tuple(source.diagnostic(i, mask) for i in issues)
    if any(d.severity == "error" for d in diagnostics):
        return ParseResult((), diagnostics)
    return ParseResult(tuple(tables), diagnostics)


_HINT_STRING = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_VALUE_KINDS = (Kind.STRING, Kind.NUMBER, Kind.WORD, Kind.IDENT)


def _secret_spans(tokens: list[Token], text: str, error: Issue | None) -> list[Span]:
    """Where secret values stand in the text, so that source excerpts can star them out.

    A value is secret when its key is (``'sasl.jaas.config' = '…'``, also unquoted dotted keys and
    Spark's ``'k' 'v'`` without ``=``) or when it looks like a credential itself. Works on tokens,
    not on the parse, so that statements with syntax errors are covered too.
    """
    spans: list[Span] = []
    n = len(tokens)
    for j, tok in enumerate(tokens):
        kind = tok.kind
        if kind is Kind.SYMBOL:
            if tok.text == "=" and is_secret_key(_key_before(tokens, j)):
                if j + 1 < n and tokens[j + 1].kind in _VALUE_KINDS:
                    spans.append(tokens[j + 1].span)
                elif j + 1 == n and error is not None and error.span is not None:
                    # The value is where tokenizing failed (an unclosed quote): hide the rest.
                    spans.append(Span(error.span.start, len(text)))
        elif kind is Kind.STRING:
            if is_secret_value(tok.text):
                spans.append(tok.span)
            elif j + 1 < n and tokens[j + 1].kind is Kind.STRING and is_secret_key(tok.text):
                spans.append(tokens[j + 1].span)
        elif kind is Kind.HINT:  # hints are not parsed; hide one that names a secret
            strings = [a or b for a, b in _HINT_STRING.findall(tok.text)]
            if any(is_secret_key(s) or is_secret_value(s) for s in strings):
                spans.append(tok.span)
    return spans


def _key_before(tokens: list[Token], j: int) -> str:
    """The property key ending just before token ``j``: a string, or a dotted name."""
    i = j - 1
    if i < 0:
        return ""
    if tokens[i].kind is Kind.STRING:
        return tokens[i].text
    parts: list[str] = []
    while i >= 0 and tokens[i].kind in (Kind.WORD, Kind.IDENT):
        parts.append(tokens[i].text)
        if i >= 2 and tokens[i - 1].is_symbol("."):
            i -= 2
        else:
            break
    return ".".join(reversed(parts))


def parse_column(text: str, what: str = "--add-column") -> ColumnSpec:
    """One column definition, ``name TYPE [NOT NULL] [COMMENT '…']``, checked as a CREATE TABLE
    column is (the same grammar and types: it is parsed as the only column of one)."""
    try:
        spec = parse_ddl(f"CREATE TABLE t ({text})", what)[0]
    except DDLError as exc:
        first = exc.errors[0].message if exc.errors else "invalid column definition"
        raise InvalidInputError(
            f"{what} {text!r}: {first}",
            hint="write one column as NAME TYPE [COMMENT 'text'], e.g. \"region STRING\"",
        ) from None
    if len(spec.columns) != 1 or spec.primary_key or spec.properties or spec.partitioned_by:
        raise InvalidInputError(
            f"{what} {text!r}: expected one column definition",
            hint=f"give each column its own {what}, as NAME TYPE [COMMENT 'text']",
        )
    return spec.columns[0]


def parse_alter_statement(
    text: str, filename: str = "--sql"
) -> tuple[str, list[ColumnSpec], list[ColumnSpec]]:
    """``ALTER TABLE name ADD COLUMNS (…)`` (``parse_alter_add_columns``) or ``ALTER TABLE name
    ALTER|CHANGE COLUMN c TYPE t [;]`` (a type widening, checked against the table later): the table's
    name as written, the columns added, the columns widened."""
    cleaned, name, rest = _alter_head(text, filename)
    if (
        name
        and len(rest) >= 4
        and rest[0].is_word("ALTER", "CHANGE")
        and rest[1].is_word("COLUMN")
        and rest[3].is_word("TYPE")
    ):
        column = cleaned[rest[2].start : rest[2].end]
        typed = cleaned[rest[4].start : rest[-1].end] if len(rest) > 4 else ""
        widened = parse_column(f"{column} {typed}", filename)
        if not widened.nullable or widened.comment is not None:
            raise InvalidInputError(
                f"{filename}: ALTER COLUMN … TYPE takes a type only", hint=_WIDEN_HINT
            )
        return ".".join(name), [], [widened]
    named, added = parse_alter_add_columns(text, filename)
    return named, added, []


def _alter_head(text: str, filename: str) -> tuple[str, list[str], list[Token]]:
    """The cleaned text, the table's name parts and the tokens after them, of ``ALTER TABLE``."""
    cleaned = clean(text)
    lexed = tokenize(cleaned)
    if lexed.error is not None:
        raise InvalidInputError(f"{filename}: {lexed.error.message}", hint=_ALTER_HINT)
    tokens = [t for t in lexed.tokens if t.kind is not Kind.EOF]
    if tokens and tokens[-1].is_symbol(";"):
        tokens.pop()
    if len(tokens) < 2 or not (tokens[0].is_word("ALTER") and tokens[1].is_word("TABLE")):
        raise InvalidInputError(f"{filename}: expected ALTER TABLE …", hint=_ALTER_HINT)
    i, name = 2, []
    while i < len(tokens) and tokens[i].kind in (Kind.WORD, Kind.IDENT):
        name.append(tokens[i].text)
        if i + 1 < len(tokens) and tokens[i + 1].is_symbol("."):
            i += 2
            continue
        i += 1
        break
    return cleaned, name, tokens[i:]


def parse_alter_add_columns(text: str, filename: str = "--sql") -> tuple[str, list[ColumnSpec]]:
    """``ALTER TABLE name ADD COLUMN[S] [(]column, …[)] [;]``: the table's name as written and its
    columns (each checked as ``parse_column``)."""
    cleaned, name, rest = _alter_head(text, filename)
    if name and rest and rest[0].is_word("DROP", "RENAME", "ALTER", "CHANGE", "REPLACE"):
        raise InvalidInputError(
            f"{filename}: {rest[0].text.upper()} is refused: logstore only adds and widens "
            "columns; the log's old records keep a column's old name and type, and a reader "
            "replaying them would show them under a column that no longer means the same",
            hint="add a new column instead (ADD COLUMNS), and fill it in your writes; a type "
            "widening is ALTER TABLE t ALTER COLUMN c TYPE BIGINT",
        )
    if (
        not name
        or len(rest) < 3
        or not rest[0].is_word("ADD")
        or not rest[1].is_word("COLUMN", "COLUMNS")
    ):
        raise InvalidInputError(
            f"{filename}: only ALTER TABLE <name> ADD COLUMNS (…) is taken here",
            hint=_ALTER_HINT + "; properties change with --set/--unset",
        )
    body = rest[2:]
    if body[0].is_symbol("(") != body[-1].is_symbol(")"):
        raise InvalidInputError(f"{filename}: unbalanced parentheses", hint=_ALTER_HINT)
    if body[0].is_symbol("(") and body[-1].is_symbol(")"):
        inner = cleaned[body[0].end : body[-1].start]
    else:
        inner = cleaned[body[0].start : body[-1].end]
    try:
        spec = parse_ddl(f"CREATE TABLE t ({inner})", filename)[0]
    except DDLError as exc:
        first = exc.errors[0].message if exc.errors else "invalid column definitions"
        raise InvalidInputError(f"{filename}: {first}", hint=_ALTER_HINT) from None
    if spec.primary_key or spec.properties or spec.partitioned_by:
        raise InvalidInputError(f"{filename}: expected column definitions only", hint=_ALTER_HINT)
    return ".".join(name), list(spec.columns)


_ALTER_HINT = "write ALTER TABLE db.t ADD COLUMNS (region STRING COMMENT 'where', n INT)"
_WIDEN_HINT = "write ALTER TABLE db.t ALTER COLUMN qty TYPE BIGINT"
