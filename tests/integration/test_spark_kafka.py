"""Spark's Kafka connector on logstore's classpath reads the real broker, batch and streaming.

The connector's token-provider jar is pinned to 4.0.0 (Maven does not find 4.0.1; see
spark-deps.xml): these reads prove it links with Spark 4.0.1. Records are produced with confluent-kafka; the delivery
reports (partition, offset) are the truth the reads are compared with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from logstore_cli.jvm.deps import Classpath, ensure_classpath

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

QUERY_TIMEOUT_S = 120
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Sent:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, first: int, count: int) -> list[Sent]:
    """``count`` records numbered from ``first``, as delivered (partition and offset known)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    sent: list[Sent] = []
    errors: list[KafkaError] = []

    def on_delivery(record: Sent, err: KafkaError | None, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if err is not None or partition is None or offset is None:
            errors.append(err or KafkaError(KafkaError.UNKNOWN, "delivered without a position"))
        else:
            sent.append(replace(record, partition=partition, offset=offset))

    for i in range(first, first + count):
        # Every fifth record has no key (librdkafka picks its partition) and an empty value. Header
        # keys repeat (their order must hold) and one header has no value.
        record = Sent(
            partition=-1,
            offset=-1,
            key=None if i % 5 == 4 else f"key-{i}".encode(),
            value=b"" if i % 5 == 4 else f'{{"n": {i}}}'.encode(),
            headers=(("ls.n", str(i).encode()), ("ls.n", b"again"), ("ls.none", None)),
            timestamp_ms=1_700_000_000_000 + i,
        )
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp=record.timestamp_ms,
            on_delivery=partial(on_delivery, record),
        )
    assert producer.flush(30) == 0
    assert errors == []
    assert len(sent) == count
    return sent


def _received(rows: list[Row]) -> list[Sent]:
    return [
        Sent(
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            tuple((h["key"], h["value"]) for h in r["headers"] or ()),
            r["ts_ms"],
        )
        for r in rows
    ]


def _project(df: DataFrame) -> DataFrame:
    return df.selectExpr(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        "timestampType",
        "unix_millis(timestamp) AS ts_ms",
    )


def _by_position(records: list[Sent]) -> list[Sent]:
    return sorted(records, key=lambda s: (s.partition, s.offset))


def test_batch_read_returns_every_record_with_its_position_and_headers(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str
) -> None:
    _create_topic(kafka_bootstrap, topic_name, partitions=2)
    sent = _produce(kafka_bootstrap, topic_name, first=0, count=10)

    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic_name)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = _project(df).collect()

    assert {r["topic"] for r in rows} == {topic_name}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime: the producer's timestamp
    assert _by_position(_received(rows)) == _by_position(sent)
    assert {s.partition for s in sent} == {0, 1}  # both partitions were read


def test_available_now_stream_sees_each_record_once_across_runs(
    spark: SparkSession, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    _create_topic(kafka_bootstrap, topic_name, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    batches: list[tuple[int, list[Row]]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append((batch_id, _project(batch).collect()))

    def run() -> list[Sent]:
        """One availableNow run on the shared checkpoint: the records of its batches."""
        before = len(batches)
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic_name)
            .option("includeHeaders", "true")
            .option("startingOffsets", "earliest")  # only for a fresh checkpoint
            .option("maxOffsetsPerTrigger", "4")  # several micro-batches per run
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow run did not finish"
        finally:
            query.stop()
        assert query.exception() is None
        return _received([row for _, rows in batches[before:] for row in rows])

    first = _produce(kafka_bootstrap, topic_name, first=0, count=10)
    seen_first = run()
    assert _by_position(seen_first) == _by_position(first)
    first_batches = len(batches)
    assert first_batches >= 3  # 10 records at most 4 per trigger

    second = _produce(kafka_bootstrap, topic_name, first=10, count=5)
    seen_second = run()
    assert _by_position(seen_second) == _by_position(second)

    assert run() == []  # nothing new: nothing again
    batch_ids = [batch_id for batch_id, _ in batches]
    assert batch_ids == sorted(set(batch_ids))  # batch ids continue, none is replayed


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``: the name before the version."""
    match = re.match(r"(.+?)-\d+\.", jar)
    assert match is not None, f"no version in the jar name {jar}"
    return match.group(1)


def test_spark_classpath_adds_no_second_copy_of_a_pyspark_jar() -> None:
    ours = {_artifact(j.name): j.name for j in ensure_classpath(Classpath.SPARK)}
    pyspark_jars = Path(str(resources.files("pyspark"))) / "jars"
    shipped = {
        _artifact(j.name): j.name
        for j in pyspark_jars.glob("*.jar")
        if re.search(r"-\d+\.", j.name)
    }
    assert "spark-core_2.13" in shipped  # the comparison is against the real pyspark/jars
    assert {"spark-sql-kafka-0-10_2.13", "kafka-clients", "delta-spark_2.13"} <= ours.keys()
    duplicated = {ours[a]: shipped[a] for a in ours.keys() & shipped.keys()}
    assert duplicated == {}
