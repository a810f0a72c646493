"""``logstore spark start|stop|status``: a local Spark standalone cluster (master + workers)."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from logstore_cli.cli.options import JsonOpt, StateDirOpt
from logstore_cli.cli.output import Output, key_value_table, simple_table
from logstore_cli.errors import InvalidInputError, SparkClusterError
from logstore_cli.paths import state_home

app = typer.Typer(
    help="Start, stop and inspect a local Spark standalone cluster (a master and workers on "
    "loopback), to run the jobs with --master spark://….",
    no_args_is_help=True,
)

WorkerOpt = Annotated[
    int | None,
    typer.Option(
        "--worker",
        min=1,
        help="Only worker N (1-based) of the running cluster: to stop one and start it again.",
    ),
]


def _cluster_json(info: Any, answering: bool, workers: list[Any]) -> dict[str, Any]:
    return {
        "running": True,
        "master_url": info.master_url,
        "webui": info.master.webui,
        "master_pid": info.master.pid,
        "master_answering": answering,
        "master_log": info.master.log_file,
        "python": info.python,
        "uptime_s": round(time.time() - info.master.started_at, 1),
        "workers": [asdict(w) for w in workers],
    }


def _render(data: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        console.print(
            key_value_table(
                "Local Spark cluster",
                [
                    ("master", data["master_url"]),
                    ("web UI", data["webui"]),
                    ("master pid", data["master_pid"]),
                    ("answering", "yes" if data["master_answering"] else "no"),
                    ("executors' Python", data["python"]),
                ],
            )
        )
        rows = [
            [w["index"], w["pid"], "yes" if w["alive"] else "no",
             "yes" if w["registered"] else "no", w["cores"],
             "-" if w["cores_used"] is None else w["cores_used"], w["memory"], w["webui"]]
            for w in data["workers"]
        ]  # fmt: skip
        console.print(
            simple_table(
                "Workers",
                ["worker", "pid", "alive", "registered", "cores", "cores used", "memory", "web UI"],
                rows,
            )
        )

    return render


def _status_data(sd: Path) -> dict[str, Any]:
    from logstore_cli.jobs import standalone

    info, answering, workers = standalone.status(sd)
    return _cluster_json(info, answering, workers)


@app.command()
def start(
    state_dir: StateDirOpt = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Number of workers.")] = 2,
    worker_cores: Annotated[
        int, typer.Option("--worker-cores", min=1, help="Cores each worker offers.")
    ] = 1,
    worker_memory: Annotated[
        str, typer.Option("--worker-memory", help="Memory each worker offers (e.g. 2g, 1536m).")
    ] = "2g",
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65535, help="The master's port (default: a free one)."),
    ] = None,
    worker: WorkerOpt = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for the cluster to be up.")
    ] = 90.0,
    json_: JsonOpt = False,
) -> None:
    """Launch a master and workers on 127.0.0.1 and wait until the master lists every worker.

    --worker N starts worker N of the running cluster again (after 'stop --worker N').
    """
    from logstore_cli.jobs import standalone

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    if worker is not None:
        out.info(f"starting worker {worker} of the local Spark cluster …")
        w = standalone.start_worker(sd, worker, timeout_s=timeout)
        out.success(f"worker {worker} up (pid {w.pid})")
    else:
        out.info(f"starting a local Spark cluster: a master and {workers} worker(s) …")
        info = standalone.start(
            sd, workers=workers, cores=worker_cores, memory=worker_memory, port=port,
            timeout_s=timeout,
        )  # fmt: skip
        out.success(f"Spark master at {info.master_url} with {len(info.workers)} worker(s)")
        out.info(
            f"run jobs on it with --master {info.master_url} "
            f"(or LOGSTORE_SPARK_MASTER={info.master_url}); web UI {info.master.webui}"
        )
    data = _status_data(sd)
    out.emit(data, _render(data))


@app.command()
def stop(
    state_dir: StateDirOpt = None,
    worker: WorkerOpt = None,
    kill: Annotated[
        bool,
        typer.Option(
            "--kill", help="With --worker: SIGKILL it at once, as a machine failure would."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL."),
    ] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Stop the cluster 'logstore spark start' launched (exactly those pids), or one worker."""
    from logstore_cli.jobs import standalone

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    if worker is None and kill:
        raise InvalidInputError("--kill goes with --worker N", hint="e.g. 'stop --worker 1 --kill'")
    if worker is not None:
        one = standalone.stop_worker(sd, worker, timeout_s=timeout, force=kill)
        if one is None:
            out.info(f"worker {worker} was not running; nothing to stop")
        else:
            out.success(
                f"stopped worker {worker} (pid {one.pid}{', killed' if one.forced else ''})"
            )
        stopped = [] if one is None else [one]
    else:
        result = standalone.stop(sd, timeout_s=timeout)
        if result is None:
            out.info("no local Spark cluster is running; nothing to stop")
            out.emit({"stopped": []}, lambda c: None)
            return
        stopped = result
        for s in stopped:
            if s.forced:
                out.warning(
                    f"the {s.what} (pid {s.pid}) ignored SIGTERM for {timeout:g}s; killed it"
                )
        out.success(f"stopped the local Spark cluster ({len(stopped)} process(es))")
    out.emit({"stopped": [asdict(s) for s in stopped]}, lambda c: None)


@app.command()
def status(state_dir: StateDirOpt = None, json_: JsonOpt = False) -> None:
    """The master URL, web UI and each worker; exit 1 when no cluster runs or a worker is down."""
    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    try:
        data = _status_data(sd)
    except SparkClusterError:
        out.emit({"running": False}, lambda c: None)
        raise
    out.emit(data, _render(data))
    if not data["master_answering"]:
        raise SparkClusterError(
            f"the Spark master (pid {data['master_pid']}) runs but its web UI does not answer",
            hint=f"see its log: {data['master_log']}",
        )
    down = [w["index"] for w in data["workers"] if not (w["alive"] and w["registered"])]
    if down:
        raise SparkClusterError(
            f"worker(s) {', '.join(map(str, down))} of the local Spark cluster are down",
            hint="start one again with 'logstore spark start --worker N'",
        )
