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
