"""Kafka topic administration for provisioning (create-table, describe, alter-table, drop-table).

A small typed wrapper over ``confluent_kafka.admin.AdminClient`` with two promises:

* **Every call ends within its deadline** (``timeout_s``, one deadline per public call, shared by the
  requests it makes). librdkafka retries an unreachable broker forever unless told otherwise, so the
  client gets short connection/socket time-outs, every request a ``request_timeout``, and every wait
  a deadline of our own.
* **Kafka errors become domain errors** (``logstore_cli.errors``) that say what failed, where, and how
  to fix it: unreachable broker, rejected credentials, missing ACLs (naming the principal), existing
  or missing topics, and settings the broker refuses.

Client properties come from DDL (``properties.*`` / ``kafka.*``, written for Flink's Java client) and
the config file; :func:`librdkafka_config` maps them to librdkafka settings, translating
``sasl.jaas.config`` and dropping Java-only keys. Secret values never reach a log line or a message.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

# confluent_kafka.admin re-exports these without __all__; mypy (strict, no implicit re-export) only
# accepts them from the modules that define them.
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.admin._topic import TopicDescription
from confluent_kafka.cimpl import NewPartitions, NewTopic

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
from logstore_cli.model import is_secret_key

log = logging.getLogger(__name__)

#: librdkafka's own log lines (connection refused, authentication failures, retries) go to this
#: logger, never to stderr. It has a NullHandler and does not propagate: our errors already carry the
#: line that matters. Attach a handler to it to see them (e.g. for a ``--debug`` flag).
LIBRDKAFKA_LOGGER: Final = "logstore_cli.kafka.librdkafka"

# librdkafka fails a request at its request_timeout; our own wait gives it this much longer.
_GRACE_S = 0.5
# The wait step: AdminClient.poll serves the error/log callbacks and paces the loop.
_POLL_S = 0.05
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_TOPIC_CONFIG_DOCS = "https://kafka.apache.org/documentation/#topicconfigs"
_LIBRDKAFKA_DOCS = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"


# --------------------------------------------------------------------------------------------------
# Client properties: Java/Flink client keys -> librdkafka settings (pure)
# --------------------------------------------------------------------------------------------------

_TRUSTSTORE = "Java trust stores are not supported by librdkafka; set ssl.ca.location to a PEM file"
_KEYSTORE = (
    "librdkafka reads PKCS#12 via ssl.keystore.location or PEM via ssl.certificate/key.location"
)
_JAVA_CLASS = "names a Java class; librdkafka has no equivalent"
_JAVA_METRICS = "Java client metrics setting; librdkafka has none"
_JAVA_LOGIN = "Java login/refresh tuning; librdkafka has no equivalent"
_FLINK = "a Flink Kafka connector option, not a Kafka client setting"
_CALLBACK = "a confluent-kafka Python callback, not a client property"

#: Keys that Java (or Flink) Kafka clients accept and librdkafka rejects, with the reason shown when
#: they are dropped. Verified against librdkafka by ``tests/unit/kafka/test_admin_config.py``.
JAVA_ONLY_KEYS: Final[Mapping[str, str]] = {
    "key.serializer": _JAVA_CLASS,
    "value.serializer": _JAVA_CLASS,
    "key.deserializer": _JAVA_CLASS,
    "value.deserializer": _JAVA_CLASS,
    "interceptor.classes": _JAVA_CLASS,
    "partitioner.class": _JAVA_CLASS + " (librdkafka's setting is 'partitioner')",
    "metric.reporters": _JAVA_CLASS,
    "security.providers": _JAVA_CLASS,
    "sasl.login.class": _JAVA_CLASS,
    "sasl.login.callback.handler.class": _JAVA_CLASS,
    "sasl.client.callback.handler.class": _JAVA_CLASS,
    "ssl.engine.factory.class": _JAVA_CLASS,
    "metrics.num.samples": _JAVA_METRICS,
    "metrics.sample.window.ms": _JAVA_METRICS,
    "metrics.recording.level": _JAVA_METRICS,
    "auto.include.jmx.reporter": _JAVA_METRICS,
    "ssl.truststore.location": _TRUSTSTORE,
    "ssl.truststore.password": _TRUSTSTORE,
    "ssl.truststore.type": _TRUSTSTORE,
    "ssl.truststore.certificates": _TRUSTSTORE,
    "ssl.keystore.type": _KEYSTORE,
    "ssl.keystore.key": _KEYSTORE,
    "ssl.keystore.certificate.chain": _KEYSTORE,
    "ssl.keymanager.algorithm": "Java TLS setting; librdkafka uses OpenSSL",
    "ssl.trustmanager.algorithm": "Java TLS setting; librdkafka uses OpenSSL",
    "ssl.protocol": "Java TLS setting; librdkafka uses OpenSSL",
    "ssl.enabled.protocols": "Java TLS setting; librdkafka uses OpenSSL",
    "ssl.provider": "Java TLS setting; librdkafka uses OpenSSL",
    "ssl.secure.random.implementation": "Java TLS setting; librdkafka uses OpenSSL",
    "sasl.kerberos.ticket.renew.window.factor": _JAVA_LOGIN,
    "sasl.kerberos.ticket.renew.jitter": _JAVA_LOGIN,
    "sasl.login.refresh.window.factor": _JAVA_LOGIN,
    "sasl.login.refresh.window.jitter": _JAVA_LOGIN,
    "sasl.login.refresh.min.period.seconds": _JAVA_LOGIN,
    "sasl.login.refresh.buffer.seconds": _JAVA_LOGIN,
    "sasl.login.connect.timeout.ms": _JAVA_LOGIN,
    "sasl.login.read.timeout.ms": _JAVA_LOGIN,
    "sasl.login.retry.backoff.ms": _JAVA_LOGIN,
    "sasl.login.retry.backoff.max.ms": _JAVA_LOGIN,
    "sasl.oauthbearer.jwks.endpoint.url": "Java broker-side OAuth validation setting",
    "sasl.oauthbearer.scope.claim.name": "Java OAuth setting; librdkafka has no equivalent",
    "sasl.oauthbearer.expected.audience": "Java OAuth setting; librdkafka has no equivalent",
    "sasl.oauthbearer.expected.issuer": "Java OAuth setting; librdkafka has no equivalent",
    "sasl.oauthbearer.clock.skew.seconds": "Java OAuth setting; librdkafka has no equivalent",
    "buffer.memory": "Java producer setting; librdkafka uses queue.buffering.max.kbytes",
    "max.block.ms": "Java producer setting; librdkafka has no equivalent",
    "max.request.size": "Java producer setting; librdkafka uses message.max.bytes",
    "send.buffer.bytes": "Java socket setting; librdkafka uses socket.send.buffer.bytes",
    "receive.buffer.bytes": "Java socket setting; librdkafka uses socket.receive.buffer.bytes",
    "default.api.timeout.ms": "Java client setting; librdkafka has no equivalent",
    "exclude.internal.topics": "Java consumer setting; librdkafka has no equivalent",
    "fetch.max.wait.ms": "Java consumer setting; librdkafka uses fetch.wait.max.ms",
    "socket.connection.setup.timeout.max.ms": "Java client setting; librdkafka has no equivalent",
    "metadata.max.idle.ms": "Java producer setting; librdkafka has no equivalent",
    "internal.leave.group.on.close": "Java consumer setting; librdkafka has no equivalent",
    "partitioner.ignore.keys": "Java producer setting; librdkafka has no equivalent",
    "partitioner.adaptive.partitioning.enable": "Java producer setting; librdkafka has none",
    "partitioner.availability.timeout.ms": "Java producer setting; librdkafka has none",
    "transaction.two.phase.commit.enable": "Java producer setting; librdkafka has none",
    "partition.discovery.interval.ms": _FLINK,
    "flink.partition-discovery.interval-millis": _FLINK,
    "client.id.prefix": _FLINK,
    "register.consumer.metrics": _FLINK,
    "commit.offsets.on.checkpoint": _FLINK,
    "logger": _CALLBACK,
    "error_cb": _CALLBACK,
    "throttle_cb": _CALLBACK,
    "stats_cb": _CALLBACK,
    "oauth_cb": _CALLBACK,
    "on_delivery": _CALLBACK,
    "on_commit": _CALLBACK,
}
_JAVA_ONLY_SUFFIXES: Final = (".serializer", ".deserializer", ".class", ".classes")

_ASSIGNORS: Final[Mapping[str, str | None]] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.StickyAssignor": None,  # no librdkafka equivalent
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}


def java_only_reason(key: str) -> str | None:
    """Why ``key`` (a Java/Flink Kafka client key) is no librdkafka setting; None if it may be one."""
    if key in JAVA_ONLY_KEYS:
        return JAVA_ONLY_KEYS[key]
    if key.endswith(_JAVA_ONLY_SUFFIXES):
        return _JAVA_CLASS
    return None


def librdkafka_config(
    bootstrap: str, client_properties: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """Map client properties to a librdkafka configuration: ``(config, ignored_keys)``.

    ``client_properties`` are the keys without their DDL prefix (``properties.`` / ``kafka.``).
    ``bootstrap`` wins over a ``bootstrap.servers`` property. ``sasl.jaas.config`` with the PLAIN,
    SCRAM, Kerberos or OAuth (client credentials) login module becomes librdkafka's ``sasl.*``
    settings (explicit ``sasl.*`` properties win); Java-only keys (:data:`JAVA_ONLY_KEYS`, and keys
    naming Java classes) are dropped and listed in ``ignored_keys``; Java values librdkafka spells
    differently are translated. Any other key passes through for librdkafka to judge.

    Raises :class:`~logstore_cli.errors.ConfigError` for a JAAS configuration it cannot translate;
    no message ever contains a property's value.
    """
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    ignored: list[str] = []
    jaas: str | None = None
    for key, raw in client_properties.items():
        value = str(raw)
        if key == "bootstrap.servers":
            if value.strip() != bootstrap.strip():
                ignored.append(key)  # the resolved address given to us wins
        elif key == "sasl.jaas.config":
            jaas = value
        elif java_only_reason(key) is not None:
            ignored.append(key)
        elif key == "ssl.endpoint.identification.algorithm":
            # Java disables host name checks with an empty value; librdkafka spells it "none".
            conf[key] = value.strip().lower() or "none"
        elif key == "partition.assignment.strategy":
            names = [_ASSIGNORS.get(c.strip()) for c in value.split(",") if c.strip()]
            if names and all(n is not None for n in names):
                conf[key] = ",".join(n for n in names if n is not None)
            else:
                ignored.append(key)
        else:
            conf[key] = value
    if jaas is not None:
        for key, value in _translate_jaas(jaas, conf).items():
            conf.setdefault(key, value)
    return conf, ignored


_JAAS_HEAD = re.compile(
    r"\s*(?P<module>[A-Za-z_$][\w$.]*)\s+(?P<flag>required|requisite|sufficient|optional)\b"
)
_JAAS_OPTION = re.compile(
    r'\s*(?P<key>[A-Za-z_][\w.-]*)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))'
)
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a one-module JAAS entry, as Kafka clients accept it."""
    bad = ConfigError(
        "sasl.jaas.config is not a JAAS entry Kafka clients accept",
        hint='write it as: <LoginModule class> required key="value" ...; (one login module)',
    )
    head = _JAAS_HEAD.match(text)
    if head is None:
        raise bad
    options: dict[str, str] = {}
    pos = head.end()
    while True:
        option = _JAAS_OPTION.match(text, pos)
        if option is None:
            break
        quoted = option.group("quoted")
        value = option.group("bare") if quoted is None else re.sub(r"\\(.)", r"\1", quoted)
        options[option.group("key")] = value
        pos = option.end()
    if text[pos:].strip() not in ("", ";"):
        raise bad
    return head.group("module"), options


def _translate_jaas(text: str, conf: Mapping[str, Any]) -> dict[str, str]:
    module, options = _parse_jaas(text)
    simple = module.rsplit(".", 1)[-1]
    mechanism = str(conf.get("sasl.mechanism", "")).upper()

    def need(*names: str) -> list[str]:
        missing = [n for n in names if not options.get(n)]
        if missing:
            raise ConfigError(
                f"sasl.jaas.config ({simple}) lacks the option(s) {', '.join(missing)}",
                hint="add them to the JAAS entry, or set librdkafka's sasl.* properties instead",
            )
        return [options[n] for n in names]

    def mechanism_for(expected: tuple[str, ...], default: str | None) -> dict[str, str]:
        if mechanism in expected:
            return {}
        if not mechanism and default is not None:
            return {"sasl.mechanism": default}
        raise ConfigError(
            f"sasl.jaas.config uses {simple} but sasl.mechanism is {mechanism or 'not set'}",
            hint=f"set properties.sasl.mechanism to {' or '.join(expected)}",
        )

    if simple == "PlainLoginModule":
        username, password = need("username", "password")
        return {
            **mechanism_for(("PLAIN",), "PLAIN"),
            "sasl.username": username,
            "sasl.password": password,
        }
    if simple == "ScramLoginModule":
        username, password = need("username", "password")
        return {**mechanism_for(_SCRAM, None), "sasl.username": username, "sasl.password": password}
    if simple == "Krb5LoginModule":
        out = mechanism_for(("GSSAPI",), "GSSAPI")
        renames = {
            "keyTab": "sasl.kerberos.keytab",
            "principal": "sasl.kerberos.principal",
            "serviceName": "sasl.kerberos.service.name",
        }
        out.update({new: options[old] for old, new in renames.items() if options.get(old)})
        return out
    if simple == "OAuthBearerLoginModule" and options.get("clientId"):
        client_id, client_secret = need("clientId", "clientSecret")
        out = {
            **mechanism_for(("OAUTHBEARER",), "OAUTHBEARER"),
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": client_secret,
        }
        if options.get("scope"):
            out["sasl.oauthbearer.scope"] = options["scope"]
        return out
    raise ConfigError(
        f"sasl.jaas.config uses the login module {module}, which cannot be translated for librdkafka",
        hint="set librdkafka's sasl.* properties instead (sasl.mechanism, sasl.username, "
        f"sasl.password, sasl.oauthbearer.*; see {_LIBRDKAFKA_DOCS})",
    )


def _principal(conf: Mapping[str, Any]) -> str:
    """The principal the broker will see, as far as the configuration tells (no secrets)."""
    protocol = str(conf.get("security.protocol", "plaintext")).upper()
    if protocol.startswith("SASL"):
        mechanism = str(conf.get("sasl.mechanism", "GSSAPI")).upper()
        if mechanism in ("PLAIN", *_SCRAM) and conf.get("sasl.username"):
            return f"User:{conf['sasl.username']}"
        if mechanism == "GSSAPI" and conf.get("sasl.kerberos.principal"):
            return f"the Kerberos principal {conf['sasl.kerberos.principal']}"
        return f"the client's {mechanism} principal"
    if protocol == "SSL":
        return "the principal of the client's TLS certificate"
    return "User:ANONYMOUS"


# --------------------------------------------------------------------------------------------------
# The admin client
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    replication: int  # replicas of partition 0
    configs: Mapping[str, str]  # only non-default topic configs (source DYNAMIC_TOPIC_CONFIG)


@dataclass(frozen=True)
class _Op:
    """One request of an admin call, for messages: ``verb`` in prose, ``acl`` the ACL operation it
    needs, ``also`` the ACL operations the rest of the call needs (so one error names them all)."""

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
_CONNECTION: Final = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
)
_AUTHENTICATION: Final = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
)
_AUTHORIZATION: Final = frozenset(
    {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
)


class KafkaAdmin:
    """Topic administration against one Kafka cluster; every call ends within ``timeout_s``.

    Use it as a context manager, or call :meth:`close`. Not thread-safe.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_properties: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 10.0,
    ) -> None:
        if not bootstrap_servers.strip():
            raise ConfigError(
                "no Kafka bootstrap servers given",
                hint="set the table's 'log-store.address' / 'kafka.bootstrap.servers', "
                "or the bootstrap servers in the config file",
            )
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        conf, ignored = librdkafka_config(bootstrap_servers, client_properties or {})
        for key in ignored:
            reason = java_only_reason(key) or "overridden or not translatable for librdkafka"
            log.warning("ignoring Kafka client property %r: %s", key, reason)
        #: Client properties dropped because librdkafka has no such setting (see JAVA_ONLY_KEYS).
        self.ignored_properties: tuple[str, ...] = tuple(ignored)
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self._principal = _principal(conf)
        self._secrets = _secret_values(client_properties or {}, conf)
        self._errors: deque[KafkaError] = deque(maxlen=32)  # from error_cb, served by poll()

        ms = int(timeout_s * 1000)
        conf.setdefault("socket.connection.setup.timeout.ms", max(1000, min(ms // 2, 30000)))
        conf.setdefault("socket.timeout.ms", max(ms, 10))
        if "reconnect.backoff.ms" not in conf:
            # A broker that comes up during the call is found within a second, not ten.
            conf.setdefault("reconnect.backoff.max.ms", 1000)
        conf["logger"] = _librdkafka_logger()
        conf["error_cb"] = self._errors.append
        try:
            self._admin: AdminClient | None = AdminClient(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(
                f"the Kafka client properties are invalid: {self._redact(_reason(exc))}",
                hint="properties.* / kafka.* keys are passed to librdkafka (confluent-kafka); "
                f"remove the key or use librdkafka's name and values for it ({_LIBRDKAFKA_DOCS})",
            ) from None

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.__exit__(None, None, None)  # destroys the librdkafka handle

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the API -----------------------------------------------------------------------------------

    def ping(self) -> None:
        """Return once a broker answers a metadata request; BrokerError after ``timeout_s``."""
        deadline = self._begin()
        admin = self._client()
        last: KafkaException | None = None
        while True:
            step = max(min(deadline - time.monotonic(), 1.0), 0.05)
            try:
                if admin.list_topics(timeout=step).brokers:
                    return
            except KafkaException as exc:
                last = exc
            admin.poll(0)
            self._raise_if_credentials_rejected()
            if time.monotonic() >= deadline:
                raise self._unreachable(detail=_reason(last) if last else None)

    def describe_topic(self, name: str) -> TopicInfo | None:
        """The topic's partitions, replication and non-default configs; None when it does not exist."""
        op = _Op("describe", "DESCRIBE", name, also=("DESCRIBE_CONFIGS",))
        _check_topic_name(name, op)
        deadline = self._begin()
        description = self._describe(op, deadline)
        if description is None:
            return None
        configs = self._configs(_Op("describe the configs of", "DESCRIBE_CONFIGS", name), deadline)
        if configs is None:  # deleted in between
            return None
        partitions = sorted(description.partitions, key=lambda p: p.id)
        return TopicInfo(
            name=name,
            partitions=len(partitions),
            replication=len(partitions[0].replicas) if partitions else 0,
            configs=configs,
        )

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Create the topic and wait until its partitions have leaders (``validate_only``: only let
        the broker check the request; nothing is created). ``-1`` means the broker's default."""
        op = _Op("create", "CREATE", name)
        _check_topic_name(name, op)
        if partitions == 0 or partitions < -1:
            raise self._spec_error(op, f"{partitions} partitions", "a topic needs at least 1")
        if replication == 0 or replication < -1:
            raise self._spec_error(op, f"replication {replication}", "a topic needs at least 1")
        deadline = self._begin()
        new = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication,
            config={k: str(v) for k, v in (configs or {}).items()},
        )
        remaining = self._remaining(deadline, op)
        futures = self._client().create_topics(
            [new],
            validate_only=validate_only,
            request_timeout=remaining,
            operation_timeout=remaining * 0.8,
        )
        self._result(futures[name], op, deadline, replication=replication)
        if not validate_only:
            self._settle(
                op, deadline,
                lambda d: d is not None and (partitions == -1 or len(d.partitions) == partitions)
                and all(p.leader is not None for p in d.partitions),
            )  # fmt: skip

    def delete_topic(self, name: str) -> None:
        """Delete the topic and wait until it is gone; no error if it does not exist."""
        op = _Op("delete", "DELETE", name)
        _check_topic_name(name, op)
        deadline = self._begin()
        remaining = self._remaining(deadline, op)
        futures = self._client().delete_topics(
            [name], request_timeout=remaining, operation_timeout=remaining * 0.8
        )
        try:
            self._result(futures[name], op, deadline)
        except TopicNotFoundError:
            return
        self._settle(op, deadline, lambda d: d is None)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow the topic to ``total`` partitions (no-op when it has that many; never shrinks)."""
        op = _Op("add partitions to", "ALTER", name)
        _check_topic_name(name, op)
        if total < 1:
            raise self._spec_error(op, f"{total} partitions", "a topic needs at least 1")
        deadline = self._begin()
        description = self._describe(_Op("describe", "DESCRIBE", name, also=("ALTER",)), deadline)
        if description is None:
            raise self._not_found(op)
        current = len(description.partitions)
        if total == current:
            return
        if total < current:
            raise TopicSpecError(
                f"cannot shrink Kafka topic '{name}' from {current} to {total} partitions",
                hint=f"Kafka only adds partitions: set 'log.system.partitions' to {current} or "
                "more, or recreate the topic (drop-table, create-table) to have fewer",
            )
        remaining = self._remaining(deadline, op)
        futures = self._client().create_partitions(
            [NewPartitions(name, total)],
            request_timeout=remaining,
            operation_timeout=remaining * 0.8,
        )
        self._result(futures[name], op, deadline)
        self._settle(
            op, deadline,
            lambda d: d is not None and len(d.partitions) >= total
            and all(p.leader is not None for p in d.partitions),
        )  # fmt: skip

    def alter_topic_configs(
        self, name: str, set_: Mapping[str, str], delete: Iterable[str] = ()
    ) -> None:
        """Set and delete (back to the broker default) topic configs, incrementally."""
        op = _Op("alter the configs of", "ALTER_CONFIGS", name)
        _check_topic_name(name, op)
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
        ] + [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
            for k in delete
            if k not in set_
        ]
        if not entries:
            return
        deadline = self._begin()
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self._client().incremental_alter_configs(
            [resource], request_timeout=self._remaining(deadline, op)
        )
        self._result(futures[resource], op, deadline)

    def end_offsets(self, name: str) -> dict[int, int]:
        """Partition -> high watermark (the offset the next record will get)."""
        op = _Op("read the end offsets of", "DESCRIBE", name)
        _check_topic_name(name, op)
        deadline = self._begin()
        description = self._describe(_Op("describe", "DESCRIBE", name), deadline)
        if description is None:
            raise self._not_found(op)
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(name, p.id): latest for p in description.partitions}
        if not request:
            return {}
        futures = self._client().list_offsets(
            request, request_timeout=self._remaining(deadline, op)
        )
        self._wait(futures.values(), op, deadline)
        offsets: dict[int, int] = {}
        for tp, future in futures.items():
            offsets[tp.partition] = int(self._result(future, op, deadline).offset)
        return offsets

    # -- internals ---------------------------------------------------------------------------------

    def _client(self) -> AdminClient:
        if self._admin is None:
            raise RuntimeError("KafkaAdmin is closed")
        return self._admin

    def _begin(self) -> float:
        """Start a call: forget earlier client errors, return the call's deadline."""
        self._client().poll(0)
        self._errors.clear()
        return time.monotonic() + self.timeout_s

    def _remaining(self, deadline: float, op: _Op) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            raise self._timed_out(op)
        return remaining

    def _wait(self, futures: Iterable[Future[Any]], op: _Op, deadline: float) -> None:
        """Wait for ``futures`` until the deadline, failing fast when the broker rejects our login."""
        pending = list(futures)
        admin = self._client()
        while True:
            pending = [f for f in pending if not f.done()]
            if not pending:
                return
            self._raise_if_credentials_rejected()
            if time.monotonic() > deadline + _GRACE_S:
                raise self._timed_out(op)
            admin.poll(_POLL_S)

    def _result(
        self, future: Future[Any], op: _Op, deadline: float, *, replication: int | None = None
    ) -> Any:
        self._wait([future], op, deadline)
        try:
            return future.result(timeout=0)
        except KafkaException as exc:
            raise self._map(exc, op, replication=replication) from None

    def _describe(self, op: _Op, deadline: float) -> TopicDescription | None:
        futures = self._client().describe_topics(
            TopicCollection([op.topic]), request_timeout=self._remaining(deadline, op)
        )
        try:
            description: TopicDescription = self._result(futures[op.topic], op, deadline)
        except TopicNotFoundError:
            return None
        return description

    def _configs(self, op: _Op, deadline: float) -> dict[str, str] | None:
        resource = ConfigResource(ResourceType.TOPIC, op.topic)
        futures = self._client().describe_configs(
            [resource], request_timeout=self._remaining(deadline, op)
        )
        try:
            entries: Mapping[str, Any] = self._result(futures[resource], op, deadline)
        except TopicNotFoundError:
            return None
        dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {
            name: str(entry.value)
            for name, entry in sorted(entries.items())
            if _source_value(entry.source) == dynamic and entry.value is not None
        }

    def _settle(
        self, op: _Op, deadline: float, done: Callable[[TopicDescription | None], bool]
    ) -> None:
        """Poll the topic's metadata until ``done(description)`` holds, at most until the deadline.

        Kafka acknowledges a change before every broker's metadata shows it; callers (and a
        describe right after) should see the result. Best effort: the change itself succeeded.
        """
        probe = _Op("describe", "DESCRIBE", op.topic)
        admin = self._client()
        while True:
            try:
                if done(self._describe(probe, deadline)):
                    return
            except LogstoreError as exc:  # e.g. allowed to create but not to describe
                log.debug("cannot confirm that %s topic %r took effect: %s", op.verb, op.topic, exc)
                return
            if time.monotonic() + 0.1 >= deadline:
                log.warning(
                    "Kafka acknowledged the request to %s topic %r, but its metadata did not show "
                    "the change within %gs",
                    op.verb, op.topic, self.timeout_s,
                )  # fmt: skip
                return
            admin.poll(0.1)  # pacing of a poll with a deadline; also serves client callbacks

    # -- error mapping -----------------------------------------------------------------------------

    def _map(
        self, exc: KafkaException, op: _Op, *, replication: int | None = None
    ) -> LogstoreError:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        code = err.code() if err is not None else KafkaError.UNKNOWN
        said = self._redact(_reason(exc))
        topic = f"Kafka topic '{op.topic}'"
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return TopicExistsError(
                f"{topic} already exists at {self.bootstrap_servers}",
                hint="use the existing topic, pick another topic name, or delete it first if "
                "nothing needs it",
            )
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return self._not_found(op)
        if code in _AUTHORIZATION:
            return self._denied(op, cluster=code == KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        if code in _AUTHENTICATION:
            return self._rejected(said)
        if code in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_REPLICA_ASSIGNMENT):
            what = f"replication {replication}" if replication is not None else "that replication"
            return self._spec_error(
                op, what, said,
                hint="set 'log.system.replication' to at most the number of brokers "
                "(1 for the local development broker)",
            )  # fmt: skip
        if code == KafkaError.INVALID_CONFIG:
            return self._spec_error(
                op, "its topic configs", said,
                hint=f"fix or remove that topic setting in the table's properties ({_TOPIC_CONFIG_DOCS})",
            )  # fmt: skip
        if code == KafkaError.INVALID_PARTITIONS:
            return self._spec_error(
                op, "that partition count", said,
                hint="'log.system.partitions' must be positive; Kafka only adds partitions",
            )  # fmt: skip
        if code in (KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_REQUEST):
            return self._spec_error(op, "that request", said)
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
            return self._timed_out(op, detail=said)
        name = err.name() if err is not None else type(exc).__name__
        return BrokerError(
            f"Kafka at {self.bootstrap_servers} failed to {op.verb} {topic}: {name}: {said}",
            hint="retry; if it persists, check the broker's log",
        )

    def _denied(self, op: _Op, *, cluster: bool) -> KafkaAuthorizationError:
        on = "the cluster" if cluster else f"topic '{op.topic}'"
        needed = [op.acl, *op.also]
        why = f" (to {op.verb} topic '{op.topic}')" if cluster else ""
        if op.also:
            why += f"; this call also needs {' and '.join(op.also)}"
        example = ""
        if self._principal.startswith("User:"):
            resource = "--cluster" if cluster else f"--topic '{op.topic}'"
            # kafka-acls.sh spells DESCRIBE_CONFIGS as DescribeConfigs
            operations = " ".join(
                "--operation " + "".join(word.title() for word in acl.split("_")) for acl in needed
            )
            example = (
                f" (kafka-acls.sh --bootstrap-server {self.bootstrap_servers} --add "
                f"--allow-principal {self._principal} {operations} {resource})"
            )
        return KafkaAuthorizationError(
            f"Kafka at {self.bootstrap_servers} denied {self._principal} {op.acl} on {on}{why}",
            hint=f"grant {' and '.join(needed)} on {on} to {self._principal}{example}, or check "
            "properties.sasl.* / security.protocol if the client should authenticate as another "
            "principal",
        )

    def _rejected(self, said: str) -> KafkaAuthenticationError:
        return KafkaAuthenticationError(
            f"Kafka at {self.bootstrap_servers} rejected the client's credentials "
            f"({self._principal})",
            hint="check properties.sasl.mechanism, sasl.username and sasl.password (or "
            "sasl.jaas.config) and security.protocol",
            detail=said,
        )

    def _login_error(self) -> BrokerError | None:
        """The error to raise when the client reported rejected credentials or a failed TLS
        handshake: retrying will not help, so calls fail at once instead of at their deadline."""
        for err in list(self._errors):
            if err.code() in _AUTHENTICATION:
                return self._rejected(self._redact(err.str()))
            if err.code() == KafkaError._SSL:
                return BrokerError(
                    f"the TLS handshake with Kafka at {self.bootstrap_servers} failed",
                    hint="check security.protocol and ssl.* (ssl.ca.location for the broker's CA, "
                    "ssl.endpoint.identification.algorithm)",
                    detail=self._redact(err.str()),
                )
        return None

    def _raise_if_credentials_rejected(self) -> None:
        error = self._login_error()
        if error is not None:
            raise error

    def _unreachable(self, detail: str | None = None) -> BrokerError:
        last = (
            next((e.str() for e in reversed(self._errors) if e.code() in _CONNECTION), None)
            or detail
        )
        return BrokerError(
            f"cannot reach Kafka at {self.bootstrap_servers} within {self.timeout_s:g}s",
            hint="check the bootstrap servers and that the brokers are up ('logstore broker "
            "start' runs a local one); behind TLS/SASL set security.protocol and sasl.*/ssl.*",
            detail=self._redact(last) if last else None,
        )

    def _timed_out(self, op: _Op, detail: str | None = None) -> BrokerError:
        self._client().poll(0)
        login = self._login_error()
        if login is not None:
            return login
        if any(e.code() in _CONNECTION for e in self._errors):
            return self._unreachable(detail)
        return BrokerError(
            f"Kafka at {self.bootstrap_servers} did not {op.verb} topic '{op.topic}' within "
            f"{self.timeout_s:g}s",
            hint="the cluster is slow or unhealthy: retry, raise the Kafka time-out, or check "
            "the brokers",
            detail=self._redact(detail) if detail else None,
        )

    def _not_found(self, op: _Op) -> TopicNotFoundError:
        return TopicNotFoundError(
            f"Kafka topic '{op.topic}' does not exist at {self.bootstrap_servers}",
            hint="check the table's topic name and bootstrap servers, or create it (create-table)",
        )

    def _spec_error(
        self, op: _Op, what: str, said: str, *, hint: str | None = None
    ) -> TopicSpecError:
        return TopicSpecError(
            f"cannot {op.verb} Kafka topic '{op.topic}' with {what}: {said}",
            hint=hint
            or "fix the table's log settings (topic name, 'log.system.partitions', "
            "'log.system.replication', topic configs)",
        )

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = secret.sub("***", text)
        return text


def _check_topic_name(name: str, op: _Op) -> None:
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise TopicSpecError(
            f"cannot {op.verb} Kafka topic {name!r}: not a valid topic name",
            hint="topic names are 1-249 characters of ASCII letters, digits, '.', '_' and '-'",
        )


def _secret_values(properties: Mapping[str, str], conf: Mapping[str, Any]) -> list[re.Pattern[str]]:
    """Patterns matching every secret value given, longest first (short ones only as whole words)."""
    values = {str(v) for k, v in [*properties.items(), *conf.items()] if is_secret_key(k) and v}
    patterns = []
    for value in sorted(values, key=len, reverse=True):
        escaped = re.escape(value)
        patterns.append(re.compile(escaped if len(value) >= 6 else rf"(?<![\w]){escaped}(?![\w])"))
    return patterns


def _source_value(source: Any) -> Any:
    return source.value if isinstance(source, ConfigSource) else source


def _reason(exc: BaseException | None) -> str:
    """The broker's or librdkafka's own words for an exception."""
    if exc is None:
        return ""
    arg = exc.args[0] if exc.args else exc
    if isinstance(arg, KafkaError):
        return arg.str()
    return str(arg)


def _librdkafka_logger() -> logging.Logger:
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger
