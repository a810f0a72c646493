"""The CLI edge: help, version, exit codes, and no heavy imports on the fast path."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from logstore_cli import __version__
from logstore_cli.cli import app as app_module
from logstore_cli.errors import EXIT_FAILURE, EXIT_INVALID_INPUT, InvalidInputError

runner = CliRunner()


def test_help_lists_commands() -> None:
    result = runner.invoke(app_module.app, ["--help"])
    assert result.exit_code == 0
    for command in ("broker", "setup"):
        assert command in result.output


def test_version() -> None:
    result = runner.invoke(app_module.app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"logstore {__version__}"


def test_help_imports_no_spark_and_no_kafka_client() -> None:
    code = (
        "import sys\n"
        "from logstore_cli.cli.app import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'py4j', 'delta', 'confluent_kafka'))\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in proc.stdout, proc.stdout


def _run_main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        app_module.main(argv)
    code = info.value.code
    return code if isinstance(code, int) else EXIT_FAILURE


def test_domain_error_is_one_message_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise InvalidInputError("the thing is wrong", hint="do the other thing")

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", boom)
    assert _run_main(["setup", "--only", "spark"]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert "error: the thing is wrong" in err
    assert "hint: do the other thing" in err
    assert "Traceback" not in err


def test_unexpected_error_is_reported_as_internal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", boom)
    monkeypatch.setattr(app_module, "_verbose", False)
    assert _run_main(["setup", "--only", "kafka"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: division by zero" in err
    assert "--verbose" in err
    assert "Traceback" not in err


def test_bad_option_value_lists_valid_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_main(["setup", "--only", "scala"]) == 2
    err = capsys.readouterr().err
    assert "spark" in err and "kafka" in err
