"""Kafka topic administration for provisioning (create-table, describe, alter-table, drop-table).

A small typed wrapper over ``confluent_kafka.admin.AdminClient`` with two promises:

* **Every call ends within its deadline** (``timeout_s``, one deadline per public call, shared by the
  requests it makes), and at once when waiting cannot help: every bootstrap address refused the
  connection, the credentials were rejected, the TLS handshake failed. librdkafka retries an
  unreachable broker forever unless told otherwise, so the client gets short connection/socket
  time-outs, every request a ``request_timeout``, and every wait a deadline of our own.
* **Kafka errors become domain errors** (``logstore_cli.errors``), through the client's
  :class:`~logstore_cli.kafka.errors.KafkaErrorMapper`.

Client properties (DDL ``properties.*`` / ``kafka.*`` and the config file, written for Flink's Java
client) are mapped by :func:`~logstore_cli.kafka.client_config.librdkafka_config`. Secret values
never reach a log line or a message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

# confluent_kafka.admin re-exports these without __all__; mypy (strict, no implicit re-export) only
# accepts them from the modules that define them.
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.admin._topic import TopicDescription
from confluent_kafka.cimpl import NewPartitions, NewTopic

from logstore_cli.errors import (
    BrokerError,
    ConfigError,
    LogstoreError,
    TopicNotFoundError,
    TopicSpecError,
)
from logstore_cli.kafka.client_config import java_only_reason, librdkafka_config
from logstore_cli.kafka.errors import KafkaErrorMapper, Operation, check_topic_name, reason
from logstore_cli.kafka.types import TopicInfo

log = logging.getLogger(__name__)

# librdkafka fails a request at its request_timeout; our own wait gives it this much longer.
_GRACE_S = 0.5
# The wait step: AdminClient.poll serves the error/log callbacks and paces the loop.
_POLL_S = 0.05
# The shortest attempt of a request that is retried with fresh metadata (see KafkaAdmin._offsets).
_ATTEMPT_MIN_S = 3.0
# Errors after which the same request, with fresh metadata, may succeed: the leader moved or died.
_RETRIABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.BROKER_NOT_AVAILABLE,
    }
)
# ping's first metadata wait; it doubles up to _PING_STEP_MAX_S (a slow link still gets answered).
_PING_STEP_S = 0.2
_PING_STEP_MAX_S = 1.0


class KafkaAdmin:
    """Topic administration against one Kafka cluster; every call ends within ``timeout_s``.

    Use it as a context manager, or call :meth:`close`. Not thread-safe.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_properties: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 10.0,
    ) -> None:
        if not bootstrap_servers.strip():
            raise ConfigError(
                "no Kafka bootstrap servers given",
                hint="set the table's 'log-store.address' / 'kafka.bootstrap.servers', "
                "or the bootstrap servers in the config file",
            )
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        properties = client_properties or {}
        conf, ignored = librdkafka_config(bootstrap_servers, properties)
        for key in ignored:
            why = java_only_reason(key) or "overridden or not translatable for librdkafka"
            log.warning("ignoring Kafka client property %r: %s", key, why)
        #: Client properties dropped because librdkafka has no such setting (see JAVA_ONLY_KEYS).
        self.ignored_properties: tuple[str, ...] = tuple(ignored)
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self._errors = KafkaErrorMapper.for_config(conf, properties, timeout_s=timeout_s)

        ms = int(timeout_s * 1000)
        conf.setdefault("socket.connection.setup.timeout.ms", max(1000, min(ms // 2, 30000)))
        conf.setdefault("socket.timeout.ms", max(ms, 10))
        if "reconnect.backoff.ms" not in conf:
            # A broker that comes back during a call is found within a second, not ten.
            conf.setdefault("reconnect.backoff.max.ms", 1000)
        conf.update(self._errors.callbacks())
        self._conf = conf
        self._admin: AdminClient | None = self._new_client()

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.__exit__(None, None, None)  # destroys the librdkafka handle

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the API -----------------------------------------------------------------------------------

    def ping(self) -> None:
        """Return once a broker answers a metadata request; BrokerError when none does within
        ``timeout_s``, at once when every bootstrap address refuses the connection."""
        deadline = self._begin()
        admin = self._client()
        last: KafkaException | None = None
        step = _PING_STEP_S
        while True:
            wait = max(min(deadline - time.monotonic(), step), 0.05)
            try:
                if admin.list_topics(timeout=wait).brokers:
                    self._errors.reached()
                    return
            except KafkaException as exc:
                last = exc
            admin.poll(0)
            self._raise_if_fatal()
            if time.monotonic() >= deadline:
                raise self._errors.unreachable(detail=reason(last) if last else None)
            step = min(step * 2, _PING_STEP_MAX_S)

    def describe_topic(self, name: str) -> TopicInfo | None:
        """The topic's partitions, replication and non-default configs; None when it does not exist."""
        op = Operation("describe", "DESCRIBE", name, also=("DESCRIBE_CONFIGS",))
        check_topic_name(op)
        deadline = self._begin()
        description = self._describe(op, deadline)
        if description is None:
            return None
        configs = self._configs(
            Operation("describe the configs of", "DESCRIBE_CONFIGS", name), deadline
        )
        if configs is None:  # deleted in between
            return None
        partitions = sorted(description.partitions, key=lambda p: p.id)
        return TopicInfo(
            name=name,
            partitions=len(partitions),
            replication=len(partitions[0].replicas) if partitions else 0,
            configs=configs,
        )

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Create the topic and wait until its partitions have leaders (``validate_only``: only let
        the broker check the request; nothing is created). ``-1`` means the broker's default."""
        op = Operation("create", "CREATE", name)
        check_topic_name(op)
        if partitions == 0 or partitions < -1:
            raise self._errors.spec_error(
                op, f"{partitions} partitions", "a topic needs at least 1"
            )
        if replication == 0 or replication < -1:
            raise self._errors.spec_error(
                op, f"replication {replication}", "a topic needs at least 1"
            )
        deadline = self._begin()
        new = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication,
            config={k: str(v) for k, v in (configs or {}).items()},
        )
        remaining = self._remaining(deadline, op)
        futures = self._client().create_topics(
            [new],
            validate_only=validate_only,
            request_timeout=remaining,
            operation_timeout=remaining * 0.8,
        )
        self._result(
            futures[name], op, deadline, replication=None if replication == -1 else replication
        )
        if not validate_only:
            self._settle(
                op, deadline,
                lambda d: d is not None and (partitions == -1 or len(d.partitions) == partitions)
                and all(p.leader is not None for p in d.partitions),
            )  # fmt: skip

    def delete_topic(self, name: str) -> None:
        """Delete the topic and wait until it is gone; no error if it does not exist."""
        op = Operation("delete", "DELETE", name)
        check_topic_name(op)
        deadline = self._begin()
        remaining = self._remaining(deadline, op)
        futures = self._client().delete_topics(
            [name], request_timeout=remaining, operation_timeout=remaining * 0.8
        )
        try:
            self._result(futures[name], op, deadline)
        except TopicNotFoundError:
            return
        self._settle(op, deadline, lambda d: d is None)

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow the topic to ``total`` partitions (no-op when it has that many; never shrinks).
        ``validate_only``: only let the broker check the request; nothing changes."""
        op = Operation("add partitions to", "ALTER", name)
        check_topic_name(op)
        if total < 1:
            raise self._errors.spec_error(op, f"{total} partitions", "a topic needs at least 1")
        deadline = self._begin()
        description = self._describe(
            Operation("describe", "DESCRIBE", name, also=("ALTER",)), deadline
        )
        if description is None:
            raise self._errors.not_found(op)
        current = len(description.partitions)
        if total == current:
            return
        if total < current:
            raise TopicSpecError(
                f"cannot shrink Kafka topic '{name}' from {current} to {total} partitions",
                hint=f"Kafka only adds partitions: set 'log.system.partitions' to {current} or "
                "more, or recreate the topic (drop-table, create-table) to have fewer",
            )
        remaining = self._remaining(deadline, op)
        futures = self._client().create_partitions(
            [NewPartitions(name, total)],
            validate_only=validate_only,
            request_timeout=remaining,
            operation_timeout=remaining * 0.8,
        )
        self._result(futures[name], op, deadline)
        if not validate_only:
            self._settle(
                op, deadline,
                lambda d: d is not None and len(d.partitions) >= total
                and all(p.leader is not None for p in d.partitions),
            )  # fmt: skip

    def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete (back to the broker default) topic configs, incrementally.
        ``validate_only``: only let the broker check the change; nothing changes."""
        op = Operation("alter the configs of", "ALTER_CONFIGS", name)
        check_topic_name(op)
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
        ] + [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
            for k in delete
            if k not in set_
        ]
        if not entries:
            return
        deadline = self._begin()
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self._client().incremental_alter_configs(
            [resource],
            validate_only=validate_only,
            request_timeout=self._remaining(deadline, op),
        )
        self._result(futures[resource], op, deadline)

    def start_offsets(self, name: str) -> dict[int, int]:
        """Partition -> earliest offset still held (equal to the end offset when the partition
        holds no records)."""
        earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        return self._offsets(Operation("read the start offsets of", "DESCRIBE", name), earliest)

    def end_offsets(self, name: str) -> dict[int, int]:
        """Partition -> high watermark (the offset the next record will get)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        return self._offsets(Operation("read the end offsets of", "DESCRIBE", name), latest)

    # -- internals ---------------------------------------------------------------------------------

    def _new_client(self) -> AdminClient:
        try:
            return AdminClient(self._conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise self._errors.invalid_properties(exc) from None

    def _client(self) -> AdminClient:
        if self._admin is None:
            raise RuntimeError("KafkaAdmin is closed")
        return self._admin

    def _begin(self) -> float:
        """Start a call: forget earlier client errors, return the call's deadline."""
        self._client().poll(0)
        replace = self._errors.brokers_down
        if replace:
            # librdkafka reported the cluster down and has not reached it since: a fresh handle
            # tries every bootstrap address now and reports the outcome anew.
            self.close()
            self._admin = self._new_client()
        self._errors.begin(new_client=replace)
        return time.monotonic() + self.timeout_s

    def _remaining(self, deadline: float, op: Operation) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            raise self._timed_out(op)
        return remaining

    def _wait(self, futures: Iterable[Future[Any]], op: Operation, deadline: float) -> None:
        """Wait for ``futures`` until the deadline; fail at once when waiting cannot help."""
        pending = list(futures)
        admin = self._client()
        while True:
            pending = [f for f in pending if not f.done()]
            if not pending:
                return
            self._raise_if_fatal()
            if time.monotonic() > deadline + _GRACE_S:
                raise self._timed_out(op)
            admin.poll(_POLL_S)

    def _raise_if_fatal(self) -> None:
        error = self._errors.fatal()
        if error is not None:
            raise error

    def _timed_out(self, op: Operation) -> BrokerError:
        self._client().poll(0)  # the reason may be among the pending client errors
        return self._errors.timed_out(op)

    def _result(
        self, future: Future[Any], op: Operation, deadline: float, *, replication: int | None = None
    ) -> Any:
        self._wait([future], op, deadline)
        try:
            result = future.result(timeout=0)
        except KafkaException as exc:
            raise self._errors.map(exc, op, replication=replication) from None
        self._errors.reached()
        return result

    def _describe(self, op: Operation, deadline: float) -> TopicDescription | None:
        futures = self._client().describe_topics(
            TopicCollection([op.topic]), request_timeout=self._remaining(deadline, op)
        )
        try:
            description: TopicDescription = self._result(futures[op.topic], op, deadline)
        except TopicNotFoundError:
            return None
        return description

    def _configs(self, op: Operation, deadline: float) -> dict[str, str] | None:
        resource = ConfigResource(ResourceType.TOPIC, op.topic)
        futures = self._client().describe_configs(
            [resource], request_timeout=self._remaining(deadline, op)
        )
        try:
            entries: Mapping[str, Any] = self._result(futures[resource], op, deadline)
        except TopicNotFoundError:
            return None
        dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {
            name: str(entry.value)
            for name, entry in sorted(entries.items())
            if _source_value(entry.source) == dynamic and entry.value is not None
        }

    def _offsets(self, op: Operation, spec: OffsetSpec) -> dict[int, int]:
        """One offset per partition, read from each partition's leader. A leader that dies is
        routine in a cluster (its partitions get new leaders within seconds), and a request to it
        only ends at its time-out: each attempt gets a slice of the time-out, and a retriable
        failure (an attempt that timed out, a leader that moved, a broken connection) is tried
        again with fresh metadata until the whole time-out is spent."""
        check_topic_name(op)
        deadline = self._begin()
        while True:
            attempt = min(deadline, time.monotonic() + max(_ATTEMPT_MIN_S, self.timeout_s / 4))
            found = self._offsets_once(op, spec, attempt)
            if found is not None:
                self._errors.reached()
                return found
            if deadline - time.monotonic() <= 0.05:
                raise self._timed_out(op)
            log.debug("retrying to %s topic %s with fresh metadata", op.verb, op.topic)
            # A fresh handle: librdkafka sends ListOffsets to the leaders its metadata cache names,
            # and a handle's cache can keep naming a dead leader for a minute after the cluster
            # elected a new one (seen in the suite: new leaders 8.5 s after the kill, 60 s of
            # refused connections to the dead one). A new handle asks the cluster afresh.
            fresh = self._new_client()  # first: a handle that cannot be made leaves the old one
            self.close()
            self._admin = fresh

    def _offsets_once(
        self, op: Operation, spec: OffsetSpec, deadline: float
    ) -> dict[int, int] | None:
        """One attempt of ``_offsets`` until ``deadline``; None when it should be tried again."""
        admin = self._client()
        described = Operation("describe", "DESCRIBE", op.topic)
        futures = admin.describe_topics(
            TopicCollection([op.topic]), request_timeout=max(0.1, deadline - time.monotonic())
        )
        if not self._settled(futures.values(), deadline):
            return None
        try:
            description: TopicDescription = futures[op.topic].result(timeout=0)
        except KafkaException as exc:
            if _retriable(exc):
                return None
            error = self._errors.map(exc, described)
            if isinstance(error, TopicNotFoundError):
                raise self._errors.not_found(op) from None
            raise error from None
        request = {TopicPartition(op.topic, p.id): spec for p in description.partitions}
        if not request:
            return {}
        offsets = admin.list_offsets(request, request_timeout=max(0.1, deadline - time.monotonic()))
        if not self._settled(offsets.values(), deadline):
            return None
        found: dict[int, int] = {}
        for tp, future in offsets.items():
            try:
                found[tp.partition] = int(future.result(timeout=0).offset)
            except KafkaException as exc:
                if _retriable(exc):
                    return None
                raise self._errors.map(exc, op) from None
        return found

    def _settled(self, futures: Iterable[Future[Any]], deadline: float) -> bool:
        """Whether every future is done by ``deadline`` (polling the client meanwhile)."""
        pending = list(futures)
        admin = self._client()
        while True:
            pending = [f for f in pending if not f.done()]
            if not pending:
                return True
            self._raise_if_fatal()
            if time.monotonic() >= deadline:
                return False
            admin.poll(_POLL_S)

    def _settle(
        self, op: Operation, deadline: float, done: Callable[[TopicDescription | None], bool]
    ) -> None:
        """Poll the topic's metadata until ``done(description)`` holds, at most until the deadline.

        Kafka acknowledges a change before every broker's metadata shows it; callers (and a
        describe right after) should see the result. Best effort: the change itself succeeded.
        """
        probe = Operation("describe", "DESCRIBE", op.topic)
        admin = self._client()
        while True:
            try:
                if done(self._describe(probe, deadline)):
                    return
            except LogstoreError as exc:  # e.g. allowed to create but not to describe
                log.debug("cannot confirm that %s topic %r took effect: %s", op.verb, op.topic, exc)
                return
            if time.monotonic() + 0.1 >= deadline:
                log.warning(
                    "Kafka acknowledged the request to %s topic %r, but its metadata did not show "
                    "the change within %gs",
                    op.verb, op.topic, self.timeout_s,
                )  # fmt: skip
                return
            admin.poll(0.1)  # pacing of a poll with a deadline; also serves client callbacks


def _source_value(source: Any) -> Any:
    return source.value if isinstance(source, ConfigSource) else source


def _retriable(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    return error.code() in _RETRIABLE or bool(error.retriable())
