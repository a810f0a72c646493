"""Kafka client properties as written for Java/Flink clients -> librdkafka settings. Pure.

DDL (``properties.*`` / ``kafka.*``) and the config file carry properties for Flink's Java Kafka
client; every confluent-kafka client of this tool (admin, producer, consumer) maps them through
:func:`librdkafka_config`: ``sasl.jaas.config`` becomes librdkafka's ``sasl.*`` settings, Java-only
keys are dropped (and named), Java spellings of values are translated. No message ever contains a
property's value. No confluent-kafka import: commands that only plan never load the client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from logstore_cli.errors import ConfigError

LIBRDKAFKA_DOCS: Final = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"
DEFAULT_PORT: Final = 9092

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
#: they are dropped. Verified against librdkafka by ``tests/unit/kafka/test_client_config.py``.
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
        f"sasl.password, sasl.oauthbearer.*; see {LIBRDKAFKA_DOCS})",
    )


def client_principal(conf: Mapping[str, Any]) -> str:
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


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each entry of a bootstrap list as librdkafka reads it: comma or space
    separated, an optional ``protocol://`` prefix, IPv6 hosts in brackets, port 9092 by default."""
    addresses = []
    for entry in re.split(r"[,\s]+", bootstrap.strip()):
        if not entry:
            continue
        hostport = entry.split("://", 1)[-1]
        bracketed = re.fullmatch(r"\[(?P<host>[^\]]*)\](?::(?P<port>\d+))?", hostport)
        if bracketed:
            host, port = bracketed.group("host"), bracketed.group("port")
        elif hostport.count(":") == 1:
            host, port = hostport.split(":")
        else:  # a bare host name, or an unbracketed IPv6 address
            host, port = hostport, None
        addresses.append((host, int(port) if port and port.isdigit() else DEFAULT_PORT))
    return addresses
