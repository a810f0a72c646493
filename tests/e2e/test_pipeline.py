"""``tests/e2e/pipeline.sh``: logstore driven as a CI pipeline drives it (a ``set -euo pipefail``
script; ``--json`` parsed with python; every exit code checked), against the session's broker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("pipeline.sh")


def test_the_pipeline_script_passes(tmp_path: Path, kafka_bootstrap: str) -> None:
    # The installed console script next to this interpreter: the venv's, as a pipeline runs it.
    logstore = Path(sys.executable).with_name("logstore")
    env = {**os.environ, "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
           "LOGSTORE_BIN": str(logstore), "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=900, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("pipeline: ok (ci.orders_") and "300 rows" in lines[-1]
    steps = {line.split()[1]: line.split()[3] for line in lines[:-1]}
    # the exit codes a script relies on, each seen: ok, invalid input, operational failure
    assert steps["ingest"] == steps["verify"] == steps["drop"] == "0"
    assert steps["validate-typo"] == steps["ingest-bad-option"] == steps["drop-unconfirmed"] == "2"
    assert steps["read-missing"] == steps["create-again"] == steps["status-after"] == "1"
    assert list(tmp_path.iterdir()) == []  # its mktemp directory is gone
    print(result.stdout + f"pipeline.sh: {took:.1f} s, {len(steps)} commands")
