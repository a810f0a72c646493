"""The log's producer on Pulsar (issue 23), the counterpart of ``kafka/producer.py``: change
records to the partition Kafka's partitioner picks for their key, commit markers to a named
partition, and where each partition's records end after a flush (design §7.1).

The ``pulsar`` client (its native library) is imported when a producer is made, never by the
commands that do not write to Pulsar.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from logstore_cli.errors import BrokerError
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.pulsar.admin import MessagePosition, TopicName

SEND_TIMEOUT_MS = 30_000
# What the C++ client logs goes through Python's logging (stderr, warnings and up unless -v), never
# to its default, stdout: 'ingest --json' prints JSON lines alone there. The readers use it too.
CLIENT_LOG = logging.getLogger("logstore_cli.pulsar.client")


def producer_name(writer: str, attempt: str) -> str:
    """Broker-side deduplication keys on (producer name, sequence id): one name per attempt, so a
    retried attempt is never taken for a resend of the failed one (design §7.1)."""
    return f"logstore-{writer}-{attempt}"


def properties(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """Format 1's headers as Pulsar message properties: the same names and UTF-8 values."""
    return {name: value.decode("utf-8") for name, value in headers}


class PulsarLogProducer:
    """Writes one topic's records; ``flush`` says where each partition's records end."""

    def __init__(
        self,
        service_url: str,
        topic: TopicName,
        partitions: int,
        name: str,
        *,
        client: Any = None,
        send_timeout_ms: int = SEND_TIMEOUT_MS,
    ) -> None:
        import pulsar

        self._pulsar = pulsar
        self._own_client = client is None
        self._client = client or pulsar.Client(
            service_url,
            operation_timeout_seconds=max(1, send_timeout_ms // 1000),
            logger=CLIENT_LOG,
        )
        self.topic = topic
        self.partitions = partitions
        self._name = name
        self._timeout_ms = send_timeout_ms
        self._lock = threading.Lock()
        self._failed: list[str] = []
        self._ends: dict[int, MessagePosition] = {}
        self._markers: dict[int, Any] = {}
        try:
            # Keys go where Kafka's partitioner sends them; records without a key are spread.
            self._records = self._client.create_producer(
                str(topic),
                producer_name=name,
                batching_enabled=False,
                send_timeout_millis=send_timeout_ms,
                # An epoch holds more records than the client's queue (1000 by default): wait for
                # room rather than fail the epoch with ProducerQueueIsFull.
                block_if_queue_full=True,
                message_routing_mode=pulsar.PartitionsRoutingMode.CustomPartition,
                message_router=self._route,
            )
        except Exception as exc:
            self.close()
            raise BrokerError(f"cannot produce to Pulsar topic {topic}: {exc}") from None

    def send(self, key: str | None, value: bytes, props: Mapping[str, str]) -> None:
        """Queue a change record (``key``: the format-1 key text, None for a keyless table)."""
        args: dict[str, Any] = {"properties": dict(props)}
        if key is not None:
            args["partition_key"] = key
        self._records.send_async(value, self._delivered, **args)

    def send_marker(self, partition: int, value: bytes, props: Mapping[str, str]) -> None:
        """Queue a commit marker to ``partition`` itself (markers have no key)."""
        producer = self._markers.get(partition)
        if producer is None:
            producer = self._client.create_producer(
                self.topic.partition(partition),
                producer_name=f"{self._name}-m{partition}",
                batching_enabled=False,
                send_timeout_millis=self._timeout_ms,
                block_if_queue_full=True,
            )
            self._markers[partition] = producer

        def delivered(result: Any, message_id: Any) -> None:
            self._note(result, message_id, partition)

        producer.send_async(value, delivered, properties=dict(props))

    def flush(self) -> dict[int, MessagePosition]:
        """Wait for every queued record; the last position written to each partition so far.
        Raises BrokerError naming the first failure (nothing is retried here: the epoch is)."""
        self._records.flush()
        for producer in self._markers.values():
            producer.flush()
        with self._lock:
            if self._failed:
                first, count = self._failed[0], len(self._failed)
                self._failed.clear()
                raise BrokerError(f"{count} record(s) were not written to {self.topic}: {first}")
            return dict(self._ends)

    def close(self) -> None:
        for producer in [getattr(self, "_records", None), *self._markers.values()]:
            if producer is not None:
                # Closing after a failure: the failure is what gets reported.
                with contextlib.suppress(Exception):
                    producer.close()
        if self._own_client:
            self._client.close()

    def __enter__(self) -> PulsarLogProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _route(self, message: Any, partitions: int) -> int:
        key = message.partition_key()
        if not key:
            return random.randrange(partitions)
        return partition_for(key.encode("utf-8"), partitions)

    def _delivered(self, result: Any, message_id: Any) -> None:
        self._note(result, message_id, message_id.partition() if message_id else -1)

    def _note(self, result: Any, message_id: Any, partition: int) -> None:
        with self._lock:
            if result != self._pulsar.Result.Ok:
                self._failed.append(str(result))
                return
            position = MessagePosition(
                message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()
            )
            if partition not in self._ends or self._ends[partition] < position:
                self._ends[partition] = position
