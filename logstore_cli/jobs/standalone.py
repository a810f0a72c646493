"""A Spark standalone cluster on loopback: one master and N workers, for development and tests.

Started with the ``spark-class`` launcher that pyspark ships (``<pyspark>/bin/spark-class``, which
``exec``s the JVM: the pid it gets is the JVM's), bound to 127.0.0.1 on free ports. Everything lives
in ``<state dir>/spark-cluster`` (mode 0700):

- ``cluster.json``: the running cluster (master and worker pids, ports, log files), so that
  ``stop`` and ``status`` find exactly the processes ``start`` launched; removed by ``stop``;
- ``master.log``, ``worker-N.log`` (the previous run's kept as ``.1``), and ``worker-N/``: the
  worker's work directory (its executors' stdout and stderr, the jars they fetched).

Workers run the Python of this installation (``PYSPARK_PYTHON``), so the executors import
``logstore_cli`` and its dependencies exactly as the driver does. No pyspark import here: the
launcher is found with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from logstore_cli import processes
from logstore_cli.errors import InvalidInputError, SetupError, SparkClusterError, StateDirError
from logstore_cli.paths import check_state_dir, state_subdir
from logstore_cli.processes import alive as _alive
from logstore_cli.processes import free_ports as _free_ports
from logstore_cli.processes import port_is_free as _port_is_free
from logstore_cli.processes import tail_file as _tail
from logstore_cli.processes import wait_gone as _wait_gone

HOST = "127.0.0.1"
CLUSTER_DIR = "spark-cluster"
STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
DEFAULT_WORKERS = 2
DEFAULT_WORKER_CORES = 1
DEFAULT_WORKER_MEMORY = "2g"
DAEMON_MEMORY = "512m"  # heap of the master and worker daemons (Spark's default is 1g each)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class MasterInfo:
    pid: int
    port: int
    webui_port: int
    log_file: str
    started_at: float

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui(self) -> str:
        return f"http://{HOST}:{self.webui_port}"


@dataclass(frozen=True)
class WorkerInfo:
    index: int  # 1-based, as 'stop --worker N' names it
    pid: int
    port: int
    webui_port: int
    cores: int
    memory: str
    work_dir: str
    log_file: str
    started_at: float


@dataclass(frozen=True)
class ClusterInfo:
    master: MasterInfo
    workers: tuple[WorkerInfo, ...]
    python: str  # the executors' Python
    spark_class: str

    @property
    def master_url(self) -> str:
        return self.master.url

    def worker(self, index: int) -> WorkerInfo:
        for w in self.workers:
            if w.index == index:
                return w
        known = ", ".join(str(w.index) for w in self.workers)
        raise SparkClusterError(
            f"the local Spark cluster has no worker {index}", hint=f"its workers are {known}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "master": asdict(self.master),
            "workers": [asdict(w) for w in self.workers],
            "python": self.python,
            "spark_class": self.spark_class,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterInfo:
        return cls(
            master=MasterInfo(**data["master"]),
            workers=tuple(WorkerInfo(**w) for w in data["workers"]),
            python=str(data["python"]),
            spark_class=str(data["spark_class"]),
        )


@dataclass(frozen=True)
class WorkerStatus:
    """A worker as ``status`` shows it: the process, and what the master says of it."""

    index: int
    pid: int
    alive: bool  # the process runs
    registered: bool  # the master lists it as ALIVE
    cores: int
    cores_used: int | None
    memory: str
    webui: str
    log_file: str


@dataclass(frozen=True)
class Stopped:
    pid: int
    what: str  # "master" or "worker N"
    forced: bool  # it ignored SIGTERM and was killed


# -- pure parts: where things are, command lines --------------------------------------------------


def cluster_dir(state_dir: Path) -> Path:
    return state_dir / CLUSTER_DIR


def spark_class() -> Path:
    """pyspark's ``bin/spark-class``, found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError(
            "pyspark is not installed in this Python environment",
            hint="run scripts/setup.sh (or 'pip install -e .') in the project's virtualenv",
        )
    launcher = Path(next(iter(spec.submodule_search_locations))) / "bin" / "spark-class"
    if not launcher.is_file():
        raise SetupError(
            f"pyspark has no launcher at {launcher}",
            hint="reinstall pyspark ('pip install --force-reinstall pyspark==4.0.1')",
        )
    return launcher


def master_command(launcher: Path, port: int, webui_port: int) -> list[str]:
    return [str(launcher), MASTER_CLASS, "--host", HOST, "--port", str(port),
            "--webui-port", str(webui_port)]  # fmt: skip


def worker_command(
    launcher: Path, master_url: str, *, port: int, webui_port: int, cores: int, memory: str,
    work_dir: Path,
) -> list[str]:  # fmt: skip
    return [str(launcher), WORKER_CLASS, "--host", HOST, "--port", str(port),
            "--webui-port", str(webui_port), "--cores", str(cores), "--memory", memory,
            "--work-dir", str(work_dir), master_url]  # fmt: skip


def daemon_env(base: Mapping[str, str], python: str) -> dict[str, str]:
    """The daemons' environment: loopback only, this installation's Python for the executors."""
    env = dict(base)
    env.update(
        SPARK_LOCAL_IP=HOST,
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
    )
    # Not the caller's SPARK_HOME (another Spark, maybe): spark-class finds pyspark's own.
    env.pop("SPARK_HOME", None)
    # Spark's own cleanup of finished applications' directories in the workers' work dirs.
    env["SPARK_WORKER_OPTS"] = (
        "-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.appDataTtl=86400"
    )
    return env


def check_memory(memory: str) -> str:
    """A worker memory like Spark's ``--memory``: digits and a unit (m or g)."""
    text = memory.strip().lower()
    if len(text) >= 2 and text[:-1].isdigit() and text[-1] in "mg" and int(text[:-1]) > 0:
        if text[-1] == "m" and int(text[:-1]) < 512:
            raise InvalidInputError(
                f"worker memory {memory!r} is too small for an executor",
                hint="give at least 512m (an executor asks for 1g by default)",
            )
        return text
    raise InvalidInputError(
        f"worker memory {memory!r} is not a size", hint="use a number and m or g, e.g. 2g or 1536m"
    )


# -- the state file ---------------------------------------------------------------------------


def read_state(state_dir: Path) -> ClusterInfo | None:
    """The cluster ``start`` recorded (processes may have died since); None when none was."""
    check_state_dir(state_dir)
    path = cluster_dir(state_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        return ClusterInfo.from_json(data)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise StateDirError(
            f"cannot read {path}: permission denied",
            hint="run logstore as the user who started the cluster, or set LOGSTORE_STATE_DIR",
        ) from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise SparkClusterError(
            f"the Spark cluster state file {path} is unreadable: {exc}",
            hint=f"stop any stray Spark master or worker by hand, then delete {path}",
        ) from exc


def _write_state(state_dir: Path, info: ClusterInfo) -> None:
    path = cluster_dir(state_dir) / STATE_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(info.to_json(), fh, indent=2)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- processes --------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def master_running(master: MasterInfo) -> bool:
    """The master's pid is alive and still our master (pids get reused)."""
    cmd = _cmdline(master.pid)
    return MASTER_CLASS.encode() in cmd and str(master.port).encode() in cmd and _alive(master.pid)


def worker_running(worker: WorkerInfo) -> bool:
    cmd = _cmdline(worker.pid)
    return WORKER_CLASS.encode() in cmd and worker.work_dir.encode() in cmd and _alive(worker.pid)


def executor_pids(worker: WorkerInfo) -> list[int]:
    """The executor JVMs this worker launched (found by the worker's address in their argv)."""
    url = f"Worker@{HOST}:{worker.port}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = _cmdline(int(entry.name))
            if EXECUTOR_CLASS.encode() in cmd and any(url in part for part in cmd):
                found.append(int(entry.name))
    return found


def terminate(pid: int, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``; True when it had to be killed."""
    return processes.terminate(pid, timeout_s=timeout_s, stuck=SparkClusterError)


def kill(pid: int) -> None:
    """SIGKILL, and wait until the kernel has reaped it."""
    processes.kill(pid, SparkClusterError)


def _launch(command: Sequence[str], env: Mapping[str, str], log_file: Path) -> int:
    return processes.launch(command, log_file, env).pid


# -- the master's view (its web UI's JSON) ------------------------------------------------------


def master_view(master: MasterInfo, *, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master's own account (``/json/``: workers, their state, cores, memory); None when it
    does not answer."""
    try:
        with urllib.request.urlopen(f"{master.webui}/json/", timeout=timeout_s) as resp:
            data = json.loads(resp.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return data if isinstance(data, dict) else None


def registered_workers(view: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    """The master's ALIVE workers by port."""
    out: dict[int, dict[str, Any]] = {}
    for w in (view or {}).get("workers", []):
        if isinstance(w, dict) and w.get("state") == "ALIVE" and w.get("host") == HOST:
            out[int(w.get("port", -1))] = w
    return out


def _wait_until(
    ready: Any, pid: int, what: str, log_file: Path, timeout_s: float, poll_s: float = 0.2
) -> None:
    """Poll ``ready()`` until true; fail when the process exits or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not _alive(pid):
            raise SparkClusterError(
                f"the Spark {what} exited during start-up",
                detail=_tail(log_file),
                hint=f"full log: {log_file}",
            )
        if time.monotonic() > deadline:
            raise SparkClusterError(
                f"the Spark {what} did not come up within {timeout_s:.0f}s",
                detail=_tail(log_file),
                hint=f"full log: {log_file}; a slow machine may need a longer --timeout",
            )
        time.sleep(poll_s)  # poll interval of a condition with a deadline


# -- start, stop --------------------------------------------------------------------------------


def _java() -> None:
    from logstore_cli.kafka.local_broker import java_executable

    java_executable()  # SetupError with an install hint when there is none


def start(
    state_dir: Path,
    *,
    workers: int = DEFAULT_WORKERS,
    cores: int = DEFAULT_WORKER_CORES,
    memory: str = DEFAULT_WORKER_MEMORY,
    port: int | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> ClusterInfo:
    """Launch a master and ``workers`` workers, and wait until the master lists every worker.

    On any failure (or Ctrl-C) every process started so far is stopped and no state is left.
    """
    if workers < 1:
        raise InvalidInputError(f"--workers must be at least 1, got {workers}")
    if cores < 1:
        raise InvalidInputError(f"--worker-cores must be at least 1, got {cores}")
    memory = check_memory(memory)
    state_dir = state_dir.absolute()
    root = state_subdir(state_dir, CLUSTER_DIR)
    existing = read_state(state_dir)
    if existing is not None:
        if master_running(existing.master) or any(worker_running(w) for w in existing.workers):
            raise SparkClusterError(
                f"a local Spark cluster is already running ({existing.master_url}, master pid "
                f"{existing.master.pid})",
                hint=f"use it with --master {existing.master_url}, or run 'logstore spark stop' "
                "first",
            )
        (root / STATE_FILE).unlink(missing_ok=True)  # left by a cluster that died
    if port is not None and not _port_is_free(port):
        raise SparkClusterError(
            f"port {port} on {HOST} is already in use",
            hint="choose another --port, or leave --port out (a free port is chosen)",
        )
    _java()
    launcher = spark_class()
    python = sys.executable
    env = daemon_env(os.environ, python)
    ports = iter(p for p in _free_ports(2) if p != port)
    master_port = port or next(ports)
    webui = next(ports)
    master_log = root / "master.log"
    pid = _launch(master_command(launcher, master_port, webui), env, master_log)
    master = MasterInfo(pid, master_port, webui, str(master_log), time.time())
    info = ClusterInfo(master, (), python, str(launcher))
    started = [pid]
    try:
        _write_state(state_dir, info)
        _wait_until(lambda: master_view(master) is not None, pid, "master", master_log, timeout_s)
        for index in range(1, workers + 1):
            worker = _launch_worker(state_dir, info, index, cores, memory, env)
            started.append(worker.pid)
            info = replace(info, workers=(*info.workers, worker))
            _write_state(state_dir, info)
        for worker in info.workers:
            _wait_registered(master, worker, timeout_s)
    except BaseException:
        for p in reversed(started):
            with contextlib.suppress(SparkClusterError):
                terminate(p, timeout_s=10.0)
        (root / STATE_FILE).unlink(missing_ok=True)
        raise
    return info


def _launch_worker(
    state_dir: Path, info: ClusterInfo, index: int, cores: int, memory: str, env: Mapping[str, str]
) -> WorkerInfo:
    work_dir = state_subdir(state_dir, CLUSTER_DIR, f"worker-{index}")
    log_file = cluster_dir(state_dir) / f"worker-{index}.log"
    # New ports at every start: the master refuses a worker at an address it still lists.
    port, webui = _free_ports(2)
    command = worker_command(
        Path(info.spark_class), info.master_url, port=port, webui_port=webui, cores=cores,
        memory=memory, work_dir=work_dir,
    )  # fmt: skip
    pid = _launch(command, env, log_file)
    return WorkerInfo(index, pid, port, webui, cores, memory, str(work_dir), str(log_file),
                      time.time())  # fmt: skip


def _wait_registered(master: MasterInfo, worker: WorkerInfo, timeout_s: float) -> None:
    def ready() -> bool:
        return worker.port in registered_workers(master_view(master))

    _wait_until(ready, worker.pid, f"worker {worker.index}", Path(worker.log_file), timeout_s)


def _running(state_dir: Path) -> ClusterInfo:
    info = read_state(state_dir)
    if info is None or not master_running(info.master):
        raise SparkClusterError(
            "no local Spark cluster is running", hint="start one with 'logstore spark start'"
        )
    return info


def start_worker(state_dir: Path, index: int, *, timeout_s: float = START_TIMEOUT_S) -> WorkerInfo:
    """Start worker ``index`` of the running cluster again (same cores and memory, new ports)."""
    state_dir = state_dir.absolute()
    info = _running(state_dir)
    old = info.worker(index)
    if worker_running(old):
        raise SparkClusterError(
            f"worker {index} of the local Spark cluster is running (pid {old.pid})",
            hint=f"stop it first with 'logstore spark stop --worker {index}'",
        )
    env = daemon_env(os.environ, info.python)
    worker = _launch_worker(state_dir, info, index, old.cores, old.memory, env)
    try:
        _write_state(
            state_dir,
            replace(info, workers=tuple(worker if w.index == index else w for w in info.workers)),
        )
        _wait_registered(info.master, worker, timeout_s)
    except BaseException:
        with contextlib.suppress(SparkClusterError):
            terminate(worker.pid, timeout_s=10.0)
        raise
    return worker


def stop_worker(
    state_dir: Path, index: int, *, timeout_s: float = STOP_TIMEOUT_S, force: bool = False
) -> Stopped | None:
    """Stop worker ``index`` (SIGKILL at once with ``force``, as a machine failure would), and
    any executor it leaves behind; None when it was not running."""
    info = _running(state_dir.absolute())
    worker = info.worker(index)
    if not worker_running(worker):
        _end_executors(worker)
        return None
    if force:
        kill(worker.pid)
        forced = True
    else:
        forced = terminate(worker.pid, timeout_s=timeout_s)
    _end_executors(worker)
    return Stopped(worker.pid, f"worker {index}", forced)


def _end_executors(worker: WorkerInfo, timeout_s: float = 15.0) -> None:
    """An executor exits by itself when its worker goes (it watches it); wait for that, and kill
    one that does not, so no JVM of the cluster is left behind."""
    deadline = time.monotonic() + timeout_s
    pids = executor_pids(worker)
    for pid in pids:
        if not _wait_gone(pid, max(deadline - time.monotonic(), 0.0)):
            with contextlib.suppress(SparkClusterError):
                kill(pid)


def stop(state_dir: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> list[Stopped] | None:
    """Stop the workers, then the master (SIGTERM, SIGKILL after ``timeout_s``); None when no
    cluster was recorded. The state file goes; logs and work directories stay."""
    state_dir = state_dir.absolute()
    info = read_state(state_dir)
    if info is None:
        return None
    stopped = []
    for worker in info.workers:
        if worker_running(worker):
            stopped.append(Stopped(worker.pid, f"worker {worker.index}",
                                   terminate(worker.pid, timeout_s=timeout_s)))  # fmt: skip
        _end_executors(worker)
    if master_running(info.master):
        stopped.append(
            Stopped(info.master.pid, "master", terminate(info.master.pid, timeout_s=timeout_s))
        )
    with contextlib.suppress(FileNotFoundError):
        (cluster_dir(state_dir) / STATE_FILE).unlink()
    return stopped


def status(state_dir: Path) -> tuple[ClusterInfo, bool, list[WorkerStatus]]:
    """The recorded cluster, whether its master answers, and each worker's state."""
    info = _running(state_dir.absolute())
    view = master_view(info.master)
    registered = registered_workers(view)
    workers = []
    for w in info.workers:
        seen = registered.get(w.port)
        workers.append(
            WorkerStatus(
                index=w.index, pid=w.pid, alive=worker_running(w), registered=seen is not None,
                cores=w.cores, cores_used=None if seen is None else int(seen.get("coresused", 0)),
                memory=w.memory, webui=f"http://{HOST}:{w.webui_port}", log_file=w.log_file,
            )
        )  # fmt: skip
    return info, view is not None, workers
