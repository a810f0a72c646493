"""The log's record format, wire format version 1 (docs/design.md, section 7).

Pure (stdlib only, no I/O), so that every engine that writes or reads the log shares it.
"""

from logstore_cli.logformat.errors import WireFormatError
from logstore_cli.logformat.partitioner import murmur2, partition_for
from logstore_cli.logformat.values import decode_value, encode_value, parse_json, parse_type
from logstore_cli.logformat.wire import (
    DEBEZIUM_FORMAT,
    FORMAT_VERSION,
    HEADER_ATTEMPT,
    HEADER_DELTA_VERSION,
    HEADER_EPOCH,
    HEADER_FORMAT,
    HEADER_KIND,
    HEADER_WRITER,
    HEADERS,
    ChangeRecord,
    CommitMarker,
    EpochEncoder,
    EpochId,
    LogFormat,
    RowKind,
    RowSchema,
    commit_metadata,
    decode,
    encode_change,
    encode_key,
    encode_marker,
    encode_row,
    envelope,
    parse_commit_metadata,
)

__all__ = [
    "DEBEZIUM_FORMAT",
    "FORMAT_VERSION",
    "HEADERS",
    "HEADER_ATTEMPT",
    "HEADER_DELTA_VERSION",
    "HEADER_EPOCH",
    "HEADER_FORMAT",
    "HEADER_KIND",
    "HEADER_WRITER",
    "ChangeRecord",
    "CommitMarker",
    "EpochEncoder",
    "EpochId",
    "LogFormat",
    "RowKind",
    "RowSchema",
    "WireFormatError",
    "commit_metadata",
    "decode",
    "decode_value",
    "encode_change",
    "encode_key",
    "encode_marker",
    "encode_row",
    "encode_value",
    "envelope",
    "murmur2",
    "parse_commit_metadata",
    "parse_json",
    "parse_type",
    "partition_for",
]
