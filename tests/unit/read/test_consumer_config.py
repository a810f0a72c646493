"""The consumer engine's client configuration (pure: no client is built): settings the engine
depends on win over client properties, throughput defaults yield to them, secrets stay hidden."""

from __future__ import annotations

import pickle

import pytest

from logstore_cli.errors import InvalidInputError
from logstore_cli.read.consumer import (
    DEFAULT_GROUP,
    FIXED,
    TUNING,
    SourceConf,
    consumer_config,
)


def test_the_engine_settings_win_and_contrary_properties_are_reported() -> None:
    conf = SourceConf(
        "b:9092",
        {
            "enable.auto.commit": "true",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": "false",
            "allow.auto.create.topics": "false",  # agrees with FIXED: not reported
        },
        "t",
    )
    config, ignored = consumer_config(conf)
    assert {k: config[k] for k in FIXED} == dict(FIXED)
    assert sorted(ignored) == sorted(
        ["enable.auto.commit", "auto.offset.reset", "isolation.level", "enable.partition.eof"]
    )


def test_throughput_defaults_yield_to_the_tables_properties() -> None:
    config, _ = consumer_config(SourceConf("b:9092", {"fetch.max.bytes": "1048576"}, "t"))
    assert config["fetch.max.bytes"] == "1048576"
    for key in set(TUNING) - {"fetch.max.bytes"}:
        assert config[key] == TUNING[key]


def test_the_group_id_is_the_tables_or_a_fixed_name() -> None:
    assert consumer_config(SourceConf("b:9092", {}, "t"))[0]["group.id"] == DEFAULT_GROUP
    given = SourceConf("b:9092", {"group.id": "team-readers"}, "t")
    assert consumer_config(given)[0]["group.id"] == "team-readers"


def test_the_time_out_bounds_connection_set_up_and_requests() -> None:
    config, _ = consumer_config(SourceConf("b:9092", {}, "t", timeout_s=4.0))
    assert config["socket.connection.setup.timeout.ms"] == 2000
    assert config["socket.timeout.ms"] == 4000


def test_no_bootstrap_servers_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="bootstrap"):
        consumer_config(SourceConf("  ", {}, "t"))


def test_a_source_conf_pickles_and_its_repr_hides_property_values() -> None:
    conf = SourceConf("b:9092", {"sasl.password": "hunter2-secret", "sasl.username": "u"}, "t")
    assert pickle.loads(pickle.dumps(conf)) == conf
    text = repr(conf)
    assert "hunter2-secret" not in text and "sasl.password" in text


def test_a_held_fetch_is_short_unless_the_tables_properties_say_otherwise() -> None:
    # a fetch held open for new records delays the metadata request behind it: bounded reads
    # of every partition after the first waited the librdkafka default (500 ms) each
    assert consumer_config(SourceConf("b:9092", {}, "t"))[0]["fetch.wait.max.ms"] == 100
    given = SourceConf("b:9092", {"fetch.wait.max.ms": "500"}, "t")
    assert consumer_config(given)[0]["fetch.wait.max.ms"] == "500"
