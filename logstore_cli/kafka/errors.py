"""Kafka errors -> domain errors (``logstore_cli.errors``), for every confluent-kafka client.

A client (the topic admin; the jobs' producer and consumer) owns one :class:`KafkaErrorMapper`. It
takes librdkafka's client errors (``error_cb``), knows the bootstrap servers, the principal the
broker sees and the secret values to redact, and turns a ``KafkaException`` into an error that says
what failed, where and how to fix it: unreachable brokers, rejected credentials, missing ACLs
(naming the principal, with a ``kafka-acls.sh`` line), existing or missing topics, settings the
broker refuses, policies, time-outs. Nothing it returns contains a secret value.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException

from logstore_cli.errors import (
    BrokerError,
    ConfigError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    LogstoreError,
    TopicExistsError,
    TopicNotFoundError,
    TopicSpecError,
)
from logstore_cli.kafka.client_config import (
    LIBRDKAFKA_DOCS,
    bootstrap_addresses,
    client_principal,
)
from logstore_cli.model import is_secret_key

#: librdkafka's own log lines (connection refused, authentication failures, retries) go to this
#: logger, never to stderr. It has a NullHandler and does not propagate: our errors already carry the
#: line that matters. Attach a handler to it to see them (e.g. for a ``--debug`` flag).
LIBRDKAFKA_LOGGER: Final = "logstore_cli.kafka.librdkafka"

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_TOPIC_CONFIG_DOCS = "https://kafka.apache.org/documentation/#topicconfigs"
_FAMILIES: Final = {"v4": socket.AF_INET, "v6": socket.AF_INET6}


@dataclass(frozen=True)
class Operation:
    """One request of a client call, for messages: ``verb`` in prose ("create", "write to"),
    ``acl`` the ACL operation it needs on ``topic``, ``also`` the ACL operations the rest of the call
    needs there (so one error names them all)."""

    verb: str
    acl: str
    topic: str
    also: tuple[str, ...] = ()


_UNREACHABLE: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.BROKER_NOT_AVAILABLE,
    }
)
# A connection attempt (or connection) that failed: one per broker address tried.
_CONNECT_FAILED: Final = frozenset({KafkaError._TRANSPORT, KafkaError._RESOLVE})
# librdkafka: "127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
_CONNECT_TO: Final = re.compile(r"Connect to (?:ipv[46]#)?(\S+?) failed")
_AUTHENTICATION: Final = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
)
_AUTHORIZATION: Final = frozenset(
    {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
)


@dataclass
class _CallErrors:
    """What the client reported during the current call."""

    login_error: KafkaError | None = None  # rejected credentials or a failed TLS handshake
    connect_failures: int = 0  # failed connections or connection attempts (one per address tried)
    last_connect_error: str | None = None
    failed_addresses: set[str] = field(default_factory=set)  # host:port of the failed connections
    resolve_failed: bool = False
    all_down: bool = False


class KafkaErrorMapper:
    """What one client needs to turn Kafka's errors into domain errors.

    Give librdkafka :meth:`callbacks`; call :meth:`begin` at the start of each call, :meth:`reached`
    when a response arrives, :meth:`fatal` while waiting (an error that retrying within the call
    cannot fix), and :meth:`map` / :meth:`timed_out` when a request fails.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        timeout_s: float,
        principal: str = "User:ANONYMOUS",
        secrets: Iterable[str] = (),
        address_family: str = "any",
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self.principal = principal
        self._secrets = _secret_patterns(secrets)
        self._family = _FAMILIES.get(address_family.lower(), socket.AF_UNSPEC)
        self._addresses: int | None = None  # bootstrap addresses librdkafka tries, resolved lazily
        self._brokers_down = False
        self._call = _CallErrors()

    @classmethod
    def for_config(
        cls,
        conf: Mapping[str, Any],
        client_properties: Mapping[str, str] | None = None,
        *,
        timeout_s: float,
    ) -> KafkaErrorMapper:
        """The mapper of a client built from ``conf`` (:func:`librdkafka_config`'s result); the
        secrets to redact are the secret values of ``conf`` and of the properties it came from."""
        pairs = [*(client_properties or {}).items(), *conf.items()]
        return cls(
            str(conf["bootstrap.servers"]),
            timeout_s=timeout_s,
            principal=client_principal(conf),
            secrets=[str(v) for k, v in pairs if is_secret_key(k) and v],
            address_family=str(conf.get("broker.address.family", "any")),
        )

    # -- client errors (error_cb) ------------------------------------------------------------------

    def callbacks(self) -> dict[str, Any]:
        """The librdkafka settings that route the client's errors here and its log lines to
        :data:`LIBRDKAFKA_LOGGER`."""
        return {"logger": librdkafka_logger(), "error_cb": self.on_error}

    def on_error(self, err: KafkaError) -> None:
        """librdkafka's ``error_cb``; called from the client's ``poll()``."""
        code, call = err.code(), self._call
        if code in _AUTHENTICATION or code == KafkaError._SSL:
            call.login_error = call.login_error or err
        elif code in _CONNECT_FAILED:
            call.connect_failures += 1
            call.last_connect_error = err.str()
            found = _CONNECT_TO.search(err.str())
            if found:
                call.failed_addresses.add(found.group(1))
            call.resolve_failed = call.resolve_failed or code == KafkaError._RESOLVE
        elif code == KafkaError._ALL_BROKERS_DOWN:
            call.all_down = self._brokers_down = True

    def begin(self, *, new_client: bool = False) -> None:
        """Start a call: forget the client errors reported before it (``new_client``: and the
        state of the handle it replaces)."""
        if new_client:
            self._brokers_down = False
        self._call = _CallErrors()

    def reached(self) -> None:
        """A broker answered: the cluster is reachable again."""
        self._brokers_down = False

    @property
    def brokers_down(self) -> bool:
        """librdkafka reported every broker down, and none has answered since. It reports that once
        per outage (older versions) or about once a second: a client that wants a prompt verdict
        on its next call starts it with a fresh handle."""
        return self._brokers_down

    def fatal(self) -> BrokerError | None:
        """The error to raise now, because waiting longer cannot help: the broker rejected the
        credentials, the TLS handshake failed, or every bootstrap address refused the connection (or
        did not resolve, or timed out its connection set-up)."""
        login = self._login_failure()
        if login is not None:
            return login
        if self._call.all_down and self._call.connect_failures >= self._address_count():
            return self.unreachable(at_once=True)
        return None

    # -- errors ------------------------------------------------------------------------------------

    def map(
        self, exc: KafkaException, op: Operation, *, replication: int | None = None
    ) -> LogstoreError:
        """The domain error for a request's ``KafkaException``."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        code = err.code() if err is not None else KafkaError.UNKNOWN
        said = self.redact(reason(exc))
        topic = f"Kafka topic '{op.topic}'"
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return TopicExistsError(
                f"{topic} already exists at {self.bootstrap_servers}",
                hint="use the existing topic, pick another topic name, or delete it first if "
                "nothing needs it",
            )
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return self.not_found(op)
        if code in _AUTHORIZATION:
            return self.denied(op, cluster=code == KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        if code in _AUTHENTICATION:
            return self.rejected(said)
        if code in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_REPLICA_ASSIGNMENT):
            what = f"replication {replication}" if replication is not None else "that replication"
            return self.spec_error(
                op, what, said,
                hint="set 'log.system.replication' to at most the number of brokers "
                "(1 for the local development broker)",
            )  # fmt: skip
        if code == KafkaError.INVALID_CONFIG:
            return self.spec_error(
                op, "its topic configs", said,
                hint=f"fix or remove that topic setting in the table's properties ({_TOPIC_CONFIG_DOCS})",
            )  # fmt: skip
        if code == KafkaError.INVALID_PARTITIONS:
            return self.spec_error(
                op, "that partition count", said,
                hint="'log.system.partitions' must be positive; Kafka only adds partitions",
            )  # fmt: skip
        if code in (KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_REQUEST):
            return self.spec_error(op, "that request", said)
        if code == KafkaError.POLICY_VIOLATION:
            return BrokerError(
                f"the cluster's topic policy refused to {op.verb} {topic}: {said}",
                hint="change the table's log settings to what the policy allows, or ask the "
                "Kafka administrators",
            )
        if code == KafkaError.TOPIC_DELETION_DISABLED:
            return BrokerError(
                f"Kafka at {self.bootstrap_servers} does not allow deleting topics ({topic})",
                hint="the brokers run with delete.topic.enable=false; ask their administrators",
            )
        if code in _UNREACHABLE:
            return self.timed_out(op, detail=said)
        name = err.name() if err is not None else type(exc).__name__
        return BrokerError(
            f"Kafka at {self.bootstrap_servers} failed to {op.verb} {topic}: {name}: {said}",
            hint="retry; if it persists, check the broker's log",
        )

    def denied(self, op: Operation, *, cluster: bool) -> KafkaAuthorizationError:
        on = "the cluster" if cluster else f"topic '{op.topic}'"
        needed = [op.acl, *op.also]
        why = f" (to {op.verb} topic '{op.topic}')" if cluster else ""
        if op.also:
            why += f"; this call also needs {' and '.join(op.also)}"
        example = ""
        if self.principal.startswith("User:"):
            resource = "--cluster" if cluster else f"--topic '{op.topic}'"
            # kafka-acls.sh spells DESCRIBE_CONFIGS as DescribeConfigs
            operations = " ".join(
                "--operation " + "".join(word.title() for word in acl.split("_")) for acl in needed
            )
            example = (
                f" (kafka-acls.sh --bootstrap-server {self.bootstrap_servers} --add "
                f"--allow-principal {self.principal} {operations} {resource})"
            )
        return KafkaAuthorizationError(
            f"Kafka at {self.bootstrap_servers} denied {self.principal} {op.acl} on {on}{why}",
            hint=f"grant {' and '.join(needed)} on {on} to {self.principal}{example}, or check "
            "properties.sasl.* / security.protocol if the client should authenticate as another "
            "principal",
        )

    def rejected(self, said: str) -> KafkaAuthenticationError:
        return KafkaAuthenticationError(
            f"Kafka at {self.bootstrap_servers} rejected the client's credentials "
            f"({self.principal})",
            hint="check properties.sasl.mechanism, sasl.username and sasl.password (or "
            "sasl.jaas.config) and security.protocol",
            detail=said,
        )

    def unreachable(self, detail: str | None = None, *, at_once: bool = False) -> BrokerError:
        """``at_once``: every bootstrap address failed its connection, so nothing was waited for."""
        last = self._call.last_connect_error or detail
        when = "" if at_once else f" within {self.timeout_s:g}s"
        return BrokerError(
            f"cannot reach Kafka at {self.bootstrap_servers}{when}",
            hint="check the bootstrap servers and that the brokers are up ('logstore broker "
            "start' runs a local one); behind TLS/SASL set security.protocol and sasl.*/ssl.*",
            detail=self.redact(last) if last else None,
        )

    def timed_out(self, op: Operation, detail: str | None = None) -> BrokerError:
        """The error for a request that got no answer in time (serve the client's callbacks first:
        the reason may be among them)."""
        login = self._login_failure()
        if login is not None:
            return login
        call = self._call
        if call.all_down or self._brokers_down:
            return self.unreachable(detail)
        if call.failed_addresses and len(call.failed_addresses) < self._address_count():
            # some brokers answered: a node of the cluster is down and its partitions' new leaders
            # were not known in time; "cannot reach Kafka" would send the user to the wrong place
            down = ", ".join(sorted(call.failed_addresses))
            return BrokerError(
                f"Kafka at {self.bootstrap_servers} did not {op.verb} topic '{op.topic}' within "
                f"{self.timeout_s:g}s: {down} refused connections, the other brokers answered",
                hint="a broker of the cluster is down and its partitions had no new leader in "
                "time: restart it or wait for the cluster to elect leaders, then run the same "
                "command again (an ingest resumes its epoch; nothing is lost)",
                detail=self.redact(call.last_connect_error or detail or "") or None,
            )
        if call.connect_failures:
            return self.unreachable(detail)
        return BrokerError(
            f"Kafka at {self.bootstrap_servers} did not {op.verb} topic '{op.topic}' within "
            f"{self.timeout_s:g}s",
            hint="the cluster is slow or unhealthy: retry, raise the Kafka time-out, or check "
            "the brokers",
            detail=self.redact(detail) if detail else None,
        )

    def not_found(self, op: Operation) -> TopicNotFoundError:
        return TopicNotFoundError(
            f"Kafka topic '{op.topic}' does not exist at {self.bootstrap_servers}",
            hint="check the table's topic name and bootstrap servers, or create it (create-table)",
        )

    def spec_error(
        self, op: Operation, what: str, said: str, *, hint: str | None = None
    ) -> TopicSpecError:
        return TopicSpecError(
            f"cannot {op.verb} Kafka topic '{op.topic}' with {what}: {said}",
            hint=hint
            or "fix the table's log settings (topic name, 'log.system.partitions', "
            "'log.system.replication', topic configs)",
        )

    def invalid_properties(self, exc: BaseException) -> ConfigError:
        """The error for client properties librdkafka refused when the client was built."""
        return ConfigError(
            f"the Kafka client properties are invalid: {self.redact(reason(exc))}",
            hint="properties.* / kafka.* keys are passed to librdkafka (confluent-kafka); "
            f"remove the key or use librdkafka's name and values for it ({LIBRDKAFKA_DOCS})",
        )

    def redact(self, text: str) -> str:
        """``text`` with every secret value of the client's configuration replaced by ``***``."""
        for secret in self._secrets:
            text = secret.sub("***", text)
        return text

    # -- internals ---------------------------------------------------------------------------------

    def _login_failure(self) -> BrokerError | None:
        err = self._call.login_error
        if err is None:
            return None
        if err.code() in _AUTHENTICATION:
            return self.rejected(self.redact(err.str()))
        return BrokerError(
            f"the TLS handshake with Kafka at {self.bootstrap_servers} failed",
            hint="check security.protocol and ssl.* (ssl.ca.location for the broker's CA, "
            "ssl.endpoint.identification.algorithm)",
            detail=self.redact(err.str()),
        )

    def _address_count(self) -> int:
        """How many addresses the bootstrap servers stand for. librdkafka reports all brokers down
        after the first failed address of each server, then tries a server's other addresses (e.g.
        ``localhost`` as ::1, then 127.0.0.1); only when each has failed is the verdict final."""
        if self._addresses is None:
            addresses = bootstrap_addresses(self.bootstrap_servers)
            total = sum(self._resolved(host, port) for host, port in addresses)
            self._addresses = max(total, 1)
        return self._addresses

    def _resolved(self, host: str, port: int) -> int:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return 1
        if (
            self._call.resolve_failed
        ):  # the resolver just failed librdkafka: do not wait on it again
            return 1
        try:
            infos = socket.getaddrinfo(host, port, self._family, socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return 1
        return max(len({info[4] for info in infos}), 1)


def check_topic_name(op: Operation) -> None:
    """Raise :class:`TopicSpecError` unless ``op.topic`` is a valid Kafka topic name."""
    name = op.topic
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise TopicSpecError(
            f"cannot {op.verb} Kafka topic {name!r}: not a valid topic name",
            hint="topic names are 1-249 characters of ASCII letters, digits, '.', '_' and '-'",
        )


def reason(exc: BaseException | None) -> str:
    """The broker's or librdkafka's own words for an exception."""
    if exc is None:
        return ""
    arg = exc.args[0] if exc.args else exc
    if isinstance(arg, KafkaError):
        return arg.str()
    return str(arg)


def librdkafka_logger() -> logging.Logger:
    """:data:`LIBRDKAFKA_LOGGER`, silent unless someone attaches a handler."""
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _secret_patterns(values: Iterable[str]) -> list[re.Pattern[str]]:
    """Patterns matching every secret value given, longest first (short ones only as whole words)."""
    patterns = []
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        escaped = re.escape(value)
        patterns.append(re.compile(escaped if len(value) >= 6 else rf"(?<![\w]){escaped}(?![\w])"))
    return patterns
