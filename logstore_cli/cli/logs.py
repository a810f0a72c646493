"""Log records to stderr: ``logstore_cli``'s as the CLI's own ``warning:``/``error:`` lines, with
``--verbose`` everything through Rich. Every record's text is cleaned like any other output."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

from logstore_cli.cli.output import Output, _stderr_console, clean

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable, Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_LOGGER = "logstore_cli"
_installed: list[logging.Handler] = []


def setup_logging(*, verbose: bool) -> None:
    """Route log records to stderr, through one handler on the root logger (replaced, not added to,
    by a second call).

    Without ``verbose``: ``logstore_cli``'s warnings and errors as ``warning:``/``error:`` lines;
    other libraries say nothing (py4j logs a traceback on the root logger whenever a JVM call is
    interrupted or its connection drops: the CLI reports such failures itself). With ``verbose``:
    every ``logstore_cli`` record from DEBUG up, and other libraries' warnings, through Rich with
    time and origin. librdkafka's own log stays off either way (its logger does not propagate); its
    failures reach the user as the CLI's errors.

    Importing ``logging`` costs about as much as a quarter of Typer and Rich, and most commands
    that need no Spark never log: until something imports it, the handler waits in an import hook
    that installs it the moment ``logging`` is loaded, before any record can be made.
    """
    for finder in [f for f in sys.meta_path if isinstance(f, _WhenLoggingLoads)]:
        sys.meta_path.remove(finder)
    if "logging" in sys.modules:
        _install(verbose=verbose)
    else:
        sys.meta_path.insert(0, _WhenLoggingLoads(verbose=verbose))


class _WhenLoggingLoads:
    """Finds nothing itself: wraps the standard loader of ``logging`` so that the handler is
    installed right after the module runs. (A meta path finder and a loader are protocols: no
    ``importlib.abc`` base, whose import costs more than ``logging``'s.)"""

    def __init__(self, *, verbose: bool) -> None:
        self.verbose = verbose

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "logging":
            return None
        sys.meta_path.remove(self)
        from importlib.util import find_spec

        spec = find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = cast("Loader", _ThenInstall(spec.loader, verbose=self.verbose))
        return spec


class _ThenInstall:
    def __init__(self, loader: Loader, *, verbose: bool) -> None:
        self.loader, self.verbose = loader, verbose

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _install(verbose=self.verbose)

    def __getattr__(self, name: str) -> Any:  # the wrapped loader's other methods (get_source, …)
        return getattr(self.loader, name)


def _install(*, verbose: bool) -> None:
    import logging

    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    _installed.clear()
    handler: logging.Handler
    if verbose:
        from rich.logging import RichHandler

        handler = RichHandler(console=_stderr_console(), markup=False)
        handler.addFilter(_levels(logging.DEBUG, logging.WARNING))
        handler.addFilter(_cleaned)
    else:
        handler = _message_handler()
        handler.addFilter(_levels(logging.WARNING, logging.CRITICAL + 1))
    # The logger's own level gates records before any handler sees them.
    logging.getLogger(_LOGGER).setLevel(logging.DEBUG if verbose else logging.NOTSET)
    root.addHandler(handler)
    _installed.append(handler)


def _levels(ours: int, others: int) -> Callable[[logging.LogRecord], bool]:
    """``logstore_cli``'s records from ``ours`` up, other libraries' from ``others`` up."""

    def keep(record: logging.LogRecord) -> bool:
        mine = record.name == _LOGGER or record.name.startswith(_LOGGER + ".")
        return record.levelno >= (ours if mine else others)

    return keep


def _cleaned(record: logging.LogRecord) -> bool:
    """A record's message with its control characters escaped (``clean``): log records quote
    brokers, files and records too."""
    record.msg, record.args = clean(record.getMessage()), None
    return True


def _message_handler() -> logging.Handler:
    """A record as the CLI's own ``warning:`` or ``error:`` line (its class built once ``logging``
    is loaded: its base is ``logging.Handler``)."""
    import logging

    class MessageHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                out = Output()
                if record.levelno >= logging.ERROR:
                    out.error(record.getMessage())
                else:
                    out.warning(record.getMessage())
            except Exception:
                self.handleError(record)

    return MessageHandler()
