"""The CLI edge: help, version, exit codes, Ctrl-C, tracebacks only with --verbose. (What each
command imports, --help included: test_startup_imports.py.)"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from typer.testing import CliRunner

from logstore_cli import __version__
from logstore_cli.cli import app as app_module
from logstore_cli.cli.output import setup_logging
from logstore_cli.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_INVALID_INPUT,
    InvalidInputError,
    LogstoreError,
)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    setup_logging(verbose=False)  # a --verbose run leaves debug logging on in this process


def test_help_lists_commands() -> None:
    result = runner.invoke(app_module.app, ["--help"])
    assert result.exit_code == 0
    for command in ("broker", "setup"):
        assert command in result.output


def test_version() -> None:
    result = runner.invoke(app_module.app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"logstore {__version__}"


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


def test_no_arguments_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_main([]) == 2
    assert "create-table" in capsys.readouterr().out


def test_verbose_shows_the_traceback_of_a_domain_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise InvalidInputError("the thing is wrong", hint="do the other thing")

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", boom)
    assert _run_main(["--verbose", "setup", "--only", "spark"]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in boom" in err
    assert err.rstrip().endswith("error: the thing is wrong\nhint: do the other thing")


def test_verbose_shows_the_traceback_of_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", boom)
    assert _run_main(["--verbose", "setup", "--only", "kafka"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "error: internal error: ZeroDivisionError: division by zero" in err


def test_keyboard_interrupt_in_a_command_is_interrupted_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def wait_forever(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", wait_forever)
    assert _run_main(["setup", "--only", "spark"]) == EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert captured.err.endswith("…\nerror: interrupted\n")  # after 'resolving the … classpath …'
    assert "Traceback" not in captured.err
    assert captured.out == ""


def _sigint_surfacing_as(error: Exception) -> object:
    """A service that receives SIGINT while a handler like Spark's is installed: the handler's own
    call into the JVM fails, so ``error`` surfaces instead of KeyboardInterrupt."""

    def service(*_: object, **__: object) -> None:
        def spark_like_handler(signum: int, frame: FrameType | None) -> None:
            raise error

        previous = signal.signal(signal.SIGINT, spark_like_handler)
        try:
            signal.raise_signal(signal.SIGINT)  # runs the handler before it returns
        finally:
            signal.signal(signal.SIGINT, previous)

    return service


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("An error occurred while calling o42.sc"),  # py4j's Py4JError is one
        LogstoreError("creating the Delta table at /w/db/t failed: o65.execute"),
    ],
    ids=["py4j-error", "domain-error"],
)
def test_any_error_after_sigint_is_interrupted_130(
    error: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", _sigint_surfacing_as(error))
    assert _run_main(["setup", "--only", "spark"]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.endswith("…\nerror: interrupted\n")
    assert "Traceback" not in err and "o42" not in err and "o65" not in err


def test_interrupted_with_verbose_shows_where(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = RuntimeError("An error occurred while calling o42.sc")
    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", _sigint_surfacing_as(error))
    assert _run_main(["--verbose", "setup", "--only", "spark"]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "Traceback" in err and "o42.sc" in err
    assert err.endswith("error: interrupted\n")


def test_a_sigint_after_the_run_is_not_remembered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        "logstore_cli.jvm.deps.ensure_classpath",
        _sigint_surfacing_as(RuntimeError("o42.sc")),
    )
    assert _run_main(["setup", "--only", "spark"]) == EXIT_INTERRUPTED
    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", lambda *_, **__: [])
    # a fresh run starts clean (without the class archive's warm-up, a Spark job)
    assert _run_main(["setup", "--only", "spark", "--no-class-archive", "--json"]) == 0
    assert '"classpath": "spark"' in capsys.readouterr().out


def test_markup_like_paths_are_printed_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    # delta-rs writes only to URL-safe paths; it reads any. The table moves into the odd warehouse.
    write_deltalake(str(tmp_path / "plain"), pa.table({"id": pa.array([1], pa.int32())}))
    warehouse = tmp_path / "w[bold]x[/red]"
    shutil.copytree(tmp_path / "plain", warehouse / "db" / "t")
    where = ["--warehouse", str(warehouse)]

    assert _run_main(["list", *where]) == 0
    assert f"Tables in {warehouse}" in capsys.readouterr().out
    assert _run_main(["describe", "db.t", "--no-topic", *where]) == 0
    assert str(warehouse / "db" / "t") in capsys.readouterr().out
    assert _run_main(["drop-table", "db.t", "--yes", *where]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"✓ dropped table 'db.t' ({warehouse / 'db' / 't'})\n"
    assert captured.out == ""  # the result is for --json; people had the message
    assert not (warehouse / "db" / "t").exists()


def test_a_library_panic_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class PanicException(BaseException):  # what pyo3 (delta-rs) raises on a Rust panic
        pass

    def boom(*_: object, **__: object) -> None:
        raise PanicException("Invalid object store url.: External(InvalidDomainCharacter)")

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", boom)
    assert _run_main(["setup", "--only", "spark"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "error: internal error: PanicException: Invalid object store url." in err
    assert "Traceback" not in err


def test_interrupted_says_what_the_interrupted_work_left_behind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def half_done(*_: object, **__: object) -> None:
        interrupt = KeyboardInterrupt()
        interrupt.add_note("changed and left so: added partitions to topic 't' (cannot be undone)")
        raise interrupt

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", half_done)
    assert _run_main(["setup", "--only", "spark"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.endswith(
        "error: interrupted\nchanged and left so: added partitions to topic 't' (cannot be undone)\n"
    )


def test_end_of_input_at_a_prompt_is_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    def no_answer(*_: object, **__: object) -> None:
        raise typer.Abort  # what typer.confirm raises at end of input

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", no_answer)
    assert _run_main(["setup", "--only", "spark"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.endswith("error: aborted: no answer (end of input)\n")


def test_a_closed_stdout_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def reader_gone(*_: object, **__: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")  # e.g. logstore list --json | head -1

    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", reader_gone)
    assert _run_main(["setup", "--only", "spark", "--json"]) == EXIT_FAILURE
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("argv", "env", "shown"),
    [
        (["setup"], {}, False),
        (["--verbose", "setup"], {}, True),
        (["-v", "setup"], {}, True),
        (["setup"], {"LOGSTORE_VERBOSE": "1"}, True),
    ],
)
def test_verbose_prints_the_debug_log(
    argv: list[str],
    env: dict[str, str],
    shown: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    def resolve(*_: object, **__: object) -> list[Path]:
        logging.getLogger("logstore_cli.jvm.deps").debug("running mvn [/red] dependency:copy")
        return []

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("logstore_cli.jvm.deps.ensure_classpath", resolve)
    assert _run_main([*argv, "--only", "spark", "--no-class-archive", "--json"]) == 0
    captured = capsys.readouterr()
    assert ("running mvn [/red] dependency:copy" in captured.err) is shown
    assert '"classpath": "spark"' in captured.out  # stdout holds the result only
    assert "mvn" not in captured.out
