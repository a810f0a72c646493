from __future__ import annotations

from pathlib import Path

from logstore_cli.jobs.spark import DELTA_CONF, SparkSettings, session_conf


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
