"""Spark with Delta on the real S3 server through logstore's own session builder: the S3 jars and
the s3a settings (``storage.s3.s3a_spark_conf``) are enough to create a Delta table on
``s3a://bucket/prefix/…``, MERGE into it and read it back; delta-rs, opened with the seam's
``delta_rs_location``, then reads the same table and agrees. No key is ever on the JVM's command
line: with keys given as settings they reach the running JVM over PySpark's gateway (neither argv
nor environment). (Keys in the environment, found by the JVM's AWS SDK chain, are what every
S3 job of the CLI tests uses: tests/e2e/test_s3_ingest_cli.py, the crash and fence tests' [s3]
cases; the chain's settings are unit-tested in tests/unit/jobs/test_spark_s3.py.)

Each case runs its Spark job in a process of its own (``s3_spark_job.py``): the suite's shared
``spark`` JVM has no S3 jars and cannot gain them once started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.storage import delta_rs_location, open_storage
from logstore_cli.storage.s3 import S3A_KEYS_PROVIDER

pytestmark = pytest.mark.s3

REPO = Path(__file__).resolve().parents[3]
JOB_TIMEOUT_S = 900  # the first run may wait for 'logstore setup --s3' (a 558 MB bundle)


@pytest.fixture(scope="module")
def s3_jars() -> None:
    """The S3 jars, resolved here once (Maven, about 1.5 min the first time on a machine) rather
    than inside a job: a resolution that fails fails the test saying so."""
    from logstore_cli.errors import LogstoreError
    from logstore_cli.jvm.deps import Classpath, ensure_classpath

    try:
        ensure_classpath(Classpath.S3)
    except LogstoreError as exc:
        pytest.fail(f"could not resolve the S3 jars: {exc}\n{exc.detail or ''}", pytrace=False)


def _run_job(request: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.storage.s3_spark_job"],
        input=json.dumps(request), capture_output=True, text=True, cwd=REPO, env=env,
        timeout=JOB_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_delta_on_s3a_through_the_session_builder_with_keys_as_settings_is_read_back_by_delta_rs(
    s3_jars: None, s3_env: dict[str, str], s3_bucket: str, tmp_path: Path
) -> None:
    secret = s3_env["AWS_SECRET_ACCESS_KEY"]
    # Only the request (stdin) carries the keys: the JVM can get them from nowhere but the
    # gateway; its environment has the endpoint and region alone.
    env = {
        k: v
        for k, v in {**os.environ, **s3_env}.items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    request: dict[str, Any] = {
        "table": f"s3a://{s3_bucket}/lake/wh/shop/orders",
        "work_dir": str(tmp_path / "spark"),
        "keys": s3_env,
    }

    result = _run_job(request, env)

    assert result["rows"] == [[1, "a", 10], [2, "B", 21], [3, "c", 30], [4, "d", 40]]
    assert result["operations"] == [[0, "WRITE"], [1, "MERGE"]]
    assert result["hadoop_conf"]["fs.s3a.endpoint"] == s3_env["AWS_ENDPOINT_URL"]
    assert result["hadoop_conf"]["fs.s3a.aws.credentials.provider"] == S3A_KEYS_PROVIDER
    assert result["snapshot_partitions"] == "2"  # a loopback master's default: small tables
    cmdline = result["jvm_cmdline"]
    assert "hadoop-aws-3.4.1.jar" in cmdline and "bundle-2.24.6.jar" in cmdline
    assert "spark.hadoop.fs.s3a.endpoint=" in cmdline
    assert secret not in cmdline and "secret.key" not in cmdline
    assert secret not in result["jvm_environ"]

    # delta-rs through the seam's location and storage options reads what Spark wrote.
    from deltalake import DeltaTable

    root, options = delta_rs_location(open_storage(f"s3://{s3_bucket}/lake/wh"))
    table = DeltaTable(f"{root}/shop/orders", storage_options=options)
    assert table.version() == 1
    read = table.to_pyarrow_table().sort_by("id").to_pylist()
    assert [[r["id"], r["name"], r["qty"]] for r in read] == result["rows"]
