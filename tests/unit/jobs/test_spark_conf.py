from __future__ import annotations

import os
from pathlib import Path

import pytest

from logstore_cli.errors import InvalidInputError
from logstore_cli.jobs import spark as spark_module
from logstore_cli.jobs.spark import DELTA_CONF, SparkSettings, launch_conf, session_conf


def test_local_session_gets_laptop_defaults_and_delta() -> None:
    conf = session_conf(SparkSettings(), [Path("/j/delta.jar"), Path("/j/storage.jar")])
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.jars"] == "/j/delta.jar,/j/storage.jar"
    for key, value in DELTA_CONF.items():
        assert conf[key] == value


def test_cluster_master_gets_no_loopback_defaults() -> None:
    conf = session_conf(SparkSettings(master="yarn"), [Path("/j/delta.jar")])
    assert "spark.driver.bindAddress" not in conf
    assert conf["spark.sql.extensions"] == DELTA_CONF["spark.sql.extensions"]


def test_user_confs_win_and_user_jars_are_kept() -> None:
    settings = SparkSettings(conf={"spark.ui.enabled": "true", "spark.jars": "/mine.jar"})
    conf = session_conf(settings, [Path("/j/delta.jar")])
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.jars"] == "/j/delta.jar,/mine.jar"


def test_spark_warehouse_is_under_the_work_dir_not_the_cwd(tmp_path: Path) -> None:
    conf = session_conf(SparkSettings(work_dir=tmp_path / "spark"), [])
    assert conf["spark.sql.warehouse.dir"] == (tmp_path / "spark" / "warehouse").as_uri()


def test_spark_warehouse_defaults_to_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    for master in ("local[2]", "yarn"):  # a cluster driver must not litter its CWD either
        conf = session_conf(SparkSettings(master=master), [])
        assert conf["spark.sql.warehouse.dir"] == (tmp_path / "state/spark/warehouse").as_uri()


def test_a_relative_state_dir_gives_an_absolute_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOGSTORE_STATE_DIR", "rel")
    conf = session_conf(SparkSettings(), [])
    assert conf["spark.sql.warehouse.dir"] == (tmp_path / "rel/spark/warehouse").as_uri()


def test_the_users_warehouse_dir_wins() -> None:
    conf = session_conf(SparkSettings(conf={"spark.sql.warehouse.dir": "/mine"}), [])
    assert conf["spark.sql.warehouse.dir"] == "/mine"


def test_the_launch_command_line_gets_no_secret_conf() -> None:
    conf = session_conf(
        SparkSettings(conf={
            "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
            "spark.hadoop.fs.s3a.access.key": "AKIA",
            "spark.ssl.keyStorePassword": "pw",
            "spark.logstore.x": "user=a password=pw",  # a secret by its value
            "spark.hadoop.fs.s3a.aws.credentials.provider": "com.example.Provider",
        }),
        [],
    )  # fmt: skip
    launch = launch_conf(conf)
    assert "s3cr3t" not in str(launch) and "AKIA" not in str(launch) and "pw" not in str(launch)
    assert launch["spark.hadoop.fs.s3a.aws.credentials.provider"] == "com.example.Provider"
    assert {k: v for k, v in conf.items() if k in launch} == launch  # the rest, unchanged
    assert launch["spark.sql.extensions"] == DELTA_CONF["spark.sql.extensions"]


def test_a_secret_in_jvm_options_is_refused() -> None:
    # The launcher makes spark.driver.extraJavaOptions the JVM's own command line.
    conf = {"spark.driver.extraJavaOptions": "-Djavax.net.ssl.trustStorePassword=pw"}
    with pytest.raises(InvalidInputError, match=r"spark.driver.extraJavaOptions holds a secret"):
        launch_conf(conf)


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "spark.jsa"
    path.write_bytes(b"classes")
    monkeypatch.setattr("logstore_cli.jvm.class_archive.current_archive", lambda: path)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    return path


def test_the_class_archive_is_passed_unless_turned_off_or_the_user_decides(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = spark_module._archive_options(SparkSettings(), {})
    assert options is not None and f"-XX:SharedArchiveFile={archive}" in options.split()
    assert spark_module._archive_options(SparkSettings(class_archive=False), {}) is None
    user = {"spark.driver.extraJavaOptions": "-Xshare:off"}
    assert spark_module._archive_options(SparkSettings(), user) is None
    monkeypatch.setattr("logstore_cli.jvm.class_archive.current_archive", lambda: None)
    assert spark_module._archive_options(SparkSettings(), {}) is None  # none built


def test_the_options_go_before_the_users_submit_opts_for_the_launch_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:+UseSerialGC")
    with spark_module.submit_opts("-XX:SharedArchiveFile=/a.jsa"):
        assert os.environ["SPARK_SUBMIT_OPTS"] == "-XX:SharedArchiveFile=/a.jsa -XX:+UseSerialGC"
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-XX:+UseSerialGC"
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    with pytest.raises(RuntimeError), spark_module.submit_opts("-Xshare:auto"):
        assert os.environ["SPARK_SUBMIT_OPTS"] == "-Xshare:auto"
        raise RuntimeError("the launch failed")
    assert "SPARK_SUBMIT_OPTS" not in os.environ  # restored on failure too
    with spark_module.submit_opts(None):
        assert "SPARK_SUBMIT_OPTS" not in os.environ
