"""The ingest job's log sink on Pulsar (issue 23, design §7.1): the epoch's change records, sorted
as Kafka's sink sorts them, through one producer per attempt (``pulsar.producer``: Kafka's
murmur2 partition for each key, broker-side deduplication that never takes a retry for a resend),
flushed; then where each partition ends (the admin's last message ids), and the commit markers to
every partition.

Imported by the job only when a table's log is on Pulsar: it loads the Pulsar client's native
library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logstore_cli.errors import BrokerError, TopicNotFoundError
from logstore_cli.ingest.epoch import Produced
from logstore_cli.jobs.ingest import PulsarTarget, SparkBatch, SparkLogSink
from logstore_cli.logformat.pulsar_form import pulsar_key_value, pulsar_properties, to_pulsar
from logstore_cli.logformat.wire import (
    CommitMarker,
    EpochEncoder,
    EpochId,
    LogFormat,
    LogPosition,
    RowKind,
    change_value,
    encode_marker,
)
from logstore_cli.pulsar.admin import MessagePosition, PulsarAdmin, TopicName
from logstore_cli.pulsar.producer import CLIENT_LOG, PulsarLogProducer, producer_name

if TYPE_CHECKING:
    from logstore_cli.model import TableSpec

# Room left in a message for what Pulsar adds to key + value: the properties (the five headers),
# the producer name, sequence id and publish time. The check is on key + value, as Kafka's.
METADATA_ALLOWANCE = 1024


class PulsarLogSink(SparkLogSink):
    """``LogSink`` on Pulsar. ``open`` checks the topic before Spark starts."""

    too_large_hint = "raise the brokers' maxMessageSize, or write smaller rows"

    def __init__(
        self,
        table: TableSpec,
        target: PulsarTarget,
        admin: PulsarAdmin,
        client: Any,
        partitions: int,
        max_bytes: int | None = None,
    ) -> None:
        super().__init__(table, target.topic, max_bytes)
        self.target = target
        self.name = TopicName.parse(target.topic)
        self.admin = admin
        self.client = client
        self.partitions = partitions
        self._timeout_ms = max(1000, int(target.timeout_s * 1000))

    @classmethod
    def open(cls, table: TableSpec, target: PulsarTarget) -> PulsarLogSink:
        """The sink of ``table``'s topic: it must exist (created by create-table) and the admin
        API and the brokers must answer."""
        import pulsar

        admin = PulsarAdmin(target.admin_url, timeout_s=target.timeout_s)
        name = TopicName.parse(target.topic)
        found = admin.describe_topic(name)
        if found is None:
            raise TopicNotFoundError(
                f"the Pulsar topic {target.topic} of table {table.name} does not exist",
                hint="it was deleted outside logstore: create it again as a partitioned topic "
                f"(pulsar-admin topics create-partitioned-topic {target.topic} -p "
                f"{table.log_store.partitions if table.log_store else 1}), or drop the table "
                "and create it again",
            )
        limit = admin.max_message_size() - METADATA_ALLOWANCE
        try:
            client = pulsar.Client(
                target.service_url,
                operation_timeout_seconds=max(1, int(target.timeout_s)),
                logger=CLIENT_LOG,  # not stdout, where 'ingest --json' writes
            )
        except Exception as exc:
            raise BrokerError(f"cannot connect to Pulsar at {target.service_url}: {exc}") from None
        return cls(table, target, admin, client, found.partitions, max(1, limit))

    def close(self) -> None:
        self.client.close()

    def _producer(self, epoch: EpochId, suffix: str = "") -> PulsarLogProducer:
        return PulsarLogProducer(
            self.target.service_url,
            self.name,
            self.partitions,
            producer_name(epoch.writer, epoch.attempt) + suffix,
            client=self.client,
            send_timeout_ms=self._timeout_ms,
        )

    def produce(self, batch: SparkBatch, eid: EpochId) -> Produced:
        encoder = EpochEncoder(self.schema, eid, self.fmt)
        # Each kind's properties once: the client copies them into each message.
        props = {kind: pulsar_properties(encoder.headers(RowKind(kind))) for kind in self.log_kinds}
        wrap = self.fmt is not LogFormat.JSON
        rows = produced = 0
        # A producer per attempt: its name is what deduplication keys on (design §7.1).
        with self._producer(eid) as producer:
            for piece in self._sorted(batch):
                rows += piece.rows
                for key, value, kind in zip(piece.keys, piece.values, piece.kinds, strict=True):
                    if kind not in props:  # a kind the changelog mode leaves out (upsert: -U)
                        continue
                    sent = (
                        change_value(value, RowKind(kind), self.fmt, upsert=self.tombstones)
                        if wrap
                        else value
                    )
                    producer.send(*pulsar_key_value(key, sent), props[kind])
                    produced += 1
            delivered = producer.flush()
        # Exact, as the lease keeps other writers out: the last message of each partition.
        last = self.admin.last_positions(self.name, self.partitions)
        for partition, position in delivered.items():
            end = last.get(partition)
            if end is None or end < position:
                raise BrokerError(
                    f"partition {partition} of Pulsar topic {self.target.topic} ends at {end} "
                    f"although a record was delivered at {position}",
                    hint="something else deletes messages of the topic; check its retention",
                )
        return Produced(rows, produced, _positions(last))

    def publish_markers(self, marker: CommitMarker) -> None:
        _, value, headers = encode_marker(marker, self.fmt)
        _, payload, props = to_pulsar(None, value, headers)
        # Named after the attempt that committed: a re-publish continues its sequence ids.
        with self._producer(marker.epoch, "-markers") as producer:
            for partition in range(self.partitions):
                producer.send_marker(partition, payload, props)
            producer.flush()


def _positions(last: dict[int, MessagePosition | None]) -> dict[int, LogPosition]:
    """The Delta commit's positions: each partition's last message id; a partition that holds no
    message yet is left out (a reader starts it at its beginning)."""
    return {p: str(position) for p, position in sorted(last.items()) if position is not None}
