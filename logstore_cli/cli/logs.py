"""Log records to stderr: ``logstore_cli``'s as the CLI's own ``warning:``/``error:`` lines, with
``--verbose`` everything through Rich. Every record's text is cleaned like any other output."""

from __future__ import annotations

import logging

from logstore_cli.cli.output import Output, _stderr_console, clean

_LOGGER = "logstore_cli"
_installed: list[logging.Handler] = []


class _Levels(logging.Filter):
    """``logstore_cli``'s records from ``ours`` up, other libraries' from ``others`` up."""

    def __init__(self, ours: int, others: int) -> None:
        super().__init__()
        self.ours, self.others = ours, others

    def filter(self, record: logging.LogRecord) -> bool:
        mine = record.name == _LOGGER or record.name.startswith(_LOGGER + ".")
        return record.levelno >= (self.ours if mine else self.others)


class _Cleaned(logging.Filter):
    """A record's message with its control characters escaped (``clean``): log records quote
    brokers, files and records too."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = clean(record.getMessage()), None
        return True


class _MessageHandler(logging.Handler):
    """A record as the CLI's own ``warning:`` or ``error:`` line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            out = Output()
            if record.levelno >= logging.ERROR:
                out.error(record.getMessage())
            else:
                out.warning(record.getMessage())
        except Exception:
            self.handleError(record)


def setup_logging(*, verbose: bool) -> None:
    """Route log records to stderr, through one handler on the root logger (replaced, not added to,
    by a second call).

    Without ``verbose``: ``logstore_cli``'s warnings and errors as ``warning:``/``error:`` lines;
    other libraries say nothing (py4j logs a traceback on the root logger whenever a JVM call is
    interrupted or its connection drops: the CLI reports such failures itself). With ``verbose``:
    every ``logstore_cli`` record from DEBUG up, and other libraries' warnings, through Rich with
    time and origin. librdkafka's own log stays off either way (its logger does not propagate); its
    failures reach the user as the CLI's errors.
    """
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    _installed.clear()
    handler: logging.Handler
    if verbose:
        from rich.logging import RichHandler

        handler = RichHandler(console=_stderr_console(), markup=False)
        handler.addFilter(_Levels(logging.DEBUG, logging.WARNING))
        handler.addFilter(_Cleaned())
    else:
        handler = _MessageHandler()
        handler.addFilter(_Levels(logging.WARNING, logging.CRITICAL + 1))
    # The logger's own level gates records before any handler sees them.
    logging.getLogger(_LOGGER).setLevel(logging.DEBUG if verbose else logging.NOTSET)
    root.addHandler(handler)
    _installed.append(handler)
