"""Tables on the real S3 server: version 0 and later commits put with ``If-None-Match: *``,
read back (and appended to) by delta-rs directly; listed by prefix and delimiter; found by name."""

from __future__ import annotations

import pytest

from logstore_cli.provision.delta_log import put_commit
from logstore_cli.storage import open_storage
from logstore_cli.storage.s3 import S3Storage
from tests import table_contract as contract
from tests.deltalog import write_table_on
from tests.storage_contract import race

pytestmark = pytest.mark.s3


@pytest.fixture
def warehouse(s3_bucket: str) -> S3Storage:
    found = open_storage(f"s3://{s3_bucket}/lake/wh")
    assert isinstance(found, S3Storage)
    return found


def test_created_and_read_back_by_delta_rs(warehouse: S3Storage) -> None:
    contract.check_a_table_is_created_and_read_back_by_delta_rs(warehouse)


def test_a_second_create_is_refused(warehouse: S3Storage) -> None:
    contract.check_a_second_create_is_refused(warehouse)


def test_properties_and_columns(warehouse: S3Storage) -> None:
    contract.check_properties_and_columns_are_committed(warehouse)


def test_listed_and_found(warehouse: S3Storage) -> None:
    contract.check_tables_are_listed_and_found(warehouse)


def test_spark_only_properties_are_refused(warehouse: S3Storage) -> None:
    contract.check_spark_only_properties_are_refused(warehouse)


def test_racing_commits_of_one_version_have_one_winner(warehouse: S3Storage) -> None:
    table = write_table_on(warehouse, contract.DDL)
    text = '{"commitInfo":{"operation":"WRITE"}}\n'
    for version in range(1, 6):
        won = race(8, lambda i, v=version: put_commit(table, v, text))
        assert len(won) == 1, f"version {version}: {won}"


def test_the_table_lives_under_the_prefix(warehouse: S3Storage, s3_bucket: str) -> None:
    write_table_on(warehouse, contract.DDL)
    listed = warehouse._client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [o["Key"] for o in listed] == [
        "lake/wh/shop/orders/_delta_log/00000000000000000000.json"
    ]
