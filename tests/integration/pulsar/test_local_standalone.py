"""``logstore pulsar start|status|stop``: a real Pulsar standalone from Maven Central jars, ready
when its namespace exists; a message written before a restart is read after it, at the same
address; ``stop`` leaves no JVM (``--fresh``: tests/unit/pulsar/test_local_standalone.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logstore_cli import processes
from logstore_cli.pulsar import local_standalone

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]


def _cli(state: Path, *args: str, check: bool = True) -> tuple[int, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "logstore_cli", "pulsar", *args, "--state-dir", str(state), "--json"],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None


def _produce(service_url: str, topic: str, values: list[bytes]) -> None:
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i, value in enumerate(values):
            producer.send(value, properties={"logstore.kind": "+I"}, partition_key=f"k{i}")
    finally:
        client.close()


def _read_all(service_url: str, topic: str, count: int) -> list[tuple[bytes, dict[str, str]]]:
    """The topic's first ``count`` messages (a reader polls for each with a deadline: a broker
    that has just started may still be loading the topic)."""
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        found = []
        while len(found) < count:
            message = reader.read_next(timeout_millis=60_000)
            found.append((message.data(), dict(message.properties())))
        assert not reader.has_message_available()  # and nothing after them
        return found
    finally:
        client.close()


def _create_topic(web_url: str, topic: str) -> None:
    import urllib.request

    url = f"{web_url}/admin/v2/persistent/public/default/{topic}"
    with urllib.request.urlopen(urllib.request.Request(url, method="PUT")) as answer:
        assert answer.status == 204


def test_start_status_restart_and_stop(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _, started = _cli(state, "start")
    assert started["service_url"].startswith("pulsar://127.0.0.1:")
    assert not started["reused_data"]
    info = local_standalone.read_state(state)
    assert info is not None and local_standalone.is_running(info)
    try:
        # Loopback only, and the state the CLI keeps is the user's alone.
        conf = Path(info.config_file).read_text()
        assert "bindAddress=127.0.0.1" in conf and "allowAutoTopicCreation=false" in conf
        for path in (Path(info.config_file), state / "pulsar" / "pulsar.json"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        _, status = _cli(state, "status")
        assert status["running"] and status["answering"] and status["pid"] == info.pid

        _create_topic(info.web_url, "t1")
        topic = "persistent://public/default/t1"
        _produce(info.service_url, topic, [b"a", b"b"])
        assert _read_all(info.service_url, topic, 2) == [
            (b"a", {"logstore.kind": "+I"}),
            (b"b", {"logstore.kind": "+I"}),
        ]

        # A second start while it runs starts nothing and says so.
        code, _ = _cli(state, "start", check=False)
        assert code == 1

        _, stopped = _cli(state, "stop")
        assert stopped["stopped"] and not stopped["forced"]
        assert not processes.alive(info.pid)
        code, gone = _cli(state, "status", check=False)
        assert code == 1 and gone == {"running": False}

        # A restart serves the same messages at the same address.
        _, again = _cli(state, "start")
        assert again["reused_data"] and again["service_url"] == info.service_url
        assert _read_all(info.service_url, topic, 2) == [
            (b"a", {"logstore.kind": "+I"}),
            (b"b", {"logstore.kind": "+I"}),
        ]
        _cli(state, "stop")
    finally:
        stopped_now = local_standalone.stop(state)
        last = local_standalone.read_state(state)
        assert last is None
        if stopped_now is not None:
            assert not processes.alive(stopped_now.pid)
    # Nothing of ours is left running.
    leftover = [
        pid for pid in os.listdir("/proc") if pid.isdigit()
        and local_standalone.MAIN_CLASS.encode() in _cmdline(int(pid))
        and str(state).encode() in _cmdline(int(pid))
    ]  # fmt: skip
    assert leftover == []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
