"""Fixtures shared by the CLI's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli import config as cfg


@pytest.fixture
def setup_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """For ``logstore setup`` run in-process: none of the developer's logstore settings, a jar
    cache of its own (``LOGSTORE_HOME``, returned) and ``tmp_path`` as the current directory."""
    for var in [*cfg.ENV_VARS, cfg.CONFIG_ENV]:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("LOGSTORE_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture(autouse=True)
def no_class_archive_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test never runs the class archive's warm-up (a Spark job of a minute, writing into
    the real jar cache): ``logstore setup`` run here must say ``--no-class-archive`` or replace
    ``class_archive.build`` itself (which then wins over this)."""

    def refuse() -> None:
        raise AssertionError("a unit test ran the class archive's warm-up: a Spark job")

    monkeypatch.setattr("logstore_cli.jvm.class_archive.build", refuse)
    # As on a machine without one: the refusal holds whether or not this one has an archive.
    monkeypatch.setattr("logstore_cli.jvm.class_archive.current_archive", lambda: None)
