"""Wire format 1 on Pulsar (design §7.1): a Kafka record's parts as a Pulsar message's and back.
Pure: the producer and reader of the Pulsar log system call these, so one encoder (``encode_change``,
``encode_marker``) and one decoder (``decode``) serve both log systems.

| Kafka | Pulsar |
|---|---|
| key bytes (the key's UTF-8 JSON text), or null | the partition key (that text), or none |
| value bytes, or null (a debezium-json marker or tombstone) | the payload, or an empty payload (a format-1 value is never empty: it is a JSON object) |
| headers (UTF-8 values) | properties of the same names and values |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from logstore_cli.logformat.errors import WireFormatError

PulsarMessage = tuple[str | None, bytes, dict[str, str]]


def to_pulsar(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
) -> PulsarMessage:
    """(partition key, payload, properties) of a record ``encode_change``/``encode_marker`` made."""
    partition_key, payload = pulsar_key_value(key, value)
    return partition_key, payload, pulsar_properties(headers)


def pulsar_key_value(key: bytes | None, value: bytes | None) -> tuple[str | None, bytes]:
    """``to_pulsar``'s partition key and payload alone: the ingest sink converts each record's
    key and value, and each kind's headers once (``pulsar_properties``), as they repeat."""
    if key == b"":
        raise WireFormatError("an empty key cannot be a Pulsar partition key", reason="malformed")
    if value == b"":
        raise WireFormatError("an empty value would read back as a null one", reason="malformed")
    try:
        partition_key = None if key is None else key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"not UTF-8: {exc}", reason="malformed") from None
    return partition_key, value or b""


def pulsar_properties(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """``to_pulsar``'s properties: the headers' names and UTF-8 values, each name once."""
    try:
        props = {name: raw.decode("utf-8") for name, raw in headers}
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"not UTF-8: {exc}", reason="malformed") from None
    if len(props) != len(headers):
        raise WireFormatError("a header repeats: properties hold one value per name",
                              reason="malformed")  # fmt: skip
    return props


def from_pulsar(
    partition_key: str | None, payload: bytes, properties: Mapping[str, str]
) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    """(key, value, headers) of a Pulsar message, as ``decode`` takes a Kafka record's."""
    key = partition_key.encode("utf-8") if partition_key else None
    headers = [(name, value.encode("utf-8")) for name, value in properties.items()]
    return key, payload or None, headers


# -- positions -------------------------------------------------------------------------------------
# A Pulsar message id (ledger, entry, batch index) as one ordered integer per partition, so that the
# decider, reader checkpoints and verify, written for Kafka's offsets, run unchanged (design §7.1).
# Message ids are even ordinals; ``ordinal + 1`` (odd) is "just after that message", the position a
# reader stands at once it has read it (the decider's ``offset + 1``). Lossless: entry ids stay far
# below 2**42 (a ledger rolls over after 50,000 entries by default) and batch indexes below 2**20.
_INTEGER = re.compile(r"-?[0-9]{1,19}")
_BATCH_BITS = 21  # (batch + 1) << 1 takes the low 21 bits
_ENTRY_BITS = 43
_MAX_ENTRY = (1 << _ENTRY_BITS) - 1
_MAX_BATCH = (1 << (_BATCH_BITS - 1)) - 2


def ordinal(ledger: int, entry: int, batch: int = -1) -> int:
    """The even ordinal of message id ``ledger:entry:batch``: ordered as Pulsar orders ids."""
    if ledger < 0 or not 0 <= entry <= _MAX_ENTRY or not -1 <= batch <= _MAX_BATCH:
        raise WireFormatError(
            f"Pulsar message id {ledger}:{entry}:{batch} is out of logstore's range",
            reason="malformed",
        )
    return (ledger << (_ENTRY_BITS + _BATCH_BITS)) | (entry << _BATCH_BITS) | ((batch + 1) << 1)


def message_id(position: int) -> tuple[int, int, int, bool]:
    """``(ledger, entry, batch, inclusive)`` where a read at ``position`` starts: at that message
    (an even ordinal), or just after it (odd: the message of ``position - 1`` was read)."""
    if position < 0:
        raise ValueError(f"a position is >= 0, got {position}")
    base = position & ~1
    batch = ((base & ((1 << _BATCH_BITS) - 1)) >> 1) - 1
    entry = (base >> _BATCH_BITS) & _MAX_ENTRY
    ledger = base >> (_ENTRY_BITS + _BATCH_BITS)
    return ledger, entry, batch, position == base


def after(text: str) -> int:
    """The position just after the message ``"<ledger>:<entry>:<batch>"`` (Delta commit
    metadata's form of a Pulsar position): where a hybrid read goes on."""
    parts = text.split(":")
    if len(parts) != 3 or not all(_INTEGER.fullmatch(p) for p in parts):
        raise WireFormatError(
            f"not a Pulsar message id ('<ledger>:<entry>:<batch>'): {text!r}", reason="malformed"
        )
    return ordinal(int(parts[0]), int(parts[1]), int(parts[2])) + 1


def position_text(position: int) -> str:
    """A position as users read it: ``"L:E:B"`` (at that message) or ``"after L:E:B"``."""
    if position == 0:
        return "earliest"
    ledger, entry, batch, inclusive = message_id(position)
    return f"{ledger}:{entry}:{batch}" if inclusive else f"after {ledger}:{entry}:{batch}"
