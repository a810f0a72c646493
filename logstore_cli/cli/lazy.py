"""Commands registered by name and loaded when run: ``logstore validate`` imports the module of
``validate`` and no other command's, and ``logstore --help`` imports none.

Typer builds every command's Click parameters from its function's signature, which means importing
the function's module and every module that module imports. ``LazyGroup`` is the root group: it
knows each command by a ``LazyCommand`` (name, module, attribute, one-line help) and imports the
module on the first lookup of that name. The list in ``--help`` and the command names a shell
completes are drawn from the one-line helps alone; a unit test checks that they equal the loaded
commands' own.
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Final, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup


class LazyCommand(NamedTuple):
    """A command of the root group: ``module.attribute`` is its function, or a ``typer.Typer`` of
    subcommands; ``help`` is the line the root's ``--help`` shows for it."""

    name: str
    module: str
    attribute: str
    help: str

    def load(self) -> Any:
        """The Click command, built by Typer from the imported function (or sub-app)."""
        target = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(target, typer.Typer):
            command: Any = typer.main.get_group(target)  # no completion options of its own
        else:
            single = typer.Typer(add_completion=False)
            single.command(self.name)(target)
            command = typer.main.get_command(single)
        command.name = self.name
        return command

    def summary(self) -> TyperCommand:
        """A stand-in with the name and help only: what a listing needs, nothing imported."""
        return TyperCommand(name=self.name, help=self.help)


class _Commands(MutableMapping[str, Any]):
    """The group's commands by name: a lookup loads (once) unless the group is only listing."""

    def __init__(self, group: LazyGroup, lazy: Sequence[LazyCommand]) -> None:
        self._group = group
        self._lazy = {c.name: c for c in lazy}
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._loaded:
            return self._loaded[name]
        spec = self._lazy[name]  # KeyError for an unknown name, as a dict
        if self._group.listing:
            return spec.summary()
        command = self._loaded[name] = spec.load()
        return command

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._lazy.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._lazy
        yield from (n for n in self._loaded if n not in self._lazy)

    def __len__(self) -> int:
        return len(self._lazy.keys() | self._loaded.keys())


class LazyGroup(TyperGroup):
    """A ``TyperGroup`` whose commands are ``COMMANDS``, imported on first use.

    Subclass it with ``COMMANDS`` set and pass the subclass as ``typer.Typer(cls=...)``.
    """

    COMMANDS: ClassVar[Sequence[LazyCommand]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.listing = False
        commands = _Commands(self, self.COMMANDS)
        for name, command in dict(self.commands).items():  # any registered eagerly
            commands[name] = command
        self.commands = commands

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _coerce_plain_values_directly(self, ctx, recurse=False)  # the root's own options
        return list(super().parse_args(ctx, args))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _coerce_plain_values_directly(command, ctx)
        return name, command, rest

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: nothing loaded

    @contextmanager
    def _listing(self) -> Iterator[None]:
        self.listing = True
        try:
            yield
        finally:
            self.listing = False

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if getattr(self, "rich_markup_mode", None) != "rich":  # Click's plain help: cheap already
            with self._listing():
                super().format_help(ctx, formatter)
            return
        from logstore_cli.cli.group_help import print_group_help

        with self._listing():
            shown = [self.commands[name] for name in self.list_commands(ctx)]
        print_group_help(self, ctx, [(c.name or "", c.help or "") for c in shown if not c.hidden])

    def typer_help(self, ctx: Any) -> None:
        """The help as Typer's own renderer draws it (what ``format_help`` must look like)."""
        with self._listing():
            super().format_help(ctx, ctx.make_formatter())

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        # Completing the command name lists names and helps; completing a command's arguments
        # resolves that command through get_command, outside this block, and loads it.
        with self._listing():
            return list(super().shell_complete(ctx, incomplete))


# Typer (0.29) coerces every parameter's value, given or default, through a pydantic TypeAdapter
# built on first use: importing pydantic and building the adapters cost more than importing Typer
# and Rich together. A value that already has its parameter's type needs no coercion: an option's
# text for a ``str`` parameter, an unset option's None, a default. Those pass as they are (as
# pydantic would return them); any other value goes to Typer's own coercion, built then.
_PLAIN: Final = (str, int, float)


class _PlainFirst:
    """A parameter's runtime coercion (Typer's ``RuntimeParam`` protocol: ``coerce``)."""

    def __init__(self, param: Any) -> None:
        self._descriptor = param.type_descriptor
        self._typer: Any = None

    def coerce(self, value: Any, *, param: Any, ctx: Any) -> Any:
        annotation = self._descriptor.annotation
        if value is None:  # as Typer's RuntimeParam.coerce
            return () if param.multiple or param.nargs == -1 else None
        if annotation in _PLAIN and type(value) is annotation:
            return value
        if (
            self._descriptor.is_list
            and typing.get_args(annotation) == (str,)
            and isinstance(value, tuple | list)
            and all(type(v) is str for v in value)
        ):
            return list(value)
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self._descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)


def _checks(info: Any) -> bool:
    """Whether Typer's coercion does more than convert: a custom parser, a range (which a default
    is held to as well); such a parameter keeps Typer's coercion for every value."""
    return any(
        getattr(info, k, None) not in (None, False) for k in ("parser", "min", "max", "clamp")
    )


def _coerce_plain_values_directly(command: Any, ctx: Any, *, recurse: bool = True) -> None:
    """Give ``command``'s parameters (and its subcommands') the ``_PlainFirst`` coercion; a Typer
    without runtime coercion objects (before 0.29: Click's types, no pydantic) is left alone.

    ``get_params`` includes the help option, which Click makes (once per command) on first use;
    its names come from the root's context settings, which every context inherits.
    """
    for param in command.get_params(ctx):
        # Typer's lazily built coercion, not built yet (nor ours given): the attributes of 0.29
        typer_coerces = getattr(param, "_runtime_param", 0) is None
        if (
            typer_coerces
            and hasattr(param, "type_descriptor")
            and not _checks(param.type_descriptor.parameter_info)
        ):
            param._runtime_param = _PlainFirst(param)
    for sub in getattr(command, "commands", {}).values() if recurse else ():
        _coerce_plain_values_directly(sub, ctx)
