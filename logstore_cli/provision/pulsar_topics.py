"""The Pulsar side of provisioning (issue 23): a ``TopicStore`` on Pulsar's admin REST API, and
the store that picks Kafka's or Pulsar's per table by its log system (``log-store.type``).

A table's topic on Pulsar is a *partitioned* persistent topic (design §7.1) with

- ``log.system.partitions`` partitions (grown by alter-table; Pulsar never shrinks a topic);
- its own retention policy, always set: ``log.topic.retention.ms`` / ``retention.bytes`` in
  Pulsar's units (whole minutes, whole MiB), else Kafka's defaults (7 days, no size limit), since
  Pulsar's own default deletes whatever no subscription holds;
- broker-side deduplication on (the producer's names make a retried attempt never "already seen").

Its configs, as ``describe`` returns them, are that retention in Kafka's names and units, so the
planner compares them with the table's ``log.topic.*`` properties as it does for Kafka.

Positions: the ``TopicStore`` protocol's ``start_offsets`` / ``end_offsets`` are Kafka offsets.
Pulsar's message ids are not dense integers, so here they mean *how much a partition holds*:
``end_offsets`` is each partition's count of messages held in its ledgers (the producer sends
unbatched, one entry per message) and ``start_offsets`` is 0 for each, so that ``end - start``
is what provisioning asks of them (whether a topic holds records, and how many). They are never
positions to read from; those are ``pulsar.admin.MessagePosition`` (``"<ledger>:<entry>:<batch>"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from logstore_cli.config import PulsarConfig
from logstore_cli.ddl.properties import (
    PULSAR_TOPIC_CONFIGS,
    pulsar_retention,
    pulsar_retention_configs,
)
from logstore_cli.errors import InvalidInputError, TopicNotFoundError
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import LogStoreSpec
from logstore_cli.provision.backends import TopicStore
from logstore_cli.pulsar.admin import MessagePosition, PulsarAdmin, TopicName, admin_url_for

# Pulsar's own default write quorum (broker.conf managedLedgerDefaultWriteQuorum), shown as the
# topic's replication when neither the namespace nor the broker says.
_PULSAR_DEFAULT_WRITE_QUORUM = 2


class LogTail(NamedTuple):
    """A Pulsar partition's last message id ("<ledger>:<entry>:<batch>", None when it holds none)
    and how many messages it holds after a given position (None: not known)."""

    last: str | None
    after: int | None


# (service URL, admin URL) of the local standalone ('logstore pulsar start'), when there is one.
LocalPulsar = Callable[[], tuple[str, str] | None]


class PulsarTopicStore:
    """``TopicStore`` on Pulsar: one admin client per admin URL."""

    def __init__(
        self,
        config: PulsarConfig,
        *,
        timeout_s: float = 10.0,
        local: LocalPulsar = lambda: None,
        admin: Callable[[str, float], PulsarAdmin] | None = None,
    ) -> None:
        """``admin``: makes the admin client of a URL (tests give a fake)."""
        self._config = config
        self._timeout_s = timeout_s
        self._local = local
        self._make_admin = admin or (lambda url, timeout: PulsarAdmin(url, timeout_s=timeout))
        self._admins: dict[str, PulsarAdmin] = {}

    def admin_url(self, log: LogStoreSpec) -> str:
        """Where the admin API of ``log``'s Pulsar is (``pulsar.admin.admin_url_for``)."""
        local = None if self._config.admin_url else self._local()
        return admin_url_for(log.address, self._config.admin_url, local)

    def _admin(self, log: LogStoreSpec) -> PulsarAdmin:
        url = self.admin_url(log)
        if url not in self._admins:
            self._admins[url] = self._make_admin(url, self._timeout_s)
        return self._admins[url]

    @staticmethod
    def _name(log: LogStoreSpec) -> TopicName:
        return TopicName.parse(log.topic)

    def describe(self, log: LogStoreSpec) -> TopicInfo | None:
        admin, name = self._admin(log), self._name(log)
        found = admin.describe_topic(name)
        if found is None:
            return None
        quorum = admin.write_quorum(name) or _PULSAR_DEFAULT_WRITE_QUORUM
        configs = pulsar_retention_configs(found.retention_minutes, found.retention_mb)
        return TopicInfo(found.name, found.partitions, quorum, configs)

    def create(
        self,
        log: LogStoreSpec,
        partitions: int,
        replication: int | None,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None:
        """The partitioned topic with its retention and deduplication; ``validate_only``: check
        what Pulsar can be asked without creating anything (the admin API answers, the tenant
        and namespace exist), as Kafka's ``validate_only`` does."""
        if replication is not None:
            raise InvalidInputError(
                f"Pulsar topic '{log.topic}': a replication cannot be set per topic",
                hint="remove log.system.replication; Pulsar replicates by the namespace's "
                "persistence policy",
            )
        _check_configs(log, configs)
        minutes, mb = pulsar_retention(configs)
        admin, name = self._admin(log), self._name(log)
        if validate_only:
            if not admin.namespace_exists(name):
                raise InvalidInputError(
                    f"the Pulsar namespace '{name.tenant}/{name.namespace}' of topic "
                    f"'{log.topic}' does not exist at {admin.web_url}",
                    hint=f"create it first (pulsar-admin namespaces create "
                    f"{name.tenant}/{name.namespace}), or use a topic in public/default",
                )
            return
        admin.create_topic(name, partitions, retention_minutes=minutes, retention_mb=mb)
        try:
            admin.set_deduplication(name, True)
        except BaseException:
            # A topic without deduplication must not stay behind looking provisioned: the next
            # create-table would take it as it is.
            admin.delete_topic(name)
            raise

    def add_partitions(self, log: LogStoreSpec, total: int, *, validate_only: bool = False) -> None:
        admin, name = self._admin(log), self._name(log)
        if validate_only:
            found = admin.describe_topic(name)
            if found is None:
                raise TopicNotFoundError(f"Pulsar topic '{log.topic}' does not exist")
            if total <= found.partitions:
                raise InvalidInputError(
                    f"Pulsar topic '{log.topic}' has {found.partitions} partitions; it can only "
                    f"grow (asked for {total})",
                    hint="set log.system.partitions to more than the current count",
                )
            return
        admin.add_partitions(name, total)

    def alter_configs(
        self,
        log: LogStoreSpec,
        set_: Mapping[str, str],
        delete: Sequence[str],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set the topic's retention policy: its current parts, ``set_`` over them, and the
        ``delete``d ones back to logstore's defaults (never to Pulsar's own)."""
        _check_configs(log, {**set_, **dict.fromkeys(delete, "-1")})
        current = self.describe(log)
        if current is None:
            raise TopicNotFoundError(f"Pulsar topic '{log.topic}' does not exist")
        merged = {k: v for k, v in current.configs.items() if k not in delete}
        merged.update(set_)
        minutes, mb = pulsar_retention(merged)
        if not validate_only:
            self._admin(log).set_retention(self._name(log), minutes, mb)

    def delete(self, log: LogStoreSpec) -> None:
        self._admin(log).delete_topic(self._name(log))

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        """Each partition's count of messages held (not a position: see the module's doc)."""
        admin, name = self._admin(log), self._name(log)
        found = admin.describe_topic(name)
        if found is None:
            raise TopicNotFoundError(f"Pulsar topic '{log.topic}' does not exist")
        return admin.held_entries(name, found.partitions)

    def log_tail(self, log: LogStoreSpec, committed: Mapping[int, int | str]) -> dict[int, LogTail]:
        """Each partition's last message id and the messages after its ``committed`` position
        (status's "after commit"): a partition ``committed`` leaves out counts all it holds."""
        admin, name = self._admin(log), self._name(log)
        found = admin.describe_topic(name)
        if found is None:
            raise TopicNotFoundError(f"Pulsar topic '{log.topic}' does not exist")
        after: dict[int, MessagePosition | None] = {}
        for partition in range(found.partitions):
            position = committed.get(partition)
            if isinstance(position, str):
                after[partition] = MessagePosition.parse(position)
            elif position is None:
                after[partition] = None
            # an offset (int) names no Pulsar message: its lag is not known
        last = admin.last_positions(name, found.partitions)
        counts = admin.messages_after(name, after)
        return {
            p: LogTail(None if position is None else str(position), counts.get(p))
            for p, position in sorted(last.items())
        }

    def start_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        """0 for each partition: ``end_offsets`` counts what a partition holds."""
        return dict.fromkeys(self.end_offsets(log), 0)

    def adoption_positions(self, log: LogStoreSpec) -> dict[int, int]:
        """Each partition's read position just after its last message (``MessagePosition.after``),
        0 ("earliest") for one that holds none: what an adopting table records."""
        admin, name = self._admin(log), self._name(log)
        found = admin.describe_topic(name)
        if found is None:
            raise TopicNotFoundError(f"Pulsar topic '{log.topic}' does not exist")
        last = admin.last_positions(name, found.partitions)
        return {p: 0 if at is None else at.after() for p, at in sorted(last.items())}

    def close(self) -> None:
        self._admins.clear()  # plain HTTP: nothing stays open


def _check_configs(log: LogStoreSpec, configs: Mapping[str, str]) -> None:
    """Only the retention configs (the DDL refuses others: this guards direct callers)."""
    other = sorted(k for k in configs if k not in PULSAR_TOPIC_CONFIGS)
    if other:
        raise InvalidInputError(
            f"Pulsar topic '{log.topic}' takes no topic config {', '.join(map(repr, other))}",
            hint="a Pulsar topic takes only log.topic.retention.ms and log.topic.retention.bytes",
        )


class TopicStoreBySystem:
    """A ``TopicStore`` that hands each call to the store of the table's log system: Kafka's as
    it was, Pulsar's built on first use (a Kafka-only run never constructs it)."""

    def __init__(self, kafka: TopicStore, pulsar: Callable[[], TopicStore]) -> None:
        self.kafka = kafka
        self._make_pulsar = pulsar
        self._pulsar: TopicStore | None = None

    def store(self, log: LogStoreSpec) -> TopicStore:
        if log.system != "pulsar":
            return self.kafka
        if self._pulsar is None:
            self._pulsar = self._make_pulsar()
        return self._pulsar

    def describe(self, log: LogStoreSpec) -> TopicInfo | None:
        return self.store(log).describe(log)

    def create(
        self,
        log: LogStoreSpec,
        partitions: int,
        replication: int | None,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None:
        self.store(log).create(log, partitions, replication, configs, validate_only=validate_only)

    def add_partitions(self, log: LogStoreSpec, total: int, *, validate_only: bool = False) -> None:
        self.store(log).add_partitions(log, total, validate_only=validate_only)

    def alter_configs(
        self,
        log: LogStoreSpec,
        set_: Mapping[str, str],
        delete: Sequence[str],
        *,
        validate_only: bool = False,
    ) -> None:
        self.store(log).alter_configs(log, set_, delete, validate_only=validate_only)

    def delete(self, log: LogStoreSpec) -> None:
        self.store(log).delete(log)

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        return self.store(log).end_offsets(log)

    def start_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        return self.store(log).start_offsets(log)

    def adoption_positions(self, log: LogStoreSpec) -> dict[int, int]:
        return self.store(log).adoption_positions(log)

    def log_tail(self, log: LogStoreSpec, committed: Mapping[int, int | str]) -> dict[int, LogTail]:
        """Pulsar's ``log_tail`` (Kafka's tail is its end offsets: status subtracts those)."""
        store = self.store(log)
        if not isinstance(store, PulsarTopicStore):
            raise TypeError(f"no log tail for a {log.system} log store")
        return store.log_tail(log, committed)

    def close(self) -> None:
        for store in (self.kafka, self._pulsar):
            close = getattr(store, "close", None)
            if close is not None:
                close()
