"""The ingest job against the real broker and delta-spark (read back with delta-rs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from logstore_cli import config as cfg
from logstore_cli.catalog import epochs
from logstore_cli.catalog.lease import Lease, LeaseHeldError
from logstore_cli.catalog.tables import load_table
from logstore_cli.cli.context import Context
from logstore_cli.cli.ingest import build_job
from logstore_cli.errors import InvalidInputError
from logstore_cli.ingest import plan
from logstore_cli.jobs import ingest as job_api
from logstore_cli.logformat.wire import CommitMarker, EpochId, RowKind, decode

from .ingest_support import (
    COLUMNS,
    Change,
    assert_log_reads_equal_delta,
    changes,
    check_protocol,
    create_table,
    delta_state,
    fold,
    ingest_once,
    normalized,
    orders_ddl,
    plain_debezium_fold,
    read_log,
    write_files,
)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def create(spark: SparkSession, warehouse: Path) -> Callable[[str], None]:
    return lambda ddl: create_table(spark, warehouse, ddl)


def run(
    spark: SparkSession, warehouse: Path, table: str, source: str, **kw: Any
) -> list[job_api.EpochReport]:
    return ingest_once(spark, warehouse, table, source, **kw)


def test_ten_thousand_changes_double_written_in_several_epochs(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=3))
    log = changes(10_500, keys=300, seed=1)
    size = -(-len(log) // 6)  # six files, two per epoch
    files = [log[i : i + size] for i in range(0, len(log), size)]
    write_files(tmp_path / "in", files)

    reports = run(spark, warehouse, "shop.orders", str(tmp_path / "in"),
                  source_options={"maxFilesPerTrigger": "2"})  # fmt: skip

    assert len(reports) == 3 and sum(r.rows for r in reports) == len(log)
    path = warehouse / "shop" / "orders"
    assert delta_state(path) == {k: normalized(v) for k, v in fold(log).items()}
    table = load_table(warehouse, "shop.orders").spec
    counts = check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert counts == {"changes": len(log), "epochs": 3, "partitions": 3}
    # the Delta commits hold the end offsets the reports gave, epoch by epoch
    commits = {c.epoch.epoch: c for c in epochs.epoch_commits(path)}
    assert [commits[r.epoch].offsets for r in reports] == [r.offsets for r in reports]
    assert [commits[r.epoch].version for r in reports] == [r.delta_version for r in reports]


def test_a_rerun_epoch_only_republishes_its_markers(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    """Spark's commit log lost the last batch (a crash after the markers): the batch runs again,
    Delta says it is committed, and only its markers are sent again: no record twice."""
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2))
    log = changes(400, keys=50, seed=2)
    write_files(tmp_path / "in", [log[:200], log[200:]])
    first = run(spark, warehouse, "shop.orders", str(tmp_path / "in"),
                source_options={"maxFilesPerTrigger": "1"})  # fmt: skip
    path = warehouse / "shop" / "orders"
    version = max(epochs.commit_versions(path))
    records_before = read_log(kafka_bootstrap, topic_name)
    checkpoint = path / "_logstore" / "checkpoints" / "ingest"
    for name in (str(first[-1].epoch), f".{first[-1].epoch}.crc"):  # Spark's entry and checksum
        (checkpoint / "commits" / name).unlink(missing_ok=True)

    again = run(spark, warehouse, "shop.orders", str(tmp_path / "in"))

    assert [(r.epoch, r.republished) for r in again] == [(first[-1].epoch, True)]
    assert again[0].attempt == first[-1].attempt and again[0].delta_version == version
    assert max(epochs.commit_versions(path)) == version  # nothing committed again
    records_after = read_log(kafka_bootstrap, topic_name)
    # the start-up rule and the re-run each add one marker per partition; no change record
    seen = {(b.partition, b.offset) for b in records_before}
    added = [r for r in records_after if (r.partition, r.offset) not in seen]
    assert sorted(r.partition for r in added) == [0, 0, 1, 1]
    assert all(r.key is None and dict(r.headers)["logstore.kind"] == b"COMMIT"
               for r in added)  # fmt: skip
    republished = CommitMarker(
        EpochId(first[-1].writer, first[-1].epoch, first[-1].attempt), version
    )
    assert [decode(r.key, r.value, r.headers) for r in added] == [republished] * 4
    table = load_table(warehouse, "shop.orders").spec
    check_protocol(table, path, records_after)
    assert delta_state(path) == {k: normalized(v) for k, v in fold(log).items()}


def test_a_paimon_keyed_table_writes_its_deletes_as_tombstones(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    # Paimon's defaults for a table with a key: 'log.format' debezium-json, changelog mode upsert.
    create(
        f"CREATE TABLE shop.orders ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'log.system' = 'kafka', 'kafka.bootstrap.servers' = '{kafka_bootstrap}', "
        f"'kafka.topic' = '{topic_name}', 'log.system.partitions' = '2');"
    )
    table = load_table(warehouse, "shop.orders").spec
    assert table.log_store is not None
    assert (table.log_store.data_format, table.log_store.changelog_mode.value) == (
        "debezium-json", "upsert")  # fmt: skip
    log = changes(400, keys=60, seed=11)
    write_files(tmp_path / "in", [log[:200], log[200:]])
    run(spark, warehouse, "shop.orders", str(tmp_path / "in"),
        source_options={"maxFilesPerTrigger": "1"})  # fmt: skip
    path = warehouse / "shop" / "orders"
    want = {k: normalized(v) for k, v in fold(log).items()}
    assert delta_state(path) == want
    records = read_log(kafka_bootstrap, topic_name)
    check_protocol(table, path, records)
    kinds = [dict(r.headers)["logstore.kind"] for r in records]
    deletes = [r for r, kind in zip(records, kinds, strict=True) if kind == b"-D"]
    # As Paimon wrote them: the key and a null value, so log compaction drops deleted keys.
    assert deletes and all(r.key is not None and r.value is None for r in deletes)
    assert b"-U" not in kinds
    assert all(r.value.endswith(b'"op":"c"}')
               for r, kind in zip(records, kinds, strict=True) if kind in (b"+I", b"+U"))  # fmt: skip
    # A consumer of Kafka's upsert meaning folds the topic to the table; Flink's debezium-json
    # source skips null values and keeps the keys deleted last (docs/guide.md says so).
    assert plain_debezium_fold(records, tombstones=True) == want
    assert set(want) < set(plain_debezium_fold(records))
    # logstore's own readers (committed, eventual, verify) read the tombstones as deletes.
    assert_log_reads_equal_delta(warehouse, "shop.orders")


def test_upsert_changelog_writes_no_update_before_and_rows_without_op_are_upserts(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(
        f"CREATE TABLE shop.items (id BIGINT, name STRING, qty INT, price DECIMAL(10,2), "
        f"PRIMARY KEY (id) NOT ENFORCED) WITH ('log.system' = 'kafka', "
        f"'kafka.bootstrap.servers' = '{kafka_bootstrap}', 'kafka.topic' = '{topic_name}', "
        f"'log.changelog-mode' = 'upsert', 'log.system.partitions' = '2');"
    )
    (tmp_path / "in").mkdir()
    rows = [{"id": i % 7, "name": f"v{i}", "qty": i, "price": "1.00"} for i in range(30)]
    (tmp_path / "in" / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    upserts = run(spark, warehouse, "shop.items", str(tmp_path / "in"))
    assert sum(r.rows for r in upserts) == 30
    path = warehouse / "shop" / "items"
    assert delta_state(path) == {r["id"]: normalized(r) for r in rows}  # the last per key wins
    # a changelog with -U: the log leaves the -U out
    cl = [Change("-U", rows[-1]), Change("+U", {**rows[-1], "name": "changed"})]
    write_files(tmp_path / "in2", [cl])
    run(spark, warehouse, "shop.items", str(tmp_path / "in2"), job="second")
    table = load_table(warehouse, "shop.items").spec
    log = read_log(kafka_bootstrap, topic_name)
    kinds = [dict(r.headers)["logstore.kind"] for r in log if r.key is not None]
    assert kinds.count(b"+U") == 31 and b"-U" not in kinds and b"+I" not in kinds
    check_protocol(table, path, log)
    assert delta_state(path)[rows[-1]["id"]]["name"] == "changed"


def test_a_table_without_a_key_appends_and_quarantines_deletes(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.events", topic_name, kafka_bootstrap, partitions=2, key=False))
    lines = [json.dumps({"id": i, "name": "x", "qty": 1, "price": "2.50", "op": "+I"})
             for i in range(20)]  # fmt: skip
    lines += [json.dumps({"id": 1, "name": "x", "qty": 1, "price": "2.50", "op": "-D"})]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("\n".join(lines) + "\n")
    reports = run(spark, warehouse, "shop.events", str(tmp_path / "in"))
    assert sum(r.rows for r in reports) == 20 and sum(r.quarantined for r in reports) == 1
    from deltalake import DeltaTable

    path = warehouse / "shop" / "events"
    assert sorted(r["id"] for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist()) == list(
        range(20)
    )
    log = read_log(kafka_bootstrap, topic_name)
    table = load_table(warehouse, "shop.events").spec
    changes_ = [decode(r.key, r.value, r.headers, None) for r in log]
    assert sorted(c.row["id"] for c in changes_ if not isinstance(c, CommitMarker)) == list(
        range(20)
    )
    assert all(c.kind is RowKind.INSERT for c in changes_ if not isinstance(c, CommitMarker))
    del table


def test_malformed_records_are_quarantined_with_reason_raw_and_source(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2))
    good = [
        json.dumps({"id": i, "name": "ok", "qty": 1, "price": "1.00", "op": "+I"}) for i in range(5)
    ]
    bad = [
        '{"id": 7, "name": "broken"',  # not JSON
        json.dumps({"id": 8, "name": "x", "qty": "many", "price": "1.00", "op": "+I"}),  # type
        json.dumps({"name": "no key", "qty": 1, "price": "1.00", "op": "+I"}),  # missing key
        json.dumps({"id": 9, "name": "x", "qty": 1, "price": "1.00", "op": "upsert"}),  # op
    ]
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "mixed.json"
    source.write_text("\n".join(good[:2] + bad + good[2:]) + "\n")
    reports = run(spark, warehouse, "shop.orders", str(tmp_path / "in"))
    assert sum(r.rows for r in reports) == 5 and sum(r.quarantined for r in reports) == 4
    path = warehouse / "shop" / "orders"
    assert sorted(delta_state(path)) == [0, 1, 2, 3, 4]
    files = sorted((path / "_logstore" / "quarantine" / "ingest").glob("*.jsonl"))
    kept = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert sorted(k["raw"] for k in kept) == sorted(bad)
    assert all(k["reason"] and str(source.name) in k["source"] for k in kept)
    assert {k["epoch"] for k in kept} == {reports[0].epoch}


def test_the_sequence_column_orders_a_keys_changes_within_an_epoch(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=1))
    rows = [(3, "third"), (1, "first"), (2, "second")]  # arrival order differs from qty order
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("".join(
        json.dumps({"id": 1, "name": name, "qty": seq, "price": "1.00", "op": "+U"}) + "\n"
        for seq, name in rows
    ))  # fmt: skip
    run(spark, warehouse, "shop.orders", str(tmp_path / "in"), sequence_column="qty")
    path = warehouse / "shop" / "orders"
    assert delta_state(path)[1]["name"] == "third"
    log = read_log(kafka_bootstrap, topic_name)
    names = [json.loads(r.value or b"{}")["name"] for r in log if r.key is not None]
    assert names == ["first", "second", "third"]


def test_log_only_emit_commits_with_markers_and_no_delta_version(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2))
    path = warehouse / "shop" / "orders"
    before = max(epochs.commit_versions(path))
    write_files(tmp_path / "in", [changes(50, keys=10, seed=3)])
    reports = run(spark, warehouse, "shop.orders", str(tmp_path / "in"), emit="log")
    assert [r.delta_version for r in reports] == [None]
    assert max(epochs.commit_versions(path)) == before
    log = read_log(kafka_bootstrap, topic_name)
    markers = [decode(r.key, r.value, r.headers) for r in log if r.key is None]
    assert len(markers) == 2 and all(isinstance(m, CommitMarker) and m.delta_version is None
                                     and m.epoch.attempt == reports[0].attempt for m in markers)  # fmt: skip


def test_a_second_writer_is_refused_naming_the_holder_until_its_lease_expires(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    import time

    from logstore_cli.catalog.lease import read_lease

    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=1))
    write_files(tmp_path / "in", [changes(10, keys=5, seed=4)])
    table_dir = warehouse / "shop" / "orders"
    # a job on another machine that stopped renewing: it is waited out, not judged by pid
    Lease.acquire(table_dir, "other-job", 3.0, host="elsewhere.example")
    with pytest.raises(LeaseHeldError, match=r"other-job.*elsewhere\.example"):
        run(spark, warehouse, "shop.orders", str(tmp_path / "in"))
    deadline = time.monotonic() + 30
    while not (held := read_lease(table_dir)) or not held.expired(time.time()):
        assert time.monotonic() < deadline, "the lease did not expire"
        time.sleep(0.2)  # polling the expiry, with a deadline
    assert run(spark, warehouse, "shop.orders", str(tmp_path / "in"))
    assert read_lease(table_dir) is None  # released at the end


def test_bad_input_is_refused_before_spark_runs(warehouse: Path, create: Callable[[str], None],
                                                 kafka_bootstrap: str, topic_name: str) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=1))
    ctx = Context(cfg.Config(warehouse=str(warehouse)))
    base: dict[str, Any] = dict(
        source="generate", format=None, source_options={}, source_bootstrap=None,
        generate=plan.GenerateSource(10, 10, 100, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=1.0, once=True, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    for change, message in [
        ({"op_column": "name"}, "is a column of table"),
        ({"emit": "files"}, "unknown emit mode"),
        ({"job": "../x"}, "job name"),
        ({"trigger_s": 0.0}, "--trigger"),
        ({"source": "kafka:bad/topic"}, "not a Kafka topic name"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            build_job(ctx, "shop.orders", **{**base, **change})


def test_the_writer_id_lives_in_the_checkpoint(tmp_path: Path) -> None:
    first = job_api.writer_id(tmp_path / "cp")
    assert job_api.writer_id(tmp_path / "cp") == first
    (tmp_path / "cp" / job_api.WRITER_FILE).unlink()
    assert job_api.writer_id(tmp_path / "cp") != first  # deleted: a new writer
    (tmp_path / "cp2" / "offsets").mkdir(parents=True)
    (tmp_path / "cp2" / "offsets" / "0").write_text("v1")
    with pytest.raises(InvalidInputError, match="no writer id"):
        job_api.writer_id(tmp_path / "cp2")


def test_a_kafka_topic_of_json_changes_is_ingested_and_a_missing_one_refused(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str,
) -> None:  # fmt: skip
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from logstore_cli.errors import TopicNotFoundError

    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2))
    source = f"{topic_name}-cdc"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(source, 2, 1)])[source].result(timeout=30)
    log = changes(500, keys=40, seed=6)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for c in log:  # one source partition per key keeps a key's changes in order
        producer.produce(source, json.dumps({**c.row, "op": c.op}).encode(), key=str(c.row["id"]))
    assert producer.flush(30) == 0

    reports = run(spark, warehouse, "shop.orders", f"kafka:{source}")

    assert sum(r.rows for r in reports) == len(log)
    path = warehouse / "shop" / "orders"
    assert delta_state(path) == {k: normalized(v) for k, v in fold(log).items()}
    check_protocol(
        load_table(warehouse, "shop.orders").spec, path, read_log(kafka_bootstrap, topic_name)
    )
    with pytest.raises(TopicNotFoundError, match=f"{source}-missing"):
        run(spark, warehouse, "shop.orders", f"kafka:{source}-missing", job="other")


def test_generated_changes_once_in_several_epochs_equal_the_generators_state(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str,
) -> None:  # fmt: skip
    from logstore_cli.ingest import generate

    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=3))
    source = plan.GenerateSource(rate=1000, keys=200, total=9_000, update_ratio=0.6,
                                 delete_ratio=0.2, seed=11)  # fmt: skip
    reports = run(spark, warehouse, "shop.orders", "generate", generate=source,
                  source_options={"maxChangesPerBatch": "4000"})  # fmt: skip

    assert [r.epoch for r in reports] == [0, 1, 2]  # 4000 + 4000 + 1000 changes
    table = load_table(warehouse, "shop.orders").spec
    expected = generate.expected_state(source, table, 9_000)
    assert isinstance(expected, dict)
    path = warehouse / "shop" / "orders"
    assert delta_state(path) == {key[0]: normalized(row) for key, row in expected.items()}
    counts = check_protocol(table, path, read_log(kafka_bootstrap, topic_name))
    assert counts["changes"] == sum(r.log_records for r in reports) > 9_000  # updates: -U and +U


def test_a_debezium_json_table_writes_flink_s_envelope_and_reads_back(
    spark: SparkSession, warehouse: Path, create: Callable[[str], None], kafka_bootstrap: str,
    topic_name: str, tmp_path: Path,
) -> None:  # fmt: skip
    create(orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2,
                      extra={"log-store.data-format": "debezium-json"}))  # fmt: skip
    log = changes(600, keys=80, seed=5)
    write_files(tmp_path / "in", [log[:300], log[300:]])
    reports = run(spark, warehouse, "shop.orders", str(tmp_path / "in"),
                  source_options={"maxFilesPerTrigger": "1"})  # fmt: skip
    assert len(reports) == 2
    path = warehouse / "shop" / "orders"
    want = {k: normalized(v) for k, v in fold(log).items()}
    assert delta_state(path) == want
    records = read_log(kafka_bootstrap, topic_name)
    table = load_table(warehouse, "shop.orders").spec
    assert check_protocol(table, path, records)["changes"] == len(log)
    for r in records:
        head = dict(r.headers)
        assert head["logstore.format"] == b"debezium-json"
        if head["logstore.kind"] == b"COMMIT":
            assert r.key is None and r.value is None and "logstore.delta-version" in head
        else:
            op = b'"op":"c"}' if head["logstore.kind"] in (b"+I", b"+U") else b'"op":"d"}'
            assert r.value is not None and r.value.endswith(op), r.value
    # A consumer that knows nothing of logstore folds the topic to the table (no failed attempt).
    assert plain_debezium_fold(records) == want
    # logstore's own readers (committed, eventual, verify) read the format.
    assert_log_reads_equal_delta(warehouse, "shop.orders")
