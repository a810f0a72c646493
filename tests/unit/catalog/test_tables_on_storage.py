"""Tables on the storage seam, on ``LocalStorage`` (the same checks run on the S3 server in
tests/integration/storage/test_s3_tables.py), and the same answers as the local functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.storage.local import LocalStorage
from tests import table_contract as contract
from tests.deltalog import write_table


@pytest.fixture
def warehouse(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "wh")


def test_created_and_read_back_by_delta_rs(warehouse: LocalStorage) -> None:
    contract.check_a_table_is_created_and_read_back_by_delta_rs(warehouse)


def test_a_second_create_is_refused(warehouse: LocalStorage) -> None:
    contract.check_a_second_create_is_refused(warehouse)


def test_properties_and_columns(warehouse: LocalStorage) -> None:
    contract.check_properties_and_columns_are_committed(warehouse)


def test_listed_and_found(warehouse: LocalStorage) -> None:
    contract.check_tables_are_listed_and_found(warehouse)


def test_spark_only_properties_are_refused(warehouse: LocalStorage) -> None:
    contract.check_spark_only_properties_are_refused(warehouse)


def test_the_seam_lists_what_the_local_functions_list(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    write_table(root, contract.DDL)
    write_table(root, contract.DDL.replace("shop.orders", "crm.people"))
    (root / "shop" / "half" / "_delta_log").mkdir(parents=True)
    (root / "shop" / "half" / "_delta_log" / "x.tmp").write_text("")
    local = [(r.name, r.committed) for r in wh.list_tables(root)]
    seam = [(r.name, r.committed) for r in wh.list_tables_on(LocalStorage(root))]
    assert seam == local
