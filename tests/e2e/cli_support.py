"""What the status and verify e2e tests share: the CLI run in a child process with its own
warehouse and state dir, and a keyed two-partition table's DDL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGSTORE_WAREHOUSE": str(cwd / "wh"),
           "LOGSTORE_STATE_DIR": str(cwd / "state")}  # fmt: skip
    env.pop("LOGSTORE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def keyed_ddl(name: str, topic: str, bootstrap: str) -> str:
    return (
        f"CREATE TABLE {name} (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
        f"WITH ('log.system' = 'kafka', 'kafka.topic' = '{topic}', "
        f"'kafka.bootstrap.servers' = '{bootstrap}', 'log.system.partitions' = '2')"
    )
