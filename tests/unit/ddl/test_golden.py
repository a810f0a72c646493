"""Golden tests: every ``tests/fixtures/ddl/*.sql`` parses to exactly its ``*.json``.

The expected file holds the tables (``TableSpec.to_json``, what ``validate --json`` prints) and the
diagnostics (severity, line, column, message). After a deliberate change, regenerate with
``LOGSTORE_REGEN_GOLDEN=1 .venv/bin/pytest tests/unit/ddl/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.ddl import ParseOptions, parse_document

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ddl"
CASES = sorted(FIXTURES.glob("*.sql"))


def _actual(sql: Path) -> dict[str, Any]:
    # No default broker: the fixtures must say everything themselves.
    result = parse_document(sql.read_text(encoding="utf-8"), sql.name, ParseOptions())
    return {
        "diagnostics": [
            {"severity": d.severity, "line": d.line, "col": d.col, "message": d.message}
            for d in result.diagnostics
        ],
        "tables": [t.to_json() for t in result.tables],
    }


def test_fixtures_exist() -> None:
    assert len(CASES) >= 10
    assert all(p.with_suffix(".json").exists() for p in CASES) or os.environ.get(
        "LOGSTORE_REGEN_GOLDEN"
    )


@pytest.mark.parametrize("sql", CASES, ids=[p.stem for p in CASES])
def test_golden(sql: Path) -> None:
    actual = _actual(sql)
    expected_path = sql.with_suffix(".json")
    if os.environ.get("LOGSTORE_REGEN_GOLDEN"):
        expected_path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    assert actual == expected


def test_no_golden_output_shows_a_secret() -> None:
    for sql in CASES:
        text = json.dumps(_actual(sql))
        for secret in ("s3cr3t", "trust-me", "hunter2", "k3y", 'password=\\"p\\"'):
            assert secret not in text, (sql.name, secret)
