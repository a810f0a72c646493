"""``create-table --adopt-topic`` of a Pulsar topic that already holds messages (issue 23): the
table records the position just after each partition's last message (``logstore.adopted-topic``),
and verify and the committed read take nothing before it as logstore's, not even a dropped
table's marker left in the topic. Epochs are written by hand (the log's producer and delta-rs, no
Spark); the CLI in-process, against the real standalone."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.tables import load_table
from logstore_cli.logformat.pulsar_form import to_pulsar
from logstore_cli.logformat.wire import (
    CommitMarker,
    EpochId,
    RowSchema,
    encode_marker,
)
from logstore_cli.pulsar.admin import PulsarAdmin, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from logstore_cli.pulsar.producer import PulsarLogProducer
from logstore_cli.read.pulsar_source import UNKNOWN_START
from tests.integration.pulsar.epochs import write_epoch
from tests.integration.pulsar.test_pulsar_tables import amoro_ddl, cli, env_for, failed

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

TABLE = "shop.adopted"


def _foreign(service_url: str, topic: TopicName) -> None:
    """Another producer's messages: plain ones to partition 0, a batch of three to partition 1."""
    import pulsar as client_lib

    client = client_lib.Client(service_url, operation_timeout_seconds=30)
    try:
        plain = client.create_producer(topic.partition(0), batching_enabled=False)
        plain.send(b"someone else's message", properties={"origin": "elsewhere"})
        plain.send(b"")
        plain.close()
        batched = client.create_producer(
            topic.partition(1), batching_enabled=True, batching_max_publish_delay_ms=1000
        )
        for i in range(3):
            batched.send_async(f"batched {i}".encode(), lambda result, msg_id: None)
        batched.flush()
        batched.close()
    finally:
        client.close()


def _epoch(
    pulsar: PulsarInfo, topic: TopicName, table: Path, schema: RowSchema, eid: EpochId,
    rows: list[dict[str, Any]],
) -> int:  # fmt: skip
    data = pa.table({"id": pa.array([r["id"] for r in rows], pa.int64()),
                     "amount": pa.array([r["amount"] for r in rows], pa.float64())})  # fmt: skip
    return write_epoch(pulsar, topic, table, schema, eid, rows, data, mode="append")


def test_a_pulsar_topic_holding_messages_is_adopted(pulsar: PulsarInfo, tmp_path: Path) -> None:
    env = env_for(tmp_path, pulsar)
    topic = TopicName.parse(f"t-adopt-{uuid.uuid4().hex[:12]}")
    admin = PulsarAdmin(pulsar.web_url, timeout_s=30)
    admin.create_topic(topic, 2, retention_minutes=-1, retention_mb=-1)
    _foreign(pulsar.service_url, topic)
    # And what a dropped table left in the topic (drop-table keeps it): its records and markers
    # look like logstore's, their markers naming version 1, which the new table's log gives to
    # another epoch (not confirmed).
    ddl = amoro_ddl(pulsar.service_url, str(topic), table=TABLE)
    assert cli(env, "create-table", "--sql", ddl, "--adopt-topic").exit_code == 0
    dropped = load_table(tmp_path, TABLE)
    schema = RowSchema.of(dropped.spec)
    _epoch(pulsar, topic, dropped.ref.path, schema, EpochId("gone", 1, "g"),
           [{"id": 100, "amount": 1.0}, {"id": 101, "amount": 2.0}])  # fmt: skip
    assert cli(env, "drop-table", TABLE, "--yes").exit_code == 0  # the topic stays

    code, said = failed(cli(env, "create-table", "--sql", ddl))
    # Counted in ledger entries (PulsarTopicStore.end_offsets): the foreign batch of three is one.
    assert code == 1 and "holds 7 records" in said and "--adopt-topic" in said
    created = cli(env, "create-table", "--sql", ddl, "--adopt-topic", "--json")
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)[0]["topic"]["adopted_records"] == 7

    # The property holds the positions just after each partition's last message id.
    stored = load_table(tmp_path, TABLE)
    last = admin.last_positions(topic, 2)
    recorded = wh.adopted_positions(stored.state.properties)
    assert recorded == {p: at.after() for p, at in last.items() if at is not None}
    assert set(recorded) == {0, 1}
    assert stored.state.properties[wh.P_ADOPTED_TOPIC] == wh.adopted_positions_text(recorded)

    # The table's own epochs, then verify and the committed read.
    path = stored.ref.path
    v1 = _epoch(pulsar, topic, path, schema, EpochId("w", 1, "a"),
                [{"id": i, "amount": i / 2} for i in range(6)])  # fmt: skip
    v2 = _epoch(pulsar, topic, path, schema, EpochId("w", 2, "a"),
                [{"id": i, "amount": i * 2.0} for i in range(6, 12)])  # fmt: skip
    assert v2 == v1 + 1
    verified = cli(env, "verify", TABLE, "--json")
    data = json.loads(verified.stdout)
    assert verified.exit_code == 0, verified.output
    assert data["equal"] is True and data["delta_version"] == v2
    assert data["log"]["markers"] == 4 and data["log"]["changes"] == 12
    # Nothing before the adoption point was read: not the foreign messages (the batch's last
    # included), not the dropped table's records and markers.
    assert data["log"]["skipped"] == 0 and data["log"]["unconfirmed"]["markers"] == 0
    # Both partitions still hold messages from before adoption: their start is known.
    assert UNKNOWN_START not in data["notes"]

    read = cli(env, "read", TABLE, "--mode", "log", "--consistency", "committed", "--from",
               "earliest", "-o", "jsonl")  # fmt: skip
    assert read.exit_code == 0, read.output
    folded: dict[int, float] = {}
    for line in read.stdout.splitlines():
        change = json.loads(line)
        assert change["kind"] == "+I", change  # no retraction: nothing of the dropped table's
        folded[int(change["row"]["id"])] = float(change["row"]["amount"])
    delta = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert folded == {int(r["id"]): float(r["amount"]) for r in delta}
    assert folded == {i: i / 2 for i in range(6)} | {i: i * 2.0 for i in range(6, 12)}

    # A marker written after adoption by something else is named by its message id.
    forged = EpochId("intruder", 9, "x")
    with PulsarLogProducer(pulsar.service_url, topic, 2, "adopt-forged") as out:
        _, payload, marker_props = to_pulsar(*encode_marker(CommitMarker(forged, v2)))
        out.send_marker(0, payload, marker_props)
        out.flush()
    last_0 = admin.last_positions(topic, 2)[0]
    refused = cli(env, "verify", TABLE, "--json")
    assert refused.exit_code == 1, refused.output
    reason = json.loads(refused.stdout)["reason"]
    assert f"partition 0 message {last_0}: epoch 9 of writer intruder" in reason, reason

    described = cli(env, "describe", TABLE, "--json")
    assert described.exit_code == 0, described.output
    status = cli(env, "status", TABLE, "--json")
    assert status.exit_code == 0, status.output
