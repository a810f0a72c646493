"""Build a SparkSession with Delta configured, from jars resolved ahead of time (no network).

The JVM's stderr is sent to a log file for the session's lifetime (Spark's console logging is noise at
a terminal); when the JVM fails to start, the tail of that file becomes the error the user sees,
instead of PySpark's bare ``JAVA_GATEWAY_EXITED``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from logstore_cli.errors import SparkStartError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# Defaults for a laptop or a CI machine: loopback only, no UI port to collide on, few shuffle tasks.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    app_name: str = "logstore"
    conf: Mapping[str, str] = field(default_factory=dict)
    log_dir: Path | None = None  # where the JVM's stderr goes; a temp dir by default
    extra_jars: tuple[Path, ...] = ()

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")


def session_conf(settings: SparkSettings, jars: list[Path]) -> dict[str, str]:
    """The full Spark configuration: local defaults < Delta < the user's confs. Pure."""
    conf: dict[str, str] = {}
    if settings.is_local:
        conf.update(LOCAL_DEFAULTS)
    conf.update(DELTA_CONF)
    all_jars = [str(j) for j in [*jars, *settings.extra_jars]]
    conf.update(settings.conf)
    user_jars = settings.conf.get("spark.jars")
    conf["spark.jars"] = ",".join([*all_jars, *([user_jars] if user_jars else [])])
    return conf


def build_session(settings: SparkSettings | None = None) -> SparkSession:
    """Start (or reuse) the SparkSession; raises SparkStartError with the JVM's own output."""
    settings = settings or SparkSettings()
    from logstore_cli.jvm.deps import Classpath, resolved_jars

    jars = resolved_jars(Classpath.SPARK)
    if jars is None:
        from logstore_cli.jvm.deps import ensure_classpath

        jars = ensure_classpath(Classpath.SPARK)
    missing = [j for j in settings.extra_jars if not j.is_file()]
    if missing:
        raise SparkStartError(
            f"jar not found: {missing[0]}", hint="check the path given in the Spark settings"
        )
    _check_java()
    if settings.is_local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in session_conf(settings, jars).items():
        builder = builder.config(key, value)

    log_dir = settings.log_dir or Path(tempfile.gettempdir()) / "logstore-spark"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / f"driver-{os.getpid()}.log"
    try:
        with _stderr_to(log_file):
            spark = builder.getOrCreate()
    except Exception as exc:
        raise SparkStartError(
            f"the Spark JVM did not start: {_first_line(exc)}",
            detail=_tail(log_file),
            hint=f"full JVM output: {log_file}",
        ) from exc
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _check_java() -> None:
    from logstore_cli.kafka.local_broker import java_executable

    java_executable()  # raises SetupError with an install hint when there is none


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Point fd 2 at ``path`` while the JVM starts: the JVM inherits it and keeps it."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return "(the JVM wrote nothing)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(the JVM wrote nothing)"
