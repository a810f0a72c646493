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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from logstore_cli.errors import BrokerError
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.pulsar.admin import MessagePosition, TopicName

SEND_TIMEOUT_MS = 30_000
# Messages in flight per partition before a send waits (the client's default is 1000): unbatched,
# each is a ledger entry's round trip, and a deeper queue keeps the broker busy (a 32,698-record
# epoch on 3 partitions: 7.0 s at 1000, 5.4 s at 5000). The epoch is held in memory anyway.
MAX_PENDING = 10_000
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
    """Writes one topic's records; ``flush`` says where each partition's records end.

    One producer per partition, made when its first record comes: the partition of a record is
    computed here (``partition_for``, Kafka's), so the client never calls back into Python to
    route a message, a key's records all go through one producer in the order sent, and each
    partition has one delivery callback made once, not a closure per message. Unbatched: one
    ledger entry is one message, which ``status`` (it counts entries) and the positions rely on.
    """

    def __init__(
        self,
        service_url: str,
        topic: TopicName,
        partitions: int,
        name: str,
        *,
        client: Any = None,
        send_timeout_ms: int = SEND_TIMEOUT_MS,
        max_pending: int = MAX_PENDING,
    ) -> None:
        import pulsar

        if partitions < 1:
            raise ValueError(f"a topic has at least one partition, not {partitions}")
        self._ok = pulsar.Result.Ok
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
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._failed: list[str] = []
        self._records: dict[int, Any] = {}
        self._markers: dict[int, Any] = {}
        # The last message id each producer delivered, by partition: a producer's callbacks come
        # in the order of its sends, so its latest is its end in that partition.
        self._last_record: dict[int, Any] = {}
        self._last_marker: dict[int, Any] = {}
        self._on_record = [self._callback(p, self._last_record) for p in range(partitions)]
        self._on_marker = [self._callback(p, self._last_marker) for p in range(partitions)]

    def send(self, key: str | None, value: bytes, props: Mapping[str, str]) -> None:
        """Queue a change record (``key``: the format-1 key text, None for a keyless table) to the
        partition Kafka's partitioner picks for it (records without a key are spread).
        ``props`` is handed to the client as is when it is a dict (the client copies it)."""
        if key is None:
            partition = random.randrange(self.partitions)
        else:
            partition = partition_for(key.encode("utf-8"), self.partitions)
        producer = self._records.get(partition)
        if producer is None:
            # The attempt's name on each partition: deduplication is per partition (a topic of
            # its own), so the name is still unique where the broker keys on it (design §7.1).
            producer = self._records[partition] = self._create(partition, self._name)
        producer.send_async(
            value,
            self._on_record[partition],
            properties=props if isinstance(props, dict) else dict(props),
            partition_key=key,
        )

    def send_marker(self, partition: int, value: bytes, props: Mapping[str, str]) -> None:
        """Queue a commit marker to ``partition`` itself (markers have no key)."""
        producer = self._markers.get(partition)
        if producer is None:
            producer = self._markers[partition] = self._create(
                partition, f"{self._name}-m{partition}"
            )
        producer.send_async(
            value,
            self._on_marker[partition],
            properties=props if isinstance(props, dict) else dict(props),
        )

    def flush(self) -> dict[int, MessagePosition]:
        """Wait for every queued record; the last position written to each partition so far.
        Raises BrokerError naming the first failure (nothing is retried here: the epoch is)."""
        for producer in [*self._records.values(), *self._markers.values()]:
            producer.flush()
        with self._lock:
            if self._failed:
                first, count = self._failed[0], len(self._failed)
                self._failed.clear()
                raise BrokerError(f"{count} record(s) were not written to {self.topic}: {first}")
            ends: dict[int, MessagePosition] = {}
            for last in (self._last_record, self._last_marker):
                for partition, mid in last.items():
                    position = MessagePosition(mid.ledger_id(), mid.entry_id(), mid.batch_index())
                    if partition not in ends or ends[partition] < position:
                        ends[partition] = position
            return ends

    def close(self) -> None:
        for producer in [*self._records.values(), *self._markers.values()]:
            # Closing after a failure: the failure is what gets reported.
            with contextlib.suppress(Exception):
                producer.close()
        if self._own_client:
            self._client.close()

    def __enter__(self) -> PulsarLogProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self, partition: int, name: str) -> Any:
        if not 0 <= partition < self.partitions:
            raise ValueError(
                f"{self.topic} has partitions 0..{self.partitions - 1}, not {partition}"
            )
        try:
            return self._client.create_producer(
                self.topic.partition(partition),
                producer_name=name,
                batching_enabled=False,
                send_timeout_millis=self._timeout_ms,
                # An epoch holds more records than the client's queue: wait for room rather than
                # fail the epoch with ProducerQueueIsFull.
                block_if_queue_full=True,
                max_pending_messages=self._max_pending,
            )
        except Exception as exc:
            raise BrokerError(
                f"cannot produce to partition {partition} of Pulsar topic {self.topic}: {exc}"
            ) from None

    def _callback(self, partition: int, last: dict[int, Any]) -> Callable[[Any, Any], None]:
        ok, failed, lock = self._ok, self._failed, self._lock

        def delivered(result: Any, message_id: Any) -> None:
            if result == ok:
                last[partition] = message_id  # one assignment: atomic under the GIL
            else:
                with lock:
                    failed.append(str(result))

        return delivered
