"""The test-suite's own isolation (``tests/plugins/isolation.py``): the developer's environment, a
running local broker or a ``LOGSTORE_CONFIG`` cannot change a unit test's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logstore_cli.cli.app import app
from logstore_cli.kafka import local_broker
from tests.plugins import isolation

REPO = Path(__file__).resolve().parents[2]

# Valid DDL except for the broker address, which only the environment can supply: with a clean
# environment `validate` exits 2; a leaked config, variable or running broker turns it into 0.
DDL = "CREATE TABLE db.t (id INT, PRIMARY KEY (id)) WITH ('log.system' = 'kafka', 'kafka.topic' = 't');"
NO_ADDRESS = "no Kafka broker address is set"

# A unit test whose result depends on the environment, run by a separate pytest below.
UNIT_TEST = f"""
from typer.testing import CliRunner

from logstore_cli.cli.app import app


def test_a_log_store_without_a_broker_address_is_invalid() -> None:
    result = CliRunner().invoke(app, ["validate", "-", "--json"], input={DDL!r})
    assert result.exit_code == 2, result.output
    assert {NO_ADDRESS!r} in result.stderr


def test_the_session_broker_is_the_one_the_developer_gave(kafka_bootstrap: str) -> None:
    assert kafka_bootstrap == "given-broker:9092"  # LOGSTORE_TEST_BOOTSTRAP: none is started
"""


@pytest.fixture
def running_broker_state(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A state dir recording a live process that ``local_broker.is_running`` takes for our broker.

    The process only waits for its stdin to close, so it ends with the test even if the test dies.
    """
    state_dir = tmp_path / "dev-state"
    config_file = tmp_path / "server.properties"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "kafka.Kafka", str(config_file)],
        stdin=subprocess.PIPE,
    )
    info = local_broker.BrokerInfo(
        pid=proc.pid,
        bootstrap="from-running-broker:9092",
        controller="127.0.0.1:1",
        log_file=str(tmp_path / "broker.log"),
        data_dir=str(tmp_path / "data"),
        config_file=str(config_file),
        started_at=time.time(),
    )
    local_broker.broker_dir(state_dir).mkdir(parents=True)
    (local_broker.broker_dir(state_dir) / "broker.json").write_text(json.dumps(asdict(info)))
    try:
        deadline = time.monotonic() + 10  # its command line appears once exec has happened
        while not local_broker.is_running(info):
            assert time.monotonic() < deadline, "the stand-in broker process did not start"
            time.sleep(0.01)
        yield state_dir, info.bootstrap
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def _dev_environment(tmp_path: Path, broker_state: Path) -> dict[str, str]:
    """A developer's shell: a config file, a default broker variable, a running local broker."""
    config = tmp_path / "dev.toml"
    config.write_text('[kafka]\nbootstrap_servers = "from-config:9092"\n')
    return {
        "LOGSTORE_CONFIG": str(config),
        "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": "from-env:9092",
        "LOGSTORE_STATE_DIR": str(broker_state),
        "LOGSTORE_VERBOSE": "1",
    }


def test_each_test_gets_its_own_state_dir_and_no_tool_variables(
    logstore_state_dir: Path, tmp_path: Path
) -> None:
    assert os.environ["LOGSTORE_STATE_DIR"] == str(logstore_state_dir)
    assert logstore_state_dir.is_dir() and not any(logstore_state_dir.iterdir())
    assert tmp_path not in logstore_state_dir.parents  # the test's own tmp_path stays empty
    left = {k for k in os.environ if k.startswith("LOGSTORE_")} - {"LOGSTORE_STATE_DIR"}
    assert all(isolation.is_kept(k) for k in left), left
    # The jar cache stays where the session found it, so no test resolves jars with Maven again.
    assert os.environ.get("LOGSTORE_HOME") == isolation.SESSION_ENV.get("LOGSTORE_HOME")


def test_only_the_jar_cache_and_harness_switches_are_kept() -> None:
    assert isolation.is_kept("LOGSTORE_HOME")
    assert isolation.is_kept("LOGSTORE_TEST_BOOTSTRAP")
    for name in (
        "LOGSTORE_CONFIG",
        "LOGSTORE_STATE_DIR",
        "LOGSTORE_WAREHOUSE",
        "LOGSTORE_REGEN_GOLDEN",
    ):
        assert not isolation.is_kept(name), name


def test_logstore_never_reads_the_harness_switches() -> None:
    """Kept variables must not be able to change the tool's behaviour."""
    names = [isolation.HARNESS_PREFIX]
    sources = sorted((REPO / "logstore_cli").rglob("*.py"))
    assert sources
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert not [n for n in names if n in text], path


@pytest.mark.parametrize(
    "source", ["LOGSTORE_CONFIG", "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS", "broker"]
)
def test_each_part_of_the_developer_environment_would_change_the_result(
    source: str,
    tmp_path: Path,
    running_broker_state: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: without isolation, each part alone supplies the address `validate` needs."""
    state_dir, broker_bootstrap = running_broker_state
    dev = _dev_environment(tmp_path, state_dir)
    expected = {
        "LOGSTORE_CONFIG": "from-config:9092",
        "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": "from-env:9092",
        "broker": broker_bootstrap,
    }[source]
    var = "LOGSTORE_STATE_DIR" if source == "broker" else source
    monkeypatch.setenv(var, dev[var])
    result = CliRunner().invoke(app, ["validate", "-", "--json"], input=DDL)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["log_store"]["address"] == expected


def test_the_developer_environment_does_not_change_a_unit_tests_result(
    tmp_path: Path, running_broker_state: tuple[Path, str]
) -> None:
    """Run as tests/conftest.py runs them: the env-dependent test passes in a polluted shell, and
    the session's broker is still the one ``LOGSTORE_TEST_BOOTSTRAP`` names."""
    state_dir, _ = running_broker_state
    test_file = tmp_path / "suite" / "test_env_dependent.py"
    test_file.parent.mkdir()
    test_file.write_text(UNIT_TEST)
    (tmp_path / "suite" / "pytest.ini").write_text("[pytest]\n")
    env = {
        **os.environ,
        **_dev_environment(tmp_path, state_dir),
        "LOGSTORE_TEST_BOOTSTRAP": "given-broker:9092",
    }
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-p", "tests.plugins.isolation", "-p", "tests.plugins.kafka_broker",
            "-c", str(tmp_path / "suite" / "pytest.ini"), "--rootdir", str(tmp_path / "suite"),
            "--basetemp", str(tmp_path / "basetemp"), str(test_file),
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
