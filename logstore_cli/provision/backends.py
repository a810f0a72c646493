"""The two stores as provisioning sees them. Protocols, so the service's logic (ordering, rollback)
is unit-tested with in-memory stores and integration-tested with the real ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from logstore_cli.catalog.warehouse import DeltaState
from logstore_cli.kafka.admin import TopicInfo
from logstore_cli.model import LogStoreSpec, TableSpec


class DeltaStore(Protocol):
    def read(self, path: Path) -> DeltaState | None: ...

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None: ...

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None: ...

    def drop(self, path: Path) -> None: ...


class TopicStore(Protocol):
    def describe(self, log: LogStoreSpec) -> TopicInfo | None: ...

    def create(
        self, log: LogStoreSpec, partitions: int, replication: int, configs: Mapping[str, str]
    ) -> None: ...

    def add_partitions(self, log: LogStoreSpec, total: int) -> None: ...

    def alter_configs(
        self, log: LogStoreSpec, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None: ...

    def delete(self, log: LogStoreSpec) -> None: ...

    def end_offsets(self, log: LogStoreSpec) -> dict[int, int]: ...
