from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from logstore_cli.errors import SetupError
from logstore_cli.jvm import deps
from logstore_cli.jvm.deps import Classpath


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path))
    return tmp_path


def _fake_complete(cp: Classpath, jars: list[str]) -> Path:
    target = deps.classpath_dir(cp)
    target.mkdir(parents=True)
    for j in jars:
        (target / j).write_bytes(b"PK")
    (target / ".complete.json").write_text(json.dumps({"jars": jars}))
    return target


def test_poms_pin_versions() -> None:
    spark = deps.pom_text(Classpath.SPARK)
    kafka = deps.pom_text(Classpath.KAFKA)
    assert "<delta.version>4.0.1</delta.version>" in spark
    assert "kafka_2.13" in kafka and "log4j-core" in kafka
    for pom in (spark, kafka):
        assert "<artifactId>maven-dependency-plugin</artifactId>" in pom
        assert "<version>3.8.1</version>" in pom


def test_classpath_dir_is_keyed_by_pom_hash(cache: Path) -> None:
    spark, kafka = deps.classpath_dir(Classpath.SPARK), deps.classpath_dir(Classpath.KAFKA)
    assert spark.parent == kafka.parent == cache / "jars"
    assert spark.name.startswith("spark-") and kafka.name.startswith("kafka-")
    assert len(spark.name) == len("spark-") + 12


def test_complete_resolution_is_reused_without_maven(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _fake_complete(Classpath.SPARK, ["a.jar", "b.jar"])
    monkeypatch.setenv("PATH", "")  # no mvn: any attempt to run Maven would fail
    assert deps.ensure_classpath(Classpath.SPARK) == [target / "a.jar", target / "b.jar"]


def test_incomplete_resolution_is_redone(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _fake_complete(Classpath.SPARK, ["a.jar"])
    os.remove(target / "a.jar")
    assert deps.resolved_jars(Classpath.SPARK) is None
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SetupError, match="Maven \\('mvn'\\) is not on PATH") as info:
        deps.ensure_classpath(Classpath.SPARK)
    assert info.value.hint and "logstore setup" in info.value.hint


def test_corrupt_mark_means_unresolved(cache: Path) -> None:
    target = _fake_complete(Classpath.KAFKA, ["a.jar"])
    (target / ".complete.json").write_text("{not json")
    assert deps.resolved_jars(Classpath.KAFKA) is None


def test_maven_failure_shows_its_output(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin = cache / "bin"
    fake_bin.mkdir()
    mvn = fake_bin / "mvn"
    mvn.write_text("#!/bin/sh\necho '[ERROR] Could not resolve dependencies: boom'\nexit 1\n")
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake_bin))
    with pytest.raises(SetupError) as info:
        deps.ensure_classpath(Classpath.KAFKA)
    assert "exit 1" in info.value.message
    assert info.value.detail and "Could not resolve dependencies: boom" in info.value.detail
    assert not deps.classpath_dir(Classpath.KAFKA).exists()
