"""Option types shared by commands, so every command spells them the same way.

The configuration flags are not written out per command: ``config_options(Uses...)`` adds
``--config`` and the flags of the named groups (built from ``config.SETTINGS``) to a command's
signature, and hands the command one ``overrides: Overrides`` argument instead.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from logstore_cli.config import (
    CONFIG_ENV,
    SETTINGS,
    Overrides,
    Setting,
    Uses,
    load,
    remote_kind,
)
from logstore_cli.errors import InvalidInputError, LogstoreError

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


def complete_table(ctx: typer.Context, incomplete: str) -> list[str]:
    """The warehouse's table names for shell completion (``--warehouse``/``--config`` on the line
    count): a directory listing, no Delta metadata read; nothing at all when the config is bad."""
    from logstore_cli.catalog.warehouse import list_tables, list_tables_on

    warehouse = ctx.params.get(_PREFIX + "warehouse")
    try:
        config = load(
            ctx.params.get(_CONFIG_PARAM), os.environ, {"warehouse": warehouse} if warehouse else {}
        )
        if config.remote_warehouse:
            from logstore_cli.storage import open_storage

            names = [r.name for r in list_tables_on(open_storage(config.warehouse))]
        else:
            names = [r.name for r in list_tables(config.warehouse_path())]
    except (LogstoreError, OSError):  # completing must never print an error into the command line
        return []
    return [name for name in names if name.startswith(incomplete)]


TableArg = Annotated[
    str,
    typer.Argument(
        help="Table name: db.table (or table, in 'default').",
        metavar="TABLE",
        autocompletion=complete_table,
    ),
]

CONFIG_PANEL = "Configuration (defaults < config file < env < flags)"
_CONFIG_PARAM = "config_file"
_CONTEXT_PARAM = "typer_context"
_PREFIX = "setting_"  # keeps the injected parameters apart from a command's own


def setting_option(setting: Setting) -> Any:
    """The Typer option of one declared setting: its flag, help, env var and code default.

    Values arrive as raw text and are checked by ``config.resolve`` like the file's and the env's,
    so a bad value reads the same whichever way it came. The env var and the default are given to
    Typer for the help only: ``config.resolve`` reads the environment itself (to name it in errors)
    and applies the defaults, beneath the file; ``config_options`` passes on command-line values only.
    """
    assert setting.flag, setting.key
    option = typer.Option(
        setting.flag,
        help=setting.help,
        envvar=setting.env,
        show_default=_literal_default(setting) is not None or (setting.default_help or False),
        metavar=setting.metavar,
        rich_help_panel=CONFIG_PANEL,
    )
    kind = list[str] | None if setting.merge else str | None
    return Annotated[kind, option]


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML config file (see configs/logstore.toml).",
        envvar=CONFIG_ENV,
        metavar="<file>",
        rich_help_panel=CONFIG_PANEL,
    ),
]


def config_options(*groups: Uses) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command ``--config`` and the flags of ``groups``, as one ``overrides`` argument.

    The command declares ``overrides: Overrides`` (keyword-only, last); Typer sees the flags in its
    place and the command receives what was given, ready for ``make_context``.
    """
    chosen = [s for s in SETTINGS if s.group in groups and s.flag]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "overrides"]
        if len(own) == len(signature.parameters):
            raise TypeError(f"{command.__name__} needs a parameter 'overrides: Overrides'")
        added = [
            inspect.Parameter(
                _CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context
            ),
            inspect.Parameter(
                _CONFIG_PARAM, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt
            ),
            *(
                inspect.Parameter(
                    _PREFIX + s.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=_literal_default(s),
                    annotation=setting_option(s),
                )
                for s in chosen
            ),
        ]

        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            context: typer.Context = kwargs.pop(_CONTEXT_PARAM)
            config_path = kwargs.pop(_CONFIG_PARAM)
            flags: dict[str, object] = {}
            for s in chosen:
                value = kwargs.pop(_PREFIX + s.name)
                if _given(context, _PREFIX + s.name):
                    flags[s.key] = value
            if Uses.WAREHOUSE in groups and context.info_name not in _WAREHOUSE_ANYWHERE:
                refuse_remote_warehouse(context.info_name or "", config_path, flags)
            command(**kwargs, overrides=Overrides(config_path, flags))

        params = [*own, *added]
        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


# The commands that run on a remote (s3://, hdfs://) warehouse (issue 19): every command that
# reads or writes tables ('optimize' on s3:// under the table's writer lease: jobs/optimize.py).
# 'read' refuses a Delta or Parquet output that is no local path itself (read/service.py
# build_request).
REMOTE_COMMANDS = frozenset(
    {"create-table", "list", "describe", "alter-table", "drop-table", "status", "history"}
    | {"verify", "read", "ingest", "vacuum", "optimize"}
)
# Commands that read the warehouse setting only (never a table): not refused on a remote one.
_WAREHOUSE_ANYWHERE = REMOTE_COMMANDS | {"setup"}
REMOTE_WORKS = (
    "create-table, list, describe, alter-table (--set, --unset, --add-column), drop-table, "
    "status, history, verify, read (every engine; Delta and Parquet outputs to a local path), "
    "ingest, vacuum and optimize run there today"
)


def refuse_remote_warehouse(
    command: str, config_path: Path | None, flags: dict[str, object]
) -> None:
    """InvalidInputError (exit 2) when the warehouse is remote and ``command`` does not run there
    yet: raised before the command does anything, so nothing is ever half done."""
    try:
        config = load(config_path, os.environ, flags)
    except LogstoreError:  # the command reports a bad configuration itself, in its own order
        return
    if config.remote_warehouse:
        raise InvalidInputError(
            f"'{command}' does not run on {remote_kind(config.warehouse)} warehouse yet (issue 19 "
            f"stage 2b): {REMOTE_WORKS}",
            hint="run it on a local warehouse (--warehouse <dir>) until then; see "
            "docs/cluster.md, section 5",
        )


def _literal_default(setting: Setting) -> str | None:
    """The code's default as flag text (None when it is computed at run time, or a table)."""
    return None if setting.default is None or setting.merge else setting.default_text


def _given(context: typer.Context, param: str) -> bool:
    """Whether the value was on the command line, not Typer's env or default (``resolve``'s job)."""
    source = context.get_parameter_source(param)
    return source is not None and source.name == "COMMANDLINE"
