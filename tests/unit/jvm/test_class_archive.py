"""The Spark driver's class archive: its key, the options that use or write it, when the user's own
options decide instead, and ``build`` installing the warm-up's file (the warm-up itself replaced)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.errors import SetupError
from logstore_cli.jvm import class_archive as ca


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path / "home"))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    return tmp_path / "home"


def test_the_key_changes_with_the_java_runtime_and_pyspark() -> None:
    java = Path("/usr/lib/jvm/java-17/bin/java")
    st = os.stat(__file__)
    home = "/venv/a/site-packages/pyspark"
    key = ca.archive_key(java, st, "4.0.1", home, "")
    assert key == ca.archive_key(java, st, "4.0.1", home, "")
    assert key.startswith("spark-4.0.1-")
    assert ca.archive_key(java, st, "4.0.2", home, "") != key
    assert ca.archive_key(Path("/opt/jdk-17.0.16/bin/java"), st, "4.0.1", home, "") != key
    other = os.stat(Path(__file__).parent)  # another size and time: a JDK updated in place
    assert ca.archive_key(java, other, "4.0.1", home, "") != key
    # another virtualenv's pyspark: its jars are another class path, which the JVM refuses
    assert ca.archive_key(java, st, "4.0.1", "/venv/b/site-packages/pyspark", "") != key
    # SPARK_CONF_DIR heads the driver's class path: an archive written without it is not mapped
    assert ca.archive_key(java, st, "4.0.1", home, "/etc/spark/conf") != key
    assert ca.archive_key(java, st, "4.0.1", home, "", "spark-0123456789ab") != key  # Delta's
    odd = ca.archive_key(java, st, "4.0.1/../../x", home, "")
    assert "/" not in odd and odd.startswith("spark-4.0.1_.._.._x-")


def test_options_route_the_jvms_cds_messages_to_stderr_not_a_commands_output() -> None:
    use = ca.use_options(Path("/c/spark.jsa"))
    assert use is not None
    assert use.split() == [
        "-XX:SharedArchiveFile=/c/spark.jsa",
        "-Xshare:auto",  # an archive the JVM cannot map is skipped, never a failed start
        "-Xlog:cds*=off",
        "-Xlog:cds*=warning:stderr",
    ]
    dump = ca.dump_options(Path("/c/new.jsa"))
    assert dump is not None and dump.split()[0] == "-XX:ArchiveClassesAtExit=/c/new.jsa"
    assert "-Xlog:cds*=warning:stderr" in dump


def test_a_path_with_spaces_is_quoted_and_one_spark_would_misread_is_not_used() -> None:
    assert ca.use_options(Path("/Users/Jo Doe/.cache/a.jsa")) is not None
    assert '"/Users/Jo Doe/.cache/a.jsa"' in (
        ca.use_options(Path("/Users/Jo Doe/.cache/a.jsa")) or ""
    )
    for bad in ['/tmp/a"b/x.jsa', "/tmp/a'b/x.jsa", "/tmp/a\\b/x.jsa", "/tmp/$HOME/x.jsa"]:
        assert ca.use_options(Path(bad)) is None
        assert ca.dump_options(Path(bad)) is None


@pytest.mark.parametrize(
    ("conf", "env"),
    [
        ({"spark.driver.extraJavaOptions": "-Xmx4g -Xshare:off"}, {}),
        ({"spark.driver.defaultJavaOptions": "-XX:SharedArchiveFile=/mine.jsa"}, {}),
        ({}, {"SPARK_SUBMIT_OPTS": "-XX:ArchiveClassesAtExit=/x.jsa"}),
    ],
    ids=["extra", "default", "submit-opts"],
)
def test_a_users_own_class_sharing_options_win(conf: dict[str, str], env: dict[str, str]) -> None:
    assert ca.user_decides(conf, env)


def test_other_driver_options_leave_it_to_logstore() -> None:
    conf = {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Dshare=off -XX:SharedFoo=1"}
    assert not ca.user_decides(conf, {"SPARK_SUBMIT_OPTS": "-Dx=1"})


def test_no_archive_until_one_is_built(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    key = ca.current_key()
    assert key is not None
    assert ca.current_archive() is None
    ca.archive_path(key).parent.mkdir(parents=True)
    ca.archive_path(key).write_bytes(b"archive")
    assert ca.current_archive() == ca.archive_path(key)
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark/conf")  # another class path: not this one
    assert ca.current_archive() is None
    monkeypatch.delenv("SPARK_CONF_DIR")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark-4.0.1")  # PySpark would take its jars: not this
    assert ca.current_archive() is None


def test_no_java_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ca.current_key() is None
    assert ca.current_archive() is None


def _fake_warmup(monkeypatch: pytest.MonkeyPatch, code: int, write: bool) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        target = Path(cmd[-2])
        assert Path(cmd[-1]) == target.parent  # the archive's temporary directory, in the cache
        if write:
            target.write_bytes(b"classes")
        if code == ca.NO_ARCHIVE_EXIT:
            (target.parent / ca.REASON_FILE).write_text(
                "Error: non-empty directory '/etc/spark/conf/'\n"
            )
        return subprocess.CompletedProcess(cmd, code, "", "the JVM said why\n")

    monkeypatch.setattr(ca.subprocess, "run", run)
    return calls


def test_build_installs_the_warm_ups_archive_once(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_warmup(monkeypatch, 0, write=True)
    built = ca.build()
    assert built is not None and built.read_bytes() == b"classes"
    assert built == ca.current_archive()
    assert calls[0][1:3] == ["-m", "logstore_cli.cli.warmup"]
    assert ca.build() == built and len(calls) == 1  # there already: no second warm-up
    names = sorted(p.name for p in built.parent.iterdir())
    assert names == [".build.lock", built.with_suffix(".home").name, built.name]


def test_a_killed_builds_work_dir_is_removed_by_the_next_build(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca.archive_dir().mkdir(parents=True)
    stale = ca.archive_dir() / ".warmup-old"
    stale.mkdir()
    (stale / "archive.jsa").write_bytes(b"half")
    elsewhere = cache.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    (ca.archive_dir() / ".warmup-link").symlink_to(elsewhere)  # never followed
    _fake_warmup(monkeypatch, 0, write=True)
    assert ca.build() is not None
    assert not stale.exists()
    assert (elsewhere / "keep").is_file()


def test_a_jvm_that_writes_no_archive_says_why_and_is_not_an_error(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_warmup(monkeypatch, 3, write=False)
    why = ca.Unavailable("Error: non-empty directory '/etc/spark/conf/'")
    assert ca.build() == why
    assert ca.current_archive() is None
    key = ca.current_key()
    assert key is not None and ca.known_unavailable(key) == why
    assert ca.build() == why and len(calls) == 1  # recorded: no second warm-up to hear the same


@pytest.mark.parametrize(("code", "write"), [(1, False), (0, False), (1, True)])
def test_a_failed_warm_up_installs_nothing_and_says_why(
    cache: Path, monkeypatch: pytest.MonkeyPatch, code: int, write: bool
) -> None:
    _fake_warmup(monkeypatch, code, write=write)
    with pytest.raises(SetupError, match="warm-up") as info:
        ca.build()
    assert info.value.detail == "the JVM said why\n"
    assert info.value.hint and "--no-class-archive" in info.value.hint
    assert ca.current_archive() is None
    assert [p.name for p in ca.archive_dir().iterdir()] == [".build.lock"]


def test_the_warm_up_finds_the_jvms_reason_in_its_log() -> None:
    from logstore_cli.cli.warmup import cds_errors

    log = (
        "[38.794s][warning][cds] Preload Warning: Verification failed for org.apache.X\n"
        "[39.250s][error  ][cds] Error: non-empty directory '/etc/spark/conf/'\n"
        "25/11/27 02:24:20 WARN NativeCodeLoader: no native hadoop\n"
    )
    assert cds_errors(log) == ["Error: non-empty directory '/etc/spark/conf/'"]
    assert cds_errors("[0.1s][warning][cds] only a warning\n") == []


def test_a_cache_path_the_jvm_cannot_be_given_is_no_archive_not_a_failed_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGSTORE_HOME", str(tmp_path / "it's home"))
    calls = _fake_warmup(monkeypatch, 0, write=True)
    built = ca.build()
    assert isinstance(built, ca.Unavailable) and "cannot be passed to the JVM" in built.reason
    assert calls == []


def test_a_new_archive_replaces_the_ones_its_spark_home_had_before(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    java = str((cache.parent / "jdk" / "bin" / "java").resolve())
    home = f"{java}\n{ca.spark_home()}\n"  # its Java, its Spark home, and no SPARK_CONF_DIR
    d = ca.archive_dir()
    d.mkdir(parents=True)
    owners = [("old-jdk", home), ("other-venv", f"{java}\n/elsewhere/pyspark\n"),
              ("other-conf", f"{home}/etc/spark/conf"),
              ("other-java", f"/opt/jdk-21/bin/java\n{ca.spark_home()}\n")]  # fmt: skip
    for stem, owner in owners:
        (d / f"{stem}.jsa").write_bytes(b"classes")
        (d / f"{stem}.home").write_text(owner)
    (d / "earlier-none.none").write_text("no base archive")
    (d / "earlier-none.home").write_text(home)
    (d / "unowned.jsa").write_bytes(b"classes")  # no record of its home: left alone
    _fake_warmup(monkeypatch, 0, write=True)
    built = ca.build()
    assert isinstance(built, Path)
    left = sorted(p.name for p in d.iterdir() if p.name != ".build.lock")
    kept = [f"other-{o}.{ext}" for o in ("venv", "conf", "java") for ext in ("jsa", "home")]
    kept.append("unowned.jsa")
    assert left == sorted([built.name, built.with_suffix(".home").name, *kept])
    assert built.with_suffix(".home").read_text() == home


def test_jars_rewritten_at_the_same_path_are_a_new_key(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyspark reinstalled at the same path and version writes new jar files: the JVM would refuse
    the old archive (it checks each jar's size and time), so it is not this key's."""
    home = tmp_path / "spark-home"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("SPARK_HOME", str(home))
    key = ca.current_key()
    assert key is not None and ca.current_key() == key
    os.utime(jar, ns=(1, 1))
    assert ca.current_key() != key
    (home / "jars" / "notes.txt").write_text("not a jar")  # only jars count
    again = ca.current_key()
    (home / "jars" / "notes.txt").unlink()
    assert ca.current_key() == again
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "no-such-home"))
    assert ca.current_key() is None  # no jars: no key, no archive, never an error
