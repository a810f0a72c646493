from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from importlib import metadata, resources
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


def _pom_dependencies(pom: str) -> dict[str, tuple[str, set[str]]]:
    """artifactId -> (version with ${properties} filled in, excluded artifactIds)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.fromstring(pom)
    props = {p.tag.split("}")[1]: p.text or "" for p in root.findall("m:properties/*", ns)}
    deps_: dict[str, tuple[str, set[str]]] = {}
    for dep in root.findall("m:dependencies/m:dependency", ns):
        version = re.sub(
            r"\$\{([^}]+)\}", lambda m: props[m.group(1)], dep.findtext("m:version", "", ns)
        )
        excluded = {e.text or "" for e in dep.findall("m:exclusions/m:exclusion/m:artifactId", ns)}
        deps_[dep.findtext("m:artifactId", "", ns)] = (version, excluded)
    return deps_


def test_spark_pom_matches_the_installed_pyspark() -> None:
    # Spark's connector jars link against Spark's internals and Scala: they must be the pyspark
    # release line and its Scala binary version.
    spark = metadata.version("pyspark")
    jars = Path(str(resources.files("pyspark"))) / "jars"
    [scala_lib] = jars.glob("scala-library-*.jar")
    scala = ".".join(scala_lib.name.removeprefix("scala-library-").split(".")[:2])
    pom = _pom_dependencies(deps.pom_text(Classpath.SPARK))

    version, excluded = pom["spark-sql-kafka-0-10_2.13"]
    assert version == spark
    assert "spark-token-provider-kafka-0-10_2.13" in excluded  # replaced by the pinned one below
    token_version, _ = pom["spark-token-provider-kafka-0-10_2.13"]
    assert token_version.split(".")[:2] == spark.split(".")[:2]
    for artifact in pom:
        suffix = re.search(r"_(\d+\.\d+)$", artifact)
        assert suffix is None or suffix.group(1) == scala, artifact


def test_spark_pom_excludes_what_pyspark_ships() -> None:
    # The connector's transitive jars that pyspark/jars already holds (often in a newer version).
    shipped = {p.name for p in (Path(str(resources.files("pyspark"))) / "jars").glob("*.jar")}
    pom = _pom_dependencies(deps.pom_text(Classpath.SPARK))
    _, excluded = pom["spark-sql-kafka-0-10_2.13"]
    for artifact in ("slf4j-api", "lz4-java", "snappy-java", "zstd-jni", "jsr305", "scala-library"):
        assert any(name.startswith(f"{artifact}-") for name in shipped), artifact
        assert artifact in excluded, artifact


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


def test_s3_pom_matches_pysparks_hadoop_client() -> None:
    # hadoop-aws must be the Hadoop release of pyspark's own client jars (3.4.2+ with 3.4.1 client
    # jars fails at class loading), with the SDK bundle that release was built against.
    jars = Path(str(resources.files("pyspark"))) / "jars"
    [client] = jars.glob("hadoop-client-api-*.jar")
    hadoop = client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    pom = _pom_dependencies(deps.pom_text(Classpath.S3))
    assert set(pom) == {"hadoop-aws", "bundle", "wildfly-openssl"}
    assert pom["hadoop-aws"][0] == hadoop
    assert pom["bundle"][0] == "2.24.6"
    for artifact, (_, excluded) in pom.items():
        assert excluded == {"*"}, artifact  # the rest is in pyspark/jars or shaded in the bundle
    assert "<version>3.8.1</version>" in deps.pom_text(Classpath.S3)


def test_the_s3_jars_have_a_cache_key_of_their_own(cache: Path) -> None:
    s3, spark = deps.classpath_dir(Classpath.S3), deps.classpath_dir(Classpath.SPARK)
    assert s3.parent == spark.parent == cache / "jars"
    assert s3.name.startswith("s3-") and s3 != spark
    _fake_complete(Classpath.SPARK, ["delta.jar"])
    assert deps.resolved_jars(Classpath.S3) is None  # the base jars resolved say nothing of S3
