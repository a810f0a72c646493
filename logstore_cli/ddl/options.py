"""What the caller may supply to the DDL stages besides the text (defaults from config or env)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

BOOTSTRAP_SERVERS_ENV = "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS"


@dataclass(frozen=True)
class ParseOptions:
    # Broker address for tables whose DDL turns the log store on without one.
    default_bootstrap_servers: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ParseOptions:
        return cls(default_bootstrap_servers=env.get(BOOTSTRAP_SERVERS_ENV) or None)
