"""Shell completion through Typer, as a shell uses it: the script ``--show-completion`` prints,
sourced into bash, completes commands, options and the warehouse's table names;
``--install-completion`` installs it for the user's shell."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deltalog import write_table

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

ORDERS = (
    "CREATE TABLE shop.orders (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) "
    "WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders', "
    "'kafka.bootstrap.servers' = '127.0.0.1:9092')"
)


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``logstore`` on PATH, as the installed console script would be (the completion script
    calls the command by the name the user typed)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "logstore"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m logstore_cli "$@"\n')
    script.chmod(0o755)
    return bin_dir


def _env(bin_dir: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1",  # take the shell from the option
        **extra,
    }


@functools.cache
def _show_bash(bin_dir: Path) -> str:
    shown = subprocess.run(
        ["logstore", "--show-completion", "bash"],
        env=_env(bin_dir), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def _complete(bin_dir: Path, words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """What bash offers for ``words`` (the last one being completed), through the sourced script."""
    script = _show_bash(bin_dir)
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        '_logstore_completion logstore "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        env=env or _env(bin_dir), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return [line for line in done.stdout.splitlines() if line]


def test_show_completion_prints_a_bash_script(bin_dir: Path) -> None:
    script = _show_bash(bin_dir)
    assert "_LOGSTORE_COMPLETE=complete_bash" in script
    assert "complete -o default -F _logstore_completion logstore" in script


def test_bash_completes_a_command(bin_dir: Path) -> None:
    assert _complete(bin_dir, ["logstore", "cre"]) == ["create-table"]
    assert _complete(bin_dir, ["logstore", "broker", "st"]) == ["start", "stop", "status"]


def test_bash_completes_options_of_a_command(bin_dir: Path) -> None:
    assert _complete(bin_dir, ["logstore", "read", "shop.orders", "--cons"]) == [
        "--consistent",
        "--consistency",
    ]


def test_bash_completes_table_names_from_the_warehouse(bin_dir: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    write_table(warehouse, ORDERS)
    write_table(warehouse, ORDERS.replace("shop.orders", "shop.customers"))
    write_table(warehouse, ORDERS.replace("shop.orders", "crm.leads"))
    env = _env(bin_dir, LOGSTORE_WAREHOUSE=str(warehouse))
    assert _complete(bin_dir, ["logstore", "describe", "shop."], env) == [
        "shop.customers",
        "shop.orders",
    ]
    assert _complete(bin_dir, ["logstore", "status", ""], env) == [
        "crm.leads",
        "shop.customers",
        "shop.orders",
    ]
    # --warehouse on the command line wins over the environment, as when the command runs
    other = tmp_path / "other"
    write_table(other, ORDERS.replace("shop.orders", "hr.staff"))
    assert _complete(bin_dir, ["logstore", "read", "--warehouse", str(other), ""], env) == [
        "hr.staff"
    ]


def test_table_completion_is_silent_when_the_config_is_bad(bin_dir: Path, tmp_path: Path) -> None:
    env = _env(bin_dir, LOGSTORE_CONFIG=str(tmp_path / "missing.toml"))
    assert _complete(bin_dir, ["logstore", "describe", ""], env) == []


def test_install_completion_installs_for_bash(bin_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["logstore", "--install-completion", "bash"],
        env=_env(bin_dir, HOME=str(home)), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    installed = home / ".bash_completions" / "logstore.sh"
    assert "_logstore_completion" in installed.read_text()
    assert str(installed.relative_to(home)) in (home / ".bashrc").read_text()
