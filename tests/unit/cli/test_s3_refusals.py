"""The commands that do not run on an s3:// warehouse yet refuse it at once (issue 19): exit 2, one
message naming the command and what runs there today, before anything is read or started."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli import config as cfg
from logstore_cli.cli import app as app_module
from logstore_cli.cli.options import REMOTE_COMMANDS


def _run_main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        app_module.main(argv)
    code = info.value.code
    return code if isinstance(code, int) else -1


@pytest.fixture
def s3_warehouse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in [*cfg.ENV_VARS, cfg.CONFIG_ENV]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", "s3://bucket-1/wh")
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    # Nothing may be reached: an endpoint that no server listens on.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_same_command_on_a_local_warehouse_is_not_refused(
    s3_warehouse: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(s3_warehouse / "wh"))
    _run_main(["history", "db.t"])
    err = capsys.readouterr().err
    assert "s3://" not in err and "not found" in err


def test_a_flag_overrides_an_s3_warehouse_of_the_environment(
    s3_warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_main(["history", "db.t", "--warehouse", str(s3_warehouse / "wh")])
    assert "s3://" not in capsys.readouterr().err


def test_the_commands_that_run_on_s3_are_commands() -> None:
    import typer.main

    group = typer.main.get_command(app_module.app)
    assert isinstance(group, typer.core.TyperGroup)
    names = set(group.list_commands(None))  # type: ignore[arg-type]
    assert names >= REMOTE_COMMANDS


@pytest.mark.parametrize("command", ["optimize", "vacuum"])
def test_optimize_and_vacuum_run_on_hdfs(
    s3_warehouse: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:  # fmt: skip
    """Not refused: they go to the NameNode for the table (nobody listens there: exit 1)."""
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", "hdfs://127.0.0.1:9/wh")
    assert _run_main([command, "db.t"]) == 1
    err = capsys.readouterr().err
    assert "does not run on" not in err and "hdfs://127.0.0.1:9/wh" in err, err
    assert "Traceback" not in err
    assert list(s3_warehouse.iterdir()) == []


@pytest.mark.parametrize("command", ["optimize", "vacuum"])
def test_optimize_and_vacuum_run_on_s3(
    s3_warehouse: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Not refused (optimize under the table's writer lease): they go to the S3 endpoint for the
    table (nobody listens there: exit 1)."""
    assert _run_main([command, "db.t"]) == 1
    err = capsys.readouterr().err
    assert "does not run on" not in err and "Traceback" not in err, err
