"""A real Kafka broker for the whole run: ``LOGSTORE_TEST_BOOTSTRAP``, else one started here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.plugins.isolation import SESSION_ENV

BOOTSTRAP_ENV = "LOGSTORE_TEST_BOOTSTRAP"


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a real broker: ``LOGSTORE_TEST_BOOTSTRAP``, else one started here."""
    given = SESSION_ENV.get(BOOTSTRAP_ENV)
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


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
