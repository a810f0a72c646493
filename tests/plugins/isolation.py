"""Every test runs in a clean logstore environment, whatever the developer's shell holds.

A test sees ``LOGSTORE_STATE_DIR`` pointing at a fresh temporary directory (so a broker started with
``logstore broker start`` is not the default broker) and none of the tool's other ``LOGSTORE_*``
variables (``LOGSTORE_CONFIG``, ``LOGSTORE_KAFKA_BOOTSTRAP_SERVERS``, ``LOGSTORE_VERBOSE``, ...).
Kept: ``LOGSTORE_HOME``, the jar cache (without it every run would resolve the jars with Maven
again), and the test harness's own switches, which logstore itself never reads. Subprocesses inherit
``os.environ``, so the CLI end-to-end tests are isolated the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import pytest

PREFIX = "LOGSTORE_"
STATE_DIR_ENV = "LOGSTORE_STATE_DIR"
CACHE_ENV = "LOGSTORE_HOME"
# Switches of the test harness, not of the tool (a unit test checks that logstore_cli never reads them).
HARNESS_PREFIX = "LOGSTORE_TEST_"  # e.g. LOGSTORE_TEST_BOOTSTRAP: use this broker, start none

# The environment as the session started, read when pytest loads this plugin: session fixtures
# (e.g. ``kafka_bootstrap``) take their settings from here, not from a test's cleaned environment.
SESSION_ENV: Mapping[str, str] = MappingProxyType(
    {k: v for k, v in os.environ.items() if k.startswith(PREFIX)}
)


def is_kept(name: str) -> bool:
    """Whether the variable ``name`` survives into tests: the jar cache and harness switches."""
    return name == CACHE_ENV or name.startswith(HARNESS_PREFIX)


@pytest.fixture(autouse=True)
def logstore_state_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The test's own ``LOGSTORE_STATE_DIR`` (outside its ``tmp_path``, which stays empty)."""
    for name in list(os.environ):
        if name.startswith(PREFIX) and not is_kept(name):
            monkeypatch.delenv(name)
    state_dir = tmp_path_factory.mktemp("logstore-state")
    monkeypatch.setenv(STATE_DIR_ENV, str(state_dir))
    return state_dir
