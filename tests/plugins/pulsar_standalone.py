"""A real Apache Pulsar standalone for the whole run, started once on first use (``pulsar``).

Tests that use it are marked ``pulsar``. The first run resolves Pulsar's jars from Maven Central
into the jar cache (``logstore pulsar start`` does the same); a start that fails fails the tests
(never skips them): a green run must mean the real server was exercised.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from logstore_cli.pulsar.local_standalone import PulsarInfo
from tests.plugins.scheduling import stop_after_last_user


@pytest.fixture(scope="session")
def pulsar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarInfo]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.pulsar import local_standalone

    state_dir = tmp_path_factory.mktemp("pulsar-state")
    began = time.monotonic()
    try:
        info = local_standalone.start(state_dir)
    except LogstoreError as exc:
        pytest.fail(f"could not start Pulsar: {exc}\n{exc.detail or ''}", pytrace=False)
    print(f"\nPulsar standalone up in {time.monotonic() - began:.1f} s at {info.service_url}")
    stop = stop_after_last_user("pulsar", lambda: local_standalone.stop(state_dir))
    try:
        yield info
    finally:
        stop()


@pytest.fixture
def pulsar_topic() -> str:
    """A fresh topic name (in public/default) for this test."""
    return f"t-{uuid.uuid4().hex[:12]}"
