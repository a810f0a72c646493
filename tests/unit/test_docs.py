"""The repository carries its own documentation: links resolve inside it, nothing points outside."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_OUTSIDE = re.compile(r"\.\./shared|/work/shared|shared/design\.md")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#{1,6} +(.+?) *$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    links = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    for target in links:
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        assert dest.exists(), f"{doc.name}: link to missing {target}"
        assert REPO in dest.parents or dest == REPO, f"{doc.name}: link outside the repo {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest.read_text(encoding="utf-8")), f"{doc.name}: #{anchor}"


def test_design_is_linked_from_the_readme() -> None:
    assert (REPO / "docs" / "design.md").is_file()
    assert "](docs/design.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def test_nothing_refers_to_files_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.split()  # fmt: skip
    assert tracked
    me = Path(__file__).relative_to(REPO).as_posix()
    offenders = []
    for name in tracked:
        path = REPO / name
        if name == me or not path.is_file() or path.suffix in {".parquet", ".jar", ".png"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [f"{name}: {m.group(0)}" for m in _OUTSIDE.finditer(text)]
    assert offenders == []
