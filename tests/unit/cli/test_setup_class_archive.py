"""``logstore setup`` builds the Spark class archive with the Spark classpath, once, unless told
not to; a Java that cannot write one is a warning. Maven and the warm-up are replaced here."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.cli import app as app_module
from logstore_cli.jvm import class_archive
from logstore_cli.jvm.deps import Classpath


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, setup_home: Path) -> list[str]:
    monkeypatch.setattr(
        "logstore_cli.jvm.deps.ensure_classpath",
        lambda cp, **_: [tmp_path / f"{cp.value}.jar"],
    )
    calls: list[str] = []
    archive = setup_home / "class-archive" / "spark-x.jsa"

    def build() -> Path | class_archive.Unavailable:
        calls.append("build")
        if "no-base" in calls:
            return class_archive.Unavailable("Error: non-empty directory '/etc/spark/conf/'")
        return archive

    monkeypatch.setattr("logstore_cli.jvm.class_archive.build", build)
    monkeypatch.setattr(
        "logstore_cli.jvm.class_archive.current_archive",
        lambda: archive if "there" in calls else None,
    )
    return calls


def _setup(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        app_module.main(["setup", *argv])
    code = info.value.code
    return (code if isinstance(code, int) else -1), capsys.readouterr().err


def test_setup_builds_the_archive_with_the_spark_classpath(
    builds: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _setup([], capsys)
    assert code == 0 and builds == ["build"]
    assert "Spark class archive:" in err and "spark-x.jsa" in err


def test_an_archive_already_there_is_not_built_again(
    builds: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    builds.append("there")
    code, err = _setup(["--only", Classpath.SPARK.value], capsys)
    assert code == 0 and builds == ["there"]
    assert "spark-x.jsa" in err


@pytest.mark.parametrize(
    "argv", [["--no-class-archive"], ["--only", "kafka"]], ids=["flag", "no-spark-classpath"]
)
def test_no_archive_without_the_spark_classpath_or_when_told_not_to(
    builds: list[str], capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, err = _setup(argv, capsys)
    assert code == 0 and builds == []
    assert "class archive" not in err


def test_a_jvm_that_writes_none_is_a_warning_with_its_reason(
    builds: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    builds.append("no-base")
    code, err = _setup(["--json"], capsys)
    assert code == 0 and builds == ["no-base", "build"]
    assert "warning:" in err and "wrote no Spark class archive" in err
    assert "non-empty directory '/etc/spark/conf/'" in " ".join(err.split())
