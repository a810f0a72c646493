"""What the Kafka client tests share: a JAAS line builder and everything an error would show."""

from __future__ import annotations

BOOT = "127.0.0.1:1"  # nothing listens on port 1
SECRET = "Pa55-w0rd-never-shown"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def all_text(exc: BaseException) -> str:
    """Everything a user or a log could see of an error."""
    parts = [str(exc), repr(exc), *map(str, exc.args)]
    parts += [str(getattr(exc, name, "")) for name in ("message", "hint", "detail")]
    return "\n".join(parts)
