"""The local broker is a real Kafka: admin, produce with headers, consume them back."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(timeout=30)


def test_topic_created_and_described(kafka_bootstrap: str, topic_name: str) -> None:
    _create_topic(kafka_bootstrap, topic_name, partitions=3)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    md = admin.list_topics(topic=topic_name, timeout=10)
    assert md.topics[topic_name].error is None
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2]
    from confluent_kafka.admin import ConfigResource, ResourceType

    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["cleanup.policy"].value == "delete"


def test_records_with_headers_round_trip(kafka_bootstrap: str, topic_name: str) -> None:
    _create_topic(kafka_bootstrap, topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    sent = {f"k{i}".encode(): f"v{i}".encode() for i in range(20)}
    for key, value in sent.items():
        producer.produce(
            topic_name, key=key, value=value,
            headers=[("ls.kind", b"+I"), ("ls.epoch", str(len(delivered)).encode())],
            on_delivery=on_delivery,
        )  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == []
    assert len(delivered) == len(sent)

    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{topic_name}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic_name])
    received: dict[bytes, tuple[bytes, dict[str, bytes]]] = {}
    deadline = time.monotonic() + 60
    try:
        while len(received) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            received[msg.key()] = (msg.value(), dict(msg.headers() or []))
    finally:
        consumer.close()
    assert {k: v for k, (v, _) in received.items()} == sent
    assert all(h["ls.kind"] == b"+I" and "ls.epoch" in h for _, h in received.values())
