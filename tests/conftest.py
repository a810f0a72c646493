"""Shared fixtures: a real Kafka broker and a real Spark session with Delta, started once per run.

Tests under ``tests/unit`` are marked ``unit`` and need neither; everything else is ``integration``.
When the broker or Spark cannot start, the integration tests fail (never skip): a green run must mean
the real parts were exercised.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# A second broker with SASL users and ACLs on, shared by the admin and CLI authorization tests.
from tests.authz_broker import authz_broker  # noqa: F401

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if TESTS / "unit" in path.parents:
            item.add_marker(pytest.mark.unit)
        else:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a real broker: ``LOGSTORE_TEST_BOOTSTRAP``, else one started here."""
    given = os.environ.get("LOGSTORE_TEST_BOOTSTRAP")
    if given:
        yield given
        return
    from logstore_cli.errors import LogstoreError
    from logstore_cli.kafka import local_broker

    state_dir = tmp_path_factory.mktemp("kafka-state")
    try:
        info = local_broker.start(state_dir)
    except LogstoreError as exc:
        pytest.fail(f"could not start the Kafka broker: {exc}\n{exc.detail or ''}", pytrace=False)
    try:
        yield info.bootstrap
    finally:
        local_broker.stop(state_dir)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.jobs.spark import SparkSettings, build_session

    log_dir = tmp_path_factory.mktemp("spark-logs")
    try:
        session = build_session(
            SparkSettings(master="local[2]", app_name="logstore-tests", log_dir=log_dir)
        )
    except LogstoreError as exc:
        pytest.fail(f"could not start Spark: {exc}\n{exc.detail or ''}", pytrace=False)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
