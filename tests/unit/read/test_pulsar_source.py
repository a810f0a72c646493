"""The Pulsar log read's error mapping (issue 23): each pulsar-client failure becomes the domain
error the CLI prints as what failed, where, and what to do (exit 1), never a traceback."""

from __future__ import annotations

import pytest

from logstore_cli.errors import (
    EXIT_FAILURE,
    BrokerError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    LogstoreError,
    TopicNotFoundError,
)
from logstore_cli.read.consumer import SourceConf
from logstore_cli.read.pulsar_source import client_error

pytestmark = pytest.mark.unit

CONF = SourceConf("pulsar://10.0.0.7:6650", {}, "orders", 7.0, system="pulsar",
                  admin_url="http://10.0.0.7:8080")  # fmt: skip


def _cases() -> list[tuple[Exception, type[LogstoreError], str]]:
    import pulsar

    return [
        (pulsar.TopicNotFound("x"), TopicNotFoundError, "the Pulsar topic orders does not exist"),
        (pulsar.Timeout("x"), BrokerError, "did not answer within 7s"),
        (pulsar.ConnectError("x"), BrokerError, "did not answer within 7s"),
        (pulsar.LookupError("x"), BrokerError, "did not answer within 7s"),
        (pulsar.AuthenticationError("x"), KafkaAuthenticationError, "refused the credentials"),
        (pulsar.AuthorizationError("x"), KafkaAuthorizationError, "refused to let this client"),
        (pulsar.ReadError("disk"), BrokerError, "failed to read partition 2: disk"),
    ]


@pytest.mark.parametrize("index", range(7))
def test_client_errors_become_domain_errors_naming_pulsar_and_the_work(index: int) -> None:
    exc, kind, words = _cases()[index]
    error = client_error(exc, "read partition 2", CONF)
    assert type(error) is kind and error.exit_code == EXIT_FAILURE
    assert words in error.message
    assert "pulsar://10.0.0.7:6650" in error.message
    if kind is BrokerError and "within" in words:
        assert "logstore pulsar status" in (error.hint or "")  # how to check it is running


def test_a_source_conf_shows_pulsar_without_client_property_values() -> None:
    conf = SourceConf("pulsar://h:6650", {"sasl.password": "s3cret"}, "t", system="pulsar",
                      admin_url="http://h:8080")  # fmt: skip
    shown = repr(conf)
    assert "system='pulsar'" in shown and "http://h:8080" in shown and "s3cret" not in shown
