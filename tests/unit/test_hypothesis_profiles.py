"""The suite's Hypothesis profiles (tests/hypothesis_profiles.py): which one loads, what each sets,
and that no test pins a budget or a deadline past them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests import hypothesis_profiles as hp

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _loaded(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> tuple[str, settings, int]:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(hp.PROFILE_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = settings.get_current_profile_name()
    try:
        name = hp.load()
        assert settings.default is not None
        return name, settings.default, hp.budget(300)
    finally:
        settings.load_profile(before)


def test_ci_is_derandomized_without_a_deadline_or_database(monkeypatch: pytest.MonkeyPatch) -> None:
    name, s, examples = _loaded(monkeypatch, {"CI": "true"})
    assert name == "ci" and s.derandomize and s.database is None and s.deadline is None
    assert s.max_examples == hp.BASE_EXAMPLES and examples == 300


def test_dev_is_the_default_and_random(monkeypatch: pytest.MonkeyPatch) -> None:
    name, s, examples = _loaded(monkeypatch, {})
    assert name == "dev" and not s.derandomize and s.deadline is None and examples == 300


def test_thorough_on_demand_scales_every_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    name, s, examples = _loaded(monkeypatch, {"CI": "true", hp.PROFILE_ENV: "thorough"})
    assert name == "thorough" and not s.derandomize and s.deadline is None
    assert s.max_examples == 10 * hp.BASE_EXAMPLES and examples == 3000


def test_an_unknown_profile_is_a_usage_error_naming_the_valid_ones() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/unit/test_model.py"],
        cwd=ROOT, env={**os.environ, "HYPOTHESIS_PROFILE": "fast"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error
    assert (
        "HYPOTHESIS_PROFILE='fast' is not a profile of this suite (valid: ci, dev, thorough)"
        in (result.stderr)
    )
    assert "Traceback" not in result.stderr


def test_no_test_pins_a_budget_or_a_deadline_past_the_profiles() -> None:
    """A fixed max_examples would ignore the thorough profile; a deadline fails under load."""
    pinned = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text("utf-8")
        for match in re.finditer(r"max_examples=(?!budget\()|deadline=", text):
            if path.name not in ("hypothesis_profiles.py", Path(__file__).name):
                pinned.append(
                    f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
                )
    assert pinned == []
