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

from collections.abc import Mapping, Sequence

from logstore_cli.logformat.errors import WireFormatError

PulsarMessage = tuple[str | None, bytes, dict[str, str]]


def to_pulsar(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
) -> PulsarMessage:
    """(partition key, payload, properties) of a record ``encode_change``/``encode_marker`` made."""
    if key == b"":
        raise WireFormatError("an empty key cannot be a Pulsar partition key", reason="malformed")
    if value == b"":
        raise WireFormatError("an empty value would read back as a null one", reason="malformed")
    try:
        props = {name: raw.decode("utf-8") for name, raw in headers}
        partition_key = None if key is None else key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"not UTF-8: {exc}", reason="malformed") from None
    if len(props) != len(headers):
        raise WireFormatError("a header repeats: properties hold one value per name",
                              reason="malformed")  # fmt: skip
    return partition_key, value or b"", props


def from_pulsar(
    partition_key: str | None, payload: bytes, properties: Mapping[str, str]
) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    """(key, value, headers) of a Pulsar message, as ``decode`` takes a Kafka record's."""
    key = partition_key.encode("utf-8") if partition_key else None
    headers = [(name, value.encode("utf-8")) for name, value in properties.items()]
    return key, payload or None, headers
