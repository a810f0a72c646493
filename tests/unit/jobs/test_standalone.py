"""The local Spark standalone cluster's pure parts (command lines, environment, state file) and the
checks ``start`` makes before it launches anything (no JVM here), plus the loopback-master rule and
the printed spark-submit command's pinned options."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logstore_cli.cli.app import run
from logstore_cli.errors import InvalidInputError, SparkClusterError
from logstore_cli.jobs import standalone
from logstore_cli.jobs.spark import (
    LOCAL_DEFAULTS,
    SparkSettings,
    defaults_for,
    is_loopback_master,
    local_cores,
    session_conf,
)
from logstore_cli.jobs.submit import pin_options
from logstore_cli.paths import state_subdir


@pytest.fixture(autouse=True)
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test never starts a JVM: a check that lets ``start`` through fails the test instead
    of leaving a real cluster behind."""

    def refuse(*args: object) -> int:
        raise AssertionError(f"a unit test tried to launch {args[0]}")

    monkeypatch.setattr(standalone, "_launch", refuse)


def _info(tmp_path: Path, master_pid: int = 1, port: int = 7077) -> standalone.ClusterInfo:
    master = standalone.MasterInfo(master_pid, port, 8080, str(tmp_path / "master.log"), 1.0)
    worker = standalone.WorkerInfo(1, 2, 40001, 40002, 1, "1g", str(tmp_path / "worker-1"),
                                   str(tmp_path / "worker-1.log"), 2.0)  # fmt: skip
    return standalone.ClusterInfo(master, (worker,), "/venv/bin/python", "/p/bin/spark-class")


def test_master_and_worker_command_lines_are_loopback_with_chosen_ports(tmp_path: Path) -> None:
    launcher = Path("/p/bin/spark-class")
    assert standalone.master_command(launcher, 7077, 8080) == [
        "/p/bin/spark-class", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
        "--port", "7077", "--webui-port", "8080",
    ]  # fmt: skip
    cmd = standalone.worker_command(
        launcher, "spark://127.0.0.1:7077", port=40001, webui_port=40002, cores=1, memory="1g",
        work_dir=tmp_path / "w",
    )  # fmt: skip
    assert cmd[:2] == ["/p/bin/spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--cores") + 1] == "1" and cmd[cmd.index("--memory") + 1] == "1g"
    # Never Spark's default work dir inside site-packages.
    assert cmd[cmd.index("--work-dir") + 1] == str(tmp_path / "w")
    assert cmd[-1] == "spark://127.0.0.1:7077"


def test_daemons_run_this_python_on_loopback_with_pysparks_own_spark_home() -> None:
    env = standalone.daemon_env({"PATH": "/bin", "SPARK_HOME": "/opt/other-spark"}, "/v/python")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == "/v/python"
    assert "SPARK_HOME" not in env
    assert env["PATH"] == "/bin"


@pytest.mark.parametrize(("given", "kept"), [("2g", "2g"), ("1536M", "1536m"), (" 1g ", "1g")])
def test_worker_memory_sizes(given: str, kept: str) -> None:
    assert standalone.check_memory(given) == kept


@pytest.mark.parametrize("bad", ["", "2", "g", "2gb", "-1g", "0g", "256m", "two"])
def test_bad_worker_memory_is_an_input_error(bad: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        standalone.check_memory(bad)
    assert err.value.hint


def test_state_file_round_trip_is_private(tmp_path: Path) -> None:
    info = _info(tmp_path)
    state_subdir(tmp_path, standalone.CLUSTER_DIR)
    standalone._write_state(tmp_path, info)
    path = standalone.cluster_dir(tmp_path) / standalone.STATE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert standalone.read_state(tmp_path) == info
    assert json.loads(path.read_text())["master"]["port"] == 7077
    assert info.master_url == "spark://127.0.0.1:7077"
    assert info.master.webui == "http://127.0.0.1:8080"


def test_no_state_file_means_no_cluster(tmp_path: Path) -> None:
    assert standalone.read_state(tmp_path) is None
    assert standalone.stop(tmp_path) is None


def test_an_unreadable_state_file_says_how_to_recover(tmp_path: Path) -> None:
    (tmp_path / standalone.CLUSTER_DIR).mkdir()
    (tmp_path / standalone.CLUSTER_DIR / standalone.STATE_FILE).write_text('{"master": 1}')
    with pytest.raises(SparkClusterError, match="unreadable") as err:
        standalone.read_state(tmp_path)
    assert err.value.hint is not None and "delete" in err.value.hint


def test_unknown_worker_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(SparkClusterError, match="no worker 3") as err:
        _info(tmp_path).worker(3)
    assert err.value.hint == "its workers are 1"


def test_registered_workers_are_the_alive_ones_on_loopback() -> None:
    view = {"workers": [
        {"host": "127.0.0.1", "port": 1, "state": "ALIVE", "coresused": 1},
        {"host": "127.0.0.1", "port": 2, "state": "DEAD"},
        {"host": "10.0.0.5", "port": 3, "state": "ALIVE"},
    ]}  # fmt: skip
    assert list(standalone.registered_workers(view)) == [1]
    assert standalone.registered_workers(None) == {}


@pytest.fixture
def fake_master() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose argv looks like our master's (the liveness check reads /proc's cmdline)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                             standalone.MASTER_CLASS, "--port", "7077"])  # fmt: skip
    deadline = time.monotonic() + 30
    # Until the child has exec'd: before that, /proc shows the parent's argv.
    while standalone.MASTER_CLASS.encode() not in standalone._cmdline(proc.pid):
        assert time.monotonic() < deadline, "the fake master did not start"
        time.sleep(0.01)  # polling a condition with a deadline
    yield proc
    proc.kill()
    proc.wait()


def test_start_refuses_a_running_cluster(
    tmp_path: Path, fake_master: subprocess.Popen[bytes]
) -> None:
    state_subdir(tmp_path, standalone.CLUSTER_DIR)
    standalone._write_state(tmp_path, _info(tmp_path, master_pid=fake_master.pid))
    with pytest.raises(SparkClusterError, match="already running") as err:
        standalone.start(tmp_path)
    assert err.value.hint is not None and "spark://127.0.0.1:7077" in err.value.hint
    assert fake_master.poll() is None  # nothing stopped, nothing started


def test_start_forgets_a_dead_cluster_and_refuses_a_taken_port(tmp_path: Path) -> None:
    state_subdir(tmp_path, standalone.CLUSTER_DIR)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    standalone._write_state(tmp_path, _info(tmp_path, master_pid=dead.pid))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SparkClusterError, match=f"port {port} .* in use"):
            standalone.start(tmp_path, port=port)
    assert standalone.read_state(tmp_path) is None  # the dead cluster's record is gone


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"workers": 0}, "--workers"), ({"cores": 0}, "--worker-cores"), ({"memory": "1"}, "memory"),
])  # fmt: skip
def test_start_checks_its_input_first(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        standalone.start(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / standalone.CLUSTER_DIR).exists()


def test_spark_class_is_found_without_importing_pyspark() -> None:
    code = (
        "import sys\nfrom logstore_cli.jobs import standalone\n"
        "print(standalone.spark_class())\nprint('pyspark' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    launcher, imported = proc.stdout.split()
    assert Path(launcher).name == "spark-class" and Path(launcher).parent.name == "bin"
    assert Path(launcher).is_file()
    assert imported == "False"


def test_spark_commands_import_no_pyspark(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom logstore_cli.cli.app import run\n"
        f"code = run(['spark', 'status', '--state-dir', {str(tmp_path)!r}])\n"
        "print(code, 'pyspark' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["1", "False"]
    assert "no local Spark cluster is running" in proc.stderr
    assert "logstore spark start" in proc.stderr


def test_stop_without_a_cluster_is_fine_and_kill_needs_a_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["spark", "stop", "--state-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"stopped": []}
    assert run(["spark", "stop", "--state-dir", str(tmp_path), "--kill"]) == 2
    assert "--kill goes with --worker" in capsys.readouterr().err


@pytest.mark.parametrize(("master", "loopback"), [
    ("local[*]", True), ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://127.0.0.1:7077,127.0.0.1:7078", True), ("spark://10.1.2.3:7077", False),
    ("spark://127.0.0.1:7077,master2:7077", False), ("yarn", False), ("k8s://https://k:443", False),
])  # fmt: skip
def test_loopback_masters(master: str, loopback: bool) -> None:
    assert is_loopback_master(master) is loopback


def test_a_loopback_standalone_master_gets_the_loopback_driver_and_few_tasks() -> None:
    conf = session_conf(SparkSettings(master="spark://127.0.0.1:7077"), [Path("/j/delta.jar")])
    for key, value in LOCAL_DEFAULTS.items():
        assert conf[key] == value
    assert conf["spark.jars"] == "/j/delta.jar"  # served to the executors by the driver
    remote = session_conf(SparkSettings(master="spark://10.1.2.3:7077"), [])
    assert "spark.driver.host" not in remote


def test_pinned_options_replace_the_given_ones_in_both_forms() -> None:
    args = ["ingest", "db.t", "--warehouse", "./wh", "--source", "in", "--master=local[2]",
            "--once"]  # fmt: skip
    pinned = pin_options(args, {"--master": "spark://127.0.0.1:7077", "--warehouse": "/abs/wh"})
    assert pinned == ["ingest", "db.t", "--source", "in", "--once",
                      "--master", "spark://127.0.0.1:7077", "--warehouse", "/abs/wh"]  # fmt: skip
    assert pin_options(["read"], {}) == ["read"]


@pytest.mark.parametrize(("master", "partitions"), [
    ("local", "2"), ("local[1]", "2"), ("local[2]", "4"), ("local[3,2]", "6"), ("local[*]", "16"),
])  # fmt: skip
def test_a_local_master_gets_shuffle_partitions_sized_to_its_cores(
    master: str, partitions: str
) -> None:
    conf = defaults_for(master, machine=8)  # local[*] on an 8-core machine
    assert conf["spark.sql.shuffle.partitions"] == partitions
    assert conf["spark.default.parallelism"] == partitions
    assert local_cores("yarn") is None and defaults_for("yarn") == {}  # a cluster's size: unknown
    standalone = defaults_for("spark://127.0.0.1:7077")  # logstore spark start's: few tasks
    assert (
        standalone["spark.sql.shuffle.partitions"] == LOCAL_DEFAULTS["spark.sql.shuffle.partitions"]
    )
