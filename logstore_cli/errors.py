"""Domain errors, caught once at the CLI edge (``logstore_cli.cli.app.main``).

Every error a user can cause or meet carries a message that says what went wrong, where, and how to
fix it; the exit code is part of the documented CLI contract (see README, "Exit codes").
"""

from __future__ import annotations

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
