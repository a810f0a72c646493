"""The repository carries its own documentation: links resolve inside it, nothing points outside; the
README links every page of docs/; the user guide covers every command, its example, its --json
shape and the exit codes. (The generated tables are checked where they are generated:
tests/unit/ddl/test_registry.py for docs/properties.md, tests/unit/test_config.py for the guide's
configuration table.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer

from logstore_cli.cli.app import app
from logstore_cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_INVALID_INPUT

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


def test_the_link_check_sees_a_broken_link_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n## Exit codes\n[ok](#exit-codes) [x](b.md)\n")
    text = (tmp_path / "a.md").read_text()
    assert _LINK.findall(text) == ["#exit-codes", "b.md"]
    assert "exit-codes" in _anchors(text) and "top" in _anchors(text)
    assert not (tmp_path / "b.md").exists()


def test_anchors_follow_github() -> None:
    heads = "## 5. The warehouse's storage\n### `logstore read`: the log\n## Scripts: JSON and exit codes"
    assert _anchors(heads) == {
        "5-the-warehouses-storage", "logstore-read-the-log", "scripts-json-and-exit-codes",
    }  # fmt: skip


def test_the_readme_links_every_doc() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert {"guide.md", "properties.md", "design.md", "consistency.md", "benchmarks.md"} <= set(
        pages
    )
    assert [p for p in pages if f"](docs/{p}" not in readme] == []


# -- the user guide covers the CLI ----------------------------------------------------------------

GUIDE = REPO / "docs" / "guide.md"


def _commands() -> dict[str, Any]:
    """Every command path of the app ("read", "broker start", …) and its Click command."""
    root = typer.main.get_command(app)
    found: dict[str, Any] = {}
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        found |= {f"{name} {sub}": c for sub, c in getattr(cmd, "commands", {}).items()}
        found[name] = cmd
    return found


def _section(markdown: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or higher."""
    level = len(heading.split(" ")[0])
    after = markdown[markdown.index(f"\n{heading}\n") + len(heading) + 2 :]
    end = re.search(rf"^#{{1,{level}}} ", after, flags=re.MULTILINE)
    return after[: end.start()] if end else after


def _described(path: str, shapes: str) -> bool:
    """A code span of the JSON section names the command: `read`, `broker start|status --json`."""
    top, _, sub = path.partition(" ")
    for span in re.findall(rf"`{re.escape(top)}(?:[ |][^`]*)?`", shapes):
        if not sub or sub in re.split(r"[ |`]+", span):
            return True
    return False


def test_the_guide_has_a_section_with_an_example_for_every_command() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    for path in _commands():
        section = _section(guide, f"### {path.split(' ')[0]}")
        assert f"logstore {path}" in section, f"docs/guide.md: no example of 'logstore {path}'"


def test_the_guide_gives_the_json_shape_of_every_command_with_json() -> None:
    shapes = _section(GUIDE.read_text(encoding="utf-8"), "### JSON output")
    with_json = [p for p, c in _commands().items() if any(o.name == "json_" for o in c.params)]
    assert "read" in with_json and "broker status" in with_json
    assert not _described("broker nonsense", shapes)
    missing = [p for p in with_json if not _described(p, shapes)]
    assert missing == [], f"docs/guide.md's JSON output does not describe: {missing}"


def test_the_guide_lists_the_exit_codes() -> None:
    codes = _section(GUIDE.read_text(encoding="utf-8"), "### Exit codes")
    for code in (0, EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_INTERRUPTED):
        assert re.search(rf"^\| {code} \|", codes, flags=re.MULTILINE), code


def test_the_guide_explains_shell_completion() -> None:
    section = _section(GUIDE.read_text(encoding="utf-8"), "## Shell completion")
    assert "logstore --install-completion" in section and "logstore --show-completion" in section


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
