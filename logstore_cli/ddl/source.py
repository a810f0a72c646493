"""Stage 1: the DDL text, its positions, and typographic-quote repair.

Offsets are indices into the text (``str``, so characters, not bytes); lines and columns are 1-based
and count characters, the convention of compilers and editors. Quote repair keeps every offset where
it was, so a position found in the repaired text points at the same character of the original.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import NamedTuple

from logstore_cli.errors import Diagnostic

_DOUBLE_TYPO = "“”„‟"
_SINGLE_TYPO = "‘’‚‛"  # noqa: RUF001
# Invisible characters that documents and editors slip into pasted DDL; they separate words.
_INVISIBLE = str.maketrans(dict.fromkeys("\ufeff\u200b\u200c\u200d\u2060\u00a0\u202f", " "))
# Control characters of the input are shown as their Unicode pictures (␁, ␛), one for one: a
# diagnostic must not send escape sequences to the terminal, nor shift the caret.
_SHOWN_CONTROLS = str.maketrans(
    {i: 0x2400 + i for i in range(32) if chr(i) != "\t"}
    | {0x7F: 0x2421}
    | dict.fromkeys(range(0x80, 0xA0), 0xFFFD)
)
_INTERESTING = re.compile(r"--|/\*|['\"`]|[" + _DOUBLE_TYPO + _SINGLE_TYPO + "]")


class Span(NamedTuple):
    """``text[start:end]``; ``start == end`` is a point (shown as one caret)."""

    start: int
    end: int


class Issue(NamedTuple):
    """A problem found by a stage, still in offsets; ``span is None`` means the whole input."""

    message: str
    span: Span | None
    severity: str = "error"


class Source:
    """The text of one input and the mapping from offsets to lines and columns."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_col(self, offset: int) -> tuple[int, int]:
        offset = min(max(offset, 0), len(self.text))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def line_span(self, line: int) -> Span:
        start = self._line_starts[line - 1]
        end = self._line_starts[line] - 1 if line < len(self._line_starts) else len(self.text)
        return Span(start, end)

    def diagnostic(self, issue: Issue, mask: Sequence[Span] = ()) -> Diagnostic:
        """Pin ``issue`` to its line, with the source line shown and ``mask``ed spans starred."""
        message = issue.message.translate(_SHOWN_CONTROLS)  # it may quote a key or a name
        if issue.span is None:
            return Diagnostic(message, file=self.filename, severity=issue.severity)
        line, col = self.line_col(issue.span.start)
        bounds = self.line_span(line)
        end = min(max(issue.span.end, issue.span.start + 1), bounds.end)
        chars = list(self.text[bounds.start : bounds.end].rstrip("\r"))
        for span in mask:  # same-length masking keeps the caret under the right token
            for i in range(max(span.start, bounds.start), min(span.end, bounds.end)):
                if i - bounds.start < len(chars):
                    chars[i - bounds.start] = "*"
        return Diagnostic(
            message,
            file=self.filename,
            line=line,
            col=col,
            end_col=max(end - bounds.start + 1, col + 1),
            source_line="".join(chars).translate(_SHOWN_CONTROLS),
            severity=issue.severity,
        )


def clean(text: str) -> str:
    """Text as the lexer should see it: invisible separators blanked, typographic quotes repaired.

    Every change replaces one character by one, so offsets stay valid for the original text.
    """
    return repair_quotes(text.translate(_INVISIBLE))


def repair_quotes(text: str) -> str:
    """Turn typographic quotes used as string quotes into ASCII ones, keeping every offset.

    DDL pasted from documents arrives as ``“log-store.enabled” = “true”``, sometimes with the same
    character at both ends (``“true“``). A typographic quote opens a string outside strings and
    comments and is closed by the next quote of its family on the same line; both become ``"`` (or
    ``'`` for the single family), or the other ASCII quote when the text between holds that one.
    Text that cannot be repaired this way is left as it is and fails to tokenize where it stands.
    """
    if not any(ch in text for ch in _DOUBLE_TYPO + _SINGLE_TYPO):
        return text
    chars = list(text)
    pos = 0
    while (m := _INTERESTING.search(text, pos)) is not None:
        tok, at = m.group(), m.start()
        if tok == "--":
            nl = text.find("\n", at)
            pos = len(text) if nl < 0 else nl + 1
        elif tok == "/*":
            close = text.find("*/", at + 2)
            pos = len(text) if close < 0 else close + 2
        elif tok in "'\"`":
            pos = _skip_ascii_quoted(text, at)
        else:
            family = _DOUBLE_TYPO if tok in _DOUBLE_TYPO else _SINGLE_TYPO
            close = next(
                (i for i in range(at + 1, len(text)) if text[i] in family or text[i] == "\n"), -1
            )
            if close < 0 or text[close] == "\n":
                pos = at + 1
                continue
            inner = text[at + 1 : close]
            preferred, other = ('"', "'") if family == _DOUBLE_TYPO else ("'", '"')
            quote = preferred if preferred not in inner else other if other not in inner else None
            if quote is not None:
                chars[at] = chars[close] = quote
            pos = close + 1
    return "".join(chars)


def _skip_ascii_quoted(text: str, at: int) -> int:
    """The offset after the ASCII-quoted string or identifier starting at ``at`` (Spark rules)."""
    quote = text[at]
    i = at + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "`":
            i += 2
            continue
        if ch == quote:
            if quote == "`" and text.startswith("``", i):
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)
