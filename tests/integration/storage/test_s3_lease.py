"""``StorageLease`` against the real S3 server: taken with ``If-None-Match: *``, taken over, renewed
and released with ``If-Match``; of 8 racing jobs (threads) or 4 (processes) exactly one wins, every
trial."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from logstore_cli.catalog.lease import LeaseHeldError
from logstore_cli.catalog.storage_lease import StorageLease, read_stored_lease
from logstore_cli.storage import open_storage
from logstore_cli.storage.s3 import S3Storage
from tests import lease_contract as contract

pytestmark = pytest.mark.s3


@pytest.fixture
def warehouse(s3_bucket: str) -> S3Storage:
    found = open_storage(f"s3://{s3_bucket}/wh")
    assert isinstance(found, S3Storage)
    return found


@pytest.fixture
def table(warehouse: S3Storage) -> S3Storage:
    found = warehouse.child("db/t")
    assert isinstance(found, S3Storage)
    return found


def test_racers_have_one_winner(warehouse: S3Storage) -> None:
    contract.check_racers_have_one_winner(warehouse, trials=10)


def test_live_refused_expired_taken_over(table: S3Storage) -> None:
    contract.check_a_live_lease_is_refused_and_an_expired_one_taken_over(table)


def test_a_stale_holder_cannot_renew_check_or_release(table: S3Storage) -> None:
    contract.check_a_stale_holder_cannot_renew_check_or_release(table)


def test_renewal(table: S3Storage) -> None:
    contract.check_renewal_extends_and_an_untaken_expired_lease_renews(table)


def test_release_then_reacquire(table: S3Storage) -> None:
    contract.check_release_then_reacquire(table)


def test_a_dead_local_holder_is_taken_over(table: S3Storage) -> None:
    contract.check_a_dead_local_holder_is_taken_over_at_once(table)


def test_keep_alive(table: S3Storage) -> None:
    contract.check_keep_alive_renews_until_release(table)


def test_something_else_is_not_a_lease(table: S3Storage) -> None:
    contract.check_something_else_is_not_taken_for_a_lease(table)


def test_the_lease_object_is_under_the_table(table: S3Storage, s3_bucket: str) -> None:
    contract.take(table, contract.FakeClock())
    keys = [o["Key"] for o in table._client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert keys == ["wh/db/t/_logstore/lease.json"]


def _acquire_in_process(uri: str, job: str, start: Any, done: Any, results: Any) -> None:
    start.wait()
    try:
        StorageLease.acquire(open_storage(uri), job, contract.TTL)  # the AWS_* of the parent
        results.put("won")
    except LeaseHeldError:
        results.put("held")
    except BaseException as exc:  # reported, not hidden in the child
        results.put(f"error {exc!r}")
    done.wait()  # stay alive until all tried: a dead winner may be taken over on this host


@pytest.mark.parametrize("trial", range(3))
def test_racing_processes_have_one_winner(s3_bucket: str, trial: int) -> None:
    """Jobs are processes (each its own client and connections), not threads of one."""
    n = 4
    uri = f"s3://{s3_bucket}/wh/db/t{trial}"
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
