"""A Spark standalone cluster (a master and two workers on loopback) for the whole run, started the
first time a test asks for it, with a handle to kill a worker and start it again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logstore_cli.jobs import standalone
from tests.plugins.scheduling import stop_after_last_user

WORKERS = 2


@dataclass(frozen=True)
class SparkStandalone:
    """The running cluster: ``master_url`` for ``--master``, and its workers' fate."""

    state_dir: Path
    master_url: str

    def info(self) -> standalone.ClusterInfo:
        info = standalone.read_state(self.state_dir)
        assert info is not None, "the Spark cluster's state file is gone"
        return info

    def executors(self, index: int) -> list[int]:
        """Pids of the executor JVMs worker ``index`` runs."""
        return standalone.executor_pids(self.info().worker(index))

    def kill_worker(self, index: int) -> int:
        """SIGKILL worker ``index``, as a machine failure would; returns once it and its executors
        are gone. Returns the worker's pid."""
        stopped = standalone.stop_worker(self.state_dir, index, force=True)
        assert stopped is not None, f"worker {index} was not running"
        assert not self.executors(index), "an executor outlived its killed worker"
        return stopped.pid

    def restart_worker(self, index: int) -> None:
        standalone.start_worker(self.state_dir, index)

    def ensure_whole(self) -> None:
        """Start again every worker that is down (a fault test leaves the cluster whole)."""
        for w in self.info().workers:
            if not standalone.worker_running(w):
                self.restart_worker(w.index)

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Until the master runs no application (a killed driver's is removed) and every worker
        is registered with all its cores free."""
        info = self.info()
        deadline = time.monotonic() + timeout_s
        while True:
            view = standalone.master_view(info.master) or {}
            workers = standalone.registered_workers(view)
            free = all(
                w.port in workers and int(workers[w.port].get("coresused", 1)) == 0
                for w in info.workers
            )
            if free and not view.get("activeapps"):
                return
            assert time.monotonic() < deadline, f"the cluster is not idle: {view}"
            time.sleep(0.2)  # polling a condition with a deadline


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    """``logstore spark start``'s cluster in the run's own state dir, stopped at the end."""
    from logstore_cli.errors import LogstoreError

    state_dir = tmp_path_factory.mktemp("spark-cluster-state")
    try:
        info = standalone.start(state_dir, workers=WORKERS, cores=1, memory="1g")
    except LogstoreError as exc:
        pytest.fail(f"could not start the Spark cluster: {exc}\n{exc.detail or ''}", pytrace=False)
    stop = stop_after_last_user("spark_standalone", lambda: standalone.stop(state_dir))
    try:
        yield SparkStandalone(state_dir, info.master_url)
    finally:
        stop()
