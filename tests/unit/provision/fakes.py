"""In-memory DeltaStore / TopicStore for unit tests of the provisioning logic (no JVM, no broker).
The same logic runs against delta-spark and a real broker in tests/integration/provision.

Every operation can be made to fail (``fail["alter"] = error``; validate-only calls are named
``"validate <op>"``), and the topic store behaves as a broker does where the service relies on it:
creating an existing topic fails, partitions can only grow, ``describe`` returns only the configs
set on the topic (the broker's non-default, dynamic configs), validate-only calls change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from logstore_cli.catalog.warehouse import DeltaState, TableRef
from logstore_cli.errors import BrokerError, TopicExistsError, TopicNotFoundError, TopicSpecError
from logstore_cli.kafka.types import TopicInfo
from logstore_cli.model import ColumnSpec, LogStoreSpec, TableSpec


@dataclass
class MemDelta:
    states: dict[Path, DeltaState] = field(default_factory=dict)
    fail: dict[str, BaseException] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def _op(self, op: str, path: Path) -> None:
        self.calls.append(f"{op} {path.name}")
        if op in self.fail:
            raise self.fail[op]

    def read(self, path: Path) -> DeltaState | None:
        if "read" in self.fail:
            raise self.fail["read"]
        return self.states.get(path)

    def tables(self, warehouse: Path) -> list[tuple[TableRef, DeltaState]]:
        return [
            (TableRef(p.parent.name, p.name, p), s)
            for p, s in sorted(self.states.items())
            if p.parent.parent == warehouse
        ]

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None:
        self._op("create", path)
        schema = {
            "type": "struct",
            "fields": [
                {"name": c.name, "type": c.type, "nullable": c.nullable, "metadata": {}}
                for c in spec.columns
            ],
        }
        self.states[path] = DeltaState(
            path, 0, 0, schema, dict(properties), tuple(spec.partitioned_by), spec.comment
        )

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None:
        self._op("alter", path)
        state = self.states[path]
        props = {k: v for k, v in state.properties.items() if k not in unset} | dict(set_)
        self.states[path] = state._replace(version=state.version + 1, properties=props)

    def add_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        self._op("add_columns", path)
        state = self.states[path]
        fields = [
            {"name": c.name, "type": c.type, "nullable": c.nullable, "metadata": {}}
            for c in columns
        ]
        schema = {**state.schema, "fields": [*state.schema["fields"], *fields]}
        self.states[path] = state._replace(version=state.version + 1, schema=schema)

    def widen_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        self._op("widen_columns", path)
        state = self.states[path]
        types = {c.name: c.type for c in columns}
        fields = [{**f, "type": types.get(f["name"], f["type"])} for f in state.schema["fields"]]
        schema = {**state.schema, "fields": fields}
        self.states[path] = state._replace(version=state.version + 1, schema=schema)

    def drop(self, path: Path) -> None:
        self._op("drop", path)
        del self.states[path]


@dataclass
class MemTopics:
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)  # end offsets
    starts: dict[str, dict[int, int]] = field(default_factory=dict)  # start offsets
    positions: dict[str, dict[int, int]] = field(default_factory=dict)  # adoption positions
    unreachable: bool = False
    fail: dict[str, BaseException] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    default_replication: int = 1  # the cluster's default.replication.factor

    def _op(
        self, op: str, log: LogStoreSpec, *, validate_only: bool = False, note: str = ""
    ) -> None:
        if self.unreachable:
            raise BrokerError(f"cannot reach Kafka at {log.address} within 1s")
        name = f"validate {op}" if validate_only else op
        self.calls.append(f"{name} {log.topic}{note}")
        if name in self.fail:
            raise self.fail[name]

    def _info(self, log: LogStoreSpec) -> TopicInfo:
        if log.topic not in self.topics:
            raise TopicNotFoundError(f"Kafka topic '{log.topic}' does not exist")
        return self.topics[log.topic]

    def describe(self, log: LogStoreSpec) -> TopicInfo | None:
        if self.unreachable:
            raise BrokerError(f"cannot reach Kafka at {log.address} within 1s")
        if "describe" in self.fail:
            raise self.fail["describe"]
        return self.topics.get(log.topic)

    def create(
        self,
        log: LogStoreSpec,
        partitions: int,
        replication: int | None,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None:
        self._op("create", log, validate_only=validate_only)
        if log.topic in self.topics:
            raise TopicExistsError(f"Kafka topic '{log.topic}' already exists")
        if not validate_only:
            actual = self.default_replication if replication is None else replication
            self.topics[log.topic] = TopicInfo(log.topic, partitions, actual, dict(configs))

    def add_partitions(self, log: LogStoreSpec, total: int, *, validate_only: bool = False) -> None:
        self._op("add-partitions", log, validate_only=validate_only, note=f" {total}")
        info = self._info(log)
        if total <= info.partitions:
            raise TopicSpecError(
                f"cannot add partitions to '{log.topic}': it has {info.partitions} already"
            )
        if not validate_only:
            self.topics[log.topic] = info._replace(partitions=total)

    def alter_configs(
        self,
        log: LogStoreSpec,
        set_: Mapping[str, str],
        delete: Sequence[str],
        *,
        validate_only: bool = False,
    ) -> None:
        self._op("alter-configs", log, validate_only=validate_only)
        info = self._info(log)
        if not validate_only:
            configs = {k: v for k, v in info.configs.items() if k not in delete} | dict(set_)
            self.topics[log.topic] = info._replace(configs=configs)

    def delete(self, log: LogStoreSpec) -> None:
        self._op("delete", log)
        self.topics.pop(log.topic, None)

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        if self.unreachable:
            raise BrokerError(f"cannot reach Kafka at {log.address} within 1s")
        info = self._info(log)
        return self.offsets.get(log.topic, dict.fromkeys(range(info.partitions), 0))

    def start_offsets(self, log: LogStoreSpec) -> dict[int, int]:
        info = self._info(log)
        return self.starts.get(log.topic, dict.fromkeys(range(info.partitions), 0))

    def adoption_positions(self, log: LogStoreSpec) -> dict[int, int]:
        """``positions`` when given (a Pulsar store's), else the end offsets (Kafka's)."""
        return self.positions.get(log.topic) or self.end_offsets(log)
