"""The CLI in a real terminal: tmux runs it, ``send-keys`` types, ``capture-pane`` reads the screen
and ``pipe-pane`` records the raw bytes the terminal received.

- ``ingest`` on a terminal redraws one progress view in place (the screen's whole history holds it
  once; the raw stream moves the cursor up and clears lines to redraw it);
- without a terminal (``2>&1 | tee``) it prints plain lines, one per epoch, no escape codes;
- Ctrl-C during ``ingest`` stops after the epoch in flight and exits 130, and nothing is
  half-committed: every Delta epoch commit has its markers, and ``verify`` finds the log equal to
  Delta;
- ``status --watch`` redraws in place, and Ctrl-C exits 130 with the cursor shown again.

Each test has its own tmux server (``-L`` socket, no config file), killed in teardown. tmux is part
of every machine image this project runs on (it is in the image's package list); where it is
missing these tests fail and say how to install it, rather than skip.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.logformat.wire import EpochId, commit_metadata
from tests.deltalog import write_table
from tests.integration.jobs.ingest_support import check_protocol, orders_ddl, read_log

pytestmark = [pytest.mark.terminal]

WIDTH, HEIGHT = 120, 40
JVM_DEADLINE_S = 300.0  # the first epoch: Spark starts slowly on a loaded 2-core machine
EXIT_DEADLINE_S = 120.0
ESC = "\x1b"
CURSOR_UP = "\x1b[1A"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def _tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        pytest.fail(
            "tmux is not installed: the terminal tests drive the CLI in a tmux pane "
            "(install it with: apt-get install tmux)"
        )
    return found


class Terminal:
    """One tmux server with one 120x40 pane running bash in ``cwd``, its output recorded raw."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.socket = f"logstore-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.raw = cwd / "pane.raw"
        self.env = env
        self.socket_path: Path | None = None
        self._tmux = _tmux()

    def tmux(self, *args: str) -> str:
        result = subprocess.run(
            [self._tmux, "-L", self.socket, "-f", "/dev/null", *args], env=self.env,
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return result.stdout

    def start(self) -> None:
        self.tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(self.cwd),
                  "bash --norc --noprofile")  # fmt: skip
        self.tmux("set-option", "-g", "history-limit", "50000")
        self.tmux("pipe-pane", "-o", f"cat >> {shlex.quote(str(self.raw))}")
        self.socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def kill(self) -> None:
        subprocess.run([self._tmux, "-L", self.socket, "kill-server"], capture_output=True,
                       check=False, timeout=30)  # fmt: skip
        if self.socket_path is not None:  # the server leaves its socket file behind
            self.socket_path.unlink(missing_ok=True)

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-l", line)
        self.tmux("send-keys", "Enter")

    def ctrl_c(self) -> None:
        self.tmux("send-keys", "C-c")

    def screen(self) -> str:
        """What the pane shows now."""
        return self.tmux("capture-pane", "-p")

    def history(self) -> str:
        """Everything the pane has shown, scrolled off or not (each line as it ended up)."""
        return self.tmux("capture-pane", "-p", "-S", "-", "-E", "-")

    def raw_output(self) -> str:
        return self.raw.read_bytes().decode("utf-8", "replace") if self.raw.exists() else ""

    def wait_for(self, condition: Callable[[], bool], deadline_s: float, what: str) -> None:
        end = time.monotonic() + deadline_s
        while not condition():
            if time.monotonic() > end:
                pytest.fail(f"timed out after {deadline_s:g}s waiting for {what}; the screen:\n"
                            f"{self.screen()}")  # fmt: skip
            time.sleep(0.2)

    def run_and_wait(self, command: str, rc_file: Path, deadline_s: float) -> int:
        self.type(f"{command}; echo ${{PIPESTATUS[0]}} > {shlex.quote(str(rc_file))}")
        self.wait_for(rc_file.exists, deadline_s, f"the command to end: {command}")
        self.wait_for(lambda: rc_file.read_text().strip() != "", 5, "the exit code")
        return int(rc_file.read_text())


@pytest.fixture
def terminal(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Terminal]:
    env = {**os.environ, "LOGSTORE_WAREHOUSE": str(tmp_path / "wh"),
           "LOGSTORE_KAFKA_TIMEOUT": "15", "PS1": "$ ", "TERM": "xterm-256color"}  # fmt: skip
    env.pop("TMUX", None)  # run inside another tmux: still a server of our own
    term = Terminal(tmp_path, env)
    term.start()
    try:
        yield term
    finally:
        term.kill()


def _cli(*args: str) -> str:
    return shlex.join([sys.executable, "-m", "logstore_cli", *args])


def _table(tmp_path: Path, bootstrap: str, topic: str) -> Path:
    path = write_table(tmp_path / "wh", orders_ddl("shop.orders", topic, bootstrap, partitions=2))
    with KafkaAdmin(bootstrap, timeout_s=15) as admin:
        admin.create_topic(topic, 2, 1, {})
    return path


def _epoch_lines(text: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^epoch (\d+): ", text, re.MULTILINE)]


def test_ingest_redraws_in_place_and_ctrl_c_stops_after_the_epoch(
    terminal: Terminal, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    path = _table(tmp_path, kafka_bootstrap, topic_name)
    rc = tmp_path / "rc"
    terminal.type(
        _cli("ingest", "shop.orders", "--source", "generate", "--rate", "300", "--keys", "50",
             "--trigger", "1") + f"; echo $? > {rc}"
    )  # fmt: skip
    # an epoch committed: by then the view (its clock ticks) has been redrawn many times
    terminal.wait_for(lambda: "epoch 0: " in terminal.screen(), JVM_DEADLINE_S, "epoch 0")
    history = terminal.history()
    assert history.count("ingest shop.orders (") == 1, history  # one view, not one per update
    assert len(_epoch_lines(history)) == 1, history  # the last epoch's line, redrawn
    raw = terminal.raw_output()
    assert raw.count("ingest ") >= 3 and CURSOR_UP in raw  # drawn again over itself

    terminal.ctrl_c()
    terminal.wait_for(rc.exists, EXIT_DEADLINE_S, "ingest to stop after Ctrl-C")
    terminal.wait_for(lambda: rc.read_text().strip() != "", 5, "the exit code")
    assert int(rc.read_text()) == 130
    history = terminal.history()
    assert "stopping after the epoch in flight" in history
    assert "error: interrupted" in history and "nothing is half-committed" in history
    assert "Traceback" not in history
    raw = terminal.raw_output()
    assert raw.rindex(SHOW_CURSOR) > raw.rindex(HIDE_CURSOR)  # the cursor is back

    # nothing half-committed: each Delta epoch commit has its markers, the log folds to Delta
    spec = load_table(tmp_path / "wh", "shop.orders").spec
    counts = check_protocol(spec, path, read_log(kafka_bootstrap, topic_name))
    assert counts["epochs"] >= 1
    verify = subprocess.run(
        [sys.executable, "-m", "logstore_cli", "verify", "shop.orders"], cwd=tmp_path,
        env=terminal.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_ingest_without_a_terminal_prints_one_plain_line_per_epoch(
    terminal: Terminal, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    path = _table(tmp_path, kafka_bootstrap, topic_name)
    out = tmp_path / "plain.txt"
    # --once: back-to-back epochs of at most 300 changes each, no waiting for the trigger
    command = _cli("ingest", "shop.orders", "--source", "generate", "--keys", "50", "--total",
                   "600", "--once", "--source-option", "maxChangesPerBatch=300",
                   ) + f" 2>&1 | tee {out}"  # fmt: skip
    assert terminal.run_and_wait(command, tmp_path / "rc", JVM_DEADLINE_S) == 0
    text = out.read_text("utf-8")
    assert ESC not in text and "\r" not in text, repr(text)
    committed = sorted(c.epoch.epoch for c in epochs.epoch_commits(path))
    assert _epoch_lines(text) == committed == [0, 1], text  # one line per epoch, in order
    assert "ingesting into shop.orders" in text
    assert _epoch_lines(terminal.history()) == committed  # the terminal shows the same lines


def test_status_watch_redraws_in_place_and_ctrl_c_restores_the_terminal(
    terminal: Terminal, tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    path = _table(tmp_path, kafka_bootstrap, topic_name)

    def commit(epoch: int) -> int:
        """An epoch's Delta commit as the ingest job leaves it (commitInfo with the metadata)."""
        log = path / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json")) + 1
        meta = commit_metadata(EpochId("w-term", epoch, f"a-{epoch}"), {0: epoch, 1: epoch})
        info = {
            "commitInfo": {
                "timestamp": int(time.time() * 1000),
                "operation": "MERGE",
                "operationMetrics": {"numSourceRows": "10"},
                "userMetadata": meta,
            }
        }
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
        return version

    commit(0)
    rc = tmp_path / "rc"
    terminal.type(
        _cli("status", "shop.orders", "--watch", "--interval", "0.3") + f"; echo $? > {rc}"
    )
    terminal.wait_for(lambda: "w-term" in terminal.screen(), 60, "the first view")
    for epoch in (1, 2):
        version = commit(epoch)
        terminal.wait_for(
            lambda v=version: re.search(rf"delta version\s*│\s*{v}\b", terminal.screen()) is not None,
            30, f"the view of Delta version {version}",
        )  # fmt: skip
    history = terminal.history()
    assert history.count("Ctrl-C to stop") == 1, history  # redrawn in place, not appended
    assert history.count("log records/s") == 1, history

    terminal.ctrl_c()
    terminal.wait_for(rc.exists, 30, "status --watch to end after Ctrl-C")
    terminal.wait_for(lambda: rc.read_text().strip() != "", 5, "the exit code")
    assert int(rc.read_text()) == 130
    raw = terminal.raw_output()
    assert raw.rindex(SHOW_CURSOR) > raw.rindex(HIDE_CURSOR)  # the cursor is back
    screen = terminal.screen()
    assert "error: interrupted" in screen and "Traceback" not in terminal.history()
    terminal.type("echo still-a-shell")  # the terminal takes input as before
    terminal.wait_for(lambda: "\nstill-a-shell" in terminal.screen(), 10, "the shell's answer")
