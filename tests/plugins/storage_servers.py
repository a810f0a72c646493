"""The real S3 server (versitygw) and HDFS (a MiniDFSCluster) of the tests, each started once per
run on first use (``s3_server``, ``hdfs_server``) and stopped after the last test using it
(``scheduling.stop_after_last_user``); a new bucket (``s3_bucket``) or directory (``hdfs_dir``)
per test.

Tests that use them are marked ``s3`` or ``hdfs``. The S3 binary is built into the cache by the
first run that needs it (``scripts/s3-server.sh build`` does the same ahead of time); HDFS's
minicluster jars come from Maven Central into the jar cache the first time (``scripts/hdfs-server.sh
start`` does the same). A build or start that fails fails the tests (never skips them): a green run
must mean the real server was exercised.

One suite for both servers: ``@pytest.mark.parametrize("remote_root", REMOTE, indirect=True)``
(or ``[S3_CASE]``, ``[HDFS_CASE]``) gives its tests a fresh root on each server (``remote_root``),
with the marks of each (``-m s3``, ``-m hdfs``; ``scheduling`` groups each case with its server's
other tests by them). ``tests/plugins/backends.py``'s ``backend`` is a warehouse on local disk,
S3 and HDFS for the job tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from logstore_cli.storage.hdfs_server import HdfsServerInfo
from logstore_cli.storage.s3_server import S3ServerInfo
from tests.plugins.scheduling import stop_after_last_user

Info = TypeVar("Info")

S3_CASE = pytest.param("s3", marks=pytest.mark.s3, id="s3")
HDFS_CASE = pytest.param("hdfs", marks=[pytest.mark.integration, pytest.mark.hdfs], id="hdfs")
REMOTE = [S3_CASE, HDFS_CASE]


def _serve(
    tmp_path_factory: pytest.TempPathFactory,
    fixture: str,
    start: Callable[[Path], Info],
    stop: Callable[[Path], object],
    address: Callable[[Info], str],
) -> Iterator[Info]:
    """Start a server in a private state dir, say where and how fast, stop it after its last
    user (or at the session's end, whichever comes first)."""
    from logstore_cli.errors import LogstoreError

    state_dir = tmp_path_factory.mktemp(fixture.replace("_", "-"))
    began = time.monotonic()
    try:
        info = start(state_dir)
    except LogstoreError as exc:
        pytest.fail(f"could not start {fixture}: {exc}\n{exc.detail or ''}", pytrace=False)
    print(f"\n{fixture} up in {time.monotonic() - began:.2f} s at {address(info)}")
    stopper = stop_after_last_user(fixture, lambda: stop(state_dir))
    try:
        yield info
    finally:
        stopper()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3ServerInfo]:
    from logstore_cli.storage import s3_server as server

    yield from _serve(
        tmp_path_factory, "s3_server", server.start, server.stop, lambda i: i.endpoint
    )


@pytest.fixture(scope="session")
def hdfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsServerInfo]:
    from logstore_cli.storage import hdfs_server as server

    yield from _serve(tmp_path_factory, "hdfs_server", server.start, server.stop, lambda i: i.uri)


@pytest.fixture
def s3_env(s3_server: S3ServerInfo, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The standard AWS variables of the server, set for this test (and its subprocesses)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def s3_bucket(s3_env: dict[str, str]) -> str:
    """A new, empty bucket for this test."""
    from logstore_cli.storage.s3 import S3Settings, make_client

    name = f"t-{uuid.uuid4().hex[:20]}"
    client: Any = make_client(S3Settings.from_env(s3_env))
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def hdfs_dir(hdfs_server: HdfsServerInfo) -> str:
    """A fresh directory for this test: ``hdfs://127.0.0.1:PORT/t-<random>``."""
    return f"{hdfs_server.uri}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def remote_root(request: pytest.FixtureRequest) -> str:
    """A fresh root on the parameter's server: ``s3://<new bucket>`` (its ``AWS_*`` set, as
    ``s3_env`` does) or ``hdfs://127.0.0.1:PORT/t-<random>``."""
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}"
    root: str = request.getfixturevalue("hdfs_dir")
    return root
