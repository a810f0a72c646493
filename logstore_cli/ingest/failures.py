"""What a failed epoch's Delta commit means, from the error Spark raised: another writer, a
changed table, or a table that is gone — each with its own next step. Pure: text in, words out.

Delta names its conflicts by error class (``[DELTA_CONCURRENT_APPEND]``, …) and by exception
class (``io.delta.exceptions.ConcurrentAppendException``); both forms are matched, since the first
line of a Py4J error may carry either. An epoch committed by delta-rs fails on any commit that
came first (it does not retry: see ``jobs/ingest.py``), raised with ``DELTA_RS_CONFLICT``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Explained:
    cause: str  # "another-writer", "metadata-changed", "table-gone"
    message: str
    hint: str


DELTA_RS_CONFLICT = "DELTA_RS_COMMIT_CONFLICT"  # in the error a delta-rs epoch commit raises

_ANOTHER_WRITER = (
    DELTA_RS_CONFLICT,
    "DELTA_CONCURRENT_APPEND", "ConcurrentAppendException",
    "DELTA_CONCURRENT_DELETE_READ", "ConcurrentDeleteReadException",
    "DELTA_CONCURRENT_DELETE_DELETE", "ConcurrentDeleteDeleteException",
    "DELTA_CONCURRENT_TRANSACTION", "ConcurrentTransactionException",
    "DELTA_CONCURRENT_WRITE", "ConcurrentWriteException",
)  # fmt: skip
_METADATA = (
    "DELTA_METADATA_CHANGED", "MetadataChangedException",
    "DELTA_PROTOCOL_CHANGED", "ProtocolChangedException",
    "DELTA_SCHEMA_CHANGED", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS",
)  # fmt: skip
_GONE = (
    "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND", "DELTA_PATH_DOES_NOT_EXIST",
    "is not a Delta table", "DELTA_EMPTY_DIRECTORY",
)  # fmt: skip


def explain_commit_failure(text: str, table: str) -> Explained | None:
    """The cause of an epoch failure whose error text is ``text``, for table ``table``; None when
    it is none of Delta's conflicts (the caller reports it as it is)."""
    if any(marker in text for marker in _GONE):
        return Explained(
            "table-gone",
            f"the Delta table of {table} is gone: it was dropped or its files were removed while "
            "the job ran; the epoch was not committed",
            "do not restart this job on it: create the table again (logstore create-table) and "
            "start over with a new checkpoint (--job NAME or delete the old checkpoint), or "
            "restore the table's files first",
        )
    if any(marker in text for marker in _METADATA):
        return Explained(
            "metadata-changed",
            f"the Delta table of {table} was changed while the epoch committed (its schema, "
            "properties or protocol: an alter-table or another program); the epoch was not "
            "committed",
            "check the change (logstore describe), then run the same "
            "command: the epoch runs again against the new table and nothing is written twice",
        )
    if any(marker in text for marker in _ANOTHER_WRITER):
        return Explained(
            "another-writer",
            f"another program committed to the Delta table of {table} while the epoch committed "
            "(a conflicting write that is not this job's); the epoch was not committed",
            "find the other writer (logstore status shows the lease holder; other programs do "
            "not take it) and stop it or run it between jobs, then run the same command: the "
            "epoch runs again and nothing is written twice",
        )
    return None
