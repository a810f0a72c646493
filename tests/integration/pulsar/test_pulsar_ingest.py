"""``ingest`` into a Pulsar table (issue 23, design §7.1), on the real standalone and local Spark:
Amoro's Pulsar DDL creates the table, one ``ingest --once`` of two JSON files (two epochs of
inserts, updates and deletes) writes both stores, a second run of the same source writes nothing
new; then the topic is read back with the raw ``pulsar`` client (a Reader from the start of each
partition) and checked record by record. One job run serves every assertion (module fixture)."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logstore_cli import config as cfg
from logstore_cli.catalog import epochs
from logstore_cli.catalog.tables import load_table
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.ingest import plan
from logstore_cli.ingest.epoch import EpochReport
from logstore_cli.logformat.partitioner import partition_for
from logstore_cli.logformat.pulsar_form import from_pulsar
from logstore_cli.logformat.wire import (
    HEADERS,
    ChangeRecord,
    CommitMarker,
    EpochId,
    RowKind,
    RowSchema,
    decode,
)
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.pulsar_topics import PulsarTopicStore
from logstore_cli.provision.service import Stores
from logstore_cli.pulsar.admin import MessagePosition, TopicName
from logstore_cli.pulsar.local_standalone import PulsarInfo
from tests.integration.jobs.ingest_support import (
    COLUMNS,
    Change,
    LogRecord,
    changes,
    check_protocol,
    delta_state,
    fold,
    normalized,
    write_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.pulsar]

TABLE = "shop.orders"
PARTITIONS = 3


@dataclass(frozen=True)
class Message:
    partition: int
    index: int  # its place in the partition, from 0
    partition_key: str | None
    payload: bytes
    props: dict[str, str]
    position: MessagePosition

    def record(self) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
        """(key, value, headers) as ``decode`` takes them (``pulsar_form.from_pulsar``)."""
        return from_pulsar(self.partition_key, self.payload, self.props)


@dataclass(frozen=True)
class Run:
    table: TableSpec
    path: Path
    log: list[Change]
    files: list[list[Change]]
    reports: list[EpochReport]
    versions_after_first: list[int]
    messages_after_first: list[Message]
    rerun: list[EpochReport]
    versions_after_rerun: list[int]
    messages: list[Message]


def read_topic(pulsar: PulsarInfo, topic: TopicName) -> list[Message]:
    """Every message of every partition, from its start, with the raw client."""
    import pulsar as client_lib

    client = client_lib.Client(pulsar.service_url, operation_timeout_seconds=30)
    out: list[Message] = []
    try:
        for p in range(PARTITIONS):
            reader = client.create_reader(topic.partition(p), client_lib.MessageId.earliest)
            index = 0
            while reader.has_message_available():
                m = reader.read_next(timeout_millis=30_000)
                mid = m.message_id()
                out.append(Message(p, index, m.partition_key() or None, m.data(),
                                   dict(m.properties()),
                                   MessagePosition(mid.ledger_id(), mid.entry_id(),
                                                   mid.batch_index())))  # fmt: skip
                index += 1
            reader.close()
    finally:
        client.close()
    return out


def log_records(messages: list[Message]) -> list[LogRecord]:
    """The messages as ``check_protocol`` takes a Kafka log: ``offset`` is the message's index in
    its partition, and the properties (which Pulsar gives back by name, not in order) are sorted
    into Kafka's header order."""
    records = []
    for m in messages:
        key, value, headers = m.record()
        headers.sort(key=lambda h: HEADERS.index(h[0]))
        records.append(LogRecord(m.partition, m.index, key, value, headers))
    return records


def decoded(message: Message, schema: RowSchema) -> ChangeRecord | CommitMarker:
    found = decode(*message.record(), schema)
    assert isinstance(found, ChangeRecord | CommitMarker)
    return found


def create_pulsar_table(spark: Any, pulsar: PulsarInfo, warehouse: Path) -> TopicName:
    """Amoro's Pulsar DDL, provisioned as create-table does (Delta table and partitioned topic)."""
    topic = f"t-ingest-{uuid.uuid4().hex[:12]}"
    ddl = f"""CREATE TABLE {TABLE} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH (
      'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
      'log-store.address' = '{pulsar.service_url}', 'log-store.topic' = '{topic}',
      'log.system.partitions' = '{PARTITIONS}')"""
    topics = PulsarTopicStore(cfg.PulsarConfig(admin_url=pulsar.web_url), timeout_s=30)
    service.create_tables(
        parse_ddl(ddl, "t.sql", ParseOptions()),
        warehouse,
        Stores(DeltaLogStore(warehouse, SparkDeltaStore(warehouse, lambda: spark)), topics),
    )
    return TopicName.parse(topic)


def ingest(spark: Any, pulsar: PulsarInfo, warehouse: Path, source: Path) -> list[EpochReport]:
    """``logstore ingest TABLE --source SOURCE --once`` (one file per epoch) in this process."""
    from logstore_cli.cli.context import Context
    from logstore_cli.cli.ingest import build_job
    from logstore_cli.jobs import ingest as job_api

    ctx = Context(
        cfg.Config(warehouse=str(warehouse), pulsar=cfg.PulsarConfig(admin_url=pulsar.web_url))
    )
    job = build_job(
        ctx, TABLE, source=str(source), format=None,
        source_options={"maxFilesPerTrigger": "1"}, source_bootstrap=None,
        generate=plan.GenerateSource(1, 1, None, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=1.0, once=True, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    reports: list[EpochReport] = []
    started = job_api.start(spark, job, job_api.acquire_lease(job), on_epoch=reports.append)
    job_api.wait(started, stop=lambda: False)
    return reports


@pytest.fixture(scope="module")
def run(spark: Any, pulsar: PulsarInfo, tmp_path_factory: pytest.TempPathFactory) -> Run:
    base = tmp_path_factory.mktemp("pulsar-ingest")
    warehouse = base / "warehouse"
    name = create_pulsar_table(spark, pulsar, warehouse)
    log = changes(600, keys=60, seed=23)
    files = [log[:300], log[300:]]
    write_files(base / "in", files)
    stored = load_table(warehouse, TABLE)
    path = Path(stored.ref.path)
    reports = ingest(spark, pulsar, warehouse, base / "in")
    versions = epochs.commit_versions(path)
    first = read_topic(pulsar, name)
    rerun = ingest(spark, pulsar, warehouse, base / "in")
    return Run(stored.spec, path, log, files, reports, versions, first, rerun,
               epochs.commit_versions(path), read_topic(pulsar, name))  # fmt: skip


def test_two_epochs_commit_to_delta_with_the_pulsar_positions(run: Run) -> None:
    assert [r.rows for r in run.reports] == [len(f) for f in run.files]
    assert not any(r.republished for r in run.reports)
    assert delta_state(run.path) == {k: normalized(v) for k, v in fold(run.log).items()}
    commits = {(c.epoch.writer, c.epoch.epoch): c for c in epochs.epoch_commits(run.path)}
    assert len(commits) == 2
    for r in run.reports:
        commit = commits[(r.writer, r.epoch)]
        assert commit.epoch.attempt == r.attempt and commit.version == r.delta_version
        assert commit.positions == r.offsets
        assert all(isinstance(p, str) for p in commit.positions.values())


def test_every_change_is_in_its_key_partition_in_order_with_its_epoch(run: Run) -> None:
    schema = RowSchema.of(run.table)
    kinds = {k.value for k in plan.log_kinds(run.table)}
    by_epoch = {r.epoch: r for r in run.reports}
    # what each key's changes should be, per epoch, in the source's order
    expected: dict[tuple[int, int], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for report, batch in zip(run.reports, run.files, strict=True):
        for c in batch:
            if c.op in kinds:
                expected[(report.epoch, int(c.row["id"]))].append((c.op, normalized(c.row)))
    found: dict[tuple[int, int], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for m in run.messages_after_first:
        item = decoded(m, schema)
        if isinstance(item, CommitMarker):
            continue
        report = by_epoch[item.epoch.epoch]
        assert (item.epoch.writer, item.epoch.attempt) == (report.writer, report.attempt)
        assert m.props["logstore.writer"] == report.writer
        assert m.props["logstore.epoch"] == str(report.epoch)
        assert m.props["logstore.attempt"] == report.attempt
        assert m.props["logstore.kind"] == item.kind.value
        assert m.partition_key is not None  # the key's format-1 text, hashed as Kafka does:
        assert m.partition == partition_for(m.partition_key.encode(), PARTITIONS)
        key = int(item.row["id"])
        found[(report.epoch, key)].append((item.kind.value, normalized(item.row)))
    assert found == expected
    assert sum(r.log_records for r in run.reports) == sum(len(v) for v in expected.values())
    assert RowKind.UPDATE_BEFORE.value in kinds  # Amoro's default changelog mode writes -U


def test_a_marker_per_partition_per_epoch_after_its_records(run: Run) -> None:
    schema = RowSchema.of(run.table)
    commits = {c.epoch.epoch: c for c in epochs.epoch_commits(run.path)}
    for p in range(PARTITIONS):
        items = [(m, decoded(m, schema)) for m in run.messages_after_first if m.partition == p]
        markers = [(m, i) for m, i in items if isinstance(i, CommitMarker)]
        assert [i.epoch.epoch for _, i in markers] == [r.epoch for r in run.reports]
        for marker_msg, marker in markers:
            commit = commits[marker.epoch.epoch]
            assert marker.epoch == commit.epoch and marker.delta_version == commit.version
            assert marker_msg.partition_key is None
            # every record of the epoch precedes its marker; the commit recorded the partition's
            # last message before the marker
            epoch_records = [m for m, i in items if isinstance(i, ChangeRecord)
                             and i.epoch.epoch == marker.epoch.epoch]  # fmt: skip
            assert all(m.index < marker_msg.index for m in epoch_records)
            before = [m for m, _ in items if m.index < marker_msg.index]
            recorded = commit.positions.get(p)
            if before:
                assert recorded == str(before[-1].position)
            else:
                assert recorded is None  # an empty partition: no position yet


def test_the_committed_log_folds_to_the_delta_table(run: Run) -> None:
    counts = check_protocol(run.table, run.path, log_records(run.messages_after_first))
    assert counts["epochs"] == 2 and counts["partitions"] == PARTITIONS


def test_a_rerun_of_the_same_source_commits_nothing_new(run: Run) -> None:
    assert run.rerun == []  # no epoch: the checkpoint has read every file
    assert run.versions_after_rerun == run.versions_after_first
    # the start-up rule re-published the latest epoch's markers, one per partition; no change
    seen = {(m.partition, m.index) for m in run.messages_after_first}
    added = [m for m in run.messages if (m.partition, m.index) not in seen]
    schema = RowSchema.of(run.table)
    last = run.reports[-1]
    assert sorted(m.partition for m in added) == list(range(PARTITIONS))
    assert all(
        decoded(m, schema) == CommitMarker(
            EpochId(last.writer, last.epoch, last.attempt), last.delta_version)
        for m in added
    )  # fmt: skip


def test_a_record_too_large_for_pulsar_is_quarantined_and_the_rest_written(
    spark: Any, pulsar: PulsarInfo, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    name = create_pulsar_table(spark, pulsar, warehouse)
    huge = "x" * (6 * 1024 * 1024)  # above the standalone's maxMessageSize (5 MiB)
    write_files(tmp_path / "in", [[
        Change("+I", {"id": 1, "name": "small", "qty": 1, "price": "1.00"}),
        Change("+I", {"id": 2, "name": huge, "qty": 2, "price": "2.00"}),
    ]])  # fmt: skip

    (report,) = ingest(spark, pulsar, warehouse, tmp_path / "in")

    assert (report.rows, report.log_records, report.quarantined) == (1, 1, 1)
    path = Path(load_table(warehouse, TABLE).ref.path)
    assert delta_state(path) == {1: normalized({"id": 1, "name": "small", "qty": 1,
                                                "price": "1.00"})}  # fmt: skip
    quarantined = [
        json.loads(line)
        for f in (path / "_logstore" / "quarantine" / "ingest").glob("*.jsonl")
        for line in f.read_text("utf-8").splitlines()
    ]
    assert [json.loads(q["raw"])["id"] for q in quarantined] == [2]
    assert "maxMessageSize" in quarantined[0]["reason"], quarantined[0]["reason"]
    schema = RowSchema.of(load_table(warehouse, TABLE).spec)
    changes_ = [i for i in (decoded(m, schema) for m in read_topic(pulsar, name))
                if isinstance(i, ChangeRecord)]  # fmt: skip
    assert [c.row["id"] for c in changes_] == [1]


def test_a_missing_topic_is_named_before_the_query_starts(pulsar: PulsarInfo) -> None:
    from logstore_cli.errors import TopicNotFoundError
    from logstore_cli.jobs.ingest import PulsarTarget
    from logstore_cli.jobs.pulsar_sink import PulsarLogSink
    from logstore_cli.pulsar.admin import DEFAULT_MAX_MESSAGE_SIZE, PulsarAdmin

    assert PulsarAdmin(pulsar.web_url).max_message_size() == DEFAULT_MAX_MESSAGE_SIZE
    topic = f"persistent://public/default/t-gone-{uuid.uuid4().hex[:12]}"
    (table,) = parse_ddl(
        f"""CREATE TABLE {TABLE} ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH (
        'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
        'log-store.address' = '{pulsar.service_url}', 'log-store.topic' = '{topic}')""",
        "t.sql",
        ParseOptions(),
    )
    target = PulsarTarget(pulsar.service_url, pulsar.web_url, topic, 30.0)
    with pytest.raises(TopicNotFoundError) as info:
        PulsarLogSink.open(table, target)
    assert f"the Pulsar topic {topic} of table {TABLE} does not exist" in info.value.message
    assert "create-partitioned-topic" in (info.value.hint or "")


def test_status_shows_each_partitions_last_id_and_the_messages_after_the_commit(
    run: Run, pulsar: PulsarInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status`` on a Pulsar table: the last commit's ids, each partition's last message id and
    the messages after the commit as the broker counts them (ids are not dense), which are the
    raw reader's messages after that id: here the markers, the first run's and the rerun's."""
    from tests import jobrun

    monkeypatch.setenv("LOGSTORE_PULSAR_ADMIN_URL", pulsar.web_url)
    done = jobrun.cli(run.path.parent, run.path.parents[1], "status", TABLE, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    log = json.loads(done.stdout)["log"]
    assert (log["system"], log["end_offsets_read"], log["error"]) == ("pulsar", True, None)
    committed = max(epochs.epoch_commits(run.path), key=lambda c: c.version).positions
    expected = []
    for p in range(PARTITIONS):
        held = [m for m in run.messages if m.partition == p]
        since = MessagePosition.parse(str(committed[p]))
        after = [m for m in held if m.position > since]  # ordered as Pulsar orders ids
        expected.append({"partition": p, "committed_offset": committed[p],
                         "end_offset": str(held[-1].position), "after_commit": len(after)})  # fmt: skip
        assert len(after) == 2  # the last epoch's marker, and the rerun's re-published one
    assert log["partitions"] == expected
    plain = jobrun.cli(run.path.parent, run.path.parents[1], "status", TABLE)
    assert plain.returncode == 0 and "last id" in plain.stdout, plain.stdout + plain.stderr
