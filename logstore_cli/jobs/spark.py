"""Build a SparkSession with Delta configured, from jars resolved ahead of time (no network).

The JVM's stderr is sent to a log file for the session's lifetime (Spark's console logging is noise at
a terminal); when the JVM fails to start, the tail of that file becomes the error the user sees,
instead of PySpark's bare ``JAVA_GATEWAY_EXITED``.

Spark's own files live in a directory of this user, ``<state dir>/spark`` (mode 0700): the driver logs
in ``logs/`` (a new file per session, never opened through a symlink, the newest
``KEEP_DRIVER_LOGS`` kept) and Spark's SQL warehouse in ``warehouse/`` — never ``spark-warehouse/`` in
the current directory. Delta tables are addressed by path and do not live there.

Secret settings (``model.is_secret``) never reach the JVM's command line: PySpark would pass them to
spark-submit as ``--conf k=v`` for ``ps`` to show; the JVM is launched without them and the
SparkContext gets them over the gateway (``launch_conf``, ``build_session``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logstore_cli import interrupt
from logstore_cli.errors import InvalidInputError, SparkStartError, StateDirError
from logstore_cli.jvm.class_archive import SUBMIT_OPTS
from logstore_cli.model import is_secret
from logstore_cli.paths import private_dir, state_home, state_subdir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.storage.s3 import S3Settings

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


_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback_master(master: str) -> bool:
    """``local[…]``, or ``spark://HOST:PORT[,HOST:PORT…]`` whose every host is a loopback address:
    the executors reach a driver bound to 127.0.0.1, and the machine's few cores want few tasks."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [hp.rpartition(":")[0] for hp in master.removeprefix("spark://").split(",")]
    return all(h in _LOOPBACK_HOSTS or h.startswith("127.") for h in hosts)


TASKS_PER_CORE = 2  # shuffle tasks per core: a slow task is half a core's share of a stage


def local_cores(master: str, machine: int | None = None) -> int | None:
    """The cores a ``local`` master runs on: ``local`` 1, ``local[N]`` and ``local[N,F]`` N,
    ``local[*]`` the machine's (``machine``, else ``os.cpu_count()``); None for another master."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if m is None:
        return None
    given = m.group(1)
    if given is None:
        return 1
    if given == "*":
        return machine if machine is not None else _usable_cores()
    return max(1, int(given))


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as ``nproc`` says), else the machine's."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def shuffle_partitions(cores: int) -> int:
    """Shuffle partitions for ``cores`` cores. Spark's default (200) makes every shuffle of a small
    epoch 200 tasks, each with its scheduling cost, and a MERGE write up to as many files."""
    return max(2, TASKS_PER_CORE * cores)


def defaults_for(master: str, machine: int | None = None) -> dict[str, str]:
    """The confs logstore gives a master before Delta's and the user's (which win): a local
    master's shuffle partitions and parallelism sized to its cores, a standalone master on
    loopback LOCAL_DEFAULTS' few tasks; a remote cluster's size is unknown here (no defaults)."""
    if not is_loopback_master(master):
        return {}
    conf = dict(LOCAL_DEFAULTS)
    cores = local_cores(master, machine)
    if cores is not None:
        tasks = str(shuffle_partitions(cores))
        conf["spark.sql.shuffle.partitions"] = conf["spark.default.parallelism"] = tasks
    return conf


KEEP_DRIVER_LOGS = 10
_LOG_PREFIX, _LOG_SUFFIX = "driver-", ".log"


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    app_name: str = "logstore"
    conf: Mapping[str, str] = field(default_factory=dict)
    # Spark's own files (driver logs, SQL warehouse); default <state dir>/spark.
    work_dir: Path | None = None
    log_dir: Path | None = None  # where the JVM's stderr goes; default <work_dir>/logs
    extra_jars: tuple[Path, ...] = ()
    # The warehouse's S3 settings when it is on S3: the s3a:// connector's jars and settings are
    # added (``storage.s3.s3a_spark_conf``); None (a local warehouse) adds neither.
    s3: S3Settings | None = None
    # Map the driver's classes from the archive 'logstore setup' built (jvm/class_archive.py), if
    # there is one for this Java and pyspark.
    class_archive: bool = True

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")

    @property
    def on_loopback(self) -> bool:
        """Driver and executors on this machine: ``local[…]``, or a standalone master on loopback
        (``logstore spark start``'s); they get LOCAL_DEFAULTS."""
        return is_loopback_master(self.master)

    @property
    def spark_dir(self) -> Path:
        return self.work_dir if self.work_dir is not None else state_home() / "spark"


def session_conf(settings: SparkSettings, jars: list[Path]) -> dict[str, str]:
    """The full Spark configuration: local defaults < S3A < Delta < the user's confs. No I/O."""
    conf = defaults_for(settings.master)
    if settings.s3 is not None:
        from logstore_cli.storage.s3 import s3a_spark_conf

        conf.update(s3a_spark_conf(settings.s3))
    # Spark creates its SQL warehouse (the default database's directory) at start; by default that
    # is ./spark-warehouse, a directory the user never asked for. A file: URI keeps it on the
    # driver's disk whatever Hadoop's default file system is.
    conf["spark.sql.warehouse.dir"] = (settings.spark_dir / "warehouse").absolute().as_uri()
    conf.update(DELTA_CONF)
    all_jars = [str(j) for j in [*jars, *settings.extra_jars]]
    conf.update(settings.conf)
    user_jars = settings.conf.get("spark.jars")
    conf["spark.jars"] = ",".join([*all_jars, *([user_jars] if user_jars else [])])
    return conf


def launch_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The confs that may appear on the JVM's command line: all but the secret ones (``model.is_secret``).

    PySpark passes the confs it launches its JVM with to spark-submit as ``--conf k=v``, which every
    user of the host reads with ``ps``. The secret ones (``spark.hadoop.fs.s3a.secret.key``, an SSL
    password) reach the JVM through the gateway instead, once it runs (``build_session``). JVM
    options are a command line whatever carries them: a secret in one is refused. No I/O.
    """
    for key, value in conf.items():
        if key.endswith("JavaOptions") and is_secret(key, value):
            raise InvalidInputError(
                f"the Spark setting {key} holds a secret, and JVM options are a process's command "
                "line: every user of the host would read it with ps",
                hint="pass the secret in a file the JVM reads (a keystore, a credentials file) "
                "or as a Spark or Hadoop setting of its own in [spark.conf]",
            )
    return {k: v for k, v in conf.items() if not is_secret(k, v)}


def build_session(settings: SparkSettings | None = None) -> SparkSession:
    """Start (or reuse) the SparkSession; raises SparkStartError with the JVM's own output."""
    settings = settings or SparkSettings()
    from logstore_cli.jvm.deps import spark_jars

    jars = spark_jars(s3=settings.s3 is not None)  # resolved once ('logstore setup'), then cached
    missing = [j for j in settings.extra_jars if not j.is_file()]
    if missing:
        raise SparkStartError(
            f"jar not found: {missing[0]}", hint="check the path given in the Spark settings"
        )
    _check_java()
    if settings.on_loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    conf = {
        "spark.master": settings.master,
        "spark.app.name": settings.app_name,
        **session_conf(settings, jars),
    }
    launch = launch_conf(conf)  # before the start: a refused conf is the user's error
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)

    log_file, fd = new_driver_log(driver_log_dir(settings))
    try:
        with _stderr_to(fd), _gateway_stopped_if_cut_short():
            _launch_gateway(launch, _archive_options(settings, conf))
            # The SparkContext's conf is built in the running JVM over the gateway's socket: the
            # secret confs are in it from the context's start (core confs such as spark.ssl.* are
            # read only then; spark.hadoop.* reach the Hadoop configuration and the executors)
            # without ever being on a command line, in an environment or in a file.
            spark = builder.getOrCreate()
    except Exception as exc:
        signals = interrupt.current()
        if signals is not None and signals.seen():  # the start failed because it was stopped
            raise KeyboardInterrupt from exc
        raise SparkStartError(
            f"the Spark JVM did not start: {_first_line(exc)}",
            detail=_tail(log_file),
            hint=f"full JVM output: {log_file}",
        ) from exc
    # Spark's context put its own SIGINT handler in (it cancels jobs from inside the handler):
    # ours goes back, and a stop that Spark's handler caught meanwhile is honoured here.
    interrupt.reassert()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_query_context_loggers()
    _quiet_teardown_at_exit(spark)
    return spark


def _archive_options(settings: SparkSettings, conf: Mapping[str, str]) -> str | None:
    """The driver JVM's options that map the class archive 'logstore setup' built, if there is one
    for this Java and pyspark and the user's driver options leave class sharing to logstore."""
    if not settings.class_archive:
        return None
    from logstore_cli.jvm import class_archive

    archive = class_archive.current_archive()
    if archive is None or class_archive.user_decides(conf, os.environ):
        return None
    return class_archive.use_options(archive)


def _launch_gateway(conf: Mapping[str, str], java_options: str | None = None) -> None:
    """Start PySpark's JVM with ``conf`` on its command line, unless this process has one already
    (a session stopped and built again, or a driver run by spark-submit: PySpark connects to it).

    ``java_options`` reach the driver JVM through ``SPARK_SUBMIT_OPTS``, for this launch only:
    spark-submit puts them before the driver's default and extra Java options, so a user's own
    options (in the conf or in spark-defaults.conf) still come later and win, and none of theirs
    is replaced, as setting ``spark.driver.extraJavaOptions`` here would.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:
        return
    launch = SparkConf(loadDefaults=False)
    launch.setAll(list(conf.items()))
    with submit_opts(java_options):
        SparkContext._ensure_initialized(conf=launch)


@contextlib.contextmanager
def submit_opts(options: str | None) -> Iterator[None]:
    """``options`` before any ``SPARK_SUBMIT_OPTS`` already set, while a driver JVM launches."""
    if options is None:
        yield
        return
    before = os.environ.get(SUBMIT_OPTS)
    os.environ[SUBMIT_OPTS] = f"{options} {before}" if before else options
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SUBMIT_OPTS, None)
        else:
            os.environ[SUBMIT_OPTS] = before


def _quiet_teardown_at_exit(spark: SparkSession) -> None:
    """Keep PySpark's threads from printing tracebacks as the process exits, after its message.

    The JVM ends when the interpreter, tearing down, closes the gateway's stdin, while daemon threads
    still run: the accumulator server's handler (polling the connection the JVM opens after the
    first Python task) reads end-of-file and ``socketserver`` prints the EOFError; py4j logs every
    command that finds the JVM gone (a Java object's finalizer, say) with ``logging.exception``.
    The command has said how it ended by then. Stopping the context instead costs seconds per exit.
    """
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None or getattr(server, "_logstore_quiet_at_exit", False):  # a reused session
        return
    server._logstore_quiet_at_exit = True

    def quiet() -> None:
        import logging

        logging.disable(logging.CRITICAL)
        server.server_shutdown = True  # the handler stops polling at its next wake-up
        server.handle_error = lambda request, client_address: None

    atexit.register(quiet)


def _quiet_query_context_loggers() -> None:
    """PySpark logs every failed query as a JSON line with a Java stack trace on stderr before
    raising it; logstore turns that exception into one clear message, so the line is only noise."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        # Created through PySparkLogger: its callers pass keyword arguments a plain Logger refuses.
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextlib.contextmanager
def _gateway_stopped_if_cut_short() -> Iterator[None]:
    """Stop the JVM PySpark launches when its start is interrupted (Ctrl-C) before PySpark holds it.

    Such a JVM never exits on its own: PySpark has already removed the directory it was to write its
    port to, and the gateway's threads keep it alive, holding the terminal's stdout. PySpark keeps
    the process object to itself, so its ``Popen`` is wrapped for the duration of the start.
    """
    from pyspark import SparkContext, java_gateway

    launched: list[subprocess.Popen[bytes]] = []
    real = java_gateway.Popen  # type: ignore[attr-defined]

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        # Held: a stop raised inside Popen, after the fork and before it returns (a loaded
        # machine), would lose the only handle on a JVM that then never exits.
        with interrupt.held():
            proc = real(*args, **kwargs)
            launched.append(proc)
        return proc

    java_gateway.Popen = recording_popen  # type: ignore[attr-defined,assignment]
    try:
        yield
    except BaseException:
        if SparkContext._gateway is None:  # the start never completed: nothing will stop it
            for proc in launched:
                _end(proc)
        raise
    finally:
        java_gateway.Popen = real  # type: ignore[attr-defined]


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first (Spark's shutdown hooks remove its temp dirs), SIGKILL if it lingers."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def driver_log_dir(settings: SparkSettings) -> Path:
    """The private directory of the driver logs, created 0700 (see ``paths.private_dir``)."""
    if settings.work_dir is None:
        spark_dir = state_subdir(state_home(), "spark")
    else:
        spark_dir = private_dir(settings.work_dir)
    return private_dir(settings.log_dir if settings.log_dir is not None else spark_dir / "logs")


def new_driver_log(log_dir: Path, *, keep: int = KEEP_DRIVER_LOGS) -> tuple[Path, int]:
    """A new driver log in ``log_dir`` and its write descriptor; older logs beyond ``keep`` go.

    A unique name opened with O_EXCL | O_NOFOLLOW, mode 0600: an existing file or a planted
    symlink is never written through.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = log_dir / f"{_LOG_PREFIX}{stamp}-{os.getpid()}-{secrets.token_hex(4)}{_LOG_SUFFIX}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StateDirError(
            f"cannot create the Spark driver log {path}: {exc.strerror}",
            hint=f"check the directory {log_dir} (it must be yours, writable, without stray files)",
        ) from exc
    prune_driver_logs(log_dir, keep=keep)
    return path, fd


def prune_driver_logs(log_dir: Path, *, keep: int = KEEP_DRIVER_LOGS) -> list[Path]:
    """Delete all but the newest ``keep`` driver logs of ``log_dir``; returns what was deleted.

    Only regular files named like a driver log are considered; nothing else in the directory is
    touched, and a symlink is never followed.
    """
    logs: list[tuple[float, str, Path]] = []
    with os.scandir(log_dir) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(_LOG_PREFIX) and name.endswith(_LOG_SUFFIX):
                with contextlib.suppress(FileNotFoundError):  # pruned by a concurrent session
                    if entry.is_file(follow_symlinks=False):
                        logs.append((entry.stat(follow_symlinks=False).st_mtime, name, Path(entry)))
    logs.sort(reverse=True)
    removed = []
    for _, _, path in logs[keep:]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _check_java() -> None:
    from logstore_cli.kafka.local_broker import java_executable

    java_executable()  # raises SetupError with an install hint when there is none


@contextlib.contextmanager
def _stderr_to(fd: int) -> Iterator[None]:
    """Point fd 2 at ``fd`` (then closed) while the JVM starts: the JVM inherits it and keeps it."""
    sys.stderr.flush()
    saved = os.dup(2)
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
