"""A real S3 server (versitygw) for the whole run, started once on first use; a bucket per test.

Tests that use it are marked ``s3``. The binary is built into the cache by the first run that needs
it (``scripts/s3-server.sh build`` does the same ahead of time); a build or start that fails fails
the tests (never skips them): a green run must mean the real server was exercised.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from logstore_cli.storage.s3_server import S3ServerInfo


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3ServerInfo]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.storage import s3_server as server

    state_dir = tmp_path_factory.mktemp("s3-server")
    began = time.monotonic()
    try:
        info = server.start(state_dir)
    except LogstoreError as exc:
        pytest.fail(f"could not start the S3 server: {exc}\n{exc.detail or ''}", pytrace=False)
    print(f"\nS3 server up in {time.monotonic() - began:.2f} s at {info.endpoint}")
    try:
        yield info
    finally:
        server.stop(state_dir)


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
