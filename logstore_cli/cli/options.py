"""Option types shared by commands, so every command spells them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of tables.")
]
StateDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="Where the local broker keeps its data, logs and pid file.",
        envvar="LOGSTORE_STATE_DIR",
        show_default="~/.local/state/logstore",
    ),
]

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML config file (see configs/logstore.toml).",
        envvar="LOGSTORE_CONFIG",
        exists=False,
    ),
]
WarehouseOpt = Annotated[
    str | None,
    typer.Option(
        "--warehouse",
        help="Warehouse directory: tables live at <warehouse>/<db>/<table>. "
        "Env: LOGSTORE_WAREHOUSE. (default: ./warehouse)",
        show_default=False,
    ),
]
BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-servers",
        help="Kafka brokers for tables whose DDL names none. Env: "
        "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS. (default: the local broker, when running)",
        show_default=False,
    ),
]
KafkaTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--kafka-timeout",
        help="Seconds a Kafka call may take before it fails. Env: LOGSTORE_KAFKA_TIMEOUT. "
        "(default: 10)",
        show_default=False,
    ),
]
MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master",
        help="Spark master (local[*], spark://…, yarn, k8s://…). Env: LOGSTORE_SPARK_MASTER.",
        show_default=False,
    ),
]
SparkConfOpt = Annotated[
    list[str] | None,
    typer.Option("--conf", help="Extra Spark configuration KEY=VALUE (repeatable).", metavar="K=V"),
]
