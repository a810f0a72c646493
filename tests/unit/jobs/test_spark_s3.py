"""Spark on a warehouse on S3, without a JVM: the s3a settings one pure function derives from the S3
settings, their place among the session's and spark-submit's confs, the S3 jars chosen only for an
S3 warehouse, and no key ever on a command line. (The real thing: tests/integration/storage/
test_s3_spark.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.ingest.plan import JobPaths
from logstore_cli.jobs.spark import SparkSettings, launch_conf, session_conf
from logstore_cli.jobs.submit import submit_argv, submit_confs
from logstore_cli.jvm import deps
from logstore_cli.jvm.deps import Classpath
from logstore_cli.model import is_secret
from logstore_cli.storage.s3 import (
    S3A_DEFAULT_CHAIN,
    S3A_KEYS_PROVIDER,
    S3A_SESSION_KEYS_PROVIDER,
    S3Settings,
    S3Storage,
    s3a_spark_conf,
)

H = "spark.hadoop.fs.s3a."
LOOPBACK = S3Settings(endpoint="http://127.0.0.1:7070", region="eu-west-3", path_style=True)
KEYED = S3Settings(
    endpoint="http://127.0.0.1:7070",
    path_style=True,
    access_key_id="AKIDEXAMPLE",
    secret_access_key="wJalrXUtnFEMI-very-secret",
)


def test_a_loopback_http_endpoint_gets_path_style_plain_http_and_the_default_chain() -> None:
    assert s3a_spark_conf(LOOPBACK) == {
        H + "endpoint": "http://127.0.0.1:7070",
        H + "endpoint.region": "eu-west-3",
        H + "path.style.access": "true",
        H + "connection.ssl.enabled": "false",
        H + "aws.credentials.provider": S3A_DEFAULT_CHAIN,
    }


def test_an_https_endpoint_keeps_tls() -> None:
    conf = s3a_spark_conf(S3Settings(endpoint="https://s3.example.com", path_style=True))
    assert conf[H + "connection.ssl.enabled"] == "true"


def test_aws_itself_needs_no_endpoint_and_uses_virtual_hosted_style() -> None:
    conf = s3a_spark_conf(S3Settings(region="us-west-2"))
    assert H + "endpoint" not in conf and H + "connection.ssl.enabled" not in conf
    assert conf[H + "path.style.access"] == "false"
    assert conf[H + "endpoint.region"] == "us-west-2"


def test_settings_from_the_environment_put_no_key_in_any_conf() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://localhost:9000",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-very-secret",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        conf = s3a_spark_conf(S3Settings.from_env())  # the process's: the JVM's chain reads them
    assert conf[H + "aws.credentials.provider"] == S3A_DEFAULT_CHAIN
    assert not any(is_secret(k, v) for k, v in conf.items())
    assert not any(v in ("AKIDEXAMPLE", "wJalrXUtnFEMI-very-secret") for v in conf.values())


def test_keys_carried_by_the_settings_are_secret_confs_kept_off_command_lines() -> None:
    conf = s3a_spark_conf(KEYED)
    assert conf[H + "aws.credentials.provider"] == S3A_KEYS_PROVIDER
    assert conf[H + "secret.key"] == "wJalrXUtnFEMI-very-secret"
    assert is_secret(H + "access.key", "x") and is_secret(H + "secret.key", "x")
    launched = launch_conf(session_conf(SparkSettings(s3=KEYED), []))
    assert H + "secret.key" not in launched and H + "access.key" not in launched
    assert launched[H + "endpoint"] == "http://127.0.0.1:7070"
    printed = " ".join(
        submit_argv(
            "spark-submit", "local[*]", submit_confs("local[*]", {}, KEYED), [], [], "l", []
        )
    )
    assert "very-secret" not in printed and "AKIDEXAMPLE" not in printed
    assert f"--conf {H}endpoint=http://127.0.0.1:7070" in printed


def test_a_session_token_selects_the_temporary_credentials_provider() -> None:
    keyed = S3Settings(access_key_id="a", secret_access_key="b", session_token="c")
    conf = s3a_spark_conf(keyed)
    assert conf[H + "aws.credentials.provider"] == S3A_SESSION_KEYS_PROVIDER
    assert is_secret(H + "session.token", conf[H + "session.token"])


def test_the_session_gets_the_s3a_settings_beneath_the_users() -> None:
    mine = {H + "path.style.access": "false", "spark.databricks.delta.snapshotPartitions": "8"}
    conf = session_conf(SparkSettings(s3=LOOPBACK, conf=mine), [])
    assert conf[H + "endpoint"] == "http://127.0.0.1:7070"
    assert conf[H + "path.style.access"] == "false"  # the user's conf wins
    assert conf["spark.databricks.delta.snapshotPartitions"] == "8"


def test_small_tables_on_a_loopback_master_get_few_snapshot_partitions() -> None:
    conf = session_conf(SparkSettings(master="local[2]", s3=LOOPBACK), [])
    assert int(conf["spark.databricks.delta.snapshotPartitions"]) <= 4


def test_a_local_warehouse_gets_no_s3a_setting() -> None:
    assert not any(k.startswith("spark.hadoop.fs.s3a") for k in session_conf(SparkSettings(), []))
    assert not any(k.startswith("spark.hadoop.fs.s3a") for k in submit_confs("local[*]", {}))


def test_spark_submit_confs_order_defaults_s3a_delta_then_the_users() -> None:
    confs = submit_confs("yarn", {H + "endpoint": "https://mine.example"}, LOOPBACK)
    assert confs[H + "endpoint"] == "https://mine.example"
    assert confs[H + "endpoint.region"] == "eu-west-3"
    assert "spark.driver.bindAddress" not in confs  # not a loopback master


def test_the_s3_jars_are_chosen_only_for_an_s3_warehouse() -> None:
    assert deps.spark_classpaths(s3=False) == [Classpath.SPARK]
    assert deps.spark_classpaths(s3=True) == [Classpath.SPARK, Classpath.S3]
    assert deps.setup_classpaths(s3=False) == [Classpath.SPARK, Classpath.KAFKA]
    assert deps.setup_classpaths(s3=True) == [Classpath.SPARK, Classpath.KAFKA, Classpath.S3]


def test_spark_jars_never_resolve_the_s3_classpath_for_a_local_warehouse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Classpath] = []

    def ensure(cp: Classpath, **_: object) -> list[Path]:
        asked.append(cp)
        return [Path(f"/jars/{cp.value}.jar")]

    monkeypatch.setattr(deps, "ensure_classpath", ensure)
    assert deps.spark_jars(s3=False) == [Path("/jars/spark.jar")]
    assert asked == [Classpath.SPARK]
    assert deps.spark_jars(s3=True) == [Path("/jars/spark.jar"), Path("/jars/s3.jar")]


def test_an_s3_storage_names_its_root_for_spark_as_s3a() -> None:
    storage = S3Storage(object(), "bucket-1", ("lake", "wh"))
    assert storage.uri == "s3://bucket-1/lake/wh"
    assert storage.spark_uri == "s3a://bucket-1/lake/wh"


def test_an_s3_tables_checkpoint_defaults_to_the_tables_own_prefix() -> None:
    # docs/cluster.md section 5: beside the table on S3, never on the driver's disk.
    paths = JobPaths("s3a://bucket-1/lake/wh/shop/orders", "default")
    assert paths.checkpoint == "s3a://bucket-1/lake/wh/shop/orders/_logstore/checkpoints/default"
    assert JobPaths("s3a://b/t", "j", "hdfs://nn:8020/ckpt").checkpoint == "hdfs://nn:8020/ckpt"


def test_the_printed_spark_submit_of_an_s3_warehouse_has_the_s3_jars_and_settings_no_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from logstore_cli import config as cfg
    from logstore_cli.cli.context import make_context
    from logstore_cli.cli.ingest import spark_submit_command

    for var in [*cfg.ENV_VARS, cfg.CONFIG_ENV]:
        monkeypatch.delenv(var, raising=False)
    aws = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "eu-west-3",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-very-secret",
    }
    for name, value in {
        **aws,
        "LOGSTORE_WAREHOUSE": "s3://bucket-1/wh",
        "LOGSTORE_STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(
        deps, "ensure_classpath", lambda cp, **_: [Path(f"/cache/{cp.value}/{cp.value}.jar")]
    )
    ctx = make_context(cfg.Overrides())
    assert ctx.spark_s3 is not None and ctx.spark_s3.endpoint == "http://127.0.0.1:9"
    argv = ["ingest", "shop.orders", "--source", "generate", "--print-spark-submit"]
    command = spark_submit_command(None, ctx, argv)  # type: ignore[arg-type]

    assert command[command.index("--jars") + 1] == "/cache/spark/spark.jar,/cache/s3/s3.jar"
    confs = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert confs[H + "endpoint"] == "http://127.0.0.1:9"
    assert confs[H + "endpoint.region"] == "eu-west-3"
    assert confs[H + "aws.credentials.provider"] == S3A_DEFAULT_CHAIN
    assert command[command.index("--warehouse") + 1] == "s3://bucket-1/wh"
    assert "--print-spark-submit" not in command
    assert not any(v in arg for arg in command for v in ("AKIDEXAMPLE", "very-secret"))


def test_a_local_warehouse_has_no_spark_s3_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from logstore_cli import config as cfg
    from logstore_cli.cli.context import make_context

    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(tmp_path / "wh"))
    assert make_context(cfg.Overrides()).spark_s3 is None


def test_the_printed_ingest_on_s3_leaves_out_keys_given_in_the_config_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Keys in ``[spark.conf]`` (secret settings, handed to the running JVM by the driver) and in
    the environment (read by the JVM's own chain) reach no argument of the printed command; the
    S3 jars and the s3a settings do, and the job's S3 checkpoint is passed on as given."""
    from logstore_cli import config as cfg
    from logstore_cli.cli.context import make_context
    from logstore_cli.cli.ingest import spark_submit_command

    for var in [*cfg.ENV_VARS, cfg.CONFIG_ENV]:
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "logstore.toml"
    config.write_text(
        'warehouse = "s3://bucket-1/wh"\n'
        "[spark.conf]\n"
        '"spark.hadoop.fs.s3a.access.key" = "AKIDFROMCONFIG"\n'
        '"spark.hadoop.fs.s3a.secret.key" = "config-secret-value"\n'
        '"spark.hadoop.fs.s3a.connection.maximum" = "64"\n',
        "utf-8",
    )
    for name, value in {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "AKIDFROMENV",
        "AWS_SECRET_ACCESS_KEY": "env-secret-value",
        "AWS_SESSION_TOKEN": "env-session-token",
        "LOGSTORE_STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(
        deps, "ensure_classpath", lambda cp, **_: [Path(f"/cache/{cp.value}/{cp.value}.jar")]
    )
    ctx = make_context(cfg.Overrides(config_path=config))
    argv = ["ingest", "shop.orders", "--source", "in", "--checkpoint", "s3://bucket-1/cp/orders",
            "--print-spark-submit"]  # fmt: skip
    command = spark_submit_command(None, ctx, argv)  # type: ignore[arg-type]

    assert command[command.index("--jars") + 1].split(",") == [
        "/cache/spark/spark.jar",
        "/cache/s3/s3.jar",
    ]
    confs = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert confs[H + "endpoint"] == "http://127.0.0.1:9"
    assert confs[H + "path.style.access"] == "true"
    assert confs[H + "aws.credentials.provider"] == S3A_DEFAULT_CHAIN
    assert confs[H + "connection.maximum"] == "64"  # the user's own, not secret: kept
    assert H + "access.key" not in confs and H + "secret.key" not in confs
    assert command[command.index("--config") + 1] == str(config.absolute())
    assert command[command.index("--checkpoint") + 1] == "s3://bucket-1/cp/orders"
    for secret in ("AKIDFROMCONFIG", "config-secret-value", "AKIDFROMENV", "env-secret-value",
                   "env-session-token"):  # fmt: skip
        assert not any(secret in arg for arg in command), secret
