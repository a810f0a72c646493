#!/usr/bin/env python3
"""Rewrite the property reference, docs/properties.md (between the property markers), from the registry.

    .venv/bin/python scripts/gen_property_docs.py          # rewrite docs/properties.md
    .venv/bin/python scripts/gen_property_docs.py --check  # exit 1 when docs/properties.md is stale

Only the text between ``<!-- properties:begin -->`` and ``<!-- properties:end -->`` changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from logstore_cli.ddl.registry import update_readme

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "properties.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only report whether the page is stale")
    args = ap.parse_args()
    current = REFERENCE.read_text(encoding="utf-8")
    wanted = update_readme(current)
    if wanted == current:
        print("docs/properties.md is up to date")
        return 0
    if args.check:
        print("docs/properties.md is stale: run scripts/gen_property_docs.py")
        return 1
    REFERENCE.write_text(wanted, encoding="utf-8")
    print("docs/properties.md rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
