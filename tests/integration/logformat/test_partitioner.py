"""``partition_for`` is where real Kafka clients put a key: librdkafka (``murmur2_random``) on the
test broker, and the Java client's own partitioner from the broker's kafka-clients jar."""

from __future__ import annotations

import os
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore_cli.jvm.deps import Classpath, ensure_classpath
from logstore_cli.kafka.local_broker import java_executable
from logstore_cli.logformat import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    decode,
    encode_change,
    encode_key,
    murmur2,
    partition_for,
)

PARTITIONS = 7
TABLE = RowSchema(
    (("region", "string"), ("id", "bigint"), ("price", "decimal(10,2)"), ("day", "date")),
    ("region", "id"),
)
REGIONS = ["eu", "us-east", "Zoë", "東京", 'a"b\\c', "tab\there", "\x1f", "😀", ""]


def _keys() -> list[dict[str, Any]]:
    return [{"region": r, "id": i} for r in REGIONS for i in (0, 1, -1, 42, 2**40, 7_777)]


def _key_of(record: Any) -> tuple[str, int]:
    return record.key["region"], record.key["id"]


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(timeout=30)


def test_librdkafka_murmur2_random_puts_every_key_on_partition_for(
    kafka_bootstrap: str, topic_name: str
) -> None:
    _create_topic(kafka_bootstrap, topic_name, PARTITIONS)
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "acks": "all", "partitioner": "murmur2_random"}
    )
    landed: dict[bytes | None, int | None] = {}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            landed[msg.key()] = msg.partition()

    epoch = EpochId("w-test", 3, "a-1")
    sent = []
    for n, key in enumerate(_keys()):
        row = {**key, "price": Decimal(n).scaleb(-2), "day": None}
        record = ChangeRecord(RowKind.INSERT, key, row, epoch)
        k, v, headers = encode_change(record, TABLE)
        producer.produce(topic_name, key=k, value=v, headers=list(headers), on_delivery=on_delivery)
        sent.append(record)
    assert producer.flush(30) == 0
    assert errors == []

    assert len(landed) == len(sent)
    wrong = {k: p for k, p in landed.items() if k is None or p != partition_for(k, PARTITIONS)}
    assert wrong == {}
    assert len(set(landed.values())) >= 5, "the keys should spread over the partitions"

    # What the broker stored reads back as the records sent, headers included.
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"g-{topic_name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic_name])
    received: list[ChangeRecord | CommitMarker] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            stored_key, stored_headers = msg.key(), msg.headers()
            assert isinstance(stored_key, bytes) and isinstance(stored_headers, list)
            assert msg.partition() == partition_for(stored_key, PARTITIONS)
            received.append(decode(stored_key, msg.value(), stored_headers, TABLE))
    finally:
        consumer.close()
    assert sorted(received, key=_key_of) == sorted(sent, key=_key_of)


JAVA_PARTITIONER = """
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

public class Partitions {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            byte[] key = HexFormat.of().parseHex(line.trim());
            System.out.println(Utils.murmur2(key) + " "
                + BuiltInPartitioner.partitionForKey(key, partitions));
        }
    }
}
"""


def test_the_java_clients_partitioner_agrees(tmp_path: Path) -> None:
    # The client and the logging API its classes load (no logging backend: nothing is logged).
    jars = [
        j
        for j in ensure_classpath(Classpath.KAFKA)
        if j.name.startswith(("kafka-clients-", "slf4j-api-"))
    ]
    assert len(jars) == 2, jars
    source = tmp_path / "Partitions.java"
    source.write_text(JAVA_PARTITIONER, encoding="utf-8")
    keys = [encode_key(k, TABLE) for k in _keys()]
    keys += [b"", b"\x00", bytes(range(256)), b"21", b"foobar"]
    proc = subprocess.run(
        [java_executable(), "-cp", os.pathsep.join(map(str, jars)), str(source), str(PARTITIONS)],
        input="".join(f"{k.hex()}\n" for k in keys if k is not None),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    java = [tuple(map(int, line.split())) for line in proc.stdout.splitlines()]
    ours = [(murmur2(k), partition_for(k, PARTITIONS)) for k in keys if k is not None]
    assert java == ours
    assert len({p for _, p in ours}) >= 5
