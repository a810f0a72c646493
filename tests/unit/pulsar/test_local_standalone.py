"""The Pulsar standalone's own files: its configuration says what logstore relies on, ``--fresh``
deletes the data and ports of the last start and nothing else, state files that are not ours are
named as unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.errors import BrokerError
from logstore_cli.pulsar import local_standalone as ls

pytestmark = pytest.mark.unit


def test_the_configuration_binds_loopback_and_creates_no_topic_on_use() -> None:
    conf = ls.standalone_conf(ls.Ports(6650, 8080, 3181))
    lines = dict(line.split("=", 1) for line in conf.splitlines())
    assert lines["bindAddress"] == lines["advertisedAddress"] == "127.0.0.1"
    assert (lines["brokerServicePort"], lines["webServicePort"]) == ("6650", "8080")
    assert lines["allowAutoTopicCreation"] == "false"


def test_fresh_wipes_the_data_and_ports_only(tmp_path: Path) -> None:
    root = tmp_path / "pulsar"
    (root / "data" / "bookkeeper").mkdir(parents=True)
    (root / "data" / "bookkeeper" / "x").write_text("x")
    for name in ("ports.json", "standalone.conf", "pulsar.log"):
        (root / name).write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "data" / "link").symlink_to(outside)  # rmtree removes the link, not what it names
    ls._wipe(root)
    assert sorted(p.name for p in root.iterdir()) == ["pulsar.log", "standalone.conf"]
    assert outside.is_dir()


def test_a_state_file_that_is_not_ours_is_named(tmp_path: Path) -> None:
    root = tmp_path / "pulsar"
    root.mkdir()
    (root / "pulsar.json").write_text("[1, 2]")
    with pytest.raises(BrokerError, match="unreadable"):
        ls.read_state(tmp_path)
    (root / "pulsar.json").write_text('{"pid": 1}')
    with pytest.raises(BrokerError, match="unreadable"):
        ls.read_state(tmp_path)
    assert ls.read_ports(tmp_path) is None


def test_a_taken_client_port_is_an_error_the_bookies_moves() -> None:
    import socket

    from logstore_cli import processes

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        free = processes.free_ports(2)
        with pytest.raises(BrokerError, match=f"broker port {taken} is taken"):
            ls._choose_ports(ls.Ports(taken, free[0], free[1]))
        with pytest.raises(BrokerError, match=f"admin \\(HTTP\\) port {taken} is taken"):
            ls._choose_ports(ls.Ports(free[0], taken, free[1]))
        moved = ls._choose_ports(ls.Ports(free[0], free[1], taken))
        assert (moved.broker, moved.web) == (free[0], free[1]) and moved.bookie != taken
