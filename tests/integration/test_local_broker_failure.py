"""A broker that cannot come up is reported with its own words, and leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli.errors import BrokerError
from logstore_cli.kafka import local_broker


def test_broker_that_exits_reports_its_log_tail(tmp_path: Path) -> None:
    # Valid for the storage tool, fatal for the broker: a listener port that is already taken.
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError) as info:
            local_broker.start(tmp_path, port=port, timeout_s=60)
    err = info.value
    assert "exited during start-up" in err.message or "did not answer" in err.message
    assert err.detail and ("Address already in use" in err.detail or "BindException" in err.detail)
    assert err.hint and "broker.log" in err.hint
    assert local_broker.read_state(tmp_path) is None  # no stale state pointing at a dead pid
