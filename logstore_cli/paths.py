"""Where logstore keeps its files outside the repository. Pure functions of the environment."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """Resolved jars and other downloaded artefacts (``LOGSTORE_HOME``, else ``~/.cache/logstore``)."""
    env = os.environ.get("LOGSTORE_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "logstore"


def state_home() -> Path:
    """Running services' state: the local broker's data, logs and pid (``LOGSTORE_STATE_DIR``)."""
    env = os.environ.get("LOGSTORE_STATE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "logstore"
