"""Each way a local-broker start or stop can fail: reported clearly, no process and no stale state left.

A fake ``java`` (a Python script put first through ``JAVA_HOME``) stands in for the JVM where the
failure is the point (a failing format step, a broker that never answers, one that ignores SIGTERM);
the real broker shows its own words when it exits during start-up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logstore_cli.errors import BrokerError
from logstore_cli.kafka import local_broker

# The fake JVM: ``kafka.tools.StorageTool`` formats (or fails), ``kafka.Kafka`` runs as a broker
# that never answers; MODE picks the failure.
FAKE_JAVA = """\
#!{python}
import os, signal, sys, time
from pathlib import Path

MODE = {mode!r}
MARKS = Path({marks!r})
args = sys.argv[1:]
if "kafka.tools.StorageTool" in args:
    if MODE == "format-fails":
        print("Exception in thread main: java.io.IOException: boom, the disk is made of cheese",
              file=sys.stderr)
        sys.exit(3)
    config = Path(args[args.index("-c") + 1]).read_text()
    log_dirs = next(l.split("=", 1)[1] for l in config.splitlines() if l.startswith("log.dirs="))
    Path(log_dirs, "meta.properties").write_text(
        "node.id=1\\nversion=1\\ncluster.id=" + args[args.index("-t") + 1] + "\\n")
    sys.exit(0)
assert "kafka.Kafka" in args, args
if MODE == "ignores-sigterm":
    signal.signal(signal.SIGTERM, lambda *_: (MARKS / "got-sigterm").touch())
print("[fake] broker starting, never answering", flush=True)
(MARKS / "started").write_text(str(os.getpid()))
while True:
    signal.pause()
"""


def _fake_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> Path:
    """Install the fake JVM in a fake JAVA_HOME; returns the directory where it leaves marks."""
    marks = tmp_path / "marks"
    marks.mkdir()
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(FAKE_JAVA.format(python=sys.executable, mode=mode, marks=str(marks)))
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    return marks


def _pids_with(path: Path) -> list[int]:
    """Live processes with ``path`` in an argument of their command line (zombies do not count)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if any(str(path).encode() in arg for arg in cmdline) and state != "Z":
            pids.append(int(proc.name))
    return pids


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # poll interval of a condition with a deadline
    return True


def test_format_failure_reports_the_tools_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_java(tmp_path, monkeypatch, "format-fails")
    state_dir = tmp_path / "state"
    with pytest.raises(BrokerError) as info:
        local_broker.start(state_dir, classpath=[], timeout_s=30)
    err = info.value
    assert err.message == "formatting the broker's storage failed (exit code 3)"
    assert err.detail and "boom, the disk is made of cheese" in err.detail
    assert err.hint and "logstore setup" in err.hint
    root = local_broker.broker_dir(state_dir)
    assert (
        local_broker.read_state(state_dir) is None and local_broker.read_cluster(state_dir) is None
    )
    assert list((root / "data").iterdir()) == []  # unformatted: the next start formats again
    assert _pids_with(root / "server.properties") == []


def test_broker_that_never_answers_times_out_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = _fake_java(tmp_path, monkeypatch, "never-answers")
    state_dir = tmp_path / "state"
    started = time.monotonic()
    with pytest.raises(BrokerError) as info:
        local_broker.start(state_dir, classpath=[], timeout_s=3)
    err = info.value
    assert err.message.startswith("the Kafka broker did not answer on 127.0.0.1:")
    assert err.message.endswith("within 3s")
    assert err.detail and "[fake] broker starting, never answering" in err.detail  # its log tail
    assert err.hint and "broker.log" in err.hint and "--timeout" in err.hint
    assert time.monotonic() - started < 30  # bounded by the timeout, not by the fake
    # The fake ran, and is gone; no record of it and no ports recorded for a start that failed.
    assert (marks / "started").exists()
    assert _pids_with(local_broker.broker_dir(state_dir) / "server.properties") == []
    assert (
        local_broker.read_state(state_dir) is None and local_broker.read_cluster(state_dir) is None
    )


def test_fresh_never_follows_a_symlink_out_of_the_broker_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_java(tmp_path, monkeypatch, "format-fails")  # the wipe happens before the format
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "meta.properties").write_text("cluster.id=theirs\n")
    root = local_broker.broker_dir(tmp_path / "state")
    root.mkdir(parents=True)
    (root / "data").symlink_to(precious)
    (root / "cluster.json").write_text('{"cluster_id": "x", "port": 1, "controller_port": 2}')
    with pytest.raises(BrokerError, match="formatting"):
        local_broker.start(tmp_path / "state", fresh=True, classpath=[], timeout_s=30)
    assert (precious / "meta.properties").read_text() == "cluster.id=theirs\n"
    assert not (root / "data").is_symlink() and (root / "data").is_dir()
    assert not (root / "cluster.json").exists()  # the recorded ports went with the data


def test_stop_escalates_to_sigkill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marks = _fake_java(tmp_path, monkeypatch, "ignores-sigterm")
    state_dir = tmp_path / "state"
    root = local_broker.broker_dir(state_dir)
    root.mkdir(parents=True)
    config = root / "server.properties"
    config.write_text("")
    # Launched as start() does, recorded in the state dir, so that 'broker stop' finds it.
    broker = subprocess.Popen(
        [str(tmp_path / "jdk" / "bin" / "java"), "kafka.Kafka", str(config)],
        stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        assert _wait_for(lambda: (marks / "started").exists(), 30), "the fake broker did not start"
        info = local_broker.BrokerInfo(
            pid=broker.pid, bootstrap="127.0.0.1:1", controller="127.0.0.1:2",
            log_file=str(root / "broker.log"), data_dir=str(root / "data"),
            config_file=str(config), started_at=time.time(),
        )  # fmt: skip
        (root / "broker.json").write_text(json.dumps(info.__dict__))
        assert local_broker.is_running(info)

        began = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "logstore_cli", "broker", "stop", "--timeout", "1", "--json"],
            env={**os.environ, "LOGSTORE_STATE_DIR": str(state_dir)},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        took = time.monotonic() - began
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"stopped": True, "pid": broker.pid, "forced": True}
        assert "ignored SIGTERM" in proc.stderr
        assert (marks / "got-sigterm").exists()  # asked politely first ...
        assert broker.wait(timeout=10) == -signal.SIGKILL  # ... then killed
        assert took >= 1.0  # after the stop timeout, not before
        assert local_broker.read_state(state_dir) is None
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait()


def test_broker_that_exits_reports_its_log_tail(tmp_path: Path) -> None:
    # The real broker: storage formats, then the broker itself dies on an authorizer it cannot load.
    with pytest.raises(BrokerError) as info:
        local_broker.start(
            tmp_path,
            timeout_s=60,
            extra_properties={"authorizer.class.name": "com.example.NoSuchAuthorizer"},
        )
    err = info.value
    assert err.message.startswith("the Kafka broker exited during start-up (exit code ")
    assert err.detail and "ClassNotFoundException: com.example.NoSuchAuthorizer" in err.detail
    assert err.hint and "broker.log" in err.hint
    assert local_broker.read_state(tmp_path) is None  # no stale state pointing at a dead pid
    assert _pids_with(local_broker.broker_dir(tmp_path) / "server.properties") == []


@pytest.fixture(autouse=True)
def _no_stray_fakes(tmp_path: Path) -> Iterator[None]:
    yield
    for pid in _pids_with(tmp_path / "jdk"):  # only processes of this test's own fake JVM
        os.kill(pid, signal.SIGKILL)
