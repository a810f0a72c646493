"""What the caller may supply to the DDL stages besides the text (defaults from config or env)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

# A broker address, or how to find one when a table needs it (the CLI's local-broker lookup reads
# state files: only a table without an address of its own should pay for that).
DefaultBootstrap = str | Callable[[], str | None] | None

# Named in messages; the CLI resolves it (with the config file and flags) in logstore_cli.config.
BOOTSTRAP_SERVERS_ENV = "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS"


class ParseOptions(NamedTuple):
    """What parsing needs from outside the DDL text."""

    # Broker address for tables whose DDL turns the log store on without one.
    default_bootstrap_servers: DefaultBootstrap = None

    def bootstrap_default(self) -> str | None:
        """The default broker address, looked up now if it is a lookup."""
        found = self.default_bootstrap_servers
        return found() if callable(found) else found
