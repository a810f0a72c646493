"""The property registry: coverage of docs/design.md §4, lookups, and docs/properties.md kept in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.ddl import registry
from logstore_cli.ddl.registry import PropType, Vocabulary

pytestmark = pytest.mark.unit

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "properties.md"

DESIGN_KEYS = {
    # Amoro / Arctic
    "log-store.enabled": Vocabulary.AMORO,
    "log-store.type": Vocabulary.AMORO,
    "log-store.address": Vocabulary.AMORO,
    "log-store.topic": Vocabulary.AMORO,
    "properties.*": Vocabulary.AMORO,
    "log-store.data-format": Vocabulary.AMORO,
    "log-store.data-version": Vocabulary.AMORO,
    "log-store.consistency-guarantee.enabled": Vocabulary.AMORO,
    "log.consumer.changelog.modes": Vocabulary.AMORO,
    "mixed-format.read.mode": Vocabulary.AMORO,
    "mixed-format.emit.mode": Vocabulary.AMORO,
    "scan.startup.mode": Vocabulary.AMORO,
    # Paimon / Table Store
    "log.system": Vocabulary.PAIMON,
    "kafka.bootstrap.servers": Vocabulary.PAIMON,
    "kafka.topic": Vocabulary.PAIMON,
    "kafka.*": Vocabulary.PAIMON,
    "log.system.partitions": Vocabulary.PAIMON,
    "log.system.replication": Vocabulary.PAIMON,
    "log.format": Vocabulary.PAIMON,
    "log.key.format": Vocabulary.PAIMON,
    "log.consistency": Vocabulary.PAIMON,
    "log.changelog-mode": Vocabulary.PAIMON,
    "streaming-read-mode": Vocabulary.PAIMON,
    "scan.mode": Vocabulary.PAIMON,
    "scan.timestamp-millis": Vocabulary.PAIMON,
}


def test_property_reference_matches_registry() -> None:
    page = REFERENCE.read_text(encoding="utf-8")
    assert registry.README_BEGIN in page  # the generated table is on this page
    assert registry.update_readme(page) == page, (
        "docs/properties.md is stale: run .venv/bin/python scripts/gen_property_docs.py"
    )


def test_update_readme_only_touches_the_marked_section() -> None:
    text = f"intro\n{registry.README_BEGIN}\nold\n{registry.README_END}\noutro\n"
    updated = registry.update_readme(text)
    assert updated.startswith(f"intro\n{registry.README_BEGIN}\n| Property |")
    assert updated.endswith(f"\n{registry.README_END}\noutro\n")
    assert registry.update_readme(updated) == updated
    with pytest.raises(ValueError):
        registry.update_readme("no markers")


def test_design_vocabulary_is_covered() -> None:
    keys = {d.key: d.vocabulary for d in registry.REGISTRY}
    assert {k: keys.get(k) for k in DESIGN_KEYS} == DESIGN_KEYS


def test_allowed_values_from_the_design() -> None:
    assert registry.get("mixed-format.emit.mode").allowed == ("auto", "file", "log", "file,log")
    assert registry.get("scan.startup.mode").allowed == (
        "earliest",
        "latest",
        "timestamp",
        "group-offsets",
        "specific-offsets",
    )
    assert registry.get("log.changelog-mode").allowed == ("auto", "all", "upsert")
    assert registry.get("log.consistency").default == "transactional"
    assert (
        registry.get("log.system.partitions").default,
        registry.get("log.system.replication").default,
    ) == ("1", None)  # replication: the cluster's default.replication.factor


def test_aliases() -> None:
    assert registry.lookup("arctic.read.mode") is registry.get("mixed-format.read.mode")
    assert registry.lookup("log-store.enable") is registry.get("log-store.enabled")
    assert registry.lookup("arctic.emit.mode") is registry.get("mixed-format.emit.mode")
    assert (
        registry.suggest("arctic.read.mod") == "mixed-format.read.mode"
    )  # aliases suggest the key


def test_every_entry_is_well_formed() -> None:
    seen: set[str] = set()
    for d in registry.REGISTRY:
        names = {d.key, *d.aliases}
        assert not names & seen, names
        seen |= names
        assert d.description.endswith(".")
        if d.type in (PropType.ENUM, PropType.BOOLEAN):
            assert d.allowed and (d.default is None or d.default in d.allowed)
        if d.type is PropType.PASSTHROUGH:
            assert d.key.endswith(".*")
            assert d.prefix in (*registry.PASSTHROUGH_PREFIXES, registry.TOPIC_CONFIG_PREFIX)
        else:
            reserved = registry.is_reserved(d.key)
            assert reserved or d.key.startswith(
                ("kafka.", "scan.", "streaming-", "full-compaction.")
            )


@pytest.mark.parametrize(
    ("key", "value", "normal"),
    [
        ("log-store.enabled", "TRUE", "true"),
        ("log-store.enabled", "yes", None),
        ("mixed-format.emit.mode", " log , file ", "file,log"),
        ("mixed-format.emit.mode", "log,log", "log"),
        ("mixed-format.emit.mode", "file,disk", None),
        ("log.system.partitions", "3", "3"),
        ("log.system.partitions", "0", None),
        ("log.system.partitions", "3.5", None),
        ("log.format", "avro", None),
        ("log.format", "Debezium-JSON", "debezium-json"),
        ("log.key.format", "avro", None),
        ("log-store.data-format", "debezium-json", "debezium-json"),
    ],
)
def test_normalize(key: str, value: str, normal: str | None) -> None:
    assert registry.normalize(registry.get(key), value) == normal


def test_to_json_lists_everything() -> None:
    rows = registry.to_json()
    assert [r["key"] for r in rows] == [d.key for d in registry.REGISTRY]
    assert set(rows[0]) == {
        "key",
        "aliases",
        "type",
        "default",
        "allowed",
        "vocabulary",
        "description",
    }
