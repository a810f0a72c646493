"""The Spark session builder reports the JVM's own error when the JVM cannot start."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_jvm_start_failure_shows_the_jvm_error(tmp_path: Path) -> None:
    # A fresh interpreter: the session fixture's JVM must not be reused. A bad heap size makes the
    # JVM itself refuse to start; the user must see the JVM's words, not JAVA_GATEWAY_EXITED only.
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from logstore_cli.errors import SparkStartError
        from logstore_cli.jobs.spark import SparkSettings, build_session
        try:
            build_session(SparkSettings(
                master="local[1]",
                conf={{"spark.driver.memory": "12zz"}},
                log_dir=Path({str(tmp_path)!r}),
            ))
        except SparkStartError as exc:
            print("MESSAGE:", exc.message)
            print("DETAIL:", exc.detail)
        else:
            print("STARTED")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert "STARTED" not in proc.stdout, proc.stdout
    assert "MESSAGE: the Spark JVM did not start" in proc.stdout, proc.stdout + proc.stderr
    assert "Invalid maximum heap size: -Xmx12zz" in proc.stdout, proc.stdout
