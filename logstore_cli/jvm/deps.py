"""Resolve the JVM classpaths logstore needs (Delta for Spark, the Kafka broker) with Maven.

Each classpath is a pom shipped inside the package. ``ensure_classpath`` copies its runtime jars from
Maven Central (through Maven's own settings and ``~/.m2``) into a directory keyed by the pom's hash,
and marks it complete; later calls find the mark and do no network or Maven work at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from enum import StrEnum
from importlib import resources
from pathlib import Path

from logstore_cli.errors import SetupError
from logstore_cli.paths import cache_home


class Classpath(StrEnum):
    """A named JVM classpath and the pom (inside this package) that defines it."""

    SPARK = "spark"  # Delta and Spark's Kafka connector, added to pyspark's own jars
    KAFKA = "kafka"  # the local Kafka broker
    # hadoop-aws and its AWS SDK bundle (about 560 MB), added to SPARK for a warehouse on S3 only
    S3 = "s3"
    PULSAR = "pulsar"  # the local Pulsar standalone (issue 23), ~240 MB: only when started
    HDFS = "hdfs"  # the local one-DataNode HDFS for dev and tests (issue 19), ~90 MB

    @property
    def pom(self) -> str:
        return {
            "spark": "spark-deps.xml",
            "kafka": "kafka-broker.xml",
            "s3": "s3-deps.xml",
            "pulsar": "pulsar-standalone.xml",
            "hdfs": "hdfs-minicluster.xml",
        }[self.value]


def setup_classpaths(*, s3: bool) -> list[Classpath]:
    """What ``logstore setup`` resolves: the S3 jars only when a warehouse is on S3 (``s3``)."""
    return [Classpath.SPARK, Classpath.KAFKA, *([Classpath.S3] if s3 else [])]


def spark_classpaths(*, s3: bool) -> list[Classpath]:
    """The classpaths a Spark job's jars come from: the S3 jars only for a warehouse on S3."""
    return [Classpath.SPARK, *([Classpath.S3] if s3 else [])]


def spark_jars(*, s3: bool) -> list[Path]:
    """The jars of ``spark_classpaths``, resolved with Maven the first time each is needed."""
    return [jar for cp in spark_classpaths(s3=s3) for jar in ensure_classpath(cp)]


DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_MARK = ".complete.json"


def pom_text(name: Classpath) -> str:
    return resources.files("logstore_cli.jvm").joinpath(name.pom).read_text("utf-8")


def classpath_dir(name: Classpath) -> Path:
    digest = hashlib.sha256(pom_text(name).encode()).hexdigest()[:12]
    return cache_home() / "jars" / f"{name.value}-{digest}"


def resolved_jars(name: Classpath) -> list[Path] | None:
    """The jars of a complete earlier resolution, or None when it must (re)run."""
    target = classpath_dir(name)
    mark = target / _MARK
    if not mark.is_file():
        return None
    try:
        names = json.loads(mark.read_text("utf-8"))["jars"]
    except (ValueError, KeyError, TypeError):
        return None
    jars = [target / n for n in names]
    return jars if jars and all(j.is_file() for j in jars) else None


def ensure_classpath(name: Classpath, *, quiet: bool = True) -> list[Path]:
    """Return the classpath's jars, resolving them with ``mvn`` the first time."""
    jars = resolved_jars(name)
    if jars is not None:
        return jars
    target = classpath_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _lock(target.parent / f".{name.value}.lock"):
        jars = resolved_jars(name)  # another process may have finished while we waited
        if jars is not None:
            return jars
        _run_maven(name, target, quiet=quiet)
    jars = resolved_jars(name)
    if jars is None:  # pragma: no cover - _run_maven raises on every failure path
        raise SetupError(f"resolving the {name.value} classpath left no jars in {target}")
    return jars


def _run_maven(name: Classpath, target: Path, *, quiet: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SetupError(
            "Maven ('mvn') is not on PATH; it is needed once to fetch the JVM jars",
            hint="install Maven (e.g. 'apt-get install maven') and run 'logstore setup' again",
        )
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name.value}-") as tmp:
        work = Path(tmp)
        pom = work / "pom.xml"
        pom.write_text(pom_text(name), "utf-8")
        out = work / "jars"
        cmd = [
            mvn, "-B", "-f", str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={out}", "-DincludeScope=runtime",
        ]  # fmt: skip
        if quiet:
            cmd.insert(2, "-q")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
            raise SetupError(
                f"Maven could not resolve the {name.value} classpath (exit {proc.returncode})",
                detail=tail,
                hint="check that Maven reaches Maven Central (~/.m2/settings.xml), then retry",
            )
        jars = sorted(p.name for p in out.glob("*.jar"))
        if not jars:
            raise SetupError(f"Maven resolved no jars for the {name.value} classpath")
        (out / _MARK).write_text(json.dumps({"jars": jars}, indent=1), "utf-8")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
