"""A table of a thousand epochs, as months of ingest leave it (issue 22): compacted by
``logstore optimize`` while an ingest job runs (and by the job itself), verified, then its topic's
beginning deleted as retention deletes it, vacuumed down to what a hybrid read can still need, and
read hybrid from the oldest snapshot the log allows.

The thousand epochs are written by hand, as the job writes them (records, a Delta commit with the
epoch's metadata and transaction id, markers: delta-rs and the log's producer, some 40 ms each),
so that the test takes a minute, not the quarter of an hour a thousand Spark epochs would."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import SparkSession

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.catalog.vacuum import vacuum
from logstore_cli.ingest import plan
from logstore_cli.jobs.optimize import Optimized, optimize
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from logstore_cli.read.consumer import SourceConf
from logstore_cli.read.hybrid import log_start_offsets
from logstore_cli.read.plan import OutputSpec
from logstore_cli.read.service import build_request, read_with_consumer
from tests.integration.jobs.ingest_support import (
    ListSink,
    assert_log_reads_equal_delta,
    create_table,
    delta_state,
    fold_changes,
    ingest_once,
    orders_ddl,
)

EPOCHS = 1_000
TIMEOUT_S = 30.0
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.decimal128(10, 2)),
    ]
)


def _hand_written_epochs(
    path: Path, schema: RowSchema, bootstrap: str, topic: str, numbers: range
) -> None:
    """Epochs ``numbers`` of writer ``w-old``, one new key each, as the job writes them."""
    end: dict[int, int] = {}
    table = DeltaTable(str(path))  # one object, updated by each write: no re-reading of the log
    with LogProducer(bootstrap, {}, topic, timeout_s=TIMEOUT_S) as producer:
        partitions = producer.partition_count()
        for n in numbers:
            eid = EpochId("w-old", n, f"a-{n}")
            row = {"id": 100_000 + n, "name": f"old-{n}", "qty": n, "price": Decimal("1.25")}
            producer.send(
                *encode_change(ChangeRecord(RowKind.INSERT, {"id": row["id"]}, row, eid), schema)
            )
            end.update(producer.flush())
            props = CommitProperties(
                custom_metadata={"userMetadata": commit_metadata(eid, end)},
                app_transactions=[Transaction(eid.writer, eid.epoch)],
            )
            data = pa.Table.from_pylist([row], schema=SCHEMA)
            write_deltalake(table, data, mode="append", commit_properties=props)
            _, value, headers = encode_marker(CommitMarker(eid, table.version()))
            for p in range(partitions):
                producer.send(None, value, headers, partition=p)
            end.update(producer.flush())


def _delete_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    """What retention does to a reader: each partition's log now starts at ``offsets``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def test_a_thousand_epochs_compacted_beside_an_ingest_then_vacuumed_and_read_hybrid(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    create_table(spark, warehouse, orders_ddl(
        "shop.orders", topic_name, kafka_bootstrap, partitions=2,
        extra={"delta.deletedFileRetentionDuration": "interval 0 hours",
               "full-compaction.delta-commits": "3"},
    ))  # fmt: skip
    stored = load_table(warehouse, "shop.orders")
    path = stored.ref.path
    schema = RowSchema.of(stored.spec)
    _hand_written_epochs(path, schema, kafka_bootstrap, topic_name, range(EPOCHS))
    assert len(DeltaTable(str(path)).file_uris()) == EPOCHS

    # An ingest job (a new writer) runs while optimize compacts, again and again, beside it.
    done, compactions = threading.Event(), list[Optimized]()
    other = spark.newSession()  # another program: its own SQL conf

    def compact_until_done() -> None:
        while not done.is_set() and len(compactions) < 3:  # 2 cores: a few are plenty
            compactions.append(optimize(other, "shop.orders", path, None))

    beside = threading.Thread(target=compact_until_done, daemon=True)
    beside.start()
    try:
        source = plan.GenerateSource(rate=1000, keys=300, total=2_000, update_ratio=0.5,
                                     delete_ratio=0.2, seed=5)  # fmt: skip
        reports = ingest_once(spark, warehouse, "shop.orders", "generate", generate=source,
                              source_options={"maxChangesPerBatch": "250"})  # fmt: skip
    finally:
        done.set()
        beside.join(300)
    assert len(reports) == 8 and not beside.is_alive()
    # the thousand small files compacted, by optimize or by the job's own compaction (every 3)
    removed = sum(c.files_removed for c in compactions)
    removed += sum(r.compacted.files_removed for r in reports if r.compacted is not None)
    assert removed >= EPOCHS
    assert [r.epoch for r in reports if r.compacted or r.compaction_failed] == [2, 5]
    assert len(DeltaTable(str(path)).file_uris()) < 20
    assert_log_reads_equal_delta(warehouse, "shop.orders")  # verify, committed and eventual reads

    # One more epoch after the last compaction; retention deletes the log up to its offsets: only
    # its snapshot is still a hybrid start, and vacuum deletes the files older snapshots held.
    _hand_written_epochs(path, schema, kafka_bootstrap, topic_name, range(EPOCHS, EPOCHS + 1))
    newest = epochs.latest_epoch_commit(path)
    assert newest is not None and newest.epoch == EpochId("w-old", EPOCHS, f"a-{EPOCHS}")
    _delete_before(kafka_bootstrap, topic_name, newest.offsets)
    conf = SourceConf(kafka_bootstrap, {}, topic_name, timeout_s=TIMEOUT_S)
    result = vacuum(path, "shop.orders", retain_hours=0, dry_run=False, force=False,
                    log_start=log_start_offsets(conf))  # fmt: skip
    assert result.hybrid_from == [newest.version]
    assert len(result.files) >= EPOCHS
    expected = delta_state(path)  # the table reads whole after the vacuum

    sink = ListSink()
    request = build_request(
        stored, mode="log", engine="consumer", output=OutputSpec("jsonl"), consistent=False,
        consistency="committed", changelog="all-kinds", start="snapshot", follow=False,
        limit=None, checkpoint=None, as_of=None, changes=False, bootstrap=None,
        client_properties={}, timeout_s=TIMEOUT_S,
    )  # fmt: skip
    read_with_consumer(request, sink)
    assert fold_changes(sink.changes) == expected
