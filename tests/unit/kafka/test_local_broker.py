from __future__ import annotations

import base64
import json
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from logstore_cli.errors import BrokerError, ConfigError, StateDirError
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
    # stop() of a dead broker stops nothing, clears its record and never signals an unrelated pid
    assert local_broker.stop(tmp_path) is None
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


def _record_cluster(
    state_dir: Path, *, port: int, controller_port: int, sasl_port: int | None = None
) -> local_broker.ClusterState:
    cluster = local_broker.ClusterState(
        local_broker.new_cluster_id(), port, controller_port, sasl_port
    )
    local_broker.broker_dir(state_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    (local_broker.broker_dir(state_dir) / "cluster.json").write_text(json.dumps(cluster.__dict__))
    return cluster


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_recorded_port_taken_is_a_clear_error(tmp_path: Path, listening: int) -> None:
    _record_cluster(tmp_path, port=listening, controller_port=local_broker.free_port())
    with pytest.raises(BrokerError) as info:
        local_broker.start(tmp_path, classpath=[])
    err = info.value
    assert f"port {listening}" in err.message and "used by another process" in err.message
    assert err.hint and "--port" in err.hint and "--fresh" in err.hint
    assert local_broker.read_state(tmp_path) is None
    assert not (local_broker.broker_dir(tmp_path) / "server.properties").exists()  # nothing ran


def test_explicit_port_taken_is_a_clear_error(tmp_path: Path, listening: int) -> None:
    with pytest.raises(BrokerError, match=f"port {listening} on 127.0.0.1 is already in use"):
        local_broker.start(tmp_path, port=listening, classpath=[])


def test_restart_reuses_the_recorded_ports(tmp_path: Path) -> None:
    client, controller, sasl = local_broker._free_ports(3)
    _record_cluster(tmp_path, port=client, controller_port=controller, sasl_port=sasl)
    recorded = local_broker.read_cluster(tmp_path)
    assert local_broker._choose_ports(recorded, None, sasl=True) == (client, controller, sasl)
    assert local_broker._choose_ports(recorded, None, sasl=False) == (client, controller, None)


def test_taken_controller_port_moves_silently(tmp_path: Path, listening: int) -> None:
    client = local_broker.free_port()
    _record_cluster(tmp_path, port=client, controller_port=listening)
    chosen = local_broker._choose_ports(local_broker.read_cluster(tmp_path), None, sasl=True)
    assert chosen[0] == client
    assert chosen[1] not in (listening, client) and chosen[2] not in (listening, client, chosen[1])


def test_explicit_port_overrides_the_recorded_one(tmp_path: Path) -> None:
    recorded, wanted = local_broker._free_ports(2)
    _record_cluster(tmp_path, port=recorded, controller_port=wanted)  # collides with the new port
    port, controller, _ = local_broker._choose_ports(
        local_broker.read_cluster(tmp_path), wanted, sasl=False
    )
    assert port == wanted and controller not in (wanted, recorded)


def test_unreadable_cluster_file_names_the_fix(tmp_path: Path) -> None:
    local_broker.broker_dir(tmp_path).mkdir()
    (local_broker.broker_dir(tmp_path) / "cluster.json").write_text('{"port": 1}')
    with pytest.raises(BrokerError, match="unreadable") as info:
        local_broker.read_cluster(tmp_path)
    assert info.value.hint and "--fresh" in info.value.hint


def test_state_dir_below_a_file_is_an_input_error(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    state_dir = afile / "below"
    for call in (
        lambda: local_broker.start(state_dir, classpath=[]),
        lambda: local_broker.read_state(state_dir),
        lambda: local_broker.stop(state_dir),
    ):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.exit_code == 2
        assert str(state_dir) in info.value.message and str(afile) in info.value.message
        assert info.value.hint and "LOGSTORE_STATE_DIR" in info.value.hint
    assert afile.read_text() == ""


def test_symlinked_broker_dir_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    local_broker.broker_dir(state_dir).symlink_to(elsewhere)
    with pytest.raises(StateDirError, match="symbolic link"):
        local_broker.start(state_dir, fresh=True, classpath=[])
    assert list(elsewhere.iterdir()) == []


def test_symlinked_data_dir_is_refused_without_fresh(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine")
    local_broker.broker_dir(tmp_path).mkdir()
    (local_broker.broker_dir(tmp_path) / "data").symlink_to(elsewhere)
    with pytest.raises(StateDirError, match="symbolic link") as info:
        local_broker.start(tmp_path, classpath=[])
    assert info.value.hint and "--state-dir" in info.value.hint
    assert (elsewhere / "keep").read_text() == "mine"


def test_broker_files_are_private(tmp_path: Path) -> None:
    local_broker._write_private(tmp_path / "x.json", "{}")
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temp file left


def test_a_stopped_brokers_last_address_is_known(tmp_path: Path) -> None:
    assert local_broker.last_local_bootstrap(tmp_path) is None  # never started
    _record_cluster(tmp_path, port=9123, controller_port=9124)
    assert local_broker.local_bootstrap(tmp_path) is None  # not running …
    assert local_broker.last_local_bootstrap(tmp_path) == "127.0.0.1:9123"  # … but known
