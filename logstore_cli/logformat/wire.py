"""Wire format version 1 of a LogStore table's topic (docs/design.md, section 7).

Pure: no I/O, no Kafka client, no Spark; every engine that writes or reads the log shares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RowKind(StrEnum):
    """The kind of a log record: a change (``+I -U +U -D``) or a commit marker (``COMMIT``)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"
    COMMIT = "COMMIT"

    def retraction(self) -> RowKind:
        """The kind that undoes a change of this kind (what an ``eventual`` reader emits)."""
        try:
            return _RETRACTION[self]
        except KeyError:
            raise ValueError("a commit marker has no retraction") from None


_RETRACTION = {
    RowKind.INSERT: RowKind.DELETE,
    RowKind.DELETE: RowKind.INSERT,
    RowKind.UPDATE_AFTER: RowKind.UPDATE_BEFORE,
    RowKind.UPDATE_BEFORE: RowKind.UPDATE_AFTER,
}


@dataclass(frozen=True)
class EpochId:
    """One attempt of one epoch: writer ``W``, epoch number ``N`` (the batch id), attempt ``A``."""

    writer: str
    epoch: int
    attempt: str


@dataclass(frozen=True)
class ChangeRecord:
    """A change of one row, as written to the log by attempt ``epoch``."""

    kind: RowKind
    key: Mapping[str, Any] | None
    row: Mapping[str, Any]
    epoch: EpochId


@dataclass(frozen=True)
class CommitMarker:
    """Epoch ``epoch`` committed with this attempt, as Delta version ``delta_version``.

    ``delta_version`` is None with log-only emit (no Delta commit).
    """

    epoch: EpochId
    delta_version: int | None
