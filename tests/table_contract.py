"""Tables on the storage seam, checked the same way on every backend (unit: ``LocalStorage``;
``s3`` suite: the real S3 server): created by logstore's own conditional commit, read back by
delta-rs directly, changed, listed and found."""

from __future__ import annotations

import pyarrow as pa
import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.errors import InvalidInputError, LogstoreError, TableNotFoundError
from logstore_cli.model import ColumnSpec
from logstore_cli.provision.delta_log import (
    commit_columns_on,
    commit_properties_on,
    create_on,
    put_commit,
)
from logstore_cli.storage import Storage, delta_rs_location
from tests.deltalog import write_table_on

DDL = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED) "
    "WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders', 'kafka.bootstrap.servers' = 'h:9092', "
    "'retention' = '7d')"
)


def check_a_table_is_created_and_read_back_by_delta_rs(warehouse: Storage) -> None:
    from deltalake import DeltaTable, write_deltalake

    table = write_table_on(warehouse, DDL)
    uri, options = delta_rs_location(table)
    dt = DeltaTable(uri, storage_options=options)
    assert dt.version() == 0
    assert [f.name for f in dt.schema().fields] == ["id", "amount"]
    config = dt.metadata().configuration
    assert config[wh.P_PRIMARY_KEY] == "id" and config[wh.CDF] == "true"
    assert config["retention"] == "7d"
    # delta-rs appends to the table logstore made, and reads the rows back
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "amount": [1.5, 2.5]})
    write_deltalake(uri, rows, mode="append", storage_options=options)
    back = DeltaTable(uri, storage_options=options).to_pyarrow_table().sort_by("id")
    assert back.column("id").to_pylist() == [1, 2]


def check_a_second_create_is_refused(warehouse: Storage) -> None:
    table = write_table_on(warehouse, DDL)
    with pytest.raises(LogstoreError, match="already exists"):
        write_table_on(warehouse, DDL)
    assert not put_commit(table, 0, "{}\n")
    assert put_commit(table, 1, '{"commitInfo":{}}\n')
    assert not put_commit(table, 1, '{"commitInfo":{}}\n')


def check_properties_and_columns_are_committed(warehouse: Storage) -> None:
    from deltalake import DeltaTable

    table = write_table_on(warehouse, DDL)
    assert commit_properties_on(table, {"owner": "ops"}, ["retention"]) == 1
    assert commit_columns_on(table, [ColumnSpec("note", "STRING", nullable=True)]) == 2
    uri, options = delta_rs_location(table)
    dt = DeltaTable(uri, storage_options=options)
    assert dt.version() == 2
    config = dt.metadata().configuration
    assert config["owner"] == "ops" and "retention" not in config
    assert [f.name for f in dt.schema().fields] == ["id", "amount", "note"]


def check_tables_are_listed_and_found(warehouse: Storage) -> None:
    write_table_on(warehouse, DDL)
    write_table_on(warehouse, DDL.replace("shop.orders", "shop.items"))
    write_table_on(warehouse, DDL.replace("shop.orders", "crm.people"))
    warehouse.write("shop/half/_delta_log/.tmp-part", b"")  # an interrupted create's debris
    warehouse.write("shop/not a table!/_delta_log/00000000000000000000.json", b"{}")
    warehouse.write("shop/empty/data.parquet", b"")
    found = [(t.name, t.committed) for t in wh.list_tables_on(warehouse)]
    assert found == [
        ("crm.people", True),
        ("shop.half", False),
        ("shop.items", True),
        ("shop.orders", True),
    ]
    assert wh.find_table_on(warehouse, "shop.orders").storage.uri.endswith("shop/orders")
    assert not wh.find_table_on(warehouse, "shop.half", uncommitted=True).committed
    with pytest.raises(TableNotFoundError, match="no committed Delta version"):
        wh.find_table_on(warehouse, "shop.half")
    with pytest.raises(TableNotFoundError) as caught:
        wh.find_table_on(warehouse, "shop.order")
    assert "did you mean 'shop.orders'" in (caught.value.hint or "")
    for hostile in ("shop.../x", "../etc.passwd", "shop.%2e%2e", "shop.a\\b", "shop.a/b", "shop."):
        with pytest.raises(InvalidInputError):
            wh.find_table_on(warehouse, hostile)


def check_spark_only_properties_are_refused(warehouse: Storage) -> None:
    from logstore_cli.ddl import ParseOptions, parse_ddl

    ddl = DDL.replace("'retention' = '7d'", "'delta.enableDeletionVectors' = 'true'")
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    table = wh.table_storage(warehouse, wh.spec_table_name(spec))
    with pytest.raises(LogstoreError, match="needs Spark"):
        create_on(table, spec, wh.stored_properties(spec)[0])
    assert not wh.has_committed_version_on(table)
