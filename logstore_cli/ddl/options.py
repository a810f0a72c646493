"""What the caller may supply to the DDL stages besides the text (defaults from config or env)."""

from __future__ import annotations

from dataclasses import dataclass

# Named in messages; the CLI resolves it (with the config file and flags) in logstore_cli.config.
BOOTSTRAP_SERVERS_ENV = "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS"


@dataclass(frozen=True)
class ParseOptions:
    """What parsing needs from outside the DDL text."""

    # Broker address for tables whose DDL turns the log store on without one.
    default_bootstrap_servers: str | None = None
