from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli import config as cfg
from logstore_cli.errors import ConfigError


def test_defaults_work_with_no_file() -> None:
    c = cfg.resolve()
    assert c.warehouse == "./warehouse"
    assert c.kafka.bootstrap_servers is None
    assert c.kafka.timeout_s == 10.0
    assert c.spark.master == "local[*]"
    assert c.warehouse_path(Path("/home/u")) == Path("/home/u/warehouse")


def test_precedence_file_then_env_then_flags() -> None:
    data = {
        "warehouse": "/from/file",
        "kafka": {"bootstrap_servers": "file:9092", "timeout_s": 3, "client": {"acks": "all"}},
        "spark": {"master": "local[2]", "conf": {"a": 1, "b": True}},
    }
    c = cfg.resolve(data)
    assert (c.warehouse, c.kafka.bootstrap_servers, c.kafka.timeout_s) == (
        "/from/file",
        "file:9092",
        3.0,
    )
    assert dict(c.kafka.client) == {"acks": "all"}
    assert dict(c.spark.conf) == {"a": "1", "b": "true"}

    env = {"LOGSTORE_WAREHOUSE": "/from/env", "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": "env:9092"}
    c = cfg.resolve(data, env)
    assert (c.warehouse, c.kafka.bootstrap_servers) == ("/from/env", "env:9092")
    assert c.spark.master == "local[2]"

    flags = {"warehouse": "/from/flag", "kafka.timeout_s": "7", "spark.conf": ["b=false"]}
    c = cfg.resolve(data, env, flags)
    assert c.warehouse == "/from/flag"
    assert c.kafka.bootstrap_servers == "env:9092"
    assert c.kafka.timeout_s == 7.0
    assert dict(c.spark.conf) == {"a": "1", "b": "false"}


def test_unknown_key_suggests_the_nearest() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'kafka\.bootstrap_server'") as info:
        cfg.resolve({"kafka": {"bootstrap_server": "x"}}, source="my.toml")
    assert info.value.hint == "did you mean 'kafka.bootstrap_servers'?"
    assert "my.toml" in info.value.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kafka": {"timeout_s": "soon"}}, "must be a number of seconds"),
        ({"kafka": {"timeout_s": -1}}, "more than 0"),
        ({"kafka": "x"}, "must be a table"),
        ({"kafka": {"client": "acks=all"}}, "must be a table"),
        ({"warehouse": ["a"]}, "must be a non-empty string"),
    ],
)
def test_bad_values_are_config_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cfg.resolve(data)


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="LOGSTORE_KAFKA_TIMEOUT"):
        cfg.resolve({}, {"LOGSTORE_KAFKA_TIMEOUT": "abc"})


def test_load_reads_file_from_flag_or_env(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('warehouse = "/w"\n[kafka]\ntimeout_s = 2.5\n')
    assert cfg.load(f, {}).warehouse == "/w"
    assert cfg.load(None, {"LOGSTORE_CONFIG": str(f)}).kafka.timeout_s == 2.5
    assert cfg.load(None, {}).warehouse == "./warehouse"


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        cfg.load(tmp_path / "nope.toml", {})
    bad = tmp_path / "bad.toml"
    bad.write_text("warehouse = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        cfg.load(bad, {})


def test_example_config_in_repo_is_valid() -> None:
    example = Path(__file__).parents[2] / "configs" / "logstore.toml"
    c = cfg.load(example, {})
    assert c.warehouse == "./warehouse"
    assert c.spark.master == "local[*]"
