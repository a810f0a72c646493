"""A real HDFS (MiniDFSCluster) for the whole run, started once on first use (``hdfs_server``).

Tests that use it are marked ``hdfs``. The first run resolves Hadoop's minicluster jars from Maven
Central into the jar cache (``scripts/hdfs-server.sh start`` does the same); a start that fails
fails the tests (never skips them): a green run must mean the real NameNode was exercised.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from logstore_cli.storage.hdfs_server import HdfsServerInfo
from tests.plugins.scheduling import stop_after_last_user


@pytest.fixture(scope="session")
def hdfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsServerInfo]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.storage import hdfs_server as server

    state_dir = tmp_path_factory.mktemp("hdfs-server")
    began = time.monotonic()
    try:
        info = server.start(state_dir)
    except LogstoreError as exc:
        pytest.fail(f"could not start HDFS: {exc}\n{exc.detail or ''}", pytrace=False)
    print(f"\nHDFS up in {time.monotonic() - began:.1f} s at {info.uri}")
    stop = stop_after_last_user("hdfs_server", lambda: server.stop(state_dir))
    try:
        yield info
    finally:
        stop()


@pytest.fixture
def hdfs_dir(hdfs_server: HdfsServerInfo) -> str:
    """A fresh directory for this test: ``hdfs://127.0.0.1:PORT/t-<random>``."""
    return f"{hdfs_server.uri}/t-{uuid.uuid4().hex[:12]}"
