"""The JVM-free Delta store: create and alter as commits it writes itself, with Spark (a recording
stand-in here) only for what needs Spark. delta-spark reading and writing these tables, and the
same metadata as Spark's own create: tests/integration/provision/test_delta_log_spark.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.errors import LogstoreError, SparkStartError
from logstore_cli.model import ColumnSpec, TableSpec
from logstore_cli.provision import delta_log
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore

DDL = """CREATE TABLE db.t (id BIGINT, name STRING COMMENT 'who', tags ARRAY<STRING>,
  day DATE, PRIMARY KEY (id)) USING delta PARTITIONED BY (day) COMMENT 'a table'
  TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 7 days', 'my.prop' = 'v')"""


class RecordingSpark(SparkDeltaStore):
    """The Spark store's file-system side is real; its Spark steps are recorded, not run."""

    def __init__(self, warehouse: Path, *, fail: LogstoreError | None = None) -> None:
        super().__init__(warehouse, _no_spark)
        self.calls: list[str] = []
        self.fail = fail

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        self.calls.append(f"create {spec.name}")
        if self.fail:
            raise self.fail

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        self.calls.append(f"alter {sorted(set_)} {list(unset)}")

    def add_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        self.calls.append(f"add_columns {' '.join(c.name for c in columns)}")


def _no_spark() -> Any:
    raise AssertionError("no Spark here")


def _create(
    warehouse: Path, ddl: str = DDL, **kw: Any
) -> tuple[DeltaLogStore, RecordingSpark, Path]:
    spark = RecordingSpark(warehouse)
    store = DeltaLogStore(warehouse, spark, **kw)
    spec = parse_ddl(ddl, "t.sql", ParseOptions())[0]
    props, _ = wh.stored_properties(spec)
    path = wh.table_path(warehouse, wh.spec_table_name(spec))
    store.create(path, spec, props)
    return store, spark, path


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_create_writes_the_table_without_spark(tmp_path: Path) -> None:
    _, spark, path = _create(tmp_path)
    assert spark.calls == []
    state = wh.read_delta(path)
    assert state.version == 0 and state.partition_columns == ("day",)
    assert state.description == "a table"
    assert state.primary_key == ("id",)
    assert state.properties["delta.enableChangeDataFeed"] == "true"
    assert state.properties["delta.logRetentionDuration"] == "interval 7 days"
    assert state.properties["my.prop"] == "v" and state.properties["logstore.name"] == "db.t"
    fields = {f["name"]: f for f in state.schema["fields"]}
    assert fields["id"]["type"] == "long" and fields["id"]["nullable"] is False
    assert fields["name"]["metadata"] == {"comment": "who"}
    protocol = next(a["protocol"] for a in _commit(path, 0) if "protocol" in a)
    assert protocol == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["invariants", "changeDataFeed", "appendOnly"],
    }
    assert _commit(path, 0)[0]["commitInfo"]["operation"] == "CREATE TABLE"


def test_a_timestamp_ntz_column_anywhere_adds_its_feature(tmp_path: Path) -> None:
    _, _, path = _create(tmp_path, DDL.replace("ARRAY<STRING>", "ARRAY<STRUCT<t: TIMESTAMP_NTZ>>"))
    protocol = next(a["protocol"] for a in _commit(path, 0) if "protocol" in a)
    assert protocol["readerFeatures"] == ["timestampNtz"] and protocol["minReaderVersion"] == 3
    assert protocol["writerFeatures"][0] == "timestampNtz"


def test_keys_only_spark_lays_out_are_created_by_spark(tmp_path: Path) -> None:
    ddl = DDL.replace("'my.prop' = 'v'", "'delta.columnMapping.mode' = 'name'")
    _, spark, path = _create(tmp_path, ddl)
    assert spark.calls == ["create db.t"] and not path.exists()


def test_spark_defaults_in_the_config_send_create_to_spark(tmp_path: Path) -> None:
    key = delta_log.SPARK_DEFAULTS_PREFIX + "enableDeletionVectors"
    _, spark, _ = _create(tmp_path, spark_defaults=[key])
    assert spark.calls == ["create db.t"]


def test_a_spark_failure_says_why_spark_was_needed(tmp_path: Path) -> None:
    spark = RecordingSpark(tmp_path, fail=SparkStartError("Java is not installed", hint="install"))
    store = DeltaLogStore(tmp_path, spark)
    spec = parse_ddl(DDL.replace("'my.prop'", "'delta.enableDeletionVectors'"), "t.sql",
                     ParseOptions())[0]  # fmt: skip
    with pytest.raises(SparkStartError) as info:
        store.create(tmp_path / "db" / "t", spec, wh.stored_properties(spec)[0])
    assert info.value.hint == "install; Spark was needed for: delta.enableDeletionVectors"


def test_create_over_an_existing_table_fails_and_keeps_it(tmp_path: Path) -> None:
    store, _, path = _create(tmp_path)
    spec = parse_ddl(DDL, "t.sql", ParseOptions())[0]
    with pytest.raises(LogstoreError, match="a Delta table already exists there"):
        store.create(path, spec, {})
    assert wh.read_delta(path).version == 0 and wh.read_delta(path).properties["my.prop"] == "v"


def test_a_create_that_cannot_write_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(delta_log.os, "link", refused)
    with pytest.raises(LogstoreError, match=r"creating the Delta table at .*t failed: Permission"):
        _create(tmp_path)
    assert not (tmp_path / "db" / "t").exists()


def test_create_replaces_an_interrupted_create_s_leftover(tmp_path: Path) -> None:
    leftover = tmp_path / "db" / "t" / "_delta_log"
    leftover.mkdir(parents=True)
    (leftover / ".00000000000000000000.json.tmp").write_text("half")
    _, _, path = _create(tmp_path)
    assert wh.read_delta(path).version == 0


def test_alter_is_one_commit_that_sets_and_unsets(tmp_path: Path) -> None:
    store, spark, path = _create(tmp_path)
    before = wh.read_delta(path).schema
    store.alter(path, {"x.y": "z", "delta.logRetentionDuration": "8 days"}, ["my.prop"])
    assert spark.calls == []
    state = wh.read_delta(path)
    assert state.version == 1
    assert state.properties["x.y"] == "z" and "my.prop" not in state.properties
    assert state.properties["delta.logRetentionDuration"] == "8 days"
    assert state.schema == before and state.partition_columns == ("day",)
    info = _commit(path, 1)[0]["commitInfo"]
    assert info["operation"] == "SET TBLPROPERTIES"
    assert json.loads(info["operationParameters"]["unsetProperties"]) == ["my.prop"]
    assert not [p for p in (path / "_delta_log").iterdir() if p.name.endswith(".tmp")]


def test_alter_takes_the_next_version_when_another_writer_took_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, path = _create(tmp_path)
    real_link = delta_log.os.link
    raced = []

    def link_after_a_rival(src: str, dst: str) -> None:
        if not raced:  # another writer commits version 1 between our read and our write
            raced.append(dst)
            Path(dst).write_text(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
        real_link(src, dst)

    monkeypatch.setattr(delta_log.os, "link", link_after_a_rival)
    store.alter(path, {"x.y": "z"}, [])
    assert raced and wh.read_delta(path).version == 2
    assert wh.read_delta(path).properties["x.y"] == "z"
    assert _commit(path, 1) == [{"commitInfo": {"operation": "WRITE"}}]  # the rival's, intact


@pytest.mark.parametrize(
    ("set_", "unset", "writer_features"),
    [
        ({"delta.enableDeletionVectors": "true"}, [], None),
        ({}, ["delta.columnMapping.mode"], None),
        ({"x": "1"}, [], ["changeDataFeed", "inCommitTimestamp"]),
        ({"delta.appendOnly": "true"}, [], ["changeDataFeed"]),
    ],
)
def test_alters_only_spark_makes_right_go_to_spark(
    tmp_path: Path, set_: dict[str, str], unset: list[str], writer_features: list[str] | None
) -> None:
    store, spark, path = _create(tmp_path)
    if writer_features is not None:  # the table as a newer Spark might have left it
        log = path / "_delta_log" / "00000000000000000001.json"
        log.write_text(json.dumps({"protocol": {
            "minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer_features,
        }}) + "\n")  # fmt: skip
    store.alter(path, set_, unset)
    assert spark.calls == [f"alter {sorted(set_)} {unset}"]


def test_add_columns_is_one_metadata_commit_without_spark(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    store, spark, path = _create(tmp_path)
    new = [ColumnSpec("region", "string", comment="where"), ColumnSpec("n", "array<int>")]
    store.add_columns(path, new)
    assert spark.calls == []
    actions = _commit(path, 1)
    assert [next(iter(a)) for a in actions] == ["commitInfo", "metaData"]
    assert actions[0]["commitInfo"]["operation"] == "ADD COLUMNS"
    state = wh.read_delta(path)
    fields = state.schema["fields"]
    assert [f["name"] for f in fields] == ["id", "name", "tags", "day", "region", "n"]
    assert fields[4] == {"name": "region", "type": "string", "nullable": True,
                         "metadata": {"comment": "where"}}  # fmt: skip
    assert fields[5]["type"] == {"type": "array", "elementType": "integer", "containsNull": True}
    # everything else of the metadata is kept: properties, partitioning, description, id
    before = json.loads(_commit(path, 0)[1]["metaData"]["schemaString"])
    assert fields[:4] == before["fields"]
    assert state.properties["my.prop"] == "v" and state.partition_columns == ("day",)
    assert state.description == "a table" and state.primary_key == ("id",)
    assert DeltaTable(str(path)).metadata().id == _commit(path, 0)[1]["metaData"]["id"]


def test_add_columns_after_another_writers_commit_goes_on_from_it(tmp_path: Path) -> None:
    store, _, path = _create(tmp_path)
    delta_log.commit_properties(path, {"a.b": "1"}, [])
    store.add_columns(path, [ColumnSpec("region", "string")])
    state = wh.read_delta(path)
    assert state.version == 2 and state.properties["a.b"] == "1"
    assert state.schema["fields"][-1]["name"] == "region"


@pytest.mark.parametrize(
    ("ddl", "column", "why"),
    [
        (DDL, ColumnSpec("t", "timestamp_ntz"), "TIMESTAMP_NTZ"),
        (DDL.replace("'my.prop' = 'v'", "'delta.columnMapping.mode' = 'name'"),
         ColumnSpec("region", "string"), "column mapping"),
    ],
)  # fmt: skip
def test_add_columns_that_need_more_than_a_metadata_commit_go_to_spark(
    tmp_path: Path, ddl: str, column: ColumnSpec, why: str
) -> None:
    spark = RecordingSpark(tmp_path)
    store = DeltaLogStore(tmp_path, spark)
    path = tmp_path / "db" / "t"
    if "columnMapping" in ddl:  # Spark makes such a table: write a stand-in of its log by hand
        _create(tmp_path)
        delta_log.commit_properties(path, {"delta.columnMapping.mode": "name"}, [])
    else:
        _create(tmp_path, ddl)
    before = wh.read_delta(path).version
    store.add_columns(path, [column])
    assert spark.calls == [f"add_columns {column.name}"]
    assert wh.read_delta(path).version == before
