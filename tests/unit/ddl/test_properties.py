"""The position-free property API (``alter-table --set`` builds on it) and the vocabulary mapping."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import ParseOptions
from logstore_cli.ddl.properties import check_properties, redact, resolve_log_store
from logstore_cli.errors import DDLError
from logstore_cli.model import ChangelogMode, Consistency, EmitMode, ReadMode, StartupMode

pytestmark = pytest.mark.unit

AMORO = {"log-store.enabled": "true", "log-store.topic": "t", "log-store.address": "h:9092"}
PAIMON = {"log.system": "kafka", "kafka.topic": "t", "kafka.bootstrap.servers": "h:9092"}


def test_off_is_none() -> None:
    assert resolve_log_store({}, "db.t") is None
    assert resolve_log_store({"log-store.enabled": "false", "x": "y"}, "db.t") is None
    assert resolve_log_store({"log.system": "none"}, "db.t") is None


def test_amoro_defaults() -> None:
    spec = resolve_log_store(AMORO, "db.t")
    assert spec is not None
    assert (spec.system, spec.address, spec.topic) == ("kafka", "h:9092", "t")
    assert spec.consistency is Consistency.NONE
    assert spec.changelog_mode is ChangelogMode.ALL_KINDS
    assert (spec.partitions, spec.replication) == (1, None)  # None: the cluster's default
    assert (spec.read_mode, spec.emit_mode, spec.startup_mode) == (
        ReadMode.FILE,
        EmitMode.AUTO,
        StartupMode.LATEST,
    )
    assert spec.data_format == "json"


def test_paimon_defaults() -> None:
    spec = resolve_log_store(PAIMON, "db.t", primary_key=["id"])
    assert spec is not None
    assert spec.consistency is Consistency.COMMITTED  # Paimon's 'transactional' default
    assert spec.changelog_mode is ChangelogMode.UPSERT  # 'auto' with a primary key
    assert spec.data_format == "debezium-json"
    no_pk = resolve_log_store(PAIMON, "db.t")
    assert no_pk is not None and no_pk.changelog_mode is ChangelogMode.ALL_KINDS


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"log.consistency": "transactional"}, Consistency.COMMITTED),
        ({"log.consistency": "EVENTUAL"}, Consistency.EVENTUAL),
        ({"log-store.consistency-guarantee.enabled": "true"}, Consistency.EVENTUAL),
        ({"log-store.consistency-guarantee.enabled": "false"}, Consistency.NONE),
        (
            {"log.consistency": "eventual", "log-store.consistency-guarantee.enabled": "true"},
            Consistency.EVENTUAL,
        ),
    ],
)
def test_consistency_mapping(props: dict[str, str], expected: Consistency) -> None:
    spec = resolve_log_store({**AMORO, **props}, "db.t")
    assert spec is not None and spec.consistency is expected


@pytest.mark.parametrize(
    ("paimon", "amoro"),
    [("transactional", "true"), ("transactional", "false"), ("eventual", "false")],
)
def test_consistency_disagreement_names_both_keys(paimon: str, amoro: str) -> None:
    props = {
        **AMORO,
        "log.consistency": paimon,
        "log-store.consistency-guarantee.enabled": amoro,
    }
    with pytest.raises(DDLError) as info:
        resolve_log_store(props, "db.t")
    (d,) = info.value.errors
    assert "'log.consistency'" in d.message
    assert "'log-store.consistency-guarantee.enabled'" in d.message
    assert d.file == "db.t" and d.line is None
    assert d.render().startswith("db.t: error: ")


def test_changelog_and_read_modes() -> None:
    spec = resolve_log_store(
        {
            **PAIMON,
            "log.changelog-mode": "all",
            "streaming-read-mode": "log",
            "arctic.emit.mode": "log,file",
        },
        "t",
        primary_key=["id"],
    )
    assert spec is not None
    assert spec.changelog_mode is ChangelogMode.ALL_KINDS
    assert spec.read_mode is ReadMode.LOG
    assert spec.emit_mode is EmitMode.FILE_LOG


def test_append_only_and_alias() -> None:
    spec = resolve_log_store(
        {
            "log-store.enable": "true",
            "log-store.topic": "t",
            "log.consumer.changelog.modes": "append-only",
        },
        "t",
        ParseOptions(default_bootstrap_servers="d:1"),
    )
    assert spec is not None
    assert spec.changelog_mode is ChangelogMode.APPEND_ONLY and spec.address == "d:1"


def test_scan_mode_sets_the_start() -> None:
    spec = resolve_log_store(
        {**PAIMON, "scan.mode": "from-timestamp", "scan.timestamp-millis": "5"}, "t"
    )
    assert spec is not None
    assert (spec.startup_mode, spec.startup_timestamp_millis) == (StartupMode.TIMESTAMP, 5)
    spec = resolve_log_store({**PAIMON, "scan.mode": "latest-full"}, "t")
    assert spec is not None and spec.startup_mode is StartupMode.LATEST  # snapshot modes: default


def test_client_properties_from_both_prefixes() -> None:
    props = {
        **PAIMON,
        "kafka.security.protocol": "SASL_SSL",
        "properties.sasl.jaas.config": "Plain required password='x';",
        "properties.bootstrap.servers": "h:9092",  # agrees with the address: kept
    }
    spec = resolve_log_store(props, "t")
    assert spec is not None
    assert dict(spec.client_properties) == {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": "Plain required password='x';",  # raw: the client needs it
        "bootstrap.servers": "h:9092",
    }
    assert spec.to_json()["client_properties"]["sasl.jaas.config"] == "***"
    assert "password" not in repr(spec)


def test_client_bootstrap_must_match_the_address() -> None:
    with pytest.raises(DDLError, match="contradicts the log store's broker address"):
        resolve_log_store({**AMORO, "properties.bootstrap.servers": "other:9092"}, "t")


def test_check_properties_reports_problems_with_keys() -> None:
    spec, problems = check_properties(
        {"log-store.enabled": "maybe", "log-store.topik": "x", "z": "1"}
    )
    assert spec is None
    assert [(p.key, p.on_value) for p in problems] == [
        ("log-store.enabled", True),
        ("log-store.topik", False),
    ]


def test_errors_are_all_reported() -> None:
    with pytest.raises(DDLError) as info:
        resolve_log_store({"log.system": "kafka", "log.system.partitions": "x"}, "t")
    messages = [d.message for d in info.value.errors]
    assert len(messages) == 3
    assert any("no topic is set" in m for m in messages)
    assert any("no Kafka broker address" in m for m in messages)


def test_redact() -> None:
    props = {
        "properties.sasl.jaas.config": "a",
        "kafka.ssl.truststore.password": "b",
        "kafka.ssl.key.password": "c",
        "properties.ssl.keystore.key": "d",
        "fs.s3a.secret.key": "e",
        "fs.azure.account.key.acct.blob.core.windows.net": "f",
        "basic.auth.user.info": "g",
        "sasl.oauthbearer.token": "h",
        "my.setting": "user=u password=p",
        "log.key.format": "json",
        "properties.ssl.truststore.location": "/etc/t.jks",
        "kafka.topic": "t",
    }
    shown = redact(props)
    assert [k for k, v in shown.items() if v != "***"] == [
        "log.key.format",
        "properties.ssl.truststore.location",
        "kafka.topic",
    ]
    assert props["kafka.ssl.key.password"] == "c"  # a copy: the input is untouched


def test_topic_configs_are_a_known_prefix() -> None:
    assert resolve_log_store({**AMORO, "log.topic.retention.ms": "3600000"}, "t") is not None
    with pytest.raises(DDLError, match="names no topic config"):
        resolve_log_store({**AMORO, "log.topic.": "x"}, "t")
    with pytest.raises(DDLError, match=r"did you mean 'log\.topic\.retention\.ms'"):
        resolve_log_store({**AMORO, "log.topik.retention.ms": "1"}, "t")


def test_near_misses_are_errors_without_ddl_too() -> None:
    # alter-table --set goes through the same check, without positions
    with pytest.raises(DDLError) as info:
        resolve_log_store({**PAIMON, "kafka.topics": "t2", "scan.startup.mod": "earliest"}, "db.t")
    assert [d.message for d in info.value.errors] == [
        "unknown property 'kafka.topics'; did you mean 'kafka.topic'?",
        "unknown property 'scan.startup.mod'; did you mean 'scan.startup.mode'?",
    ]
    assert all(d.file == "db.t" and d.line is None for d in info.value.errors)
