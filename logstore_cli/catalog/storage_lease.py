"""The writer lease on the storage seam: fencing by conditional writes, no ``flock`` (issue 19).

The same lease as ``catalog.lease`` (``LeaseInfo``, the same errors, the same ``check`` before each
commit and keep-alive thread), stored at ``<table>/_logstore/lease.json`` on any ``Storage``, where
every read-check-write is a single conditional write instead of a locked step:

- **take**: read the lease. None there: create it with ``put_if_absent`` (S3: ``If-None-Match:
  *``). Expired, released, or held by a dead process on this host: overwrite it with
  ``replace_if_version`` of the version just read (S3: ``If-Match: <ETag>``). Of any number of
  racers exactly one such write succeeds; a loser reads the winner's lease and is refused with it.
- **renew**: ``replace_if_version`` of the version this holder last wrote. Any other write since
  (a takeover after expiry) changed the version, so a holder that was paused past its TTL finds out
  at its next renewal or check and raises ``LeaseLostError``: it cannot extend a lease it lost.
- **release**: a conditional overwrite with the lease marked ``"released": true`` (and expired),
  never a delete: some S3-compatible servers ignore a conditional DELETE's condition, and an
  unconditional delete could remove a successor's lease.

Every acquisition writes the fencing token ``fence`` = the record it replaced + 1 (the conditional
write makes that exact) and passes on the writers to fence (``lease.successor_fencing``); a check
and the Delta commit after it are still two steps, which the fence commit in Delta closes
(docs/consistency.md §6). ``Lease`` (``flock``) stays the lease of local tables.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from logstore_cli.catalog.lease import (
    LEASE_FILE,
    RELEASED,
    Clock,
    HeldLease,
    Lease,
    LeaseHeldError,
    LeaseInfo,
    LeaseLostError,
    _held_elsewhere,
    _takeable,
    check_lease_args,
    encode_lease,
    local_holder_dead,
    process_identity,
    read_lease,
    successor_fencing,
)
from logstore_cli.errors import LogstoreError, WarehouseError
from logstore_cli.ingest.plan import STATE_DIR
from logstore_cli.storage import Storage

KEY = f"{STATE_DIR}/{LEASE_FILE}"
_MAX_LEASE_BYTES = 64 * 1024
# Each failed attempt means another racer wrote a lease in between; it is then read and judged.
_ACQUIRE_ATTEMPTS = 5

_log = logging.getLogger(__name__)


_encode = encode_lease


def _decode(data: bytes, where: str) -> tuple[LeaseInfo, bool]:
    """The stored lease and whether it was released; WarehouseError when it is not a lease."""
    try:
        if len(data) > _MAX_LEASE_BYTES:
            raise ValueError(f"larger than {_MAX_LEASE_BYTES} bytes")
        parsed = json.loads(data.decode("utf-8"))
        info = LeaseInfo.from_json(parsed)
        released = parsed.get(RELEASED, False)
        if not isinstance(released, bool):
            raise ValueError(f"{RELEASED!r} is not true or false")
    except (ValueError, UnicodeDecodeError) as exc:
        raise WarehouseError(
            f"{where} is not a logstore lease: {exc}",
            hint="logstore writes this object whole, so something else changed it; if no "
            "ingest job runs on this table, delete it",
        ) from None
    return info, released


def _where(table: Storage) -> str:
    return f"{table.uri}/{KEY}"


def read_stored_lease(table: Storage) -> LeaseInfo | None:
    """The table's lease as stored (live or expired); None when there is none or it was released."""
    blob = table.read(KEY)
    if blob is None:
        return None
    info, released = _decode(blob.data, _where(table))
    return None if released else info


def _ours_after_all(table: Storage, info: LeaseInfo) -> str | None:
    """The stored lease's version when it holds ``info``'s token and was not released: a
    conditional write that was reported failed had landed (its answer lost and the request retried,
    which then found its own write). None otherwise. Only this holder writes its random token."""
    blob = table.read(KEY)
    if blob is None:
        return None
    stored, released = _decode(blob.data, _where(table))
    return blob.version if stored.token == info.token and not released else None


class StorageLease(HeldLease):
    """A held lease on a table's ``Storage``. Take it with ``acquire``; ``release`` it (or use it
    as a context manager)."""

    def __init__(
        self,
        table_storage: Storage,
        table: str,
        info: LeaseInfo,
        version: str,
        ttl_s: float,
        clock: Clock,
        took_over: LeaseInfo | None,
    ) -> None:
        super().__init__(table, info, ttl_s, clock, took_over)
        self.storage = table_storage
        self._version = version  # of the lease object as this holder last wrote it

    @classmethod
    def acquire(
        cls,
        table_storage: Storage,
        job: str,
        ttl_s: float,
        *,
        clock: Clock = time.time,
        host: str | None = None,
        pid: int | None = None,
        table: str | None = None,
        holder_dead: Callable[[LeaseInfo], bool] = local_holder_dead,
    ) -> StorageLease:
        """Take the lease of the table stored at ``table_storage`` for ``ttl_s`` seconds, or raise
        LeaseHeldError naming the live holder (see the module doc)."""
        check_lease_args(ttl_s, job)
        host = socket.gethostname() if host is None else host
        pid = os.getpid() if pid is None else pid
        name = table or table_storage.uri
        for _ in range(_ACQUIRE_ATTEMPTS):
            now = clock()
            info = LeaseInfo(
                job=job, host=host, pid=pid, token=uuid.uuid4().hex, acquired_at=now,
                expires_at=now + ttl_s, process=process_identity(pid), fence=1,
            )  # fmt: skip
            blob = table_storage.read(KEY)
            if blob is None:
                version = table_storage.put_if_absent(KEY, _encode(info))
                version = version or _ours_after_all(table_storage, info)
                if version is not None:
                    return cls(table_storage, name, info, version, float(ttl_s), clock, None)
                continue  # another job created it first: judge its lease
            current, released = _decode(blob.data, _where(table_storage))
            live = not released and not current.expired(now)
            if live and not _takeable(current, host, holder_dead):
                raise LeaseHeldError(name, current, now)
            fence, unfenced = successor_fencing(current, released)
            info = replace(info, fence=fence, unfenced=unfenced)
            version = table_storage.replace_if_version(KEY, _encode(info), blob.version)
            version = version or _ours_after_all(table_storage, info)
            if version is None:
                continue  # another job wrote it after our read: judge its lease
            took_over = None if released else current
            if took_over is not None:
                why = "expired" if current.expired(now) else "its process has exited"
                _log.info("took over the lease of table %s from %s (%s)", name, current.holder, why)
            return cls(table_storage, name, info, version, float(ttl_s), clock, took_over)
        raise LogstoreError(
            f"could not take the lease of table {name}: it changed at each of "
            f"{_ACQUIRE_ATTEMPTS} attempts",
            hint="several jobs are starting on this table at once; start only one",
        )

    def renew(self) -> None:
        """Extend the lease by its TTL from now, by a write conditional on the version this holder
        last wrote; LeaseLostError when anything else wrote it since."""
        with self._mutex:
            if self._released:
                raise LeaseLostError(f"the lease of table {self.table} was released")
            info = replace(self._info, expires_at=self._clock() + self.ttl_s)
            version = self.storage.replace_if_version(KEY, _encode(info), self._version)
            if version is None:
                # Our previous write may have landed with its answer lost (a retried request):
                # then the stored lease is still ours, and the renewal is retried on its version.
                ours = _ours_after_all(self.storage, self._info)
                if ours is not None:
                    version = self.storage.replace_if_version(KEY, _encode(info), ours)
            if version is None:
                raise _held_elsewhere(self.table, self._info, read_stored_lease(self.storage))
            self._info, self._version = info, version

    def check(self, min_remaining_s: float = 0.0) -> None:
        """Raise LeaseLostError unless the stored lease is ours and has more than
        ``min_remaining_s`` left (read from storage: a takeover is seen at once)."""
        self._raise_if_done()
        self._check_stored(read_stored_lease(self.storage), min_remaining_s)

    def release(self) -> None:
        """Stop renewing and mark the lease released if it is still ours (a conditional
        overwrite, never a delete). Idempotent."""
        self._stop_renewing()
        with self._mutex:
            if self._released:
                return
            now = self._clock()
            expires = max(self._info.acquired_at, min(now, self._info.expires_at))
            info = replace(self._info, expires_at=expires)
            done = self.storage.replace_if_version(KEY, _encode(info, released=True), self._version)
            if done is None:
                _log.warning("lease of table %s left alone: it is no longer ours", self.table)
            self._released = True  # only now: a release that failed (I/O) may be called again

    def __enter__(self) -> StorageLease:
        return self


def acquire_lease(
    table_storage: Storage,
    job: str,
    ttl_s: float,
    *,
    table: str | None = None,
    clock: Clock = time.time,
) -> HeldLease:
    """The lease of the table at ``table_storage`` by its backend's algorithm: ``flock`` on a
    local directory (``Lease``, unchanged), conditional writes elsewhere (``StorageLease``)."""
    from logstore_cli.storage.local import LocalStorage

    if isinstance(table_storage, LocalStorage):
        return Lease.acquire(table_storage.root, job, ttl_s, table=table, clock=clock)
    return StorageLease.acquire(table_storage, job, ttl_s, table=table, clock=clock)


def read_lease_on(table_storage: Storage) -> LeaseInfo | None:
    """The table's live or expired lease, as ``acquire_lease``'s algorithm stores it."""
    from logstore_cli.storage.local import LocalStorage

    if isinstance(table_storage, LocalStorage):
        return read_lease(table_storage.root)
    return read_stored_lease(table_storage)
