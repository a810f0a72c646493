"""``S3Storage`` against the real S3 server: the same contract ``LocalStorage`` meets, racing
conditional writes included, and a missing bucket or wrong keys reported without secrets."""

from __future__ import annotations

from typing import Any

import pytest

from logstore_cli.errors import WarehouseError
from logstore_cli.storage import open_storage
from logstore_cli.storage.s3 import S3Settings, S3Storage
from logstore_cli.storage.s3_server import S3ServerInfo
from tests import storage_contract as contract

pytestmark = pytest.mark.s3


@pytest.fixture
def storage(s3_bucket: str) -> S3Storage:
    found = open_storage(f"s3://{s3_bucket}/warehouse/")  # from the standard AWS variables
    assert isinstance(found, S3Storage)
    return found


def test_read_write(storage: S3Storage) -> None:
    contract.check_read_write(storage)


def test_conditional_writes(storage: S3Storage) -> None:
    contract.check_conditional_writes(storage)


def test_listing_and_children(storage: S3Storage) -> None:
    contract.check_listing_and_children(storage)


def test_containment(storage: S3Storage) -> None:
    contract.check_containment(storage)


def test_racing_put_if_absent_has_one_winner(storage: S3Storage) -> None:
    contract.check_put_if_absent_race(storage, trials=10)


def test_racing_replace_has_one_winner(storage: S3Storage) -> None:
    contract.check_replace_race(storage, trials=10)


def test_objects_live_under_the_prefix(storage: S3Storage, s3_bucket: str) -> None:
    storage.child("db").write("t/x", b"1")
    client: Any = storage._client
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert keys == ["warehouse/db/t/x"]


def test_a_missing_bucket_is_reported(s3_env: dict[str, str]) -> None:
    storage = open_storage("s3://no-such-bucket-here/wh")
    with pytest.raises(WarehouseError, match="bucket does not exist"):
        storage.write("x", b"")


def test_wrong_keys_are_reported_without_the_secret(
    s3_server: S3ServerInfo, s3_bucket: str
) -> None:
    env = {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": "wrong-s3cr3t"}
    storage = S3Storage.open(s3_bucket, (), S3Settings.from_env(env))
    with pytest.raises(WarehouseError) as caught:
        storage.read("x")
    text = f"{caught.value.message} {caught.value.hint}"
    assert "access denied" in text
    assert "wrong-s3cr3t" not in text and s3_server.secret_access_key not in text


def test_delete_all_takes_every_page_and_nothing_outside_its_prefix(
    storage: S3Storage, s3_bucket: str
) -> None:
    # More keys than one listing page and one DeleteObjects request hold (1,000).
    from concurrent.futures import ThreadPoolExecutor

    table = storage.child("db").child("t")
    names = [f"part-{i:05d}" for i in range(1_005)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: table.write(f"data/{n}", b"x"), names))
    storage.child("db").write("t2/keep", b"1")  # a sibling whose name extends the table's
    storage.child("db").write("tx", b"1")
    assert table.delete_all() == len(names)
    client: Any = storage._client
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert keys == ["warehouse/db/t2/keep", "warehouse/db/tx"]
    assert table.delete_all() == 0
