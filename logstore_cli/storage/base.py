"""The storage seam: what logstore itself reads and writes below a warehouse, on any backend.

A ``Storage`` is rooted at a prefix (a local directory, an S3 bucket and key prefix) and takes
*relative keys* ('db/table/_logstore/lease.json'), each segment checked by ``uri.key_segments``, so
nothing an operation is given reaches outside its root. ``child`` roots a new ``Storage`` deeper.

Every read returns a version token with the data, and the two conditional writes are what a lease
needs without ``flock``: ``put_if_absent`` (create only if no object exists) and
``replace_if_version`` (overwrite only if the object is still the version read). Both are single
atomic operations on the backend, so of two racers exactly one succeeds. There is deliberately no
conditional delete: some S3-compatible servers ignore its condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Blob:
    """An object's bytes and the version token of exactly those bytes (opaque, backend-made)."""

    data: bytes
    version: str


@dataclass(frozen=True)
class Listing:
    """The direct children of a key: objects (files) and common prefixes (directories), sorted;
    each file's last modification in milliseconds since the epoch (the time Delta gives a commit
    file), which equality leaves out."""

    files: tuple[str, ...]
    dirs: tuple[str, ...]
    modified: Mapping[str, int] = field(default_factory=dict, compare=False)


@runtime_checkable
class Storage(Protocol):
    """What logstore reads and writes below one root (see the module doc)."""

    @property
    def uri(self) -> str:
        """The root as the user would write it (never with credentials)."""
        ...

    def child(self, key: str) -> Storage:
        """A ``Storage`` rooted at ``key`` below this root (checked, never outside it)."""
        ...

    def read(self, key: str) -> Blob | None:
        """The object at ``key`` and its version; None when there is none."""
        ...

    def write(self, key: str, data: bytes) -> str:
        """Replace (or create) the object at ``key`` atomically; its new version."""
        ...

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        """Create the object at ``key`` only if none exists: its version, or None when one did."""
        ...

    def replace_if_version(self, key: str, data: bytes, version: str) -> str | None:
        """Overwrite ``key`` only if it still is ``version``: the new version, or None when it
        changed or is gone (someone else wrote or deleted it since it was read)."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object at ``key`` (unconditional; nothing when there is none)."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, key: str = "") -> Listing:
        """The direct children of ``key`` ('' for the root); names that are no valid segment
        (not written by logstore) are left out."""
        ...
