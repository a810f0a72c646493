"""``logstore broker start|stop|status``: the local Kafka broker or cluster for development and tests."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from logstore_cli.cli.options import JsonOpt, StateDirOpt
from logstore_cli.cli.output import Output, key_value_table, simple_table
from logstore_cli.errors import BrokerError, InvalidInputError
from logstore_cli.paths import state_home

if TYPE_CHECKING:
    from logstore_cli.kafka.local_broker import ClusterInfo, NodeStatus

_HOST = "127.0.0.1"

app = typer.Typer(
    help="Start, stop and inspect a local Kafka broker, or a local cluster of three "
    "(KRaft, loopback only).",
    no_args_is_help=True,
)

NodeOpt = Annotated[
    int | None,
    typer.Option(
        "--node", min=1, help="Only this node of a local cluster (started with --brokers 3)."
    ),
]
TimeoutStartOpt = Annotated[
    float,
    typer.Option("--timeout", min=1, help="Seconds to wait for the broker(s) to answer."),
]


def _render(title: str, data: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        console.print(key_value_table(title, list(data.items())))

    return render


@app.command()
def start(
    state_dir: StateDirOpt = None,
    brokers: Annotated[
        int | None,
        typer.Option(
            "--brokers",
            min=1,
            help="1: a single broker; 3: a cluster of three nodes (each a controller and a "
            "broker; topics default to replication 3, min.insync.replicas 2). Default: as many as "
            "the kept data has (1 the first time). Another count than the kept data's needs "
            "--fresh.",
        ),
    ] = None,
    node: NodeOpt = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=1,
            max=65535,
            help="Client port of a single broker. Default: the port of the last start (a free "
            "one the first time).",
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Delete the data (topics, records) and ports of the last start first: start empty.",
        ),
    ] = False,
    timeout: TimeoutStartOpt = 90.0,
    json_: JsonOpt = False,
) -> None:
    """Launch the broker (or the cluster's nodes) and wait until it answers metadata requests.

    A restart keeps the topics, records, ports and node count of the last start; --fresh starts
    empty. --node N restarts one stopped node of a cluster on its own ports and data.
    """
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    if node is not None:
        if brokers is not None or fresh or port is not None:
            raise InvalidInputError(
                "--node restarts one node as it was: it takes no --brokers, --fresh or --port",
                hint=f"'logstore broker start --node {node}'",
            )
        out.info(f"starting node {node} of the local Kafka cluster …")
        info = local_broker.start_node(sd, node, timeout_s=timeout)
        out.success(f"node {node} up at {info.bootstrap} (pid {info.pid})")
        data = asdict(info)
        out.emit(data, _render(f"Local Kafka cluster, node {node}", data))
        return
    count = brokers if brokers is not None else (local_broker.recorded_nodes(sd) or 1)
    if count == 1:
        out.info("starting the local Kafka broker …")
        single = local_broker.start(sd, port=port, fresh=fresh, timeout_s=timeout)
        data = asdict(single)
        out.success(f"broker up at {single.bootstrap} (pid {single.pid})")
        if single.reused_data:
            out.info("kept the topics and records of the last start ('--fresh' starts empty)")
        out.emit(data, _render("Local Kafka broker", data))
        return
    if port is not None:
        raise InvalidInputError(
            "--port sets the port of a single broker; a cluster's nodes keep their own ports",
            hint="leave --port out (the recorded ports, free ones the first time)",
        )
    out.info(f"starting a local Kafka cluster of {count} nodes …")
    cluster = local_broker.start_cluster(sd, nodes=count, fresh=fresh, timeout_s=timeout)
    out.success(f"cluster of {count} nodes up at {cluster.bootstrap}")
    if cluster.already_running:
        running = _nodes(list(cluster.already_running))
        out.info(f"{running} kept running; started the others")
    elif cluster.reused_data:
        out.info("kept the topics and records of the last start ('--fresh' starts empty)")
    data = _cluster_json(cluster)
    out.emit(data, _render_started(cluster))


def _cluster_json(cluster: ClusterInfo) -> dict[str, Any]:
    return {
        "cluster_id": cluster.cluster_id,
        "bootstrap": cluster.bootstrap,
        "nodes": [asdict(n) for n in cluster.started],
        "already_running": list(cluster.already_running),
        "reused_data": cluster.reused_data,
    }


def _render_started(cluster: ClusterInfo) -> Any:
    def render(console: Console) -> None:
        rows = [(n.node_id, n.pid, n.bootstrap, n.controller, n.log_file) for n in cluster.started]
        title = f"Local Kafka cluster {cluster.cluster_id}: {cluster.bootstrap}"
        console.print(simple_table(title, ["node", "pid", "address", "controller", "log"], rows))

    return render


@app.command()
def stop(
    state_dir: StateDirOpt = None,
    node: NodeOpt = None,
    kill: Annotated[
        bool,
        typer.Option("--kill", help="With --node: SIGKILL at once (a crash, for fault tests)."),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL."),
    ] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Stop what 'logstore broker start' launched (exactly those pids); keep the data.

    With --node N, stop only that node of a cluster (--kill: SIGKILL, no clean shutdown).
    """
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    if kill and node is None:
        raise InvalidInputError(
            "--kill stops one node abruptly and needs --node N",
            hint="'logstore broker stop --node 2 --kill'; 'logstore broker stop' stops everything "
            "cleanly",
        )
    if node is not None:
        one = local_broker.stop_node(sd, node, kill=kill, timeout_s=timeout)
        if one is None:
            out.info(f"node {node} is not running; nothing to stop")
            out.emit({"stopped": False, "node": node}, lambda c: None)
            return
        how = "killed" if kill else "stopped"
        out.success(
            f"{how} node {node} (pid {one.pid}); its data is kept for 'start --node {node}'"
        )
        data = {"stopped": True, "node": node, "pid": one.pid, "forced": one.forced}
        out.emit(data, lambda c: None)
        return
    cluster = local_broker.read_layout(sd) is not None
    if not cluster:
        stopped = local_broker.stop(sd, timeout_s=timeout)
        if stopped is not None:
            if stopped.forced:
                out.warning(
                    f"the broker (pid {stopped.pid}) ignored SIGTERM for {timeout:g}s; killed it"
                )
            else:
                out.success(
                    f"stopped the broker (pid {stopped.pid}); its data is kept for the next start"
                )
            out.emit(
                {"stopped": True, "pid": stopped.pid, "forced": stopped.forced}, lambda c: None
            )
            return
    # Also nodes of a cluster start that never finished (no nodes.json): stop_cluster finds them.
    nodes = local_broker.stop_cluster(sd, timeout_s=timeout)
    if not nodes:
        what = "node of the local cluster" if cluster else "local broker"
        out.info(f"no {what} is running; nothing to stop")
        out.emit({"stopped": False, **({"nodes": []} if cluster else {})}, lambda c: None)
        return
    for node_id, s in nodes.items():
        if s.forced:
            out.warning(f"node {node_id} (pid {s.pid}) ignored SIGTERM for {timeout:g}s; killed")
    out.success(f"stopped {_nodes(list(nodes))} of the local cluster; the data is kept")
    rows = [{"node": i, "pid": s.pid, "forced": s.forced} for i, s in nodes.items()]
    out.emit({"stopped": True, "nodes": rows}, lambda c: None)


@app.command()
def status(state_dir: StateDirOpt = None, json_: JsonOpt = False) -> None:
    """Say whether the local broker (or every node of the cluster) runs and answers; exit 1 when
    one does not."""
    from logstore_cli.kafka import local_broker

    out = Output(json_mode=json_)
    sd: Path = state_dir or state_home()
    nodes = local_broker.cluster_status(sd)
    if nodes is not None:
        _cluster_status(out, sd, nodes)
        return
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


def _cluster_status(out: Output, state_dir: Path, nodes: tuple[NodeStatus, ...]) -> None:
    from logstore_cli.kafka import local_broker

    layout = local_broker.read_layout(state_dir)
    assert layout is not None  # cluster_status found it
    answering = {
        n.node_id: n.alive and local_broker.answers_metadata(n.bootstrap, timeout_s=5.0)
        for n in nodes
    }
    health = (
        local_broker.cluster_health(layout.bootstrap, timeout_s=5.0)
        if any(answering.values())
        else None
    )
    rows = [{**asdict(n), "answering": answering[n.node_id]} for n in nodes]
    data: dict[str, Any] = {
        "running": any(n.alive for n in nodes),
        "cluster_id": layout.cluster_id,
        "bootstrap": layout.bootstrap,
        "nodes": rows,
        "registered_brokers": list(health.brokers) if health else [],
        "under_replicated_partitions": health.under_replicated if health else None,
        "offline_partitions": health.offline if health else None,
    }

    def render(console: Console) -> None:
        table = simple_table(
            f"Local Kafka cluster {layout.cluster_id}: {layout.bootstrap}",
            ["node", "pid", "address", "controller", "alive", "answering", "log"],
            [
                (
                    n.node_id, n.pid or "-", n.bootstrap, f"{_HOST}:{n.controller_port}",
                    "yes" if n.alive else "no", "yes" if answering[n.node_id] else "no",
                    n.log_file,
                )
                for n in nodes
            ],
        )  # fmt: skip
        console.print(table)
        if health is not None:
            console.print(
                f"brokers registered: {', '.join(map(str, health.brokers)) or 'none'}; "
                f"under-replicated partitions: {health.under_replicated}; "
                f"offline partitions: {health.offline}",
                highlight=False,
                markup=False,
            )

    out.emit(data, render)
    down = [n.node_id for n in nodes if not n.alive]
    silent = [n.node_id for n in nodes if n.alive and not answering[n.node_id]]
    if len(down) == len(nodes):
        raise BrokerError(
            "no node of the local cluster is running",
            hint=f"start it with 'logstore broker start' (it serves the kept data on "
            f"{layout.bootstrap} again)",
        )
    if down:
        raise BrokerError(
            f"{_nodes(down)} of the local cluster {'is' if len(down) == 1 else 'are'} not running",
            hint="restart with " + "; ".join(f"'logstore broker start --node {i}'" for i in down),
        )
    if silent:
        logs = ", ".join(n.log_file for n in nodes if n.node_id in silent)
        raise BrokerError(
            f"{_nodes(silent)} of the local cluster: running, but not answering",
            hint=f"see {logs}",
        )


def _nodes(ids: list[int]) -> str:
    return f"node {ids[0]}" if len(ids) == 1 else f"nodes {', '.join(map(str, ids))}"
