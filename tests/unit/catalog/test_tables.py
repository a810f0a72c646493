"""describe and list as typed results (Delta metadata via delta-rs, topics through a reader)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from logstore_cli.catalog.tables import describe_table, list_tables, load_table
from logstore_cli.kafka.types import TopicInfo
from tests.deltalog import write_table
from tests.unit.provision.fakes import MemTopics

DDL = """
CREATE TABLE db.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log-store.enabled' = 'true', 'log-store.topic' = 'orders_log',
      'log-store.address' = 'broker:9092', 'log.system.partitions' = '3',
      'properties.sasl.jaas.config' = 'x required username="u" password="hunter2";');
"""


def _write(warehouse: Path, ddl: str = DDL) -> Path:
    return write_table(warehouse, ddl)


def test_describe_redacts_and_reports_offsets(tmp_path: Path) -> None:
    _write(tmp_path)
    stored = load_table(tmp_path, "db.orders")
    topics = MemTopics(topics={"orders_log": TopicInfo("orders_log", 3, 1, {})})
    topics.offsets["orders_log"] = {0: 5, 1: 0, 2: 7}
    d = describe_table(stored, topics).to_json()
    assert d["topic"]["partitions"] == [
        {"partition": 0, "end_offset": 5},
        {"partition": 1, "end_offset": 0},
        {"partition": 2, "end_offset": 7},
    ]
    assert d["secret_keys_not_stored"] == ["properties.sasl.jaas.config"]
    assert d["delta"] == {"version": 0, "num_files": 0}
    assert "hunter2" not in repr(d)
    topics.unreachable = True
    d = describe_table(stored, topics).to_json()
    assert d["topic"]["exists"] is None and d["topic"]["error"].startswith("cannot reach Kafka")
    assert describe_table(stored, None).topic is None  # --no-topic: Kafka is never asked


def test_list_shows_what_it_can_read_and_an_error_row_for_the_rest(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "db" / "half" / "_delta_log" / "_staged_commits").mkdir(parents=True)
    broken = tmp_path / "db" / "broken" / "_delta_log"
    broken.mkdir(parents=True)
    (broken / "00000000000000000000.json").write_text("not json\n")
    rows = {r.name: r for r in list_tables(tmp_path)}
    assert set(rows) == {"db.orders", "db.half", "db.broken"}
    assert rows["db.orders"].error is None and rows["db.orders"].version == 0
    assert rows["db.orders"].to_json()["log_store"] == {
        "topic": "orders_log",
        "consistency": "none",
    }
    assert "drop-table db.half" in (rows["db.half"].error or "")
    assert "cannot read the Delta table" in (rows["db.broken"].error or "")


@pytest.mark.parametrize("name", ["db.orders", "cat.db.orders", "`db`.`orders`"])
def test_load_table_by_every_name_form(tmp_path: Path, name: str) -> None:
    _write(tmp_path)
    assert load_table(tmp_path, name).spec.table == "orders"


def test_a_stored_format_logstore_never_honoured_reads_as_json_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An older logstore stored any 'log.format' and wrote json records whatever it said.
    path = _write(
        tmp_path,
        DDL.replace(
            "'log.system.partitions'", "'log-store.data-format' = 'json', 'log.system.partitions'"
        ),
    )
    commit = path / "_delta_log" / "00000000000000000000.json"
    commit.write_text(
        commit.read_text().replace(
            '"log-store.data-format":"json"', '"log-store.data-format":"avro"'
        )
    )
    with caplog.at_level(logging.WARNING, logger="logstore_cli"):
        stored = load_table(tmp_path, "db.orders")
    assert stored.spec.log_store is not None and stored.spec.log_store.data_format == "json"
    assert stored.spec.properties["log-store.data-format"] == "avro"  # shown as stored
    [warning] = [r.getMessage() for r in caplog.records]
    assert "'log-store.data-format' = 'avro'" in warning
    assert "logstore alter-table db.orders --set 'log-store.data-format=json'" in warning
