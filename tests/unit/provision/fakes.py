"""In-memory DeltaStore / TopicStore for unit tests of the provisioning logic (no JVM, no broker).
The same logic runs against delta-spark and a real broker in tests/integration/provision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from logstore_cli.catalog.warehouse import DeltaState
from logstore_cli.errors import BrokerError, LogstoreError
from logstore_cli.kafka.admin import TopicInfo
from logstore_cli.model import LogStoreSpec, TableSpec


@dataclass
class MemDelta:
    tables: dict[Path, DeltaState] = field(default_factory=dict)
    fail_create: LogstoreError | None = None
    calls: list[str] = field(default_factory=list)

    def read(self, path: Path) -> DeltaState | None:
        return self.tables.get(path)

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        self.calls.append(f"create {path.name}")
        if self.fail_create is not None:
            raise self.fail_create
        schema = {
            "type": "struct",
            "fields": [
                {"name": c.name, "type": c.type, "nullable": c.nullable, "metadata": {}}
                for c in spec.columns
            ],
        }
        self.tables[path] = DeltaState(
            path, 0, 0, schema, dict(properties), tuple(spec.partitioned_by), spec.comment
        )

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        self.calls.append(f"alter {path.name}")
        state = self.tables[path]
        props = {k: v for k, v in state.properties.items() if k not in unset} | dict(set_)
        self.tables[path] = replace(state, version=state.version + 1, properties=props)

    def drop(self, path: Path) -> None:
        self.calls.append(f"drop {path.name}")
        del self.tables[path]


@dataclass
class MemTopics:
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    unreachable: bool = False
    calls: list[str] = field(default_factory=list)

    def _check(self, log: LogStoreSpec) -> None:
        if self.unreachable:
            raise BrokerError(f"cannot reach Kafka at {log.address} within 1s")

    def describe(self, log: LogStoreSpec) -> TopicInfo | None:
        self._check(log)
        return self.topics.get(log.topic)

    def create(
        self, log: LogStoreSpec, partitions: int, replication: int, configs: Mapping[str, str]
    ) -> None:
        self._check(log)
        self.calls.append(f"create {log.topic}")
        self.topics[log.topic] = TopicInfo(log.topic, partitions, replication, dict(configs))

    def add_partitions(self, log: LogStoreSpec, total: int) -> None:
        self._check(log)
        self.calls.append(f"add-partitions {log.topic} {total}")
        self.topics[log.topic] = replace(self.topics[log.topic], partitions=total)

    def alter_configs(
        self, log: LogStoreSpec, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None:
        self._check(log)
        self.calls.append(f"alter-configs {log.topic}")
        info = self.topics[log.topic]
        configs = {k: v for k, v in info.configs.items() if k not in delete} | dict(set_)
        self.topics[log.topic] = replace(info, configs=configs)

    def delete(self, log: LogStoreSpec) -> None:
        self._check(log)
        self.calls.append(f"delete {log.topic}")
        self.topics.pop(log.topic, None)

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        self._check(log)
        info = self.topics[log.topic]
        return self.offsets.get(log.topic, dict.fromkeys(range(info.partitions), 0))
