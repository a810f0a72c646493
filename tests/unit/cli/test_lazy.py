"""The root group's lazy commands: the listing drawn from the registry says what the commands say,
looking a command up loads it once, and values skip Typer's pydantic coercion without changing
what a command receives or how a bad value is reported."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import typer
from typer.testing import CliRunner

from logstore_cli.cli import app as app_module
from logstore_cli.cli.lazy import LazyCommand, LazyGroup

runner = CliRunner()


def _root() -> Any:
    return typer.main.get_command(app_module.app)


def _first_paragraph(help_text: str | None) -> str:
    return " ".join(inspect.cleandoc(help_text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("spec", app_module.COMMANDS, ids=lambda s: s.name)
def test_the_listed_help_is_the_commands_own(spec: LazyCommand) -> None:
    command = spec.load()
    assert command.name == spec.name
    assert " ".join(spec.help.split()) == _first_paragraph(command.help)


def test_help_lists_every_command_in_registry_order() -> None:
    result = runner.invoke(app_module.app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = [
        next(i for i, line in enumerate(lines) if f"│ {s.name} " in line)
        for s in app_module.COMMANDS
    ]
    assert at == sorted(at)


def test_a_command_is_loaded_on_lookup_once_and_not_for_a_listing() -> None:
    root = _root()
    assert isinstance(root, LazyGroup)
    loads: list[str] = []

    class Counting(LazyCommand):
        def load(self) -> Any:
            loads.append(self.name)
            return super().load()

    spec = app_module.COMMANDS[1]
    root.commands = cast(Any, type(root.commands))(
        root, [Counting(spec.name, spec.module, spec.attribute, spec.help)]
    )
    ctx = root.make_context("logstore", ["--version"], resilient_parsing=True)
    root.format_help(ctx, ctx.make_formatter())
    assert loads == []  # listed from the registry
    first = root.get_command(ctx, spec.name)
    assert root.get_command(ctx, spec.name) is first
    assert loads == [spec.name]
    assert not root.listing


# Renders the root's help with our renderer and with Typer's, in a fresh interpreter (Typer reads
# the width and colour variables when its renderer is imported).
_BOTH_HELPS = """
import contextlib, io, json, typer
from logstore_cli.cli.app import app
root = typer.main.get_command(app)
def render(draw):
    ctx = root.make_context("logstore", ["-v"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        draw(ctx)
    return out.getvalue()
print(json.dumps([render(lambda ctx: root.format_help(ctx, ctx.make_formatter())), render(root.typer_help)]))
"""


@pytest.mark.parametrize("colour", [False, True], ids=["plain", "colour"])
def test_the_root_help_looks_as_typer_draws_it(colour: bool) -> None:
    """Our root --help (no typer.rich_utils) is Typer's, character for character, colours too."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PY_COLORS", "NO_COLOR")}
    env |= {"TERMINAL_WIDTH": "100", **({"FORCE_COLOR": "1"} if colour else {})}
    proc = subprocess.run(
        [sys.executable, "-c", _BOTH_HELPS], env=env, capture_output=True, text=True, check=True
    )
    ours, typers = json.loads(proc.stdout)
    assert "validate" in ours and "Show tracebacks" in ours
    assert ("\x1b[" in ours) is colour
    assert ours == typers


def test_an_unknown_command_is_still_a_usage_error_with_a_suggestion() -> None:
    result = runner.invoke(app_module.app, ["valdate"])
    assert result.exit_code == 2
    assert "Did you mean 'validate'" in result.output


def test_text_values_reach_the_command_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A str option's text, a list option's texts, an unset option's None: as pydantic would."""
    from logstore_cli.cli import tables

    seen: dict[str, Any] = {}

    def fake_parse_pairs(pairs: Any, flag: str) -> Any:
        seen["pairs"] = pairs
        raise typer.Exit(0)

    def fake_make_context(overrides: Any) -> Any:
        seen["flags"], seen["config"] = dict(overrides.flags), overrides.config_path
        raise typer.Exit(0)

    monkeypatch.setattr(tables, "parse_pairs", fake_parse_pairs)
    monkeypatch.setattr(tables, "make_context", fake_make_context)
    args = ["alter-table", "db.t", "--set", "a=1", "--set", " b = 2", "--warehouse", " /w h "]
    assert runner.invoke(app_module.app, args).exit_code == 0
    assert seen["pairs"] == ["a=1", " b = 2"]
    assert type(seen["pairs"]) is list
    result = runner.invoke(app_module.app, ["list", "--warehouse", " /w h "])
    assert result.exit_code == 0, result.output
    assert seen["flags"] == {"warehouse": " /w h "}
    assert seen["config"] is None


def test_a_value_of_another_type_is_still_coerced_and_checked(tmp_path: Path) -> None:
    """Non-text values go to Typer's own coercion: a number is parsed, a bad one is exit 2."""
    bad = runner.invoke(app_module.app, ["status", "db.t", "--interval", "abc"])
    assert bad.exit_code == 2
    assert "Invalid value for '--interval'" in bad.output
    # a range is Typer's to check, for a given value as for a default
    out_of_range = runner.invoke(app_module.app, ["verify", "db.t", "--examples", "5000"])
    assert out_of_range.exit_code == 2
    assert "less than or equal to 1000" in out_of_range.output
    config = tmp_path / "c.toml"
    config.write_text(f'warehouse = "{tmp_path}"\n')
    listed = runner.invoke(app_module.app, ["list", "--config", str(config), "--json"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.strip() == "[]"
