"""The Pulsar topic admin and the log's producer against the real standalone: a partitioned topic
with its own retention; records placed where Kafka's partitioner places their key; markers on a
named partition; the positions a flush reports are the partitions' last message ids; errors named."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from logstore_cli.errors import BrokerError, TopicExistsError
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.pulsar.admin import MessagePosition, PulsarAdmin, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from logstore_cli.pulsar.producer import PulsarLogProducer, producer_name, properties

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

PARTITIONS = 4


def _read(service_url: str, partition_topic: str) -> list[Any]:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        reader = client.create_reader(partition_topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            m = reader.read_next(timeout_millis=10_000)
            mid = m.message_id()
            out.append((m.partition_key(), m.data(), dict(m.properties()),
                        MessagePosition(mid.ledger_id(), mid.entry_id(), mid.batch_index())))  # fmt: skip
        return out
    finally:
        client.close()


def test_a_topic_with_its_own_retention_grows_and_is_deleted(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    admin.ping()
    topic = TopicName.parse(pulsar_topic)
    assert admin.describe_topic(topic) is None
    admin.create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    found = admin.describe_topic(topic)
    assert found is not None
    assert (found.partitions, found.retention_minutes, found.retention_mb) == (2, -1, -1)
    with pytest.raises(TopicExistsError):
        admin.create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    admin.add_partitions(topic, 3)
    grown = admin.describe_topic(topic)
    assert grown is not None and grown.partitions == 3
    assert admin.last_positions(topic, 3) == {0: None, 1: None, 2: None}
    admin.delete_topic(topic)
    assert admin.describe_topic(topic) is None


def test_records_go_where_kafka_puts_their_key_and_flush_says_where_they_end(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    topic = TopicName.parse(pulsar_topic)
    admin.create_topic(topic, PARTITIONS, retention_minutes=-1, retention_mb=-1)
    headers = [("logstore.writer", b"w-1"), ("logstore.epoch", b"0"), ("logstore.kind", b"+I")]
    keys = [json.dumps({"id": i}, separators=(",", ":")) for i in range(40)]
    with PulsarLogProducer(
        pulsar.service_url, topic, PARTITIONS, producer_name("w-1", "a-1")
    ) as producer:
        for i, key in enumerate(keys):
            producer.send(key, json.dumps({"id": i}).encode(), properties(headers))
        ends = producer.flush()
        marker = {**properties(headers), "logstore.kind": "COMMIT"}
        for partition in range(PARTITIONS):
            producer.send_marker(partition, b'{"delta_version":0}', marker)
        after_markers = producer.flush()

    placed: dict[str, int] = {}
    for partition in range(PARTITIONS):
        records = _read(pulsar.service_url, topic.partition(partition))
        changes = [r for r in records if r[2]["logstore.kind"] == "+I"]
        for key, _, props, _ in changes:
            placed[key] = partition
            assert props == properties(headers)
        # Each partition ends with its marker, and the flushes named the last positions.
        assert records[-1][2]["logstore.kind"] == "COMMIT" and records[-1][0] == ""
        assert after_markers[partition] == records[-1][3]
        if changes:
            assert ends[partition] == changes[-1][3]
    assert placed == {k: partition_for(k.encode(), PARTITIONS) for k in keys}
    assert admin.last_positions(topic, PARTITIONS) == after_markers


def test_an_unreachable_admin_api_is_named() -> None:
    from logstore_cli import processes

    (port,) = processes.free_ports(1)
    with pytest.raises(BrokerError, match="unreachable"):
        PulsarAdmin(f"http://127.0.0.1:{port}", timeout_s=5).ping()


def test_deduplication_never_drops_a_retried_attempts_records(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    """With broker-side deduplication on, a retried attempt (its own producer name) lands whole,
    and so does a producer that comes back under a name the broker has seen: the client continues
    from the sequence id the broker remembers for it (the dedup state is real: it is that id)."""
    import pulsar as client_lib

    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    topic = TopicName.parse(pulsar_topic)
    admin.create_topic(topic, 1, retention_minutes=-1, retention_mb=-1)
    admin.set_deduplication(topic, True)
    props = {"logstore.kind": "+I"}

    def attempt(name: str, values: list[bytes]) -> None:
        with PulsarLogProducer(pulsar.service_url, topic, 1, name) as producer:
            for value in values:
                producer.send('{"id":1}', value, props)
            producer.flush()

    attempt(producer_name("w-1", "a-1"), [b"1", b"2", b"3"])
    attempt(producer_name("w-1", "a-2"), [b"1", b"2", b"3"])  # the retry: all kept
    client = client_lib.Client(pulsar.service_url)
    try:
        again = client.create_producer(
            topic.partition(0), producer_name=producer_name("w-1", "a-1"), batching_enabled=False
        )
        assert again.last_sequence_id() == 2  # the broker's record of a-1's three messages
        again.send(b"4", properties=props)
        again.close()
    finally:
        client.close()
    assert [r[1] for r in _read(pulsar.service_url, topic.partition(0))] == [
        b"1", b"2", b"3", b"1", b"2", b"3", b"4"
    ]  # fmt: skip


def test_wire_format_1_through_pulsar_decodes_as_written(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    """Changes (both value formats, a tombstone) and markers, encoded as for Kafka, produced to the
    real Pulsar in their Pulsar form and read back, decode to what was encoded."""
    from decimal import Decimal

    from logstore_cli.logformat import (
        ChangeRecord,
        CommitMarker,
        EpochId,
        LogFormat,
        RowKind,
        RowSchema,
        decode,
        encode_change,
        encode_marker,
    )
    from logstore_cli.logformat.pulsar_form import from_pulsar, to_pulsar

    schema = RowSchema((("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("id",))
    epoch = EpochId("w-1", 0, "a-1")
    records = [
        ChangeRecord(
            RowKind.INSERT,
            {"id": i},
            {"id": i, "name": f"Zoë {i}", "price": Decimal("1.50")},
            epoch,
        )
        for i in range(6)
    ]
    records.append(ChangeRecord(RowKind.DELETE, {"id": 3}, {"id": 3}, epoch))
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    topic = TopicName.parse(pulsar_topic)
    admin.create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    sent: list[object] = []
    with PulsarLogProducer(pulsar.service_url, topic, 2, producer_name("w-1", "a-1")) as producer:
        for fmt in (LogFormat.JSON, LogFormat.DEBEZIUM_JSON):
            for record in records:
                key, value, headers = encode_change(record, schema, fmt, upsert=True)
                partition_key, payload, props = to_pulsar(key, value, headers)
                assert partition_key is not None
                producer.send(partition_key, payload, props)
                sent.append(decode(key, value, headers, schema))
        producer.flush()
        marker = CommitMarker(epoch, 5)
        for partition in range(2):
            _, payload, props = to_pulsar(*encode_marker(marker, LogFormat.DEBEZIUM_JSON))
            producer.send_marker(partition, payload, props)
        producer.flush()
    read = []
    for partition in range(2):
        for key, payload, props, _ in _read(pulsar.service_url, topic.partition(partition)):
            read.append(decode(*from_pulsar(key or None, payload, props), schema))
    assert sorted(map(repr, [r for r in read if not isinstance(r, CommitMarker)])) == sorted(
        map(repr, sent)
    )
    assert [r for r in read if isinstance(r, CommitMarker)] == [marker, marker]


def test_the_producer_writes_nothing_to_stdout(
    pulsar: PulsarInfo, pulsar_topic: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The C++ client logs to stdout by default, where 'ingest --json' writes its JSON lines: its
    log goes through Python's logging instead."""
    topic = TopicName.parse(pulsar_topic)
    PulsarAdmin(pulsar.web_url, timeout_s=30).create_topic(
        topic, 1, retention_minutes=-1, retention_mb=-1
    )
    capfd.readouterr()
    with PulsarLogProducer(pulsar.service_url, topic, 1, producer_name("w-1", "a-1")) as producer:
        producer.send('{"id":1}', b"{}", {"logstore.kind": "+I"})
        assert producer.flush()[0] is not None
    assert capfd.readouterr().out == ""


def test_an_epoch_larger_than_the_clients_queue_is_written_whole(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    """A producer queues ``max_pending`` messages per partition: sending more before a flush waits
    for room (it failed the epoch with ProducerQueueIsFull)."""
    topic = TopicName.parse(pulsar_topic)
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    admin.create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    count = 2500
    with PulsarLogProducer(
        pulsar.service_url, topic, 2, producer_name("w-1", "a-1"), max_pending=100
    ) as producer:  # logstore's queue is deeper than the client's; 100 is what this test fills
        for i in range(count):
            producer.send(json.dumps({"id": i}), b"{}", {"logstore.kind": "+I"})
        producer.flush()
    assert sum(len(_read(pulsar.service_url, topic.partition(p))) for p in range(2)) == count


def _publishers(web_url: str, partition_topic: TopicName) -> list[str]:
    """The names of the producers connected to one partition (the admin API's topic stats)."""
    with urllib.request.urlopen(f"{web_url}{partition_topic.path}/stats", timeout=30) as answer:
        stats = json.load(answer)
    return sorted(p["producerName"] for p in stats.get("publishers") or ())


def test_a_keys_records_stay_in_order_on_its_partition_through_a_producer_per_partition(
    pulsar: PulsarInfo, pulsar_topic: str
) -> None:
    """The producer computes each record's partition and sends it through that partition's own
    producer: a key's records land on Kafka's partition for it in the order sent (a small queue,
    so sends wait for room), each partition's producers have distinct names (the attempt's for its
    records, one per partition for its marker), and every partition ends with its marker."""
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    topic = TopicName.parse(pulsar_topic)
    admin.create_topic(topic, 3, retention_minutes=-1, retention_mb=-1)
    name = producer_name("w-1", "a-1")
    keys = [json.dumps({"id": i}, separators=(",", ":")) for i in range(12)]
    sent = [(keys[i % len(keys)], i) for i in range(600)]
    assert {partition_for(k.encode(), 3) for k in keys} == {0, 1, 2}
    props = {"logstore.kind": "+I"}
    with PulsarLogProducer(pulsar.service_url, topic, 3, name, max_pending=8) as producer:
        for key, seq in sent:
            producer.send(key, json.dumps({"seq": seq}).encode(), props)
        ends = producer.flush()
        for partition in range(3):
            producer.send_marker(partition, b'{"delta_version":0}', {"logstore.kind": "COMMIT"})
        after_markers = producer.flush()
        parts = [TopicName(topic.tenant, topic.namespace, f"{topic.topic}-partition-{p}")
                 for p in range(3)]  # fmt: skip
        names = {p: _publishers(pulsar.web_url, parts[p]) for p in range(3)}
    assert names == {p: sorted([name, f"{name}-m{p}"]) for p in range(3)}
    for partition in range(3):
        records = _read(pulsar.service_url, topic.partition(partition))
        changes = [(key, json.loads(data)["seq"]) for key, data, _, _ in records[:-1]]
        assert changes == [(k, seq) for k, seq in sent if partition_for(k.encode(), 3) == partition]
        assert records[-1][2] == {"logstore.kind": "COMMIT"}
        assert ends[partition] == records[-2][3] and after_markers[partition] == records[-1][3]
    assert admin.last_positions(topic, 3) == after_markers
