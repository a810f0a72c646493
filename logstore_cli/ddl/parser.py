"""Stage 3: statements. Split the tokens at ``;`` and parse each CREATE TABLE by recursive descent.

Accepted: Spark ``CREATE [OR REPLACE] [EXTERNAL|TEMPORARY] TABLE [IF NOT EXISTS] [[cat.]db.]t (…)
[USING fmt] [TBLPROPERTIES (…)] [OPTIONS (…)] [PARTITIONED BY (…)] [COMMENT '…'] [LOCATION '…']``
and Flink ``… WITH ('k' = 'v')``, in any clause order; columns with Spark and Flink types, ``NOT
NULL``, ``COMMENT``, inline or table-level ``PRIMARY KEY (…) [NOT ENFORCED]``, Flink watermarks
(skipped). Other known statements (SELECT, INSERT, USE …) are skipped with a warning.

A syntax error ends its statement (the next one is still parsed); problems that leave the syntax
intact (an unknown type, an unsupported column form) are recorded and parsing goes on, so that one
run reports as much as it can.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import NoReturn

from logstore_cli.ddl import types
from logstore_cli.ddl.lexer import Kind, Token
from logstore_cli.ddl.source import Issue, Span
from logstore_cli.ddl.syntax import ColumnDef, CreateTable, Name, PrimaryKeyDef, PropertyEntry

# Statements a DDL file or a pasted script may hold besides CREATE TABLE; skipped with a warning.
STATEMENT_WORDS = frozenset(
    """ADD ALTER ANALYZE BEGIN CACHE CALL CLEAR COMMENT COMMIT CONVERT COPY CREATE DECLARE DELETE
    DESC DESCRIBE DROP EXECUTE EXPLAIN FROM GRANT INSERT LIST LOAD MERGE MSCK OPTIMIZE REFRESH REPAIR
    REPLACE RESET RESTORE REVOKE ROLLBACK SELECT SET SHOW TRUNCATE UNCACHE UPDATE UPSERT USE VACUUM
    VALUES WITH""".split()  # noqa: SIM905 - a word list reads better as words
)
_TABLE_MODIFIERS = ("EXTERNAL", "TEMPORARY", "TEMP")
_ONCE = ("USING", "TBLPROPERTIES", "OPTIONS", "WITH", "COMMENT", "PARTITIONED", "LOCATION")
_CLAUSES = "USING, TBLPROPERTIES, OPTIONS, WITH, PARTITIONED BY, COMMENT, LOCATION or ';'"
_UNSUPPORTED_COLUMN_FORMS = {
    "METADATA": "metadata columns (METADATA FROM …) are not supported",
    "GENERATED": "generated columns (GENERATED ALWAYS AS …) are not supported",
    "DEFAULT": "column defaults (DEFAULT …) are not supported",
}


class _Failure(Exception):
    """A syntax error: the statement cannot be read further."""

    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def parse_statements(
    tokens: list[Token], masked: Collection[int] = ()
) -> tuple[list[CreateTable], list[Issue]]:
    """Parse every statement; ``masked`` holds start offsets of secret tokens (never quoted)."""
    tables: list[CreateTable] = []
    issues: list[Issue] = []
    ends = [i for i, t in enumerate(tokens) if t.text == ";" and t.kind is Kind.SYMBOL]
    ends.append(len(tokens))
    start = 0
    for end in ends:
        if start >= end:
            start = end + 1
            continue
        if end < len(tokens):
            eof = Token(Kind.EOF, ";", tokens[end].start, tokens[end].end, "")
        else:  # no ';' after the last statement: point just after its last token
            eof = Token(Kind.EOF, "", tokens[end - 1].end, tokens[end - 1].end, "")
        pos = start
        while pos < end:
            parser = _StatementParser(tokens, pos, end, eof, masked)
            try:
                node = parser.statement()
            except _Failure as failure:
                parser.issues.append(failure.issue)
                node = None
            issues.extend(parser.issues)
            if node is not None:
                tables.append(node)
            pos = parser.restart if parser.restart is not None else end
        start = end + 1
    return tables, issues


class _StatementParser:
    def __init__(
        self, tokens: list[Token], start: int, end: int, eof: Token, masked: Collection[int]
    ) -> None:
        self.tokens = tokens
        self.i = start
        self.end = end
        self.eof = eof
        self.masked = masked
        self.issues: list[Issue] = []
        self.restart: int | None = None  # where the next statement starts when ';' was missing

    # -- token helpers ------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        j = self.i + k
        return self.tokens[j] if j < self.end else self.eof

    def advance(self) -> Token:
        i = self.i  # peek() inlined: called for every token of a file
        if i < self.end:
            self.i = i + 1
            return self.tokens[i]
        return self.eof

    @property
    def prev_end(self) -> int:
        return self.tokens[self.i - 1].end

    def describe(self, tok: Token) -> str:
        if tok.start in self.masked and tok.kind is not Kind.EOF:
            return "a secret value"
        if tok.kind is Kind.EOF:
            return "';'" if tok.text == ";" else "the end of the input"
        if tok.kind is Kind.STRING:
            return "a string"  # a string may be anything; only its position is shown
        if tok.kind is Kind.HINT:
            return "a hint comment"
        text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "…"
        return f"`{text}`" if tok.kind is Kind.IDENT else f"'{text}'"

    def fail(self, message: str, span: Span) -> NoReturn:
        raise _Failure(Issue(message, span))

    def expected(self, what: str) -> NoReturn:
        tok = self.peek()
        self.fail(f"expected {what}, found {self.describe(tok)}", tok.span)

    def error(self, message: str, span: Span, severity: str = "error") -> None:
        self.issues.append(Issue(message, span, severity))

    def accept_word(self, *words: str) -> Token | None:
        return self.advance() if self.peek().is_word(*words) else None

    def expect_word(self, word: str, what: str | None = None) -> Token:
        if not self.peek().is_word(word):
            self.expected(what or word)
        return self.advance()

    def accept_symbol(self, symbol: str) -> Token | None:
        return self.advance() if self.peek().is_symbol(symbol) else None

    def expect_symbol(self, symbol: str, what: str | None = None) -> Token:
        if not self.peek().is_symbol(symbol):
            self.expected(what or f"'{symbol}'")
        return self.advance()

    def identifier(self, what: str, *, allow_empty: bool = False) -> Name:
        tok = self.peek()
        if tok.kind not in (Kind.WORD, Kind.IDENT):
            self.expected(what)
        if tok.kind is Kind.IDENT and not tok.text and not allow_empty:
            self.fail("empty quoted identifier", tok.span)
        self.advance()
        return Name(tok.text, tok.span)

    def string(self, what: str) -> str:
        if self.peek().kind is not Kind.STRING:
            self.expected(what)
        # Spark would concatenate 'a' 'b'; in a property list that is far more often a missing
        # comma, so adjacent literals are an error ("expected ',' … found a string") instead.
        return self.advance().text

    # -- statements ---------------------------------------------------------------------------

    def statement(self) -> CreateTable | None:
        first = self.peek()
        if first.kind is not Kind.WORD:
            self.expected("a statement such as CREATE TABLE")
        if first.upper == "CREATE":
            j = 1
            if self.peek(j).is_word("OR") and self.peek(j + 1).is_word("REPLACE"):
                j += 2
            while self.peek(j).is_word(*_TABLE_MODIFIERS):
                j += 1
            if self.peek(j).is_word("TABLE"):
                return self.create_table()
            what = self.peek(j).upper or self.describe(self.peek(j))
            self.skip_statement(f"CREATE {what}", first)
            return None
        if first.upper in STATEMENT_WORDS:
            self.skip_statement(first.upper, first)
            return None
        close = difflib.get_close_matches(first.upper, ["CREATE", *STATEMENT_WORDS], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; expected CREATE TABLE"
        self.fail(f"unknown statement {self.describe(first)}{hint}", first.span)

    def skip_statement(self, what: str, first: Token) -> None:
        self.error(
            f"skipped this {what} statement: only CREATE TABLE statements are validated",
            first.span,
            "warning",
        )
        self.i = self.end

    def create_table(self) -> CreateTable:
        create = self.advance()
        or_replace = False
        if self.accept_word("OR"):
            self.expect_word("REPLACE", "REPLACE after OR")
            or_replace = True
        while self.accept_word(*_TABLE_MODIFIERS):
            pass
        self.expect_word("TABLE")
        if_not_exists = False
        if self.peek().is_word("IF"):
            if_tok = self.advance()
            self.expect_word("NOT", "NOT EXISTS after IF")
            self.expect_word("EXISTS", "EXISTS after IF NOT")
            if_not_exists = True
            if or_replace:
                self.error("OR REPLACE and IF NOT EXISTS cannot be used together", if_tok.span)
        name = self.qualified_name()

        self._columns: list[ColumnDef] = []
        self._primary_keys: list[PrimaryKeyDef] = []
        self._elided: Span | None = None
        column_list = None
        if self.peek().is_symbol("("):
            column_list = self.peek().span
            self.table_elements()

        using: Name | None = None
        properties: list[PropertyEntry] = []
        partitioned_by: tuple[Name, ...] = ()
        comment = location = None
        seen: set[str] = set()
        while (tok := self.peek()).kind is not Kind.EOF:
            clause = tok.upper
            if clause in seen and clause in _ONCE:
                self.error(f"duplicate {clause} clause", tok.span)
            seen.add(clause)
            if tok.is_word("USING"):
                self.advance()
                using = self.identifier("a table format after USING, such as delta")
            elif tok.is_word("TBLPROPERTIES", "OPTIONS", "WITH"):
                self.advance()
                properties.extend(self.property_list(tok.upper))
            elif tok.is_word("COMMENT"):
                self.advance()
                comment = self.string("the table comment, a quoted string")
            elif tok.is_word("PARTITIONED"):
                self.advance()
                self.expect_word("BY", "BY after PARTITIONED")
                partitioned_by = tuple(self.name_list("a partition column"))
            elif tok.is_word("LOCATION"):
                self.advance()
                location = self.string("the table location, a quoted string")
            elif tok.is_word("AS"):
                self.fail(
                    "CREATE TABLE … AS SELECT is not supported: list the columns instead", tok.span
                )
            elif tok.is_word("LIKE"):
                self.fail(
                    "CREATE TABLE … LIKE is not supported: list the columns instead", tok.span
                )
            elif tok.is_word("CREATE"):
                self.error("missing ';' before this statement", tok.span)
                self.restart = self.i
                break
            else:
                self.expected(_CLAUSES if column_list else f"'(' and the columns, or {_CLAUSES}")

        return CreateTable(
            span=create.span,
            name=tuple(name),
            columns=tuple(self._columns),
            column_list=column_list,
            elided=self._elided,
            primary_keys=tuple(self._primary_keys),
            using=using,
            properties=tuple(properties),
            partitioned_by=partitioned_by,
            comment=comment,
            location=location,
            if_not_exists=if_not_exists,
            or_replace=or_replace,
        )

    def qualified_name(self) -> list[Name]:
        # An empty `` part is read here and rejected by build.py with the naming rule.
        parts = [self.identifier("a table name", allow_empty=True)]
        while self.accept_symbol("."):
            parts.append(self.identifier("a name after '.'", allow_empty=True))
        if len(parts) > 3:
            self.error(
                "a table name has at most three parts (catalog.database.table)", parts[3].span
            )
        return parts

    def name_list(self, what: str) -> list[Name]:
        self.expect_symbol("(", f"'(' and a list of columns ({what}s)")
        names = [self.identifier(what)]
        while self.accept_symbol(","):
            names.append(self.identifier(what))
        self.expect_symbol(")", f"',' or ')' after {what}")
        return names

    # -- columns ------------------------------------------------------------------------------

    def table_elements(self) -> None:
        self.advance()  # (
        if self.accept_symbol(")"):
            return
        while True:
            self.element()
            if self.accept_symbol(","):
                continue
            if self.accept_symbol(")"):
                return
            self.expected("',' or ')' after the column definition")

    def element(self) -> None:
        tok = self.peek()
        if tok.is_symbol(".") and self.peek(1).is_symbol(".") and self.peek(2).is_symbol("."):
            self.advance(), self.advance()
            self._elide(Span(tok.start, self.advance().end))
        elif tok.is_symbol("…"):
            self._elide(self.advance().span)
        elif tok.is_word("PRIMARY") and self.peek(1).is_word("KEY"):
            self.primary_key_constraint()
        elif tok.is_word("CONSTRAINT"):
            self.advance()
            self.identifier("a constraint name")
            if not (self.peek().is_word("PRIMARY") and self.peek(1).is_word("KEY")):
                self.expected("PRIMARY KEY (only primary key constraints are supported)")
            self.primary_key_constraint()
        elif tok.is_word("WATERMARK") and self.peek(1).is_word("FOR"):
            self.skip_element()  # Flink event-time watermarks do not concern the tables we make
        else:
            self.column_def()

    def _elide(self, span: Span) -> None:
        if self._elided is None:
            self._elided = span

    def primary_key_constraint(self) -> None:
        start = self.advance()
        self.advance()  # KEY
        names = self.name_list("a primary key column")
        self.not_enforced()
        self._primary_keys.append(PrimaryKeyDef(tuple(names), Span(start.start, self.prev_end)))

    def not_enforced(self) -> None:
        if self.peek().is_word("NOT") and not self.peek(1).is_word("NULL"):
            self.advance()
            self.expect_word("ENFORCED", "ENFORCED after NOT")

    def skip_element(self) -> None:
        """Skip to the ',' or ')' that ends the current column-list element."""
        depth = 0
        while (tok := self.peek()).kind is not Kind.EOF:
            if depth == 0 and (tok.is_symbol(",") or tok.is_symbol(")")):
                return
            depth += tok.is_symbol("(") - tok.is_symbol(")")
            self.advance()

    def column_def(self) -> None:
        name = self.identifier("a column name")
        if self.peek().is_word("AS"):
            self.error(
                f"computed columns ('{name.text} AS expression') are not supported; give "
                f"'{name.text}' a type",
                name.span,
            )
            self.skip_element()
            return
        if self.peek().kind is not Kind.WORD:
            self.expected(f"a type for column '{name.text}'")
        type_ = self.type_expr()
        not_null = False
        comment = None
        primary_key = None
        while True:
            tok = self.peek()
            if tok.is_word("NOT"):
                self.advance()
                self.expect_word("NULL", "NULL after NOT")
                not_null = True
            elif tok.is_word("NULL"):
                self.advance()
            elif tok.is_word("COMMENT"):
                self.advance()
                comment = self.string("the column comment, a quoted string")
            elif tok.is_word("PRIMARY") and self.peek(1).is_word("KEY"):
                self.advance(), self.advance()
                primary_key = Span(tok.start, self.prev_end)
                self.not_enforced()
            elif tok.kind is Kind.WORD and tok.upper in _UNSUPPORTED_COLUMN_FORMS:
                self.error(_UNSUPPORTED_COLUMN_FORMS[tok.upper], tok.span)
                self.skip_element()
            else:
                break
        self._columns.append(ColumnDef(name, type_, not_null, comment, primary_key))

    # -- types --------------------------------------------------------------------------------

    def type_expr(self) -> str:
        tok = self.peek()
        if tok.kind is not Kind.WORD:
            self.expected("a type")
        self.advance()
        name = tok.upper
        if name == "ARRAY":
            self.expect_symbol("<", "'<' after ARRAY")
            element = self.nested_type()
            self.expect_symbol(">", "'>' to close ARRAY<…>")
            return f"array<{element}>"
        if name == "MAP":
            self.expect_symbol("<", "'<' after MAP")
            key = self.nested_type()
            self.expect_symbol(",", "',' between the key and value types of MAP<…>")
            value = self.nested_type()
            self.expect_symbol(">", "'>' to close MAP<…>")
            return f"map<{key},{value}>"
        if name in ("STRUCT", "ROW"):
            return self.struct_type(name)
        if name == "DOUBLE":
            self.accept_word("PRECISION")
        elif name == "CHARACTER" and self.accept_word("VARYING"):
            name = "VARCHAR"
        if name in types.UNSUPPORTED or name not in types.SCALARS:
            if name in types.UNSUPPORTED:
                message = f"unsupported type {name}: {types.UNSUPPORTED[name]}"
            else:
                close = types.suggest_type(name)
                hint = f"; did you mean {close}?" if close else ""
                message = f"unknown type '{tok.text}'{hint}"
            self.error(message, tok.span)
            self.skip_type_rest()
            return tok.text.lower()
        args = self.type_args() if self.peek().is_symbol("(") else []
        problem = types.check_args(name, args)
        if problem:
            self.error(problem, Span(tok.start, self.prev_end))
        if name.startswith("TIMESTAMP"):
            self.time_zone_suffix()
        return types.spark_scalar(name, args) if not problem else tok.text.lower()

    def nested_type(self) -> str:
        spark = self.type_expr()
        if self.peek().is_word("NOT") and self.peek(1).is_word("NULL"):
            self.advance(), self.advance()  # nested nullability is not part of Spark's type string
        elif self.peek().is_word("NULL"):
            self.advance()
        return spark

    def struct_type(self, name: str) -> str:
        if name == "ROW" and self.accept_symbol("("):
            closer = ")"
        else:
            self.expect_symbol("<", f"'<' after {name}")
            closer = ">"
        fields: list[str] = []
        seen: set[str] = set()
        if not self.accept_symbol(closer):
            while True:
                field = self.identifier(f"a field name in {name}")
                if field.text.lower() in seen:
                    self.error(f"duplicate field '{field.text}' in {name}", field.span)
                seen.add(field.text.lower())
                self.accept_symbol(":")
                spark = self.nested_type()
                if self.accept_word("COMMENT"):
                    self.string("the field comment, a quoted string")
                fields.append(types.struct_field(field.text, spark))
                if self.accept_symbol(","):
                    continue
                self.expect_symbol(closer, f"',' or '{closer}' in {name}")
                break
        return "struct<" + ",".join(fields) + ">"

    def type_args(self) -> list[int]:
        self.advance()  # (
        args: list[int] = []
        while True:
            tok = self.peek()
            if tok.kind is not Kind.NUMBER or not tok.text.isdigit():
                self.expected("a whole number")
            args.append(int(self.advance().text))
            if self.accept_symbol(","):
                continue
            self.expect_symbol(")", "',' or ')'")
            return args

    def time_zone_suffix(self) -> None:
        """Flink's TIMESTAMP(p) WITH [LOCAL] TIME ZONE / WITHOUT TIME ZONE: all map to timestamp."""
        if self.peek().is_word("WITH") and self.peek(1).is_word("LOCAL", "TIME"):
            self.advance()
            self.accept_word("LOCAL")
        elif self.peek().is_word("WITHOUT") and self.peek(1).is_word("TIME"):
            self.advance()
        else:
            return
        self.expect_word("TIME", "TIME ZONE")
        self.expect_word("ZONE", "ZONE after TIME")

    def skip_type_rest(self) -> None:
        """After a type we cannot use, skip its arguments so that parsing can go on."""
        if self.peek().is_symbol("(") or self.peek().is_symbol("<"):
            closer = ")" if self.peek().is_symbol("(") else ">"
            opener = self.advance().text
            depth = 1
            while depth and (tok := self.peek()).kind is not Kind.EOF:
                depth += tok.is_symbol(opener) - tok.is_symbol(closer)
                self.advance()
        self.time_zone_suffix()

    # -- properties ---------------------------------------------------------------------------

    def property_list(self, clause: str) -> list[PropertyEntry]:
        self.expect_symbol("(", f"'(' after {clause}")
        entries: list[PropertyEntry] = []
        if self.accept_symbol(")"):
            return entries
        while True:
            entries.append(self.property())
            if self.accept_symbol(","):
                continue
            if self.accept_symbol(")"):
                return entries
            self.expected("',' or ')' after the property")

    def property(self) -> PropertyEntry:
        tok = self.peek()
        if tok.kind is Kind.STRING:
            self.advance()
            key, key_span = tok.text, tok.span
        elif tok.kind in (Kind.WORD, Kind.IDENT):
            parts = [self.identifier("a property key").text]  # Spark: unquoted dotted keys
            while self.accept_symbol("."):
                parts.append(self.identifier("a key part after '.'").text)
            key, key_span = ".".join(parts), Span(tok.start, self.prev_end)
        else:
            self.expected("a property key, a quoted string such as 'log-store.enabled'")
        self.accept_symbol("=")  # Spark allows 'k' 'v'; Flink writes 'k' = 'v'
        tok = self.peek()
        if tok.kind is Kind.STRING:
            value = self.string("a value")
        elif tok.kind is Kind.NUMBER or (
            (tok.is_symbol("-") or tok.is_symbol("+")) and self.peek(1).kind is Kind.NUMBER
        ):
            sign = self.advance().text if tok.kind is Kind.SYMBOL else ""
            value = sign + self.advance().text
        elif tok.is_word("TRUE", "FALSE"):
            value = self.advance().upper.lower()
        else:
            self.expected(f"a value for '{key}', a quoted string")
        return PropertyEntry(key, value, key_span, Span(tok.start, self.prev_end))
