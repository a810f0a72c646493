"""``StorageLease`` against the real S3 server: taken with ``If-None-Match: *``, taken over, renewed
and released with ``If-Match``; of 8 racing jobs exactly one wins, every trial."""

from __future__ import annotations

import pytest

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
