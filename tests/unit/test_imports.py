"""The pure modules stay pure: importing them loads neither the Kafka client nor Spark.

Each import runs in a fresh interpreter, so modules other tests have already loaded do not hide a
heavy import.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE_MODULES = [
    "logstore_cli.provision.plan",
    "logstore_cli.kafka.client_config",
    "logstore_cli.kafka.types",
    "logstore_cli.catalog",
    "logstore_cli.catalog.warehouse",
    "logstore_cli.catalog.tables",
    "logstore_cli.names",
    "logstore_cli.model",
    "logstore_cli.ddl",
    "logstore_cli.logformat",
]
HEAVY = ("confluent_kafka", "pyspark")


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_no_kafka_client_and_no_spark(module: str) -> None:
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"{module} loads {proc.stdout.strip()}"


def test_the_check_sees_a_heavy_import() -> None:
    """The probe itself works: the admin client does load confluent_kafka."""
    code = "import sys\nimport logstore_cli.kafka.admin\nprint('confluent_kafka' in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "True"
