"""``explain_commit_failure``: a failed epoch's Delta error, as Py4J's first line carries it
(Delta 4.0.1's error classes and messages, from its ``delta-error-classes.json``), named by cause."""

from __future__ import annotations

import pytest

from logstore_cli.ingest.failures import explain_commit_failure

PY4J = "An error occurred while calling o412.execute.\n: "


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added to the root of "
         "the table by a concurrent update. Please try the operation again.", "another-writer"),
        ("io.delta.exceptions.ConcurrentDeleteReadException: [DELTA_CONCURRENT_DELETE_READ] This "
         "transaction attempted to read one or more files that were deleted", "another-writer"),
        ("[DELTA_CONCURRENT_TRANSACTION] ConcurrentTransactionException: This error occurs when "
         "multiple streaming queries are using the same checkpoint", "another-writer"),
        ("[DELTA_METADATA_CHANGED] MetadataChangedException: The metadata of the Delta table has "
         "been changed by a concurrent update. Please try the operation again.", "metadata-changed"),
        ("[DELTA_PROTOCOL_CHANGED] ProtocolChangedException: The protocol version of the Delta "
         "table has been changed by a concurrent update.", "metadata-changed"),
        ("[DELTA_MISSING_DELTA_TABLE] `/wh/db/t` is not a Delta table.", "table-gone"),
        ("[DELTA_PATH_DOES_NOT_EXIST] /wh/db/t doesn't exist, or is not a Delta table.",
         "table-gone"),
        # an epoch committed by delta-rs (jobs/ingest.py raises it; no Py4J prefix in reality)
        ("DELTA_RS_COMMIT_CONFLICT: another commit took the Delta version after 7 first; epoch 3 "
         "was not committed", "another-writer"),
    ],
)  # fmt: skip
def test_each_conflict_is_named_with_its_next_step(text: str, cause: str) -> None:
    explained = explain_commit_failure(PY4J + text, "db.t")
    assert explained is not None and explained.cause == cause
    assert "db.t" in explained.message and "not committed" in explained.message
    restart = "run the same command" in explained.hint
    assert restart == (cause != "table-gone")  # a dropped table must not be written again


def test_other_failures_are_left_to_the_caller() -> None:
    assert explain_commit_failure(PY4J + "java.lang.OutOfMemoryError: Java heap space", "t") is None
    assert explain_commit_failure("", "t") is None
