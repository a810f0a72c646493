"""``logstore pulsar start|stop|status``: a local Apache Pulsar standalone for development and
tests (issue 23; Amoro's ``log-store.type = pulsar``)."""

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

app = typer.Typer(
    help="Start, stop and inspect a local Apache Pulsar standalone (loopback only).",
    no_args_is_help=True,
)


def _render(title: str, data: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        console.print(key_value_table(title, list(data.items())))

    return render


@app.command()
def start(
    state_dir: StateDirOpt = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Delete the data (topics, messages) and ports of the last start first: start "
            "empty.",
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=1, help="Seconds to wait for the 'public/default' namespace."
        ),
    ] = 180.0,
    json_: JsonOpt = False,
) -> None:
    """Launch the standalone (a broker, a bookie, RocksDB metadata) and wait until its
    'public/default' namespace exists.

    The first start fetches Pulsar's jars (~240 MB) from Maven Central into the jar cache. A
    restart keeps the topics, messages and ports of the last start; --fresh starts empty.
    """
    from logstore_cli.pulsar import local_standalone

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    out.info("starting the local Pulsar standalone …")
    info = local_standalone.start(sd, fresh=fresh, timeout_s=timeout)
    out.success(f"Pulsar up at {info.service_url} (admin {info.web_url}, pid {info.pid})")
    if info.reused_data:
        out.info("kept the topics and messages of the last start ('--fresh' starts empty)")
    data = asdict(info)
    out.emit(data, _render("Local Pulsar standalone", data))


@app.command()
def stop(
    state_dir: StateDirOpt = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL."),
    ] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Stop what 'logstore pulsar start' launched (exactly that pid); keep the data."""
    from logstore_cli.pulsar import local_standalone

    out = Output(json_mode=json_)
    stopped = local_standalone.stop(state_dir or state_home(), timeout_s=timeout)
    if stopped is None:
        out.info("no local Pulsar is running; nothing to stop")
        out.emit({"stopped": False}, lambda c: None)
        return
    if stopped.forced:
        out.warning(f"Pulsar (pid {stopped.pid}) ignored SIGTERM for {timeout:g}s; killed it")
    else:
        out.success(f"stopped Pulsar (pid {stopped.pid}); its data is kept for the next start")
    out.emit({"stopped": True, "pid": stopped.pid, "forced": stopped.forced}, lambda c: None)


@app.command()
def status(state_dir: StateDirOpt = None, json_: JsonOpt = False) -> None:
    """Say whether the local Pulsar runs and its 'public/default' namespace answers; exit 1 when
    it does not."""
    from logstore_cli.pulsar import local_standalone

    out = Output(json_mode=json_)
    info = local_standalone.running(state_dir or state_home())
    if info is None:
        out.emit({"running": False}, lambda c: None)
        raise BrokerError(
            "no local Pulsar is running", hint="start one with 'logstore pulsar start'"
        )
    answering = local_standalone.namespace_exists(info.web_url, timeout_s=5.0)
    data = {
        "running": True,
        "answering": answering,
        **asdict(info),
        "uptime_s": round(time.time() - info.started_at, 1),
    }
    out.emit(data, _render("Local Pulsar standalone", data))
    if not answering:
        raise BrokerError(
            f"the Pulsar process {info.pid} runs but its admin API at {info.web_url} does not "
            "answer for public/default",
            hint=f"see its log: {info.log_file}",
        )
