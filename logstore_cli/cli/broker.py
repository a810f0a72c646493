"""``logstore broker start|stop|status``: the local Kafka broker for development and tests."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from logstore_cli.cli.options import JsonOpt, StateDirOpt
from logstore_cli.cli.output import Output, key_value_table
from logstore_cli.errors import BrokerError
from logstore_cli.paths import state_home

_HOST = "127.0.0.1"

app = typer.Typer(
    help="Start, stop and inspect a local single-node Kafka broker (KRaft, loopback only).",
    no_args_is_help=True,
)


def _render(title: str, data: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        console.print(key_value_table(title, list(data.items())))

    return render


@app.command()
def start(
    state_dir: StateDirOpt = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=1,
            max=65535,
            help="Client port. Default: the port of the last start (a free one the first time).",
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Delete the broker's data (topics, records) and ports first: start empty.",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for the broker to answer.")
    ] = 90.0,
    json_: JsonOpt = False,
) -> None:
    """Launch the broker and wait until it answers metadata requests.

    A restart keeps the topics, records and port of the last start; --fresh starts an empty broker.
    """
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    out.info("starting the local Kafka broker …")
    info = local_broker.start(state_dir or state_home(), port=port, fresh=fresh, timeout_s=timeout)
    data = asdict(info)
    out.success(f"broker up at {info.bootstrap} (pid {info.pid})")
    if info.reused_data:
        out.info("kept the topics and records of the last start ('--fresh' starts empty)")
    out.emit(data, _render("Local Kafka broker", data))


@app.command()
def stop(
    state_dir: StateDirOpt = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL."),
    ] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Stop the broker that 'logstore broker start' launched (exactly that pid); keep its data."""
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    stopped = local_broker.stop(state_dir or state_home(), timeout_s=timeout)
    if stopped is None:
        out.info("no local broker is running; nothing to stop")
        out.emit({"stopped": False}, lambda c: None)
        return
    if stopped.forced:
        out.warning(f"the broker (pid {stopped.pid}) ignored SIGTERM for {timeout:g}s; killed it")
    else:
        out.success(f"stopped the broker (pid {stopped.pid}); its data is kept for the next start")
    out.emit({"stopped": True, "pid": stopped.pid, "forced": stopped.forced}, lambda c: None)


@app.command()
def status(state_dir: StateDirOpt = None, json_: JsonOpt = False) -> None:
    """Say whether the local broker runs and answers; exit 1 when it does not."""
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    info = local_broker.read_state(sd)
    if info is None or not local_broker.is_running(info):
        out.emit({"running": False}, lambda c: None)
        kept = local_broker.read_cluster(sd)
        resume = f" (it serves the kept data on {_HOST}:{kept.port} again)" if kept else ""
        raise BrokerError(
            "no local broker is running", hint=f"start one with 'logstore broker start'{resume}"
        )
    answering = local_broker.answers_metadata(info.bootstrap, timeout_s=5.0)
    data = {
        "running": True,
        "answering": answering,
        **asdict(info),
        "uptime_s": round(time.time() - info.started_at, 1),
    }
    out.emit(data, _render("Local Kafka broker", data))
    if not answering:
        raise BrokerError(
            f"the broker process {info.pid} runs but does not answer on {info.bootstrap}",
            hint=f"see its log: {info.log_file}",
        )
