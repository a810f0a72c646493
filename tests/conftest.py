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
# JVM options of every Spark driver the tests start (the session fixture's and each job the CLI
# tests run; subprocesses inherit the environment), through spark-submit's SPARK_SUBMIT_OPTS, which
# logstore's own driver options (the class archive, jvm/class_archive.py) join rather than replace.
# The tests' JVMs are short-lived (a job per test, killed and restarted by the crash and fault
# tests) and their tables tiny: the JIT's optimizing tier (C2) and the parallel GC's threads cost
# more CPU than they ever save. With C1 only and the serial GC, a JVM start and an ingest epoch's
# MERGE take about half the CPU (measured: 47-50 -> 23-26 CPU-s for a session and six MERGEs; over
# thirty MERGEs 114 -> 84, so the long-lived session fixture gains too). Production keeps the JVM's
# defaults. Also: no bytecode verification of the classpath's classes (Spark's jars load some
# 10,000 classes; the JDK's own are never verified: the verifier guards against untrusted class
# files, not a behaviour the tests check), one JIT thread (C1 only) and no hsperfdata file (no test
# uses jps/jstat). Measured on one JVM's life (session, a Delta write, three MERGEs, a count; CPU-s
# of the JVM from /proc, three runs each): 23.3-24.7 -> 21.0-21.8.
# Not a spark-defaults.conf in a SPARK_CONF_DIR: that directory heads the driver's class path, and
# HotSpot writes no class archive for a class path holding a non-empty directory.
TEST_DRIVER_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
    "-XX:-BytecodeVerificationRemote -XX:CICompilerCount=1 -XX:-UsePerfData"
)


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
    # JVM settings for short-lived Spark JVMs and tiny tables (TEST_DRIVER_JVM_OPTIONS says which
    # and why); not the developer's own Spark conf dir, nor their own driver options.
    os.environ["SPARK_SUBMIT_OPTS"] = TEST_DRIVER_JVM_OPTIONS
    os.environ.pop("SPARK_CONF_DIR", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if TESTS / "unit" in path.parents:
            item.add_marker(pytest.mark.unit)
        else:
            item.add_marker(pytest.mark.integration)
