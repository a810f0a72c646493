"""Outside writes: Delta commits that change a table's data without being a logstore epoch (a user's
own ``DELETE``, ``MERGE`` or ``UPDATE`` in Spark SQL, a ``write_deltalake`` append, an overwrite).

The log would not know them, so an ingest job *carries* them into the log before its next epoch
(docs/consistency.md §3.4): their changes, read from Delta's Change Data Feed, become the records of
an epoch of the reserved writer ``OUTSIDE_WRITER`` whose epoch number is the newest Delta version
the job checked (``through``), committed to Delta as an empty commit with that writer's transaction
id. Delta's transaction record for ``OUTSIDE_WRITER`` is then the version through which every
outside write has been carried: the next job starts looking after it.

This module is the pure part: what counts as an outside write (``classify`` over a commit's
actions), how one is named to users, and how Change Data Feed rows become log records (``KINDS``,
``ORDER``). Reading the files is ``catalog/outside.py``; reading the feed is the Spark job's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.wire import RowKind, parse_commit_metadata, parse_fence_metadata

# The writer id of carried outside writes, in the records' headers, their markers and the Delta
# transaction id of the commit that records them. Ingest writer ids are ``w-`` + hex (one never
# collides with it); a reader treats it as any other writer.
OUTSIDE_WRITER: Final = "delta-outside"

# Change Data Feed ``_change_type`` -> the log's row kind.
KINDS: Final[Mapping[str, RowKind]] = {
    "delete": RowKind.DELETE,
    "update_preimage": RowKind.UPDATE_BEFORE,
    "update_postimage": RowKind.UPDATE_AFTER,
    "insert": RowKind.INSERT,
}
# Within one Delta version a key's removal comes before its new image: an overwrite reports a key it
# keeps as ``delete`` + ``insert``, an update as pre- then post-image (the feed has no order).
ORDER: Final[Mapping[str, int]] = {
    "delete": 0,
    "update_preimage": 1,
    "update_postimage": 2,
    "insert": 3,
}


@dataclass(frozen=True)
class OutsideCommit:
    """A Delta commit that changed data and is not a logstore epoch."""

    version: int
    operation: str | None  # commitInfo.operation: DELETE, MERGE, WRITE, UPDATE, ...
    timestamp_ms: int | None  # inCommitTimestamp, else timestamp
    engine: str | None  # commitInfo.engineInfo: e.g. "Apache-Spark/4.0.1 Delta-Lake/4.0.1"

    @property
    def when(self) -> str | None:
        if self.timestamp_ms is None:
            return None
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.timestamp_ms / 1000))
        return f"{stamp} UTC"

    def describe(self) -> str:
        """``version 7 (DELETE at 2026-11-25 20:13:05 UTC by Apache-Spark/4.0.1 ...)``."""
        parts = [self.operation or "an unnamed operation"]
        if self.when:
            parts.append(f"at {self.when}")
        if self.engine:
            parts.append(f"by {self.engine}")
        return f"version {self.version} ({' '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "operation": self.operation,
            "at": self.when,
            "engine": self.engine,
        }


def describe_all(commits: Iterable[OutsideCommit], limit: int = 5) -> str:
    """The first ``limit`` commits described, and how many more."""
    listed = list(commits)
    text = ", ".join(c.describe() for c in listed[:limit])
    if len(listed) > limit:
        text += f" and {len(listed) - limit} more"
    return text


def is_epoch_commit(info: Mapping[str, Any]) -> bool:
    """Whether a ``commitInfo`` is a logstore epoch's (its ``userMetadata``, wire format 1)."""
    meta = info.get("userMetadata")
    try:
        return parse_commit_metadata(meta if isinstance(meta, str) else None) is not None
    except WireFormatError:
        return False  # someone else's metadata that merely mentions "logstore"


def is_fence_commit(info: Mapping[str, Any]) -> bool:
    """Whether a ``commitInfo`` is a takeover's fence commit (an empty append that sets the fenced
    writer's transaction version: no change of the table's rows)."""
    meta = info.get("userMetadata")
    return parse_fence_metadata(meta if isinstance(meta, str) else None) is not None


def commit_timestamp_ms(info: Mapping[str, Any]) -> int | None:
    """A ``commitInfo``'s time: its in-commit timestamp when the table has them, else its own."""
    ts = info.get("inCommitTimestamp", info.get("timestamp"))
    return ts if isinstance(ts, int) and not isinstance(ts, bool) else None


def changes_data(actions: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a commit changes the table's data: an ``add``/``remove`` with ``dataChange`` true,
    or a ``cdc`` file (CREATE TABLE, SET TBLPROPERTIES, OPTIMIZE, VACUUM: no)."""
    for action in actions:
        if "cdc" in action:
            return True
        for name in ("add", "remove"):
            body = action.get(name)
            if isinstance(body, Mapping) and body.get("dataChange", True) is not False:
                return True
    return False


def classify(version: int, actions: Iterable[Mapping[str, Any]]) -> OutsideCommit | None:
    """The outside write a commit is, from its actions (the commit file's lines, parsed); None for
    an epoch commit, a fence commit and a commit that changes no data (``changes_data``)."""
    actions = list(actions)
    infos = [a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), Mapping)]
    info: Mapping[str, Any] = infos[-1] if infos else {}
    if any(is_epoch_commit(i) or is_fence_commit(i) for i in infos) or not changes_data(actions):
        return None
    operation, engine = info.get("operation"), info.get("engineInfo")
    return OutsideCommit(
        version,
        operation if isinstance(operation, str) else None,
        commit_timestamp_ms(info),
        engine if isinstance(engine, str) else None,
    )


def parse_actions(lines: Iterable[bytes]) -> Iterable[Mapping[str, Any]]:
    """A commit file's lines as actions (blank lines skipped; a line that is not a JSON object
    raises ValueError: a commit file is Delta's, and one that is not readable is not guessed at)."""
    for line in lines:
        if not line.strip():
            continue
        action = json.loads(line)
        if not isinstance(action, dict):
            raise ValueError("a commit file line is not a JSON object")
        yield action
