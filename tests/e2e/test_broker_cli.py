"""`logstore broker start|status|stop` as a shell script runs them: a subprocess, exit codes, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from logstore_cli.kafka import local_broker

REPO = Path(__file__).resolve().parents[2]


def _logstore(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGSTORE_STATE_DIR": str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip


def test_start_status_stop(tmp_path: Path) -> None:
    started = _logstore("broker", "start", "--json", state_dir=tmp_path)
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    try:
        assert info["bootstrap"].startswith("127.0.0.1:")
        assert info["reused_data"] is False
        assert local_broker.answers_metadata(info["bootstrap"], timeout_s=10)

        again = _logstore("broker", "start", state_dir=tmp_path)
        assert again.returncode == 1
        assert "already running" in again.stderr

        status = _logstore("broker", "status", "--json", state_dir=tmp_path)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["answering"] is True
    finally:
        stopped = _logstore("broker", "stop", "--json", state_dir=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": True, "pid": info["pid"], "forced": False}
    # is_running() already treats a vanished pid as not running
    assert not local_broker.is_running(local_broker.BrokerInfo(**info))
    assert not local_broker.answers_metadata(info["bootstrap"], timeout_s=2)

    after = _logstore("broker", "status", "--json", state_dir=tmp_path)
    assert after.returncode == 1
    assert json.loads(after.stdout) == {"running": False}
    assert info["bootstrap"] in after.stderr  # where a start would serve the kept data


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value)
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, timeout_s: float = 30) -> list[bytes]:
    """Every record of partition 0 of ``topic``, read up to its end offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < end and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def test_restart_keeps_topics_records_and_port_and_fresh_wipes_them(tmp_path: Path) -> None:
    first = _logstore("broker", "start", "--json", state_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    bootstrap = json.loads(first.stdout)["bootstrap"]
    try:
        _produce(bootstrap, "kept", b"still here")
    finally:
        assert _logstore("broker", "stop", state_dir=tmp_path).returncode == 0

    second = _logstore("broker", "start", "--json", state_dir=tmp_path)
    assert second.returncode == 0, second.stderr
    try:
        info = json.loads(second.stdout)
        assert info["bootstrap"] == bootstrap  # the same address ...
        assert info["reused_data"] is True
        assert info["cluster_id"] == json.loads(first.stdout)["cluster_id"]
        assert _read_all(bootstrap, "kept") == [b"still here"]  # ... and the same records
    finally:
        assert _logstore("broker", "stop", state_dir=tmp_path).returncode == 0

    # The script passes every flag through, and a relative --state-dir means the caller's directory.
    fresh = subprocess.run(
        [str(REPO / "scripts" / "kafka-local.sh"), "start", "--fresh", "--json",
         "--state-dir", tmp_path.name],
        cwd=tmp_path.parent, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    try:
        info = json.loads(fresh.stdout)
        assert info["reused_data"] is False
        assert info["data_dir"] == str(tmp_path / "broker" / "data")
        assert "kept" not in _topics(info["bootstrap"])
    finally:
        assert _logstore("broker", "stop", state_dir=tmp_path).returncode == 0


def test_stop_with_nothing_running(tmp_path: Path) -> None:
    state_dir = tmp_path / "never-started"
    plain = _logstore("broker", "stop", state_dir=state_dir)
    assert plain.returncode == 0, plain.stderr
    assert "no local broker is running; nothing to stop" in plain.stderr
    assert plain.stdout == ""
    as_json = _logstore("broker", "stop", "--json", state_dir=state_dir)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"stopped": False}
    assert not state_dir.exists()  # nothing to do, nothing written


@pytest.mark.parametrize("command", ["start", "status", "stop"])
def test_state_dir_below_a_file_is_an_input_error(tmp_path: Path, command: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    proc = _logstore("broker", command, state_dir=afile / "below")
    assert proc.returncode == 2, proc.stderr
    assert f"the state directory {afile / 'below'} lies below {afile}" in proc.stderr
    assert "LOGSTORE_STATE_DIR" in proc.stderr and "Traceback" not in proc.stderr
    assert afile.read_text() == "keep"
