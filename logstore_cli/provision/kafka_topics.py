"""The Kafka side of provisioning: one admin client per broker address, config + DDL properties."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logstore_cli.config import KafkaConfig
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import LogStoreSpec


class KafkaTopicStore:
    def __init__(self, config: KafkaConfig) -> None:
        self._config = config
        self._admins: dict[tuple[str, frozenset[tuple[str, str]]], KafkaAdmin] = {}

    def _admin(self, log: LogStoreSpec) -> KafkaAdmin:
        # The config's client properties apply to every table; the table's own keys win.
        props = {**self._config.client, **log.client_properties}
        key = (log.address, frozenset(props.items()))
        if key not in self._admins:
            self._admins[key] = KafkaAdmin(log.address, props, timeout_s=self._config.timeout_s)
        return self._admins[key]

    def describe(self, log: LogStoreSpec) -> TopicInfo | None:
        return self._admin(log).describe_topic(log.topic)

    def create(
        self,
        log: LogStoreSpec,
        partitions: int,
        replication: int | None,  # None: the cluster's default.replication.factor
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None:
        self._admin(log).create_topic(
            log.topic,
            partitions,
            -1 if replication is None else replication,  # -1: CreateTopics' "broker default"
            configs,
            validate_only=validate_only,
        )

    def add_partitions(self, log: LogStoreSpec, total: int, *, validate_only: bool = False) -> None:
        self._admin(log).add_partitions(log.topic, total, validate_only=validate_only)

    def alter_configs(
        self,
        log: LogStoreSpec,
        set_: Mapping[str, str],
        delete: Sequence[str],
        *,
        validate_only: bool = False,
    ) -> None:
        self._admin(log).alter_topic_configs(log.topic, set_, delete, validate_only=validate_only)

    def delete(self, log: LogStoreSpec) -> None:
        self._admin(log).delete_topic(log.topic)

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        return self._admin(log).end_offsets(log.topic)

    def start_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        return self._admin(log).start_offsets(log.topic)

    def adoption_positions(self, log: LogStoreSpec) -> dict[int, int]:
        return self.end_offsets(log)

    def close(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()
