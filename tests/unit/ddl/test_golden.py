"""Golden tests: every ``tests/fixtures/ddl/*.sql`` parses to exactly its ``*.json``.

The expected file holds the tables (``TableSpec.to_json``, what ``validate --json`` prints) and the
diagnostics (severity, line, first and end column, message). This test only reads the expected
files; after a deliberate change, ``.venv/bin/python scripts/regen_ddl_golden.py`` rewrites them
(``record`` below is the format) and prints the diff, which must be reviewed before committing.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.ddl import ParseOptions, parse_document

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ddl"
CASES = sorted(FIXTURES.glob("*.sql"))


def record(sql: Path) -> dict[str, Any]:
    """What ``sql`` parses to, in the shape of its expected ``.json`` file."""
    # No default broker: the fixtures must say everything themselves.
    result = parse_document(sql.read_text(encoding="utf-8"), sql.name, ParseOptions())
    return {
        "diagnostics": [
            {
                "severity": d.severity,
                "line": d.line,
                "col": d.col,
                "end_col": d.end_col,
                "message": d.message,
            }
            for d in result.diagnostics
        ],
        "tables": [t.to_json() for t in result.tables],
    }


def test_every_fixture_has_its_expectation() -> None:
    assert len(CASES) >= 10
    missing = [p.name for p in CASES if not p.with_suffix(".json").exists()]
    orphans = [p.name for p in FIXTURES.glob("*.json") if not p.with_suffix(".sql").exists()]
    assert not missing, f"no expected .json: run scripts/regen_ddl_golden.py and review ({missing})"
    assert not orphans, f"expected files without a .sql: {orphans}"


@pytest.mark.parametrize("sql", CASES, ids=[p.stem for p in CASES])
def test_golden(sql: Path) -> None:
    expected = json.loads(sql.with_suffix(".json").read_text(encoding="utf-8"))
    assert record(sql) == expected


def test_expectations_pin_every_diagnostic_to_a_range() -> None:
    # End columns are part of what is checked: a positioned diagnostic has a non-empty range.
    positioned = 0
    for sql in CASES:
        for d in json.loads(sql.with_suffix(".json").read_text(encoding="utf-8"))["diagnostics"]:
            assert set(d) == {"severity", "line", "col", "end_col", "message"}, (sql.name, d)
            if d["line"] is not None:
                positioned += 1
                assert d["end_col"] > d["col"], (sql.name, d)
    assert positioned >= 10


def test_a_test_run_never_writes_the_expected_files(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once, LOGSTORE_REGEN_GOLDEN=1 made the test write what the code said: a test that passes
    # by definition. Whatever the environment says, running it leaves every fixture untouched.
    monkeypatch.setenv("LOGSTORE_REGEN_GOLDEN", "1")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(FIXTURES.iterdir())}
    for sql in CASES:
        with contextlib.suppress(AssertionError):  # a mismatch is test_golden's to report
            test_golden(sql)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(FIXTURES.iterdir())}
    assert after == before


def test_no_golden_output_shows_a_secret() -> None:
    for sql in CASES:
        text = json.dumps(record(sql))
        for secret in ("s3cr3t", "trust-me", "hunter2", "k3y", 'password=\\"p\\"'):
            assert secret not in text, (sql.name, secret)
