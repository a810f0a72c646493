"""An epoch written to a Pulsar table by hand, as the ingest job writes it (no Spark): the
records, the Delta commit naming each partition's last message, a marker to each partition naming
that commit's version. Shared by the Pulsar tests that need epochs without running the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from logstore_cli.logformat.pulsar_form import position_text, to_pulsar
from logstore_cli.logformat.wire import (
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    commit_metadata,
    encode_change,
    encode_marker,
)
from logstore_cli.pulsar.admin import TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from logstore_cli.pulsar.producer import PulsarLogProducer
from logstore_cli.read.consumer import SourceConf
from logstore_cli.read.pulsar_source import PulsarLogSource


def source_conf(pulsar: PulsarInfo, topic: TopicName) -> SourceConf:
    return SourceConf(pulsar.service_url, {}, str(topic), 30.0, system="pulsar",
                      admin_url=pulsar.web_url)  # fmt: skip


def watermarks(pulsar: PulsarInfo, topic: TopicName) -> dict[int, tuple[int, int]]:
    """Each partition's (first held, next) ordinal."""
    with PulsarLogSource(source_conf(pulsar, topic)) as source:
        return source.watermarks()


def write_epoch(
    pulsar: PulsarInfo, topic: TopicName, table: Path, schema: RowSchema, eid: EpochId,
    rows: list[dict[str, Any]], data: pa.Table, *, mode: Literal["append", "overwrite"],
    partitions: int = 2,
) -> int:  # fmt: skip
    """``rows`` as the epoch's inserts (keyed by ``id``), ``data`` the commit's rows (``mode``:
    an overwrite removes the files before it); the commit's version."""
    with PulsarLogProducer(pulsar.service_url, topic, partitions, f"h-{eid.attempt}") as out:
        for row in rows:
            change = ChangeRecord(RowKind.INSERT, {"id": row["id"]}, row, eid)
            out.send(*to_pulsar(*encode_change(change, schema)))
        out.flush()
        ends = {p: position_text(high - 1) for p, (_, high) in watermarks(pulsar, topic).items()
                if high}  # fmt: skip
        props = CommitProperties(
            custom_metadata={"userMetadata": commit_metadata(eid, ends)},
            app_transactions=[Transaction(eid.writer, eid.epoch)],
        )
        write_deltalake(str(table), data, mode=mode, commit_properties=props)
        version = DeltaTable(str(table)).version()
        for partition in range(partitions):
            _, payload, marker_props = to_pulsar(*encode_marker(CommitMarker(eid, version)))
            out.send_marker(partition, payload, marker_props)
        out.flush()
    return version
