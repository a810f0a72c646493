"""``StorageLease`` (conditional writes, no ``flock``) on ``LocalStorage``; the same checks run
against the real S3 server in tests/integration/storage/test_remote_lease.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog.lease import Lease, LeaseHeldError, read_lease
from logstore_cli.catalog.storage_lease import StorageLease, acquire_lease, read_lease_on
from logstore_cli.storage.local import LocalStorage
from tests import lease_contract as contract


@pytest.fixture
def warehouse(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "wh")


@pytest.fixture
def table(warehouse: LocalStorage) -> LocalStorage:
    found = warehouse.child("db/t")
    assert isinstance(found, LocalStorage)
    return found


def test_racers_have_one_winner(warehouse: LocalStorage) -> None:
    contract.check_racers_have_one_winner(warehouse, trials=10)


def test_live_refused_expired_taken_over(table: LocalStorage) -> None:
    contract.check_a_live_lease_is_refused_and_an_expired_one_taken_over(table)


def test_a_stale_holder_cannot_renew_check_or_release(table: LocalStorage) -> None:
    contract.check_a_stale_holder_cannot_renew_check_or_release(table)


def test_the_fencing_token_grows(table: LocalStorage) -> None:
    contract.check_the_fencing_token_grows_and_the_writers_to_fence_pass_on(table)


def test_renewal(table: LocalStorage) -> None:
    contract.check_renewal_extends_and_an_untaken_expired_lease_renews(table)


def test_release_then_reacquire(table: LocalStorage) -> None:
    contract.check_release_then_reacquire(table)


def test_a_dead_local_holder_is_taken_over(table: LocalStorage) -> None:
    contract.check_a_dead_local_holder_is_taken_over_at_once(table)


def test_keep_alive(table: LocalStorage) -> None:
    contract.check_keep_alive_renews_until_release(table)


def test_something_else_is_not_a_lease(table: LocalStorage) -> None:
    contract.check_something_else_is_not_taken_for_a_lease(table)


def test_the_stored_lease_is_where_the_flock_lease_reads_it(table: LocalStorage) -> None:
    """Same place and format as ``Lease``'s file: status and history read it as they do today."""
    lease = contract.take(table, contract.FakeClock(), job="j")
    stored = read_lease(table.root)
    assert stored is not None and stored.token == lease.info.token


def test_a_lost_answer_to_our_own_write_is_not_a_lost_lease(table: LocalStorage) -> None:
    """A conditional write that landed but was reported failed (a retried request that then met
    its own write) leaves the lease ours: renew and acquire recognise their own token."""
    clock = contract.FakeClock()
    lease = contract.take(table, clock)
    blob = table.read("_logstore/lease.json")
    assert blob is not None
    table.write("_logstore/lease.json", blob.data)  # same lease, new version: "our" lost write
    lease.renew()
    lease.check()
    with pytest.raises(LeaseHeldError):
        contract.take(table, clock, job="other", host="h2")


def test_a_local_table_keeps_the_flock_lease(table: LocalStorage) -> None:
    table.root.mkdir(parents=True)  # a created table's directory
    lease = acquire_lease(table, "job", 30.0, table="db.t")
    assert isinstance(lease, Lease) and lease.table_dir == table.root
    assert (table.root / "_logstore" / "lease.lock").exists()  # the flock's file: today's lease
    stored = read_lease_on(table)
    assert stored is not None and stored.token == lease.info.token
    lease.release()
    assert read_lease_on(table) is None


def test_another_storage_gets_the_conditional_lease() -> None:
    from logstore_cli.storage.s3 import S3Storage

    class Client:
        """An empty bucket that accepts the one conditional create."""

        def get_object(self, **kw: object) -> None:
            raise _NoSuchKey()

        def put_object(self, **kw: object) -> dict[str, str]:
            assert kw["IfNoneMatch"] == "*"
            return {"ETag": '"v1"'}

    lease = acquire_lease(S3Storage(Client(), "bucket", ("wh", "db", "t")), "job", 30.0)
    assert isinstance(lease, StorageLease)


class _NoSuchKey(Exception):
    response = {"Error": {"Code": "NoSuchKey"}}  # noqa: RUF012 - botocore's ClientError shape
