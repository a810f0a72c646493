"""The import graph follows the README's Architecture table: no arrow from a lower layer to a
higher one. Read with ast (every import, also those inside functions), so nothing is executed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "logstore_cli"

# What each part of logstore_cli may import (the README's "may import" column).
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "errors": set(),
    "interrupt": set(),
    "processes": set(),
    "names": {"errors"},
    "paths": {"errors"},
    "config": {"errors", "model", "storage"},  # storage.uri (pure): the warehouse URI
    "ddl": {"errors", "model", "names"},
    "logformat": {"errors"},
    "ingest": {"errors", "model", "names", "logformat"},
    "jvm": {"errors", "paths"},
    "storage": {"errors", "paths", "processes", "jvm"},
    "kafka": {"errors", "model", "paths", "jvm", "processes"},
    "pulsar": {"errors", "names", "paths", "processes", "jvm", "logformat"},
    "catalog": {"errors", "model", "names", "ddl", "kafka", "logformat", "ingest", "storage"},
    "provision": {"errors", "model", "names", "ddl", "kafka", "pulsar", "catalog", "config",
                  "storage"},
    "read": {"errors", "model", "names", "logformat", "kafka", "pulsar", "catalog", "ingest",
             "storage"},
    "jobs": {"errors", "model", "names", "ddl", "kafka", "pulsar", "catalog", "config", "paths",
             "jvm", "logformat", "provision", "ingest", "read", "interrupt", "processes",
             "storage"},
}  # fmt: skip
TOP = {"__init__", "__main__", "cli", *ALLOWED}


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.startswith("logstore_cli."):
                found.add(name.split(".")[1])
    return found


def test_every_part_is_known() -> None:
    parts = {_part(p) for p in PACKAGE.rglob("*.py")}
    assert parts <= TOP, parts - TOP


def test_no_import_goes_up_a_layer() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = _part(path)
        if part not in ALLOWED:
            continue  # cli/ may import everything; __init__/__main__ are the entry points
        for target in _imports(path) - {part, "__init__"}:
            if target not in ALLOWED[part]:
                wrong.append(f"{path.relative_to(PACKAGE)} imports logstore_cli.{target}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_wrong_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from logstore_cli.cli import app\n")
    assert _imports(module) == {"cli"}
