from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from logstore_cli.errors import BrokerError
from logstore_cli.kafka import local_broker


def test_cluster_id_is_a_kafka_uuid() -> None:
    ids = {local_broker.new_cluster_id() for _ in range(500)}
    assert len(ids) == 500
    for cid in ids:
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_server_properties_bind_loopback_only(tmp_path: Path) -> None:
    text = local_broker.server_properties(9092, 9093, tmp_path)
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.dirs"] == str(tmp_path)


def test_free_port_is_bindable() -> None:
    import socket

    port = local_broker.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_state_round_trip_and_not_running(tmp_path: Path) -> None:
    assert local_broker.read_state(tmp_path) is None
    info = local_broker.BrokerInfo(
        pid=2**22 + 7, bootstrap="127.0.0.1:1", controller="127.0.0.1:2", log_file="l",
        data_dir="d", config_file=str(tmp_path / "server.properties"), started_at=0.0,
    )  # fmt: skip
    local_broker.broker_dir(tmp_path).mkdir()
    (local_broker.broker_dir(tmp_path) / "broker.json").write_text(json.dumps(info.__dict__))
    assert local_broker.read_state(tmp_path) == info
    assert not local_broker.is_running(info)
    # stop() of a dead broker clears its state and never signals an unrelated pid
    assert local_broker.stop(tmp_path) == info
    assert local_broker.read_state(tmp_path) is None


def test_is_running_rejects_reused_pid(tmp_path: Path) -> None:
    import os

    info = local_broker.BrokerInfo(
        pid=os.getpid(), bootstrap="", controller="", log_file="", data_dir="",
        config_file=str(tmp_path / "server.properties"), started_at=0.0,
    )  # fmt: skip
    assert not local_broker.is_running(info)  # our pytest process is alive, but not a broker


def test_unreadable_state_is_a_clear_error(tmp_path: Path) -> None:
    local_broker.broker_dir(tmp_path).mkdir()
    (local_broker.broker_dir(tmp_path) / "broker.json").write_text("{oops")
    with pytest.raises(BrokerError, match="unreadable") as info:
        local_broker.read_state(tmp_path)
    assert info.value.hint and "delete" in info.value.hint


def test_missing_java_is_a_setup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from logstore_cli.errors import SetupError

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SetupError, match="no Java runtime"):
        local_broker.java_executable()


def test_answers_metadata_false_when_nothing_listens() -> None:
    port = local_broker.free_port()
    assert local_broker.answers_metadata(f"127.0.0.1:{port}", timeout_s=1.0) is False
