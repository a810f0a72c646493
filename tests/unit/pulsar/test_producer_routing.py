"""The Pulsar producer's send path without a broker (issue 23): a record goes to the partition
Kafka's partitioner picks, through that partition's own producer (no router callback into
Python), with one delivery callback per partition, the properties passed without a copy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.pulsar.admin import MessagePosition, TopicName
from logstore_cli.pulsar.producer import PulsarLogProducer

pytestmark = pytest.mark.unit


class _Id:
    def __init__(self, entry: int) -> None:
        self.entry = entry

    def ledger_id(self) -> int:
        return 7

    def entry_id(self) -> int:
        return self.entry

    def batch_index(self) -> int:
        return -1


class _Producer:
    def __init__(self, topic: str, conf: dict[str, Any]) -> None:
        self.topic, self.conf = topic, conf
        self.sent: list[tuple[bytes, Any, dict[str, Any]]] = []

    def send_async(self, value: bytes, callback: Any, **args: Any) -> None:
        self.sent.append((value, callback, args))

    def flush(self) -> None:
        import pulsar

        for i, (_, callback, _) in enumerate(self.sent):  # delivered in the order sent
            callback(pulsar.Result.Ok, _Id(i))

    def close(self) -> None:
        pass


class _Client:
    def __init__(self) -> None:
        self.producers: list[_Producer] = []

    def create_producer(self, topic: str, **conf: Any) -> _Producer:
        self.producers.append(_Producer(topic, conf))
        return self.producers[-1]


def test_records_go_through_their_partitions_own_producer_without_a_router() -> None:
    client = _Client()
    topic = TopicName.parse("orders")
    keys = [json.dumps({"id": i}) for i in range(20)]
    props = {"logstore.kind": "+I"}
    with PulsarLogProducer("pulsar://x:1", topic, 3, "logstore-w-a", client=client) as producer:
        for key in keys * 2:
            producer.send(key, key.encode(), props)
        by_topic = {p.topic: p for p in client.producers}
        assert set(by_topic) <= {topic.partition(i) for i in range(3)}
        assert len(by_topic) == len(client.producers)  # one producer per partition
        ends = producer.flush()
    for partition in range(3):
        found = by_topic.get(topic.partition(partition))
        expected = [k for k in keys * 2 if partition_for(k.encode(), 3) == partition]
        if found is None:
            assert not expected
            continue
        assert "message_router" not in found.conf and found.conf["batching_enabled"] is False
        assert found.conf["producer_name"] == "logstore-w-a"
        assert [args["partition_key"] for _, _, args in found.sent] == expected
        assert all(args["properties"] is props for _, _, args in found.sent)  # not copied
        assert len({id(callback) for _, callback, _ in found.sent}) == 1
        assert ends[partition] == MessagePosition(7, len(expected) - 1, -1)


def test_a_failed_delivery_fails_the_flush_naming_the_topic() -> None:
    import pulsar

    from logstore_cli.errors import BrokerError

    client = _Client()
    topic = TopicName.parse("orders")
    with PulsarLogProducer("pulsar://x:1", topic, 1, "logstore-w-a", client=client) as producer:
        producer.send(None, b"{}", {})
        ((_, callback, _),) = client.producers[0].sent
        client.producers[0].sent.clear()
        callback(pulsar.Result.Timeout, None)
        with pytest.raises(
            BrokerError,
            match="1 record\\(s\\) were not written to persistent://public/default/orders",
        ):
            producer.flush()
