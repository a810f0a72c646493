"""``Lake`` of the HDFS ingest suite (``test_hdfs_ingest_cli.py`` imports it from here): the CLI run
against ``<hdfs_dir>/wh`` with nothing but the warehouse set, its files relative to the warehouse.
The table commands' tests on HDFS are ``test_remote_tables_cli.py``'s ``[hdfs]`` cases."""

from __future__ import annotations

from pathlib import Path

from logstore_cli.storage.hdfs_server import HdfsServerInfo
from tests.e2e.remote_lake import RemoteLake


class Lake(RemoteLake):
    def __init__(self, server: HdfsServerInfo, hdfs_dir: str, cwd: Path) -> None:
        super().__init__(f"{hdfs_dir}/wh", cwd, namenode=server.uri)
        self.root = self.path  # the warehouse's path on HDFS, as the ingest suite reads it
