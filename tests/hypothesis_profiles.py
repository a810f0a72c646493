"""Hypothesis profiles, registered and loaded by ``tests/conftest.py`` before any test module.

``HYPOTHESIS_PROFILE`` picks one; without it, ``ci`` when ``CI`` is set (``scripts/test.sh`` sets
``HYPOTHESIS_PROFILE=ci`` itself), else ``dev``:

- ``ci``: derandomized (the same examples on every run: a red CI run is the code, not luck), no
  example database;
- ``dev`` (the default): random examples, failures remembered in ``.hypothesis/`` and tried first;
- ``thorough``: random, ten times the examples, on demand (``HYPOTHESIS_PROFILE=thorough``).

No profile has a deadline: a per-example time limit fails on a loaded machine, not on a bug.
A test that needs more or fewer examples than the base says so with ``budget(n)``, which scales
with the profile, instead of a fixed ``max_examples`` that would ignore it.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
BASE_EXAMPLES = 100  # the ci and dev budget; budget(n) is relative to it
PROFILES = {
    "ci": settings(max_examples=BASE_EXAMPLES, derandomize=True, database=None, deadline=None),
    # derandomize=False said outright: with CI set, Hypothesis' own defaults (which a profile
    # inherits) are derandomized.
    "dev": settings(max_examples=BASE_EXAMPLES, deadline=None, derandomize=False),
    "thorough": settings(max_examples=10 * BASE_EXAMPLES, deadline=None, derandomize=False),
}


def load() -> str:
    """Register the profiles and load the chosen one; its name. ValueError for an unknown name."""
    for name, profile in PROFILES.items():
        settings.register_profile(name, profile)
    name = os.environ.get(PROFILE_ENV) or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(
            f"{PROFILE_ENV}={name!r} is not a profile of this suite (valid: {', '.join(PROFILES)})"
        )
    settings.load_profile(name)
    return name


def budget(examples: int) -> int:
    """``examples`` under the ci and dev profiles, scaled like the loaded profile's budget."""
    loaded = settings.default
    assert loaded is not None  # conftest loads a profile before any test module is imported
    return max(1, examples * loaded.max_examples // BASE_EXAMPLES)
