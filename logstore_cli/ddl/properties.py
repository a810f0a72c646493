"""Table properties → log-store spec, without positions: the same rules for DDL and for ``--set``.

``check_properties`` validates a plain ``{key: value}`` map against the registry (unknown reserved
keys, bad values, vocabularies that disagree, a log store without topic or broker) and resolves the
log store; problems name the property they are about, and ``build.py`` turns that into a position
in the DDL. ``resolve_log_store`` is the same for callers without DDL (``alter-table --set``): it
raises ``DDLError`` with position-free diagnostics.

Defaults: the topic has none (an error when missing); the broker address falls back to
``ParseOptions.default_bootstrap_servers``; partitions and replication default to 1; consistency
and changelog mode default to the vocabulary that turned the log store on (Paimon's ``log.system``:
``committed`` and ``auto``; Amoro's ``log-store.enabled``: ``none`` and ``all-kinds``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from logstore_cli.ddl import delta_properties, registry
from logstore_cli.ddl.options import BOOTSTRAP_SERVERS_ENV, ParseOptions
from logstore_cli.errors import DDLError, Diagnostic, InvalidInputError
from logstore_cli.model import (
    DEFAULT_PARTITIONS,
    ChangelogMode,
    Consistency,
    EmitMode,
    LogStoreSpec,
    ReadMode,
    StartupMode,
    misspelt_secret_key,
    redact,
)

__all__ = [
    "PULSAR_TOPIC_CONFIGS",
    "Problem",
    "check_properties",
    "pulsar_retention",
    "redact",
    "resolve_log_store",
]

ELLIPSES = ("...", "…")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_BROKER = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]]+):(\d{1,5})")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]@]+):(\d{1,5})")
PULSAR_SCHEME = "pulsar://"

# The topic configs a Pulsar topic takes (``log.topic.<config>``): its retention policy, in
# Kafka's units; Pulsar keeps whole minutes and whole MiB. Unset: Kafka's own defaults (7 days,
# no size limit), set explicitly, since Pulsar's default deletes what no subscription holds.
PULSAR_TOPIC_CONFIGS = ("retention.ms", "retention.bytes")
DEFAULT_PULSAR_RETENTION_MINUTES = 7 * 24 * 60
_MINUTE_MS, _MIB = 60_000, 1024 * 1024


def pulsar_retention(configs: Mapping[str, str]) -> tuple[int, int]:
    """``(retentionTimeInMinutes, retentionSizeInMB)`` of a Pulsar topic from its ``log.topic.*``
    configs (checked by ``check_properties``: -1, or whole minutes / MiB)."""
    ms = int(configs.get("retention.ms", DEFAULT_PULSAR_RETENTION_MINUTES * _MINUTE_MS))
    size = int(configs.get("retention.bytes", -1))
    return (-1 if ms < 0 else ms // _MINUTE_MS), (-1 if size < 0 else size // _MIB)


def pulsar_retention_configs(minutes: int | None, mb: int | None) -> dict[str, str]:
    """The ``log.topic.*`` configs a Pulsar retention policy stands for (None: no policy part)."""
    out: dict[str, str] = {}
    if minutes is not None:
        out["retention.ms"] = str(-1 if minutes < 0 else minutes * _MINUTE_MS)
    if mb is not None:
        out["retention.bytes"] = str(-1 if mb < 0 else mb * _MIB)
    return out


class Problem(NamedTuple):
    """A problem with a table's properties, before it is placed in the source."""

    message: str
    key: str | None = None  # the property it is about, as written; None: the table as a whole
    on_value: bool = False  # about the value rather than the key
    severity: str = "error"


class _Setting(NamedTuple):
    """A known property as written, with its normalized value."""

    key: str  # as written (maybe an alias)
    raw: str  # value as written
    value: str  # value normalized by the registry


def check_properties(
    props: Mapping[str, str],
    *,
    primary_key: Sequence[str] = (),
    options: ParseOptions | None = None,
) -> tuple[LogStoreSpec | None, list[Problem]]:
    """Validate ``props`` and resolve the log store (None when off, or when there are errors)."""
    checker = _Checker(props, primary_key, options or ParseOptions())
    spec = checker.run()
    return spec, checker.problems


def resolve_log_store(
    props: Mapping[str, str],
    table_name: str,
    options: ParseOptions | None = None,
    *,
    primary_key: Sequence[str] = (),
) -> LogStoreSpec | None:
    """The log store ``props`` declare (None when off); raises ``DDLError`` naming ``table_name``."""
    spec, problems = check_properties(props, primary_key=primary_key, options=options)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise DDLError([Diagnostic(p.message, file=table_name) for p in errors])
    return spec


class _Checker:
    def __init__(
        self, props: Mapping[str, str], primary_key: Sequence[str], options: ParseOptions
    ) -> None:
        self.props = props
        self.order = {k: i for i, k in enumerate(props)}
        self.primary_key = primary_key
        self.options = options
        self.problems: list[Problem] = []
        self.settings: dict[str, _Setting] = {}  # canonical key -> setting
        self.client: dict[str, _Setting] = {}  # Kafka client key -> setting
        self.unusable: set[str] = set()  # canonical keys whose value was already reported

    def problem(
        self, message: str, key: str | None = None, on_value: bool = False, severity: str = "error"
    ) -> None:
        self.problems.append(Problem(message, key, on_value, severity))

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self.problems)

    # -- one property at a time ---------------------------------------------------------------

    def scan(self) -> None:
        for key, value in self.props.items():
            if not key.strip():
                self.problem("empty property key", key)
            elif key != key.strip():
                self.problem(f"property key '{key}' has leading or trailing spaces", key)
            elif (defn := registry.lookup(key)) is not None:
                self.known(defn, key, value)
            elif key.startswith(registry.TOPIC_CONFIG_PREFIX):
                if key == registry.TOPIC_CONFIG_PREFIX:
                    self.problem(f"'{key}' names no topic config: write '{key}<config>'", key)
            elif (bad := delta_properties.value_problem(key, value)) is not None:
                self.problem(bad, key, True)
            elif (unknown := _unknown_key(key)) is not None:
                self.problem(unknown, key)
            elif (prefix := registry.passthrough_prefix(key)) is not None:
                self.passthrough(key[len(prefix) :], key, value)

    def known(self, defn: registry.PropertyDef, key: str, value: str) -> None:
        if value.strip() in ELLIPSES:
            self.problem(
                f"the value of '{key}' is elided ('{value.strip()}'); write it out", key, True
            )
            self.unusable.add(defn.key)
            return
        norm = registry.normalize(defn, value)
        if norm is None:
            self.problem(registry.invalid_value_message(defn, value, key), key, True)
            self.unusable.add(defn.key)
            return
        prev = self.settings.get(defn.key)
        if prev is None:
            self.settings[defn.key] = _Setting(key, value, norm)
        elif prev.value != norm:
            self.problem(
                f"'{key}' = '{value}' contradicts '{prev.key}' = '{prev.raw}' "
                "(the same property under two names); keep one",
                key,
                True,
            )

    def passthrough(self, name: str, key: str, value: str) -> None:
        if not name:
            self.problem(f"'{key}' names no Kafka client setting: write '{key}<setting>'", key)
            return
        if (meant := misspelt_secret_key(key)) is not None:
            # Not an error: the client key space is open. But a typo here is a login that fails.
            self.problem(
                f"'{key}' looks like a misspelling of '{meant}', which the Kafka client would "
                "not recognize; its value is treated as a secret",
                key,
                severity="warning",
            )
        prev = self.client.get(name)
        if prev is None:
            self.client[name] = _Setting(key, value, value)
        elif prev.value != value:  # values not shown: they may be secrets
            self.problem(
                f"'{key}' and '{prev.key}' set the Kafka client setting '{name}' to different values",
                key,
                True,
            )

    # -- what the properties say together -----------------------------------------------------

    def agree(
        self, *sources: tuple[str, Callable[[str], str | None]]
    ) -> tuple[str, _Setting] | None:
        """The meaning the given settings share (first written wins); a problem if they differ."""
        found: list[tuple[str, _Setting]] = []
        for canonical, meaning in sources:
            setting = self.settings.get(canonical)
            if setting is not None and (m := meaning(setting.value)) is not None:
                found.append((m, setting))
        if not found:
            return None
        found.sort(key=lambda f: self.order.get(f[1].key, 0))
        first_meaning, first = found[0]
        for meaning_, setting in found[1:]:
            if meaning_ != first_meaning:
                self.problem(
                    f"'{setting.key}' = '{setting.raw}' ({meaning_}) contradicts "
                    f"'{first.key}' = '{first.raw}' ({first_meaning}); remove one or make them agree",
                    setting.key,
                    True,
                )
        return found[0]

    def run(self) -> LogStoreSpec | None:
        self.scan()
        has_pk = bool(self.primary_key)
        enabled = self.agree(
            ("log-store.enabled", lambda v: "on" if v == "true" else "off"),
            ("log.system", lambda v: "off" if v == "none" else "on"),
        )
        address = self.agree(("log-store.address", _same), ("kafka.bootstrap.servers", _same))
        topic = self.agree(("log-store.topic", _same), ("kafka.topic", _same))
        consistency = self.agree(
            ("log-store.consistency-guarantee.enabled", {"true": "eventual", "false": "none"}.get),
            ("log.consistency", {"transactional": "committed", "eventual": "eventual"}.get),
        )
        auto = "upsert" if has_pk else "all-kinds"
        changelog = self.agree(
            ("log.consumer.changelog.modes", _same),
            ("log.changelog-mode", {"all": "all-kinds", "upsert": "upsert", "auto": auto}.get),
        )
        read = self.agree(("mixed-format.read.mode", _same), ("streaming-read-mode", _same))
        emit = self.agree(("mixed-format.emit.mode", _same))
        data_format = self.agree(("log-store.data-format", _same), ("log.format", _same))
        timestamp = self.agree(
            ("scan.startup.timestamp-millis", _same), ("scan.timestamp-millis", _same)
        )
        startup = self.agree(
            ("scan.startup.mode", _same),
            ("scan.mode", lambda v: _scan_mode_start(v, timestamp is not None)),
        )

        if changelog and changelog[0] == "upsert" and not has_pk:
            self.problem(
                f"'{changelog[1].key}' = '{changelog[1].raw}' needs a primary key",
                changelog[1].key,
                True,
            )
        if startup and startup[0] == "timestamp" and timestamp is None:
            needs = "scan.startup.timestamp-millis"
            if startup[1].key == "scan.mode":
                needs = "scan.timestamp-millis"
            self.problem(
                f"'{startup[1].key}' = '{startup[1].raw}' needs '{needs}'", startup[1].key, True
            )

        if enabled is None or enabled[0] == "off":
            self.check_off(read, emit)
            return None

        paimon = "log.system" in self.settings
        switch = enabled[1].key
        found = self.agree(
            ("log-store.type", _same), ("log.system", lambda v: None if v == "none" else v)
        )
        system = found[0] if found else "kafka"
        if system == "pulsar":
            resolved_address = self.resolve_pulsar_address(address, switch)
            resolved_topic = self.resolve_pulsar_topic(topic, switch)
            self.check_pulsar()
        else:
            resolved_address = self.resolve_address(address, switch, paimon)
            resolved_topic = self.resolve_topic(topic, switch, paimon)
        if self.failed or resolved_address is None or resolved_topic is None:
            return None
        vocabulary_default = "log.format" if paimon else "log-store.data-format"
        partitions = self.settings.get("log.system.partitions")
        replication = self.settings.get("log.system.replication")
        return LogStoreSpec(
            system=system,
            address=resolved_address,
            topic=resolved_topic,
            consistency=Consistency(
                consistency[0] if consistency else ("committed" if paimon else "none")
            ),
            changelog_mode=ChangelogMode(
                changelog[0] if changelog else (auto if paimon else "all-kinds")
            ),
            partitions=int(partitions.value) if partitions else DEFAULT_PARTITIONS,
            replication=int(replication.value) if replication else None,
            client_properties={k: s.value for k, s in self.client.items()},
            data_format=data_format[0]
            if data_format
            else registry.get(vocabulary_default).default or "json",
            read_mode=ReadMode(read[0] if read else "file"),
            emit_mode=EmitMode(emit[0] if emit else "auto"),
            startup_mode=StartupMode(startup[0] if startup else "latest"),
            startup_timestamp_millis=int(timestamp[0]) if timestamp else None,
        )

    def check_off(
        self, read: tuple[str, _Setting] | None, emit: tuple[str, _Setting] | None
    ) -> None:
        turn_on = "turn it on with 'log-store.enabled' = 'true' or 'log.system' = 'kafka'"
        if read and read[0] == "log":
            self.problem(
                f"'{read[1].key}' = 'log' needs the log store, which is off; {turn_on}",
                read[1].key,
                True,
            )
        if emit and "log" in emit[0].split(","):
            self.problem(
                f"'{emit[1].key}' = '{emit[1].raw}' writes to the log store, which is off; {turn_on}",
                emit[1].key,
                True,
            )
        for canonical in (
            "log-store.address",
            "log-store.topic",
            "kafka.bootstrap.servers",
            "kafka.topic",
        ):
            if (setting := self.settings.get(canonical)) is not None:
                self.problem(
                    f"'{setting.key}' has no effect: the log store is off; {turn_on}",
                    setting.key,
                    severity="warning",
                )

    def resolve_address(
        self, address: tuple[str, _Setting] | None, switch: str, paimon: bool
    ) -> str | None:
        key = "kafka.bootstrap.servers" if paimon else "log-store.address"
        if address is None and self.unusable & {"log-store.address", "kafka.bootstrap.servers"}:
            return None  # given, but elided or invalid: already reported
        if address is None:
            value = self.options.bootstrap_default()
            if not value:
                self.problem(
                    f"the log store is on ('{switch}') but no Kafka broker address is set; add "
                    f"'{key}' = 'host:9092', or give a default: --bootstrap-servers, "
                    f"{BOOTSTRAP_SERVERS_ENV}, the config's kafka.bootstrap_servers, or a running "
                    "'logstore broker start'",
                    switch,
                )
                return None
            where, at = f"the default broker address ({BOOTSTRAP_SERVERS_ENV})", None
        else:
            value, where, at = address[0], f"'{address[1].key}'", address[1].key
        if value.strip().lower().startswith(("pulsar://", "pulsar+ssl://")):
            self.problem(
                f"'{value[:80]}' in {where} is a Pulsar service URL, but the log store is Kafka; "
                "for Pulsar add 'log-store.type' = 'pulsar', for Kafka give host:port[,host:port…]",
                at,
                True,
            )
            return None
        brokers = [b.strip() for b in value.split(",")]
        bad = [b for b in brokers if not _valid_broker(b)]
        if bad:
            self.problem(
                f"invalid Kafka broker address '{bad[0]}' in {where}: expected "
                "host:port[,host:port…]",
                at,
                True,
            )
            return None
        value = ",".join(brokers)  # spaces after commas are common in DDL, not in client configs
        client = self.client.get("bootstrap.servers")
        if client is not None and client.value.replace(" ", "") != value:
            self.problem(
                f"'{client.key}' contradicts the log store's broker address from {where}; remove it",
                client.key,
                True,
            )
        return value

    def resolve_pulsar_address(
        self, address: tuple[str, _Setting] | None, switch: str
    ) -> str | None:
        """``pulsar://host:port[,host:port…]``, required: a Kafka default never stands for it."""
        if address is None and "log-store.address" in self.unusable:
            return None
        if address is None:
            self.problem(
                f"the log store is on ('{switch}', 'log-store.type' = 'pulsar') but no Pulsar "
                "service URL is set; add 'log-store.address' = 'pulsar://host:6650'",
                switch,
            )
            return None
        value, setting = address
        text = value.strip()
        rest = text[len(PULSAR_SCHEME) :] if text.startswith(PULSAR_SCHEME) else None
        hosts = [h.strip() for h in rest.split(",")] if rest is not None else []
        bad = rest is None or not all(
            (m := _HOST_PORT.fullmatch(h)) is not None and 0 < int(m.group(2)) < 65536
            for h in hosts
        )
        if bad:
            self.problem(
                f"invalid Pulsar service URL '{value[:80]}' in '{setting.key}': expected "
                "pulsar://host:port[,host:port…] (e.g. pulsar://127.0.0.1:6650; TLS "
                "'pulsar+ssl://' is not supported yet)",
                setting.key,
                True,
            )
            return None
        return PULSAR_SCHEME + ",".join(hosts)

    def resolve_pulsar_topic(self, topic: tuple[str, _Setting] | None, switch: str) -> str | None:
        """The full topic name (``persistent://tenant/namespace/topic``) of a short or full one."""
        if topic is None and self.unusable & {"log-store.topic", "kafka.topic"}:
            return None
        if topic is None:
            self.problem(
                f"the log store is on ('{switch}') but no topic is set; add "
                "'log-store.topic' = '<topic>' (the topic has no default)",
                switch,
            )
            return None
        value, setting = topic
        from logstore_cli.names import PulsarTopicName  # only for Pulsar tables (start-up cost)

        try:
            return str(PulsarTopicName.parse(value.strip()))
        except InvalidInputError as exc:
            self.problem(f"{exc.message} in '{setting.key}'; {exc.hint}", setting.key, True)
            return None

    def check_pulsar(self) -> None:
        """What a Pulsar log store cannot take: Kafka's replication, and topic configs other than
        its retention (Pulsar's replicas are the namespace's persistence policy)."""
        replication = self.settings.get("log.system.replication")
        if replication is not None:
            self.problem(
                f"'{replication.key}' does not apply to a Pulsar log store: a Pulsar topic's "
                "replicas are its namespace's persistence policy (ensemble and quorums); remove it",
                replication.key,
            )
        if "kafka.bootstrap.servers" in self.settings or "kafka.topic" in self.settings:
            kafka = self.settings.get("kafka.bootstrap.servers") or self.settings["kafka.topic"]
            self.problem(
                f"'{kafka.key}' is a Kafka setting, but the log store is Pulsar ('log-store.type' "
                "= 'pulsar'); use 'log-store.address' and 'log-store.topic'",
                kafka.key,
            )
        for key, value in self.props.items():
            if not key.startswith(registry.TOPIC_CONFIG_PREFIX):
                continue
            config = key[len(registry.TOPIC_CONFIG_PREFIX) :]
            if config not in PULSAR_TOPIC_CONFIGS:
                self.problem(
                    f"'{key}' is a Kafka topic config; a Pulsar topic takes only "
                    + " and ".join(
                        f"'{registry.TOPIC_CONFIG_PREFIX}{c}'" for c in PULSAR_TOPIC_CONFIGS
                    ),
                    key,
                )
                continue
            unit, name = (_MINUTE_MS, "minutes") if config == "retention.ms" else (_MIB, "MiB")
            text = value.strip()
            number = int(text) if re.fullmatch(r"-?\d{1,18}", text) else None
            if number is None or not (number == -1 or (number >= 0 and number % unit == 0)):
                self.problem(
                    f"invalid value '{value[:40]}' for '{key}' on Pulsar: expected -1 (no "
                    f"limit) or a whole number of {name} ({unit}, {2 * unit}, …), as Pulsar "
                    "keeps retention in those units",
                    key,
                    True,
                )
        for name, setting in self.client.items():
            self.problem(
                f"'{setting.key}' is a Kafka client setting; a Pulsar log store does not use it "
                f"('{name}' is ignored)",
                setting.key,
                severity="warning",
            )

    def resolve_topic(
        self, topic: tuple[str, _Setting] | None, switch: str, paimon: bool
    ) -> str | None:
        if topic is None and self.unusable & {"log-store.topic", "kafka.topic"}:
            return None
        if topic is None:
            key = "kafka.topic" if paimon else "log-store.topic"
            self.problem(
                f"the log store is on ('{switch}') but no topic is set; add '{key}' = '<topic>' "
                "(the topic has no default)",
                switch,
            )
            return None
        value, setting = topic
        if not _TOPIC.fullmatch(value) or value in (".", ".."):
            self.problem(
                f"invalid Kafka topic name '{value[:60]}' in '{setting.key}': use 1 to 249 of the "
                "characters a-z A-Z 0-9 . _ -",
                setting.key,
                True,
            )
            return None
        return value


def _unknown_key(key: str) -> str | None:
    """Why ``key`` (not in the registry) cannot be kept as written; None when it can.

    Keys under the reserved prefixes must be known; elsewhere only a near miss of a known key is
    an error, so that the open key spaces (Kafka client settings, other engines' options) stay open.
    """
    lower = key.lower()
    written_prefix = registry.passthrough_prefix(key)
    if (
        lower != key
        and written_prefix is None
        and (registry.lookup(lower) or registry.passthrough_prefix(lower))
    ):
        defn = registry.lookup(lower)
        return (
            f"unknown property '{key}' (keys are case-sensitive); did you mean "
            f"'{defn.key if defn else lower}'?"
        )
    if registry.is_reserved(key):
        close = registry.suggest(key)
        prefix = next(p for p in registry.RESERVED_PREFIXES if lower.startswith(p))
        hint = (
            f"did you mean '{close}'?"
            if close
            else f"keys under '{prefix}' are reserved; 'logstore properties' lists them"
        )
        return f"unknown property '{key}'; {hint}"
    if (close := registry.near_miss(key)) is not None:
        return f"unknown property '{key}'; did you mean '{close}'?"
    if (meant := registry.misspelt_reserved_prefix(key)) is not None:
        written = key[: key.index(".") + 1]
        return (
            f"unknown property '{key}': '{written}' looks like a misspelling of the prefix "
            f"'{meant}', whose keys 'logstore properties' lists"
        )
    return None


def _same(value: str) -> str:
    return value


def _scan_mode_start(mode: str, has_timestamp: bool) -> str | None:
    """The log start a Paimon ``scan.mode`` implies; None for modes that start from the snapshot."""
    if mode == "latest":
        return "latest"
    if mode == "from-timestamp" or (mode == "default" and has_timestamp):
        return "timestamp"
    return None


def _valid_broker(broker: str) -> bool:
    m = _BROKER.fullmatch(broker)
    return m is not None and 0 < int(m.group(2)) < 65536
