"""``logstore setup`` resolves the S3 jars (a 558 MB AWS SDK bundle) only for a warehouse on S3 or
with ``--s3``; a local warehouse never downloads them. Maven is replaced by a recorder here."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.cli import app as app_module
from logstore_cli.jvm.deps import Classpath


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, setup_home: Path) -> list[Classpath]:
    asked: list[Classpath] = []

    def ensure(cp: Classpath, **_: object) -> list[Path]:
        asked.append(cp)
        return [tmp_path / f"{cp.value}.jar"]

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", ensure)
    # The class archive's warm-up (a Spark job) is not run here: test_setup_class_archive.py.
    monkeypatch.setattr("logstore_cli.jvm.class_archive.current_archive", lambda: None)
    monkeypatch.setattr("logstore_cli.jvm.class_archive.build", lambda: tmp_path / "a.jsa")
    return asked


def _setup(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        app_module.main(["setup", *argv])
    code = info.value.code
    return code if isinstance(code, int) else -1


def test_a_local_warehouse_never_resolves_the_s3_jars(resolved: list[Classpath]) -> None:
    assert _setup([]) == 0
    assert resolved == [Classpath.SPARK, Classpath.KAFKA]


def test_an_s3_warehouse_from_the_environment_resolves_them(
    resolved: list[Classpath], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", "s3://bucket-1/wh")  # as scripts/setup.sh passes it
    assert _setup([]) == 0
    assert resolved == [Classpath.SPARK, Classpath.KAFKA, Classpath.S3]


@pytest.mark.parametrize(
    "argv", [["--s3"], ["--warehouse", "s3a://bucket-1/wh"], ["--only", "s3"]], ids=str
)
def test_a_flag_resolves_them(resolved: list[Classpath], argv: list[str]) -> None:
    assert _setup(argv) == 0
    assert Classpath.S3 in resolved


def test_an_s3_warehouse_in_the_config_file_resolves_them(
    resolved: list[Classpath], tmp_path: Path
) -> None:
    config = tmp_path / "logstore.toml"
    config.write_text('warehouse = "s3://bucket-1/wh"\n')
    assert _setup(["--config", str(config), "--json"]) == 0
    assert resolved[-1] == Classpath.S3
