"""The two stores as provisioning sees them. Protocols, so the service's logic (ordering, rollback)
is unit-tested with in-memory stores and integration-tested with the real ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from logstore_cli.catalog.tables import TopicReader
from logstore_cli.catalog.warehouse import DeltaState, TableRef
from logstore_cli.model import ColumnSpec, LogStoreSpec, TableSpec


class DeltaStore(Protocol):
    def read(self, path: Path) -> DeltaState | None:
        """The committed table at ``path``; None when there is none (or only an uncommitted
        leftover of an interrupted create, which ``create`` replaces)."""
        ...

    def tables(self, warehouse: Path) -> list[tuple[TableRef, DeltaState]]:
        """Every readable committed table of the warehouse."""
        ...

    def create(self, path: Path, spec: TableSpec, properties: Mapping[str, str]) -> None: ...

    def alter(self, path: Path, set_: Mapping[str, str], unset: Sequence[str]) -> None: ...

    def add_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        """Append nullable ``columns`` to the table's schema in one commit."""
        ...

    def widen_columns(self, path: Path, columns: Sequence[ColumnSpec]) -> None:
        """Give existing ``columns`` their (wider) new types, by Delta's type widening."""
        ...

    def drop(self, path: Path) -> None: ...


class TopicStore(TopicReader, Protocol):
    def create(
        self,
        log: LogStoreSpec,
        partitions: int,
        replication: int | None,  # None: the cluster's default.replication.factor
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None: ...

    def add_partitions(
        self, log: LogStoreSpec, total: int, *, validate_only: bool = False
    ) -> None: ...

    def alter_configs(
        self,
        log: LogStoreSpec,
        set_: Mapping[str, str],
        delete: Sequence[str],
        *,
        validate_only: bool = False,
    ) -> None: ...

    def delete(self, log: LogStoreSpec) -> None: ...

    def start_offsets(self, log: LogStoreSpec) -> dict[int, int]: ...

    def adoption_positions(self, log: LogStoreSpec) -> dict[int, int]:
        """Each partition's read position after the records it holds now, which a table adopting
        the topic records (``warehouse.P_ADOPTED_TOPIC``): Kafka's end offsets; on Pulsar, where
        ``end_offsets`` counts messages, the position just after each partition's last one."""
        ...
