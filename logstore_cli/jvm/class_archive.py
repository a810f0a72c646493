"""The Spark driver's class-data-sharing archive: the classes a Spark job loads, mapped at start.

A Spark job's JVM loads tens of thousands of classes from pyspark's and Delta's jars before its first
epoch, each read from a jar, parsed and verified. ``logstore setup`` runs one small Spark and Delta
workload (``cli/warmup.py``) with ``-XX:ArchiveClassesAtExit``: at its exit the JVM writes what it
loaded, already parsed and verified, to one file (HotSpot's dynamic CDS archive, JDK 13+). Every later
driver JVM starts with ``-XX:SharedArchiveFile`` and maps those classes instead (measured in
docs/benchmarks.md). The archive is an optimisation only: a JVM that cannot use it (another JDK
build, a jar changed under it, a heap too large for compressed pointers) says so in the driver log
and loads its classes as before; ``-Xshare:auto`` never lets it fail a start.

One archive per Java runtime, pyspark version, ``SPARK_CONF_DIR`` and Spark classpath
(``archive_key``), in the jar cache. A user whose own
driver options already choose class sharing (``-Xshare:…``, an archive of their own) gets nothing
added. Everything here but ``build`` is free of I/O beyond a ``stat``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from logstore_cli.errors import SetupError
from logstore_cli.jvm.deps import Classpath, classpath_dir
from logstore_cli.jvm.java import java_executable
from logstore_cli.paths import cache_home

DRIVER_OPTIONS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")
# spark-submit's own JVM options, the driver's in client mode: how logstore passes its options
# (jobs/spark.py), before the user's spark.driver.*JavaOptions.
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
# Bump when the warm-up changes what the archive should hold: old archives are then rebuilt.
WARMUP_VERSION = 1
# The JVM's own CDS messages (e.g. "Unable to use shared archive") go to its stderr, which logstore
# sends to the driver log; by default HotSpot prints them on stdout, a command's output.
_LOG_TO_STDERR = "-Xlog:cds*=off -Xlog:cds*=warning:stderr"
# Options by which a user already decides class sharing for the driver: then logstore adds none.
_USER_CDS = re.compile(r"(^|\s)-(Xshare:|XX:(SharedArchiveFile|ArchiveClassesAtExit)=)")
# Spark splits extraJavaOptions at whitespace, honouring quotes and backslashes: a path holding a
# quote or a backslash is not worth quoting for a speed-up; one with spaces is double-quoted.
_UNQUOTABLE = re.compile(r"[\"'\\$`\n\r\t]")
_SAFE = re.compile(r"[^0-9A-Za-z.+-]")  # the version as a file name's part
BUILD_TIMEOUT_S = 900.0
NO_ARCHIVE_EXIT = 3  # the warm-up's exit when its JVM wrote no archive,
REASON_FILE = "no-archive-reason.txt"  # and the file in its work dir that says why


def archive_key(
    java: Path,
    java_stat: os.stat_result,
    pyspark_version: str,
    spark_home: str,
    spark_conf_dir: str,
    spark_jars: str = "",
) -> str:
    """The archive's name for one Java runtime (its real path, size and time: a JDK update is a new
    key), pyspark's version and Spark's home (``SPARK_HOME``, else the pyspark package: its
    ``jars/`` are the driver's class path, so two virtualenvs sharing the jar cache get one archive
    each), ``SPARK_CONF_DIR`` (the class path's first entry: a JVM maps an archive only when its
    class path begins as the one it was written with) and logstore's Spark jars (Delta's version:
    new jars, a new archive). No I/O."""
    ident = [
        WARMUP_VERSION,
        str(java),
        java_stat.st_size,
        java_stat.st_mtime_ns,
        pyspark_version,
        spark_home,
        spark_conf_dir,
        spark_jars,
    ]
    digest = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]
    return f"spark-{_SAFE.sub('_', pyspark_version)[:40]}-{digest}"


def archive_dir() -> Path:
    return cache_home() / "class-archive"


@dataclass(frozen=True)
class _Identity:
    """What an archive is for, read once: the Java runtime, pyspark and the driver's class path."""

    java: Path
    java_stat: os.stat_result
    pyspark_version: str
    spark_home: str
    conf_dir: str
    jars: str

    @property
    def key(self) -> str:
        return archive_key(self.java, self.java_stat, self.pyspark_version, self.spark_home,
                           self.conf_dir, self.jars)  # fmt: skip

    @property
    def owner(self) -> str:
        """Whose archive this is: the Java runtime's path (another JDK keeps its own; an update of
        it in place is a new key of the same owner), Spark's home and conf dir (the class path)."""
        return f"{self.java}\n{self.spark_home}\n{self.conf_dir}"


def _identity() -> _Identity | None:
    """This machine's, or None when there is no Java or no pyspark (then no archive either)."""
    try:
        java = Path(java_executable()).resolve()
        java_stat = java.stat()
        version = metadata.version("pyspark")
        home = spark_home()
        if home is None:
            return None
        stamp = _jars_stamp(Path(home) / "jars")
    except (SetupError, OSError, metadata.PackageNotFoundError):
        return None
    jars = f"{classpath_dir(Classpath.SPARK).name}:{stamp}"
    return _Identity(java, java_stat, version, home, os.environ.get("SPARK_CONF_DIR", ""), jars)


def current_key() -> str | None:
    """This machine's key, or None when there is no Java or no pyspark (then no archive either)."""
    ident = _identity()
    return None if ident is None else ident.key


def _jars_stamp(jars: Path) -> str:
    """The name, size and time of every jar of Spark's home, hashed: what the JVM checks before it
    maps an archive (a pyspark reinstalled at the same path and version writes new jar files, whose
    times the archive's record no longer matches: a new key, not an archive silently refused).
    ~250 ``stat`` calls, about a millisecond."""
    entries = []
    with os.scandir(jars) as it:
        for entry in it:
            if entry.name.endswith(".jar"):
                st = entry.stat()
                entries.append((entry.name, st.st_size, st.st_mtime_ns))
    return hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()[:12]


def spark_home() -> str | None:
    """The Spark home PySpark's launcher takes its jars from: ``SPARK_HOME``, else pyspark's."""
    return os.environ.get("SPARK_HOME") or _pyspark_dir()


def _pyspark_dir() -> str | None:
    """Where pyspark is installed (PySpark's Spark home without SPARK_HOME), found without
    importing it."""
    spec = importlib.util.find_spec("pyspark")
    locations = spec.submodule_search_locations if spec is not None else None
    return str(Path(locations[0]).resolve()) if locations else None


def archive_path(key: str) -> Path:
    return archive_dir() / f"{key}.jsa"


def current_archive() -> Path | None:
    """The archive this machine's driver JVM can map, if ``logstore setup`` made one."""
    key = current_key()
    if key is None:
        return None
    path = archive_path(key)
    return path if path.is_file() else None


def _quoted(path: Path) -> str | None:
    text = str(path)
    if _UNQUOTABLE.search(text):
        return None
    return f'"{text}"' if " " in text else text


def use_options(archive: Path) -> str | None:
    """The driver's JVM options that map ``archive`` (None: its path cannot be passed safely)."""
    quoted = _quoted(archive)
    return (
        None if quoted is None else f"-XX:SharedArchiveFile={quoted} -Xshare:auto {_LOG_TO_STDERR}"
    )


def dump_options(target: Path) -> str | None:
    """The warm-up JVM's options that write its loaded classes to ``target`` at exit."""
    quoted = _quoted(target)
    return None if quoted is None else f"-XX:ArchiveClassesAtExit={quoted} {_LOG_TO_STDERR}"


def user_decides(conf: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether the user's own driver options (the conf's, or ``SPARK_SUBMIT_OPTS``) already decide
    class sharing: then logstore adds nothing. No I/O."""
    mine = [conf.get(k, "") for k in DRIVER_OPTIONS] + [env.get(SUBMIT_OPTS, "")]
    return any(_USER_CDS.search(text) for text in mine)


@dataclass(frozen=True)
class Unavailable:
    """The JVM wrote no archive, in its words: Spark jobs run without one."""

    reason: str


def build(*, timeout_s: float = BUILD_TIMEOUT_S) -> Path | Unavailable:
    """Run the warm-up and install its archive; its path, or why the JVM wrote none (``cli/warmup.py``
    then exits 3). Idempotent: an archive already there is kept, and a JVM that wrote none is
    not asked again for the same key (``known_unavailable``).

    The warm-up writes into a temporary file of the archive's directory, renamed into place only
    once its JVM has exited: a JVM starting meanwhile never maps half an archive.
    """
    ident = _identity()
    if ident is None:
        raise SetupError(
            "no Java runtime or no pyspark: the Spark class archive cannot be built",
            hint="install a Java 17 runtime and run scripts/setup.sh",
        )
    key = ident.key
    final = archive_path(key)
    if final.is_file():
        return final
    if dump_options(final) is None:
        return Unavailable(f"the cache's path cannot be passed to the JVM: {final.parent}")
    final.parent.mkdir(parents=True, exist_ok=True)
    # One warm-up at a time: a second 'logstore setup' (or test worker) waits and finds the file.
    with (final.parent / ".build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.is_file():
            return final
        known = known_unavailable(key)
        if known is not None:  # this Java, pyspark and conf dir wrote none before: not again
            return known
        _remove_stale_work(final.parent)
        built = _build_into(final, timeout_s)
        if isinstance(built, Unavailable):
            _write_atomically(unavailable_path(key), built.reason)
        _write_atomically(final.with_suffix(".home"), ident.owner)
        _remove_superseded(final.parent, key, ident.owner)
        return built


def _remove_superseded(directory: Path, key: str, owner: str) -> None:
    """The archives (and records of none) of earlier keys of the same owner (``_Identity.owner``): written
    for a JDK build, pyspark or jars it no longer has, ~200 MB each that no JVM would map again
    (one mapping one now keeps its pages). Other owners' archives (another JDK, virtualenv or
    SPARK_CONF_DIR) are kept."""
    for record in directory.glob("*.home"):
        stem = record.name.removesuffix(".home")
        if stem == key or record.is_symlink():
            continue
        try:
            same = record.read_text("utf-8") == owner
        except OSError:
            continue
        if same:
            for suffix in (".jsa", ".none", ".home"):
                (directory / f"{stem}{suffix}").unlink(missing_ok=True)


def unavailable_path(key: str) -> Path:
    return archive_dir() / f"{key}.none"


def known_unavailable(key: str) -> Unavailable | None:
    """Why the JVM wrote no archive for ``key`` the last time, if it did not (recorded so that a
    second 'logstore setup' does not run the warm-up again only to hear the same)."""
    path = unavailable_path(key)
    try:
        return Unavailable(path.read_text("utf-8", "replace"))
    except FileNotFoundError:
        return None


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _remove_stale_work(directory: Path) -> None:
    """A warm-up's work directory left by a killed 'logstore setup' (a half-written archive of up
    to ~200 MB): none is in use while the build lock is held."""
    for entry in directory.glob(".warmup-*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _build_into(final: Path, timeout_s: float) -> Path | Unavailable:
    with tempfile.TemporaryDirectory(prefix=".warmup-", dir=final.parent) as work:
        target = Path(work) / "archive.jsa"
        cmd = [sys.executable, "-m", "logstore_cli.cli.warmup", str(target), work]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise SetupError(
                f"the Spark warm-up that builds the class archive ran over {timeout_s:.0f} s",
                hint="run 'logstore setup' again on a less busy machine; Spark jobs run without it",
            ) from exc
        if done.returncode == NO_ARCHIVE_EXIT:  # the JVM wrote none, and the warm-up wrote down why
            reason = Path(work) / REASON_FILE
            text = reason.read_text("utf-8", "replace") if reason.is_file() else ""
            return Unavailable(text.strip()[-2000:] or "the JVM wrote no archive")
        if done.returncode != 0 or not target.is_file():
            raise SetupError(
                "the Spark warm-up that builds the class archive failed",
                detail=(done.stderr or done.stdout)[-4000:],
                hint="Spark jobs run without the archive; 'logstore setup --no-class-archive' "
                "skips it",
            )
        os.replace(target, final)
    return final
