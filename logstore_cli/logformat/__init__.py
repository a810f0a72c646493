"""The log's record format (wire format version 1): pure, shared by every engine that reads it."""

from logstore_cli.logformat.wire import ChangeRecord, CommitMarker, EpochId, RowKind

__all__ = ["ChangeRecord", "CommitMarker", "EpochId", "RowKind"]
