"""A second real broker with authentication and authorization on, for the admin layer's ACL errors.

It has the usual anonymous ``PLAINTEXT`` listener (controller and inter-broker traffic, principal
``User:ANONYMOUS``, a super user) plus a ``SASL_PLAINTEXT`` client listener with PLAIN users
``admin`` (a super user) and ``alice`` (no ACLs: every topic operation is denied to her).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import pytest

from tests.plugins.scheduling import stop_after_last_user

AUTHZ_START_TIMEOUT_S = 90.0  # the whole fixture: format, launch, broker and SASL listener answer


@dataclass(frozen=True)
class AuthzBroker:
    bootstrap: str  # PLAINTEXT: User:ANONYMOUS, a super user
    sasl_bootstrap: str  # SASL_PLAINTEXT with the PLAIN users below
    passwords: Mapping[str, str]
    start_s: float  # how long the fixture took to get it answering

    def client_properties(self, user: str, *, password: str | None = None) -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": self.passwords[user] if password is None else password,
        }


@pytest.fixture(scope="session")
def authz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthzBroker]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.kafka import local_broker
    from logstore_cli.kafka.admin import KafkaAdmin

    state_dir = tmp_path_factory.mktemp("kafka-authz-state")
    # Random passwords, so that "the password never appears in an error" means something.
    passwords = {user: f"{user}-{secrets.token_hex(12)}" for user in ("admin", "alice")}
    started = time.monotonic()
    deadline = started + AUTHZ_START_TIMEOUT_S
    try:
        info = local_broker.start(
            state_dir,
            timeout_s=AUTHZ_START_TIMEOUT_S,
            sasl_plain_users=passwords,
            extra_properties={
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": "User:ANONYMOUS;User:admin",
            },
        )
    except LogstoreError as exc:
        pytest.fail(f"could not start the authz broker: {exc}\n{exc.detail or ''}", pytrace=False)
    assert info.sasl_bootstrap is not None
    broker = AuthzBroker(info.bootstrap, info.sasl_bootstrap, passwords, 0.0)
    try:
        # The SASL listener answers and admin logs in: ping() polls until it does (bounded).
        remaining = max(deadline - time.monotonic(), 1.0)
        with KafkaAdmin(
            broker.sasl_bootstrap, broker.client_properties("admin"), timeout_s=remaining
        ) as admin:
            admin.ping()
    except LogstoreError as exc:
        local_broker.stop(state_dir)
        pytest.fail(f"the authz broker's SASL listener did not answer: {exc}", pytrace=False)
    stop = stop_after_last_user("authz_broker", lambda: local_broker.stop(state_dir))
    try:
        yield replace(broker, start_s=time.monotonic() - started)
    finally:
        stop()
