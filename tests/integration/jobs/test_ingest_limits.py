"""A record too large for the table's topic is quarantined with its reason, in neither store; the
epoch (and every re-run of the job) goes on with the others."""

from __future__ import annotations

import json
from pathlib import Path

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.producer import RECORD_OVERHEAD
from tests import jobrun
from tests.deltalog import write_table

from .ingest_support import (
    COLUMNS,
    assert_log_reads_equal_delta,
    check_protocol,
    delta_state,
    orders_ddl,
    read_log,
)
from .test_ingest_protocol import _ingest

TOPIC_MAX = 4096


def test_a_record_too_large_for_the_topic_is_quarantined_and_the_job_goes_on(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    warehouse = tmp_path / "wh"
    path = write_table(warehouse, orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic_name, 3, 1, {"max.message.bytes": str(TOPIC_MAX)})
    rows = [{"id": i, "name": f"n{i}", "qty": i, "price": "1.50", "op": "+I"} for i in range(20)]
    rows[7]["name"] = "x" * (2 * TOPIC_MAX)  # far over the topic's limit
    rows[11]["name"] = "y" * (TOPIC_MAX - RECORD_OVERHEAD - 200)  # just under it: kept
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))

    for run in ("first", "again"):  # a re-run finds nothing new and fails on nothing
        code, out, err = jobrun.finish(_ingest(warehouse, src, tmp_path, "limits"))
        assert code == 0, f"{run}: {err[-3000:]}"
    done = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert done[-1]["event"] == "done"

    files = list((path / "_logstore" / "quarantine" / "limits").glob("*.jsonl"))
    quarantined = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(quarantined) == 1, quarantined
    (bad,) = quarantined
    assert bad["reason"].startswith("too large for the log: the record's key and value are ")
    assert f"takes at most {TOPIC_MAX - RECORD_OVERHEAD}" in bad["reason"]
    assert json.loads(bad["raw"])["id"] == 7

    state = delta_state(path)
    assert sorted(state) == [i for i in range(20) if i != 7]
    assert state[11]["name"] == rows[11]["name"]
    assert len(list(epochs.epoch_commits(path))) == 1
    table = load_table(warehouse, "shop.orders").spec
    counts = check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert counts["changes"] == 19
    assert_log_reads_equal_delta(warehouse, "shop.orders")


def test_a_delete_sent_as_a_tombstone_is_sized_by_its_key_alone(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    # Paimon's defaults for a keyed table: debezium-json in upsert mode, so a -D is its key with a
    # null value. A delete whose source image is far over the topic's limit still fits as that.
    warehouse = tmp_path / "wh"
    ddl = (
        f"CREATE TABLE shop.orders ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'log.system' = 'kafka', 'kafka.bootstrap.servers' = '{kafka_bootstrap}', "
        f"'kafka.topic' = '{topic_name}', 'log.system.partitions' = '2');"
    )
    path = write_table(warehouse, ddl)
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic_name, 2, 1, {"max.message.bytes": str(TOPIC_MAX)})
    rows = [{"id": i, "name": f"n{i}", "qty": i, "price": "1.50", "op": "+I"} for i in range(10)]
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    huge = "x" * (2 * TOPIC_MAX)
    deletes = [
        {"id": 3, "name": huge, "qty": 3, "price": "1.50", "op": "-D"},  # a tombstone: kept
        {"id": 7, "name": huge, "qty": 7, "price": "1.50", "op": "+U"},  # a whole row: too large
    ]
    (src / "part-1.json").write_text("".join(json.dumps(r) + "\n" for r in deletes))

    code, _, err = jobrun.finish(_ingest(warehouse, src, tmp_path, "tombstone"))
    assert code == 0, err[-3000:]

    files = list((path / "_logstore" / "quarantine" / "tombstone").glob("*.jsonl"))
    quarantined = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert [json.loads(q["raw"])["id"] for q in quarantined] == [7]
    state = delta_state(path)
    assert sorted(state) == [i for i in range(10) if i != 3]
    assert state[7]["name"] == "n7"
    records = read_log(kafka_bootstrap, topic_name)
    tombstones = [r for r in records if dict(r.headers).get("logstore.kind") == b"-D"]
    assert [(json.loads(r.key)["id"], r.value) for r in tombstones] == [(3, None)]
    assert_log_reads_equal_delta(warehouse, "shop.orders")
