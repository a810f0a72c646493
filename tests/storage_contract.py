"""What every ``Storage`` backend must do, as plain checks: the unit suite runs them on
``LocalStorage``, the ``s3`` suite on ``S3Storage`` against the real S3 server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from logstore_cli.errors import InvalidInputError
from logstore_cli.storage import Listing, Storage


def check_read_write(storage: Storage) -> None:
    assert storage.read("db/t/_logstore/lease.json") is None
    assert not storage.exists("db/t/_logstore/lease.json")
    v1 = storage.write("db/t/_logstore/lease.json", b"one")
    blob = storage.read("db/t/_logstore/lease.json")
    assert blob is not None and blob.data == b"one" and blob.version == v1
    v2 = storage.write("db/t/_logstore/lease.json", b"two!")
    assert v2 != v1
    blob = storage.read("db/t/_logstore/lease.json")
    assert blob is not None and (blob.data, blob.version) == (b"two!", v2)
    assert storage.exists("db/t/_logstore/lease.json")
    storage.delete("db/t/_logstore/lease.json")
    storage.delete("db/t/_logstore/lease.json")  # nothing there: no error
    assert storage.read("db/t/_logstore/lease.json") is None


def check_conditional_writes(storage: Storage) -> None:
    v1 = storage.put_if_absent("k", b"first")
    assert v1 is not None
    assert storage.put_if_absent("k", b"second") is None
    blob = storage.read("k")
    assert blob is not None and blob.data == b"first"
    v2 = storage.replace_if_version("k", b"replaced", v1)
    assert v2 is not None and v2 != v1
    assert storage.replace_if_version("k", b"stale", v1) is None  # v1 is no longer current
    blob = storage.read("k")
    assert blob is not None and (blob.data, blob.version) == (b"replaced", v2)
    storage.delete("k")
    assert storage.replace_if_version("k", b"gone", v2) is None  # nothing to replace
    assert storage.read("k") is None


def check_listing_and_children(storage: Storage) -> None:
    storage.write("db1/t1/_delta_log/00000000000000000000.json", b"{}")
    storage.write("db1/t2/x", b"")
    storage.write("db2/t3/x", b"")
    storage.write("top", b"")
    assert storage.list() == Listing(files=("top",), dirs=("db1", "db2"))
    assert storage.list("db1") == Listing(files=(), dirs=("t1", "t2"))
    assert storage.list("db1/t1/_delta_log").files == ("00000000000000000000.json",)
    assert storage.list("nothing") == Listing((), ())
    # Each file's modification time, in milliseconds (a server's clock: within a minute of ours).
    listed = storage.list("db1/t1/_delta_log")
    (at,) = listed.modified.values()
    assert abs(at - time.time() * 1000) < 60_000 and set(listed.modified) == set(listed.files)
    child = storage.child("db1").child("t2")
    blob = child.read("x")
    assert blob is not None and blob.data == b""
    assert child.uri.endswith("db1/t2")


def check_containment(storage: Storage) -> None:
    for key in ("../x", "a/../../x", "a//b", "/abs", "%2e%2e/x", "a\\..\\b", "a/\x00", "", "."):
        for operation in (
            lambda k: storage.read(k),
            lambda k: storage.write(k, b"x"),
            lambda k: storage.put_if_absent(k, b"x"),
            lambda k: storage.replace_if_version(k, b"x", "v"),
            lambda k: storage.delete(k),
            lambda k: storage.child(k),
            lambda k: storage.list(k or "."),
        ):
            with pytest.raises(InvalidInputError):
                operation(key)


def race(n: int, attempt: Callable[[int], bool]) -> list[int]:
    """Run ``attempt(i)`` in ``n`` threads released at once; the indexes that returned True."""
    barrier = threading.Barrier(n)
    won: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        try:
            barrier.wait()
            if attempt(i):
                with lock:
                    won.append(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return won


def check_put_if_absent_race(storage: Storage, trials: int = 5) -> None:
    for trial in range(trials):
        key = f"race-{trial}"
        won = race(8, lambda i, key=key: storage.put_if_absent(key, f"{i}".encode()) is not None)
        assert len(won) == 1, won
        blob = storage.read(key)
        assert blob is not None and blob.data == str(won[0]).encode()


def check_replace_race(storage: Storage, trials: int = 5) -> None:
    for trial in range(trials):
        key = f"cas-{trial}"
        version = storage.write(key, b"start")
        won = race(
            8,
            lambda i, key=key, version=version: (
                storage.replace_if_version(key, f"{i}".encode(), version) is not None
            ),
        )
        assert len(won) == 1, won
        blob = storage.read(key)
        assert blob is not None and blob.data == str(won[0]).encode()
