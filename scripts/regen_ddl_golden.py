#!/usr/bin/env python3
"""Regenerate the DDL golden files: ``tests/fixtures/ddl/*.json`` from their ``*.sql``.

    .venv/bin/python scripts/regen_ddl_golden.py                 # rewrite every expected file
    .venv/bin/python scripts/regen_ddl_golden.py errors_many.sql # only these fixtures
    .venv/bin/python scripts/regen_ddl_golden.py --check         # exit 1 when any would change

The golden test never writes; this script is the only thing that does. It writes what the code
says *now*, so every change it makes is printed as a diff: read it, and commit only expectations
that are right (positions, end columns, messages, tables), not merely what the code produced.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the expected-file format is defined next to the test

from tests.unit.ddl.test_golden import CASES, FIXTURES, record  # noqa: E402


def render(sql: Path) -> str:
    return json.dumps(record(sql), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("fixtures", nargs="*", help="names of .sql fixtures (default: all)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on any change")
    args = ap.parse_args()

    cases = CASES
    if args.fixtures:
        wanted = {Path(f).name for f in args.fixtures}
        unknown = wanted - {p.name for p in CASES}
        if unknown:
            print(f"no such fixture in {FIXTURES}: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [p for p in CASES if p.name in wanted]

    changed = 0
    for sql in cases:
        expected = sql.with_suffix(".json")
        old = expected.read_text(encoding="utf-8") if expected.exists() else ""
        new = render(sql)
        if new == old:
            continue
        changed += 1
        sys.stdout.writelines(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                f"a/{expected.relative_to(ROOT)}",
                f"b/{expected.relative_to(ROOT)}",
            )
        )
        if not args.check:
            expected.write_text(new, encoding="utf-8")
    for orphan in sorted(p for p in FIXTURES.glob("*.json") if not p.with_suffix(".sql").exists()):
        print(f"note: {orphan.relative_to(ROOT)} has no .sql; remove it if the case is gone")

    verb = "would change" if args.check else "rewritten"
    print(f"{changed} of {len(cases)} expected files {verb}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
