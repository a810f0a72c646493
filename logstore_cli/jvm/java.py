"""The Java runtime the local daemons and Spark run on."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from logstore_cli.errors import SetupError


def java_executable() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH (SetupError with an install hint)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise SetupError(
            "no Java runtime found (JAVA_HOME is unset and 'java' is not on PATH)",
            hint="install a Java 17 runtime (e.g. 'apt-get install openjdk-17-jre-headless')",
        )
    return java
