"""The Delta store's file-system side, which needs no JVM: drop, and reading leftovers."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import pytest

from logstore_cli.errors import LogstoreError, SparkStartError, WarehouseError
from logstore_cli.provision.delta_spark import SparkDeltaStore


def _no_spark() -> NoReturn:
    raise AssertionError("this operation must not start Spark")


def _table(path: Path) -> Path:
    (path / "_delta_log").mkdir(parents=True)
    (path / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (path / "part-0.parquet").write_bytes(b"PAR1")
    return path


def test_drop_removes_the_table_and_its_empty_database(tmp_path: Path) -> None:
    store = SparkDeltaStore(tmp_path, _no_spark)
    _table(tmp_path / "db" / "t")
    store.drop(tmp_path / "db" / "t")
    assert not (tmp_path / "db").exists() and tmp_path.exists()


def test_drop_of_a_symlink_into_the_warehouse_removes_target_and_link(tmp_path: Path) -> None:
    store = SparkDeltaStore(tmp_path, _no_spark)
    target = _table(tmp_path / "other" / "real")
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "t").symlink_to(target)
    store.drop(tmp_path / "db" / "t")
    assert not target.exists() and not (tmp_path / "db" / "t").is_symlink()


def test_drop_of_a_symlink_out_of_the_warehouse_is_refused(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    precious = _table(tmp_path / "precious")
    (warehouse / "db").mkdir(parents=True)
    (warehouse / "db" / "t").symlink_to(precious)
    store = SparkDeltaStore(warehouse, _no_spark)
    with pytest.raises(WarehouseError, match="not inside the warehouse"):
        store.drop(warehouse / "db" / "t")
    assert (precious / "part-0.parquet").exists()


def test_drop_never_removes_the_warehouse_or_outside_paths(tmp_path: Path) -> None:
    store = SparkDeltaStore(tmp_path / "wh", _no_spark)
    (tmp_path / "wh").mkdir()
    for path in (tmp_path / "wh", tmp_path, Path("/")):
        with pytest.raises(WarehouseError):
            store.drop(path)
    assert (tmp_path / "wh").is_dir()


def test_read_treats_an_uncommitted_leftover_as_absent(tmp_path: Path) -> None:
    store = SparkDeltaStore(tmp_path, _no_spark)
    half = tmp_path / "db" / "half"
    (half / "_delta_log" / "_staged_commits").mkdir(parents=True)
    assert store.read(half) is None
    stranger = tmp_path / "db" / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("not a table")
    with pytest.raises(LogstoreError, match="is not a Delta table"):
        store.read(stranger)


def test_alter_keeps_the_jvm_s_own_start_error(tmp_path: Path) -> None:
    def jvm_fails() -> NoReturn:
        raise SparkStartError(
            "the Spark JVM did not start: JAVA_GATEWAY_EXITED",
            detail="Invalid maximum heap size: -Xmx2x",
        )

    store = SparkDeltaStore(tmp_path, jvm_fails)
    with pytest.raises(SparkStartError) as info:
        store.alter(_table(tmp_path / "db" / "t"), {"k": "v"}, [])
    assert info.value.detail == "Invalid maximum heap size: -Xmx2x"
