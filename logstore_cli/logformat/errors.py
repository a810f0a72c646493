"""The one error of the record format: a record, value or type that format 1 cannot carry."""

from __future__ import annotations

from typing import Literal

from logstore_cli.errors import LogstoreError

# Why a record or value was refused, so that a reader can choose what to do with it:
# - "foreign": no logstore headers at all (e.g. a record of an adopted topic, written before);
# - "version": a logstore record of another format version (a newer logstore wrote it);
# - "malformed": it claims format 1 but breaks it (a missing header, a value that is not JSON ...);
# - "value": a value does not fit its column's type (encoding or decoding);
# - "type": a column type format 1 has no encoding for;
# - "column": a value has a column the reader's schema lacks (added after the reader started:
#   the reader reads the table's schema again; still unknown, it is malformed).
Reason = Literal["foreign", "version", "malformed", "value", "type", "column"]


class WireFormatError(LogstoreError):
    """A record, value or column type that wire format version 1 cannot carry.

    ``reason`` tells a reader whether to skip the record quietly (``foreign``), report it as
    written by a newer logstore (``version``), or report it as broken.
    """

    def __init__(self, message: str, *, reason: Reason, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason: Reason = reason
