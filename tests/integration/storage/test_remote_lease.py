"""``StorageLease`` against the real servers, one suite for both (``remote_root``): on S3 taken with
``If-None-Match: *``, taken over, renewed and released with ``If-Match``; on HDFS (a
MiniDFSCluster) taken with a create-if-absent (a rename without overwrite), taken over, renewed
and released with a replace-if-unchanged (the next generation renamed without overwrite,
``storage/hdfs.py``). Of 8 racing jobs (threads) or 4 (processes) exactly one wins, every trial; a
holder paused past its TTL has lost the lease."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from logstore_cli.catalog.lease import LeaseHeldError, LeaseLostError
from logstore_cli.catalog.storage_lease import StorageLease, read_stored_lease
from logstore_cli.storage import Storage, open_storage
from logstore_cli.storage.hdfs import HdfsStorage, generation_name
from logstore_cli.storage.s3 import S3Storage
from tests import lease_contract as contract
from tests.plugins.storage_servers import REMOTE

STORAGE: dict[str, type[Storage]] = {"s3": S3Storage, "hdfs": HdfsStorage}
pytestmark = pytest.mark.parametrize(
    "remote_root", REMOTE, indirect=True
)  # remote_root: a fresh root


@pytest.fixture
def warehouse(remote_root: str, request: pytest.FixtureRequest) -> Storage:
    found = open_storage(f"{remote_root}/wh")
    assert isinstance(found, STORAGE[request.node.callspec.params["remote_root"]])
    return found


@pytest.fixture
def table(warehouse: Storage) -> Storage:
    found = warehouse.child("db/t")
    assert isinstance(found, type(warehouse))
    return found


def test_racers_have_one_winner(warehouse: Storage) -> None:
    contract.check_racers_have_one_winner(warehouse, trials=10)


def test_live_refused_expired_taken_over(table: Storage) -> None:
    contract.check_a_live_lease_is_refused_and_an_expired_one_taken_over(table)


def test_a_stale_holder_cannot_renew_check_or_release(table: Storage) -> None:
    contract.check_a_stale_holder_cannot_renew_check_or_release(table)


def test_the_fencing_token_grows(table: Storage) -> None:
    contract.check_the_fencing_token_grows_and_the_writers_to_fence_pass_on(table)


def test_renewal(table: Storage) -> None:
    contract.check_renewal_extends_and_an_untaken_expired_lease_renews(table)


def test_release_then_reacquire(table: Storage) -> None:
    contract.check_release_then_reacquire(table)


def test_a_dead_local_holder_is_taken_over(table: Storage) -> None:
    contract.check_a_dead_local_holder_is_taken_over_at_once(table)


def test_keep_alive(table: Storage) -> None:
    contract.check_keep_alive_renews_until_release(table)


def test_something_else_is_not_a_lease(table: Storage) -> None:
    contract.check_something_else_is_not_taken_for_a_lease(table)


def test_the_lease_is_one_object_or_file_under_the_table(table: Storage, remote_root: str) -> None:
    """S3: taken, one object below the table's ``_logstore``. HDFS: taken, renewed and released,
    one file there (the generation of the last write), nothing else."""
    lease = contract.take(table, contract.FakeClock())
    if isinstance(table, S3Storage):
        bucket = remote_root.removeprefix("s3://")
        keys = [o["Key"] for o in table._client.list_objects_v2(Bucket=bucket)["Contents"]]
        assert keys == ["wh/db/t/_logstore/lease.json"]
        return
    assert isinstance(table, HdfsStorage)
    lease.renew()
    lease.release()
    client: Any = table._client
    files = [s.path for s in client.list_status(table.path, True) if not s.isdir]
    assert files == [f"{table.path}/_logstore/{generation_name('lease.json', 2)}"]


def _acquire_in_process(uri: str, job: str, start: Any, done: Any, results: Any) -> None:
    start.wait()
    try:
        # its own client and connections (S3: the AWS_* of the parent)
        StorageLease.acquire(open_storage(uri), job, contract.TTL)
        results.put("won")
    except LeaseHeldError:
        results.put("held")
    except BaseException as exc:  # reported, not hidden in the child
        results.put(f"error {exc!r}")
    done.wait()  # stay alive until all tried: a dead winner may be taken over on this host


@pytest.mark.parametrize("trial", range(2))
def test_racing_processes_have_one_winner(remote_root: str, trial: int) -> None:
    """Jobs are processes (each its own client and connections), not threads of one."""
    n = 4
    uri = f"{remote_root}/wh/db/t{trial}"
    mp = multiprocessing.get_context("spawn")
    start, done, results = mp.Barrier(n), mp.Barrier(n), mp.Queue()
    procs = [
        mp.Process(target=_acquire_in_process, args=(uri, f"job{i}", start, done, results))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=120) for _ in range(n))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert outcomes == ["held"] * (n - 1) + ["won"]
    holder = read_stored_lease(open_storage(uri))
    assert holder is not None and holder.pid in {p.pid for p in procs}


def _hold_and_check(uri: str, ttl_s: float, events: Any) -> None:
    """Hold the lease with a keep-alive; check it in a loop until the check fails, and say how."""
    try:
        lease = StorageLease.acquire(open_storage(uri), "paused", ttl_s)
        lease.keep_alive(ttl_s / 5)
        events.put(("held", lease.info.token))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                lease.check()
            except LeaseLostError as exc:
                try:
                    lease.renew()
                    events.put(("renewed after loss", ""))
                except LeaseLostError:
                    events.put(("lost", exc.message))
                lease.release()
                return
            time.sleep(0.02)  # the job's own pace between two commits
        events.put(("never lost", ""))
    except BaseException as exc:
        events.put(("error", repr(exc)))


def test_a_holder_paused_past_its_ttl_has_lost_the_lease(remote_root: str) -> None:
    """Writer A is stopped (SIGSTOP) past its TTL, B takes the lease over, A is continued: A's next
    check fails, its renewal is refused (another version is stored), and B's lease is untouched."""
    ttl_s = 2.0
    uri = f"{remote_root}/wh/db/paused"
    mp = multiprocessing.get_context("spawn")
    events = mp.Queue()
    a = mp.Process(target=_hold_and_check, args=(uri, ttl_s, events))
    a.start()
    try:
        kind, a_token = events.get(timeout=60)
        assert kind == "held", a_token
        os.kill(a.pid, signal.SIGSTOP)
        table = open_storage(uri)
        deadline = time.monotonic() + 60
        while True:  # A's last renewal runs out while it is stopped
            stored = read_stored_lease(table)
            assert stored is not None and stored.token == a_token
            if stored.expired(time.time()):
                break
            assert time.monotonic() < deadline, "A's lease never expired"
            time.sleep(0.05)
        b = StorageLease.acquire(table, "successor", 60.0, host="another-host")
        assert b.took_over is not None and b.took_over.token == a_token
        os.kill(a.pid, signal.SIGCONT)
        kind, message = events.get(timeout=60)
        assert kind == "lost", message
        # "took over", or "expired": a check stopped after its read ends on what it had read
        assert "'successor'" in message or "expired" in message, message
        a.join(timeout=60)
        assert a.exitcode == 0
        stored = read_stored_lease(table)
        assert stored is not None and stored.token == b.info.token  # A wrote nothing over it
        b.renew()
        b.check()
        b.release()
    finally:
        if a.is_alive():
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
            a.join(timeout=30)
