"""What the ingest tests share: a LogStore table, changelog files, and the checks of the protocol
(Delta state by key, the five headers, markers naming the committed attempt, committed log = Delta).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, TopicPartition
from deltalake import DeltaTable

from logstore_cli import config as cfg
from logstore_cli.catalog import epochs
from logstore_cli.catalog.delta_log import TableLocation, delta_rs_args
from logstore_cli.catalog.tables import StoredTable, StoredTableOn, load_table, load_table_on
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.logformat.consistency import decide_partitions
from logstore_cli.logformat.wire import (
    HEADERS,
    ChangeRecord,
    CommitMarker,
    RowKind,
    RowSchema,
    decode,
)
from logstore_cli.model import TableSpec
from logstore_cli.provision import service
from logstore_cli.provision.delta_log import DeltaLogStore
from logstore_cli.provision.delta_spark import SparkDeltaStore
from logstore_cli.provision.kafka_topics import KafkaTopicStore
from logstore_cli.provision.service import Stores
from logstore_cli.pulsar.admin import MessagePosition
from logstore_cli.read.consumer import LogSource, SourceConf
from logstore_cli.read.plan import OutputSpec
from logstore_cli.read.pulsar_source import UNKNOWN_START, PulsarLogSource
from logstore_cli.read.service import ReadRequest, build_request, read_with_consumer
from logstore_cli.read.verify import location, verify_table
from logstore_cli.storage import Storage
from tests import jobrun

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.ingest.epoch import CarryReport, EpochReport

COLUMNS = "id BIGINT, name STRING, qty INT, price DECIMAL(10,2)"


def create_table(spark: SparkSession, warehouse: Path, ddl: str) -> None:
    """Provision the tables of ``ddl`` as create-table does (real Delta and Kafka stores)."""
    topics = KafkaTopicStore(cfg.KafkaConfig(timeout_s=15))
    try:
        specs = parse_ddl(ddl, "t.sql", ParseOptions())
        service.create_tables(
            specs,
            warehouse,
            Stores(DeltaLogStore(warehouse, SparkDeltaStore(warehouse, lambda: spark)), topics),
        )
    finally:
        topics.close()


def ingest_once(
    spark: SparkSession,
    warehouse: Path,
    table: str,
    source: str,
    *,
    on_carry: Callable[[CarryReport], None] = lambda report: None,
    **kw: Any,
) -> list[EpochReport]:
    """One ingest through the job API (the CLI's own build_job) in this process's Spark, to its
    end; ``kw`` are build_job's arguments."""
    from logstore_cli.cli.context import Context
    from logstore_cli.cli.ingest import build_job
    from logstore_cli.ingest import plan
    from logstore_cli.jobs import ingest as job_api

    ctx = Context(cfg.Config(warehouse=str(warehouse), kafka=cfg.KafkaConfig(timeout_s=15)))
    defaults: dict[str, Any] = dict(
        format=None, source_options={}, source_bootstrap=None,
        generate=plan.GenerateSource(1000, 10, None, 0.5, 0.1), op_column=None,
        sequence_column=None, emit=None, trigger_s=1.0, once=True, job="ingest",
        checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    job = build_job(ctx, table, source=source, **{**defaults, **kw})
    reports: list[EpochReport] = []
    lease = job_api.acquire_lease(job)
    started = job_api.start(spark, job, lease, on_epoch=reports.append, on_carry=on_carry)
    job_api.wait(started, stop=lambda: False)
    return reports


def orders_ddl(table: str, topic: str, bootstrap: str, *, partitions: int = 3, key: bool = True,
               extra: Mapping[str, str] | None = None) -> str:  # fmt: skip
    props = {
        "log-store.enabled": "true",
        "log-store.topic": topic,
        "log-store.address": bootstrap,
        "log.system.partitions": str(partitions),
        **(extra or {}),
    }
    pk = ", PRIMARY KEY (id) NOT ENFORCED" if key else ""
    body = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    return f"CREATE TABLE {table} ({COLUMNS}{pk}) WITH ({body});"


@dataclass(frozen=True)
class Change:
    op: str
    row: dict[str, Any]


def changes(n: int, keys: int, seed: int) -> list[Change]:
    """A changelog of exactly ``n`` records over ``keys`` keys: inserts, -U/+U updates and deletes,
    each valid against the state so far (a delete or update only of a live key)."""
    rnd = random.Random(seed)
    live: dict[int, dict[str, Any]] = {}
    out: list[Change] = []
    while len(out) < n:
        k = rnd.randrange(keys)
        new = {"id": k, "name": f"n{k}-{len(out)}", "qty": rnd.randrange(-5, 1000),
               "price": str(Decimal(rnd.randrange(0, 10**6)) / 100)}  # fmt: skip
        if k not in live:
            out.append(Change("+I", new))
            live[k] = new
        elif rnd.random() < 0.2:
            out.append(Change("-D", live.pop(k)))
        else:
            if len(out) + 2 <= n:  # an update is -U then +U; the last change may be a lone +U
                out.append(Change("-U", live[k]))
            out.append(Change("+U", new))
            live[k] = new
    return out


def write_files(directory: Path, batches: Iterable[list[Change]], *, start: int = 0) -> list[Path]:
    """One JSON-lines file per batch, with increasing modification times (Spark's file order)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    base = 1_700_000_000 + start * 10
    for i, batch in enumerate(batches, start):
        path = directory / f"part-{i:05d}.json"
        tmp = directory / f".part-{i:05d}.json.tmp"
        tmp.write_text("".join(json.dumps({**c.row, "op": c.op}) + "\n" for c in batch), "utf-8")
        os.utime(tmp, (base + i * 10, base + i * 10))
        tmp.rename(path)  # a file appears whole, as a real producer's should
        paths.append(path)
    return paths


def fold(changes_: Iterable[Change]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for c in changes_:
        if c.op in ("-D", "-U"):
            state.pop(c.row["id"], None)
        else:
            state[c.row["id"]] = c.row
    return state


def normalized(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": int(row["id"]),
        "name": row["name"],
        "qty": None if row["qty"] is None else int(row["qty"]),
        "price": None if row["price"] is None else str(Decimal(str(row["price"])).quantize(Decimal("0.01"))),
    }  # fmt: skip


def delta_state(path: TableLocation) -> dict[int, dict[str, Any]]:
    """The table read back by delta-rs (not Spark), by key; on a remote backend with the seam's
    storage options."""
    uri, options = delta_rs_args(path)
    rows = DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist()
    by_key = {int(r["id"]): normalized(r) for r in rows}
    assert len(by_key) == len(rows), "a key appears twice in the Delta table"
    return by_key


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def read_log(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[LogRecord]:
    """Every record of the topic, from the start to its end offsets now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ingest-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        parts = sorted(meta.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                for p in parts}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        out: list[LogRecord] = []
        pos = {p: 0 for p in parts}
        import time

        deadline = time.monotonic() + timeout_s
        while any(pos[p] < ends[p] for p in parts):
            assert time.monotonic() < deadline, f"log not read to its end: {pos} of {ends}"
            # consume(n, t) returns early only once n records came: a short t is the poll
            # interval (the loop ends at the end offsets), not a wait of a whole second per call
            for msg in consumer.consume(1000, timeout=0.05):
                assert msg.error() is None, msg.error()
                p, o = msg.partition(), msg.offset()
                if o >= ends[p]:
                    continue
                out.append(LogRecord(p, o, msg.key(), msg.value(), list(msg.headers() or [])))
                pos[p] = o + 1
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def check_protocol(table: TableSpec, path: TableLocation, log: list[LogRecord]) -> dict[str, Any]:
    """The invariants of a double-written table; returns counts for the caller's own checks.

    - every change record carries the five headers, in order;
    - each epoch Delta committed has, in every partition, markers that all name the attempt of
      its Delta commit; no epoch has markers without a Delta commit;
    - no (writer, epoch) is committed twice in Delta;
    - the committed read of the log, folded by key, equals the Delta table.
    """
    schema = RowSchema.of(table)
    commits = list(epochs.epoch_commits(path))
    ids = [(c.epoch.writer, c.epoch.epoch) for c in commits]
    assert len(ids) == len(set(ids)), "an epoch was committed to Delta twice"
    committed = {(c.epoch.writer, c.epoch.epoch): c for c in commits}

    partitions = sorted({r.partition for r in log})
    markers: dict[tuple[str, int], dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    items: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    changes_ = 0
    for r in log:
        item = decode(r.key, r.value, r.headers, schema)
        items[r.partition].append((r.offset, item))
        if isinstance(item, CommitMarker):
            markers[(item.epoch.writer, item.epoch.epoch)][r.partition].add(item.epoch.attempt)
            continue
        assert isinstance(item, ChangeRecord)
        assert [name for name, _ in r.headers] == list(HEADERS), r.headers
        changes_ += 1
    assert set(markers) == set(committed), "markers and Delta commits name different epochs"
    for eid, commit in committed.items():
        assert set(markers[eid]) == set(partitions) or not partitions, (eid, markers[eid])
        for partition, attempts in markers[eid].items():
            assert attempts == {commit.epoch.attempt}, (eid, partition, attempts)
            del partition
        assert commit.version is not None

    emitted = decide_partitions(items, "committed")
    state: dict[int, dict[str, Any]] = {}
    for p in sorted(emitted):
        for e in emitted[p]:
            k = int(e.row["id"])
            if e.kind in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
                state.pop(k, None)
            else:
                state[k] = normalized(e.row)
    assert state == delta_state(path), "the committed log does not fold to the Delta table"
    return {"changes": changes_, "epochs": len(committed), "partitions": len(partitions)}


class ListSink:
    """A read's sink that keeps every change (thread-safe: a following read runs in a thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changes: list[tuple[RowKind, dict[str, Any], dict[str, Any]]] = []
        self.schemas: list[RowSchema] = []  # what schema_changed was told, in order

    def change(self, kind: RowKind, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        with self._lock:
            self._changes.append((kind, dict(row), dict(meta)))

    def flush(self) -> None:
        pass

    def schema_changed(self, schema: RowSchema) -> None:
        with self._lock:
            self.schemas.append(schema)

    @property
    def changes(self) -> list[tuple[RowKind, dict[str, Any], dict[str, Any]]]:
        with self._lock:
            return list(self._changes)


def log_read_request(
    stored: StoredTable | StoredTableOn,
    level: str,
    *,
    follow: bool = False,
    timeout_s: float = 15.0,
) -> ReadRequest:
    """``logstore read TABLE --mode log --consistency LEVEL --from earliest -o jsonl``, checked as
    the CLI checks it (the consumer engine)."""
    return build_request(
        stored, mode="log", engine="consumer", output=OutputSpec("jsonl"), consistent=False,
        consistency=level, changelog="all-kinds", start="earliest", follow=follow, limit=None,
        checkpoint=None, as_of=None, changes=False, bootstrap=None, client_properties={},
        timeout_s=timeout_s,
    )  # fmt: skip


def fold_changes(
    emitted: Iterable[tuple[RowKind, Mapping[str, Any], Mapping[str, Any]]],
) -> dict[int, dict[str, Any]]:
    """A read's output folded by key (retractions are changes like any other)."""
    state: dict[int, dict[str, Any]] = {}
    for kind, row, _ in emitted:
        if kind in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
            state.pop(int(row["id"]), None)
        else:
            state[int(row["id"])] = normalized(row)
    return state


def assert_offsets_once_in_order(
    emitted: Iterable[tuple[RowKind, Mapping[str, Any], Mapping[str, Any]]],
) -> None:
    """Each partition's records came out once each, in offset order (a read with no retractions:
    ``committed``)."""
    last: dict[int, int | MessagePosition] = {}
    for _, _, meta in emitted:
        partition, offset = meta["partition"], meta["offset"]
        # a Pulsar read shows message ids ("L:E:B"): ordered, not dense, compared as Pulsar does
        at = MessagePosition.parse(offset) if isinstance(offset, str) else offset
        assert partition not in last or at > last[partition], (  # type: ignore[operator]
            f"partition {partition}: {offset} after {last}"
        )
        last[partition] = at


def assert_log_reads_equal_delta(
    warehouse: Path | Storage, name: str, *, admin_url: str | None = None
) -> dict[str, int]:
    """Read the table's whole log as ``logstore read --mode log`` does (``read_with_consumer``),
    at the ``committed`` and at the ``eventual`` level: each, folded by key, equals the Delta table
    read by delta-rs; the committed read emits each record once, in offset order; and ``verify``
    (its Python API) finds the log equal to Delta. Returns the rows and retractions each read
    emitted. A table's log on Pulsar is read as the CLI reads it, through ``admin_url`` (its
    ``--pulsar-admin-url``)."""
    stored: StoredTable | StoredTableOn = (
        load_table(warehouse, name)
        if isinstance(warehouse, Path)
        else load_table_on(warehouse, name)
    )
    assert stored.spec.log_store is not None
    log = stored.spec.log_store
    conf = SourceConf(log.address, {}, log.topic, timeout_s=15.0, system=log.system,
                      admin_url=admin_url)  # fmt: skip
    source: LogSource | PulsarLogSource
    unknown_start = None
    if log.system == "pulsar":  # as cli/verify.py picks the source
        assert admin_url is not None, "a Pulsar table's log is read through its admin URL"
        source, unknown_start = PulsarLogSource(conf, RowSchema.of(stored.spec)), UNKNOWN_START
    else:
        source = LogSource(conf, RowSchema.of(stored.spec))
    with source:
        verified = verify_table(stored, source, unknown_start=unknown_start)
    expected = delta_state(location(stored))
    assert verified.equal, verified.to_json()
    assert verified.diff is not None and verified.diff.delta_rows == len(expected), verified
    counts: dict[str, int] = {}
    for level in ("committed", "eventual"):
        sink = ListSink()
        req = dataclasses.replace(log_read_request(stored, level), admin_url=admin_url)
        summary = read_with_consumer(req, sink)
        emitted = sink.changes
        assert fold_changes(emitted) == expected, f"the {level} read does not fold to Delta"
        assert summary.rows == len(emitted) and summary.pending_epochs == 0, summary
        if level == "committed":
            assert summary.retractions == 0, summary
            assert_offsets_once_in_order(emitted)
        counts[f"{level}_rows"], counts[f"{level}_retractions"] = len(emitted), summary.retractions
    return counts


def assert_stores_agree(
    warehouse: Path, name: str, expected: Mapping[int, Mapping[str, Any]], *, cwd: Path,
    engines: Iterable[Sequence[str]] = ((),),
) -> dict[str, int]:  # fmt: skip
    """After a job that faults hit: the Delta table equals ``expected`` (the source folded by key);
    the protocol holds; the log reads (the API's, and ``logstore read --mode log --consistent``
    with each of ``engines``' options) equal Delta; ``logstore verify`` exits 0. Returns the
    counts of ``check_protocol`` and ``assert_log_reads_equal_delta``."""
    stored = load_table(warehouse, name)
    assert stored.spec.log_store is not None
    log = stored.spec.log_store
    want = {k: normalized(v) for k, v in expected.items()}
    assert delta_state(stored.ref.path) == want
    counts = check_protocol(stored.spec, stored.ref.path, read_log(log.address, log.topic))
    counts |= assert_log_reads_equal_delta(warehouse, name)
    for engine in engines:
        read = jobrun.cli(cwd, warehouse, "read", name, "--mode", "log", "--consistent",
                          "--from", "earliest", "--output", "jsonl", *engine)  # fmt: skip
        assert read.returncode == 0 and "Traceback" not in read.stderr, read.stderr
        state: dict[int, dict[str, Any]] = {}
        for line in read.stdout.splitlines():
            change = json.loads(line, parse_float=Decimal)
            key = int(change["row"]["id"])
            if change["kind"] in ("-U", "-D"):
                state.pop(key, None)
            else:
                state[key] = normalized(change["row"])
        assert state == want, f"logstore read --mode log --consistent {engine} differs from Delta"
    verify = jobrun.cli(cwd, warehouse, "verify", name)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    return counts


def plain_debezium_fold(log: list[Any], *, tombstones: bool = False) -> dict[int, dict[str, Any]]:
    """What a plain debezium-json consumer (Flink's ``'format' = 'debezium-json'``) folds the
    topic to: headers ignored, records with a null value skipped, ``c`` upserts ``after``, ``d``
    deletes ``before``'s key. ``tombstones``: as a consumer of Kafka's upsert meaning (a record
    with a key and a null value deletes the key) reads it instead."""
    state: dict[int, dict[str, Any]] = {}
    for r in log:
        if r.value is None:
            if tombstones and r.key is not None:
                state.pop(int(json.loads(r.key)["id"]), None)
            continue
        body = json.loads(r.value, parse_float=Decimal)
        assert set(body) == {"before", "after", "op"}, body
        if body["op"] == "c":
            state[int(body["after"]["id"])] = normalized(body["after"])
        else:
            assert body["op"] == "d" and body["after"] is None, body
            state.pop(int(body["before"]["id"]), None)
    return state
