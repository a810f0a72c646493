"""Test-suite set-up: shared fixtures come from the plugins below; markers follow the directory.

Tests under ``tests/unit`` are marked ``unit`` and need no JVM and no broker; everything else is
``integration``. When the broker or Spark cannot start, the integration tests fail (never skip): a
green run must mean the real parts were exercised.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests import hypothesis_profiles

pytest_plugins = [
    # first: the server plugins import it (imported first, pytest rewrites its asserts)
    "tests.plugins.scheduling",  # the order of the run and its split over pytest-xdist workers
    "tests.plugins.isolation",  # autouse: a clean LOGSTORE_* environment for every test
    "tests.plugins.kafka_broker",  # kafka_bootstrap (session), topic_name
    "tests.plugins.authz_broker",  # authz_broker: a second broker with SASL users and ACLs on
    "tests.plugins.kafka_cluster",  # kafka_cluster (session, lazy): three KRaft nodes, for faults
    "tests.plugins.spark_session",  # spark (session): local Spark with Delta
    "tests.plugins.spark_cluster",  # spark_standalone (session): a master and 2 workers
    # s3_server, hdfs_server (session, lazy): versitygw, a MiniDFSCluster; s3_bucket, hdfs_dir
    "tests.plugins.storage_servers",
    "tests.plugins.pulsar_standalone",  # pulsar (session, lazy): a Pulsar standalone
    "tests.plugins.backends",  # backend: a warehouse on local disk, S3 and HDFS in turn
]

TESTS = Path(__file__).parent
SPARK_CONF_DIR = TESTS / "spark-conf"


def pytest_configure(config: pytest.Config) -> None:
    # Before the test modules are imported: their budget(n) reads the loaded profile.
    try:
        hypothesis_profiles.load()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    # A shell starts a background job (`scripts/test.sh &`) with SIGINT ignored, and children
    # inherit that: the CLIs the Ctrl-C tests start would then never see their SIGINT. A handler
    # here is reset to the default in every child at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # JVM settings for short-lived Spark JVMs and tiny tables, in every Spark JVM the tests start
    # (subprocesses inherit it): tests/spark-conf/spark-defaults.conf says which and why. Not the
    # developer's own conf dir.
    os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF_DIR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if TESTS / "unit" in path.parents:
            item.add_marker(pytest.mark.unit)
        else:
            item.add_marker(pytest.mark.integration)
