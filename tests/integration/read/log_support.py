"""Log records written straight to a table's topic, as a producer following wire format 1 would
(docs/design.md §7): change records keyed and partitioned by the key, commit markers to every
partition. Lets read tests build any history (failed attempts, open epochs) without Spark."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.producer import LogProducer
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    encode_change,
    encode_marker,
)

TIMEOUT_S = 15.0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
        admin.create_topic(topic, partitions, 1)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    with KafkaAdmin(bootstrap, timeout_s=TIMEOUT_S) as admin:
        return admin.end_offsets(topic)


class LogWriter:
    """Writes change records and markers of chosen epochs and attempts to one topic (a new one:
    ``ends`` assumes this writer is its only producer)."""

    def __init__(self, bootstrap: str, topic: str, schema: RowSchema) -> None:
        self.schema = schema
        self.producer = LogProducer(bootstrap, {}, topic, timeout_s=TIMEOUT_S)
        self.partitions = self.producer.partition_count()
        #: Each partition's end offset after what this writer sent (a new topic: all 0).
        self.ends = dict.fromkeys(range(self.partitions), 0)

    def changes(self, epoch: EpochId, changes: Iterable[tuple[RowKind, Mapping[str, Any]]]) -> int:
        """Send the changes of one attempt and wait for them; returns how many were sent."""
        sent = 0
        for kind, row in changes:
            record = ChangeRecord(kind, self.schema.key_of(row), dict(row), epoch)
            key, value, headers = encode_change(record, self.schema)
            self.producer.send(key, value, headers)
            sent += 1
        self.ends.update(self.producer.flush())
        return sent

    def marker(self, epoch: EpochId, delta_version: int | None = None) -> None:
        """The epoch's commit marker (naming ``epoch.attempt``) to every partition."""
        _, value, headers = encode_marker(CommitMarker(epoch, delta_version))
        for partition in range(self.partitions):
            self.producer.send(None, value, headers, partition=partition)
        self.ends.update(self.producer.flush())

    def close(self) -> None:
        self.producer.close()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
