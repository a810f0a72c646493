"""The warehouse backends job tests run on (issue 19): a local directory, a prefix of the test S3
server (``s3://``), a directory of the test HDFS (``hdfs://``). One test body takes a ``Backend``
(the ``backend`` fixture of ``tests/plugins/backends.py``, parametrized over the three, the remote
ones marked ``s3`` / ``hdfs``; a test may pick some with ``pytest.mark.parametrize("backend",
[...], indirect=True)``) and reads the table, its lease and its Delta log through it: on a local
warehouse by path, as before; on a remote one through the storage seam (``catalog.delta_log``'s
``TableLocation``) and delta-rs with the seam's storage options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.catalog.lease import LeaseInfo, read_lease
from logstore_cli.catalog.tables import StoredTable, StoredTableOn, load_table, load_table_on
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.names import parse_table_name
from logstore_cli.storage import Storage, open_storage
from tests.deltalog import write_table, write_table_on

# The remote cases carry their server's mark: ``-m s3`` / ``-m hdfs`` select them, ``-m "not s3"``
# leaves them out, and the scheduler runs them with the other users of that server.
LOCAL = pytest.param("local", id="local")
S3 = pytest.param("s3", id="s3", marks=pytest.mark.s3)
HDFS = pytest.param("hdfs", id="hdfs", marks=pytest.mark.hdfs)
BACKENDS = [LOCAL, S3, HDFS]


@dataclass(frozen=True)
class Backend:
    """A warehouse on one backend: ``uri`` is what ``LOGSTORE_WAREHOUSE`` says (a local path, or
    an ``s3://`` / ``hdfs://`` URI; S3's credentials are in the test's environment, set by the
    ``s3_env`` fixture, which every job and CLI the test starts inherits)."""

    name: str
    uri: str
    local: Path | None = None  # the warehouse directory of the local backend
    _storage: list[Storage] = field(default_factory=list, compare=False, repr=False)

    @property
    def warehouse(self) -> Path | Storage:
        """The warehouse as the catalog takes it: a ``Path`` locally, a ``Storage`` elsewhere."""
        if self.local is not None:
            return self.local
        if not self._storage:
            self._storage.append(open_storage(self.uri))
        return self._storage[0]

    def table(self, name: str = "shop.orders") -> TableLocation:
        """Where table ``name``'s Delta log and lease are: its directory, or its ``Storage``."""
        parsed = parse_table_name(name)
        store = self.warehouse
        if isinstance(store, Path):
            return wh.table_path(store, parsed)
        return wh.table_storage(store, parsed)

    def write(self, ddl: str) -> TableLocation:
        """The Delta table of ``ddl`` without Spark and without its topic (delta-rs or the seam
        writes what ``create-table`` writes)."""
        store = self.warehouse
        return write_table(store, ddl) if isinstance(store, Path) else write_table_on(store, ddl)

    def create(self, ddl: str, bootstrap: str, topic: str, partitions: int) -> TableLocation:
        """The table of ``ddl`` (``write``) and its Kafka topic."""
        location = self.write(ddl)
        with KafkaAdmin(bootstrap, timeout_s=15) as admin:
            admin.create_topic(topic, partitions, 1, {})
        return location

    def load(self, name: str = "shop.orders") -> StoredTable | StoredTableOn:
        store = self.warehouse
        return load_table(store, name) if isinstance(store, Path) else load_table_on(store, name)

    def lease(self, name: str = "shop.orders") -> LeaseInfo | None:
        """The table's lease as the job's algorithm stores it (``flock``ed file, or conditional
        puts on the seam)."""
        table = self.table(name)
        if isinstance(table, Path):
            return read_lease(table)
        from logstore_cli.catalog.storage_lease import read_lease_on

        return read_lease_on(table)
