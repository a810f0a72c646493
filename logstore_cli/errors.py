"""Domain errors, caught once at the CLI edge (``logstore_cli.cli.app.main``).

Every error a user can cause or meet carries a message that says what went wrong, where, and how to
fix it; the exit code is part of the documented CLI contract (docs/guide.md, "Exit codes").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# Documented exit codes.
EXIT_OK = 0
EXIT_FAILURE = 1  # the operation failed: unreachable broker, missing table, JVM did not start ...
EXIT_INVALID_INPUT = 2  # the input is wrong: malformed DDL, bad option value, bad config
EXIT_INTERRUPTED = 130


class LogstoreError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint  # how to fix it, one line
        self.detail = detail  # extra text shown below, e.g. a log tail

    def __str__(self) -> str:
        return self.message

    def plain(self) -> str:
        """The error as a script without Rich prints it: ``error:``, ``hint:``, then the detail."""
        lines = [f"error: {self.message}"]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        if self.detail:
            lines.append(self.detail)
        return "\n".join(lines)


class InvalidInputError(LogstoreError):
    """The user's input (options, files, values) is wrong."""

    exit_code = EXIT_INVALID_INPUT


class ConfigError(InvalidInputError):
    """The configuration file, environment or flags do not form a valid configuration."""


class SetupError(LogstoreError):
    """A required local dependency (Java, Maven, resolved jars) is missing or broken."""


class BrokerError(LogstoreError):
    """The Kafka broker could not be started, stopped or reached."""


class SparkStartError(LogstoreError):
    """The Spark JVM did not start; ``detail`` carries the JVM's own error output."""


class SparkClusterError(LogstoreError):
    """The local Spark standalone cluster could not be started, stopped or found."""


class StateDirError(LogstoreError):
    """The state directory (local broker data, Spark's logs) cannot be created, written, or trusted
    (a symlink or another user's directory where logstore keeps its own files)."""


class Diagnostic(NamedTuple):
    """One problem found in user input, optionally pinned to a position in a file.

    ``line``/``col`` are 1-based; ``end_col`` is one past the last underlined column (same line).
    ``source_line`` is that line as it may be shown (secrets already masked). A position-free
    diagnostic (``line is None``) names only ``file``, e.g. a table name.
    """

    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    end_col: int | None = None
    source_line: str | None = None
    severity: str = "error"  # or "warning"

    @property
    def location(self) -> str:
        """``FILE:LINE:COL`` (as much of it as is known; empty when nothing is)."""
        where = [self.file] if self.file else []
        if self.line is not None:
            where.append(str(self.line))
            if self.col is not None:
                where.append(str(self.col))
        return ":".join(where)

    @property
    def headline(self) -> str:
        """``FILE:LINE:COL: error: MESSAGE``, the compiler convention editors and CI understand."""
        head = f"{self.severity}: {self.message}"
        return f"{self.location}: {head}" if self.location else head

    def excerpt(self) -> list[str]:
        """The source line and a caret/underline below the offending token (empty without one)."""
        if self.source_line is None or self.col is None:
            return []
        text = self.source_line.rstrip("\r\n")
        start = max(self.col - 1, 0)
        end = max((self.end_col or 0) - 1, start + 1)
        # Keep the line's tabs so the caret lines up however the terminal expands them.
        pad = "".join(ch if ch == "\t" else " " for ch in text[:start])
        return [text, pad + "^" + "~" * (end - start - 1)]

    def render(self) -> str:
        return "\n".join([self.headline, *self.excerpt()])


class DDLError(InvalidInputError):
    """The DDL is malformed or invalid; carries every diagnostic found in one run (warnings too).

    ``message`` is the ``FILE:LINE:COL: error: MESSAGE`` lines; ``logstore validate`` prints the full
    rendering with source excerpts itself, other commands show the lines through ``main()``.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(d.headline for d in self.errors) or "invalid DDL")

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


class TableNotFoundError(LogstoreError):
    """No table of that name in the warehouse; the hint names the nearest existing ones."""


class TableExistsError(LogstoreError):
    """The table already exists (identical); ``--if-not-exists`` makes this a no-op."""


class TableConflictError(LogstoreError):
    """The table or its topic exists but differs from the definition; ``detail`` shows how."""


class TopicInUseError(TableConflictError):
    """The topic is another table's log: a topic belongs to one table, and is never deleted while
    another table uses it."""


class WarehouseError(LogstoreError):
    """The warehouse location is missing, not a directory, or not writable."""


class KafkaAuthenticationError(BrokerError):
    """The broker rejected the client's credentials (SASL mechanism, user name or password, TLS)."""


class KafkaAuthorizationError(BrokerError):
    """The broker refused an operation to the client's principal (ACLs): grant it, or log in as
    another principal."""


class TopicExistsError(BrokerError):
    """A topic of that name already exists (creating it again is refused)."""


class TopicNotFoundError(BrokerError):
    """The topic does not exist (it was never created, or was deleted meanwhile)."""


class TopicSpecError(InvalidInputError):
    """The requested topic settings (name, partitions, replication, configs) are invalid for the
    cluster, as the broker or a local check said; the user fixes the table's definition."""


class RecordsDeletedError(LogstoreError):
    """Records a read needs are no longer in the log (the topic's retention deleted them)."""


class OutsideWriteError(LogstoreError):
    """A write to the Delta table that was not a logstore epoch cannot be carried into the log
    (docs/consistency.md §3.4): the job refuses rather than let the log silently miss it."""
