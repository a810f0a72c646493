"""What a read does, decided before reading: ``read/plan.py`` and ``read/service.build_request``."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.epochs import EpochCommit, usable_snapshots
from logstore_cli.catalog.tables import StoredTable, StoredTableOn
from logstore_cli.catalog.warehouse import DeltaState, TableRef
from logstore_cli.ddl import parse_ddl
from logstore_cli.errors import InvalidInputError, RecordsDeletedError
from logstore_cli.logformat.consistency import Emission
from logstore_cli.logformat.wire import ChangeRecord, EpochId, RowKind, RowSchema
from logstore_cli.model import TableSpec
from logstore_cli.read import plan
from logstore_cli.read.service import build_request, warehouse_uri

DDL = """CREATE TABLE db.orders (id BIGINT, name STRING, price DECIMAL(10,2), PRIMARY KEY (id))
USING delta TBLPROPERTIES ('log-store.enabled'='true', 'log-store.address'='h:9092',
'log-store.topic'='orders'{extra})"""


def _spec(extra: str = "") -> TableSpec:
    return parse_ddl(DDL.format(extra=extra))[0]


def _stored(spec: TableSpec) -> StoredTable:
    path = Path("/w/db/orders")
    state = DeltaState(path, 3, 1, {}, {}, (), None)
    return StoredTable(TableRef("db", "orders", path), state, spec)


def _request(spec: TableSpec | None = None, **given: Any) -> Any:
    args: dict[str, Any] = {
        "mode": None, "engine": "auto", "output": plan.OutputSpec("jsonl"), "consistent": False,
        "consistency": None, "changelog": "all-kinds", "start": None, "follow": False,
        "limit": None, "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
        "client_properties": {}, "timeout_s": 5.0,
    }  # fmt: skip
    args.update(given)
    return build_request(_stored(spec or _spec()), **args)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", plan.Start("earliest")),
        ("latest", plan.Start("latest")),
        ("timestamp:1700000000000", plan.Start("timestamp", timestamp_ms=1700000000000)),
        ("snapshot", plan.Start("snapshot")),
        ("snapshot:12", plan.Start("snapshot", version=12)),
        (" snapshot:0 ", plan.Start("snapshot", version=0)),
    ],
)
def test_start_positions_parse(text: str, expected: plan.Start) -> None:
    assert plan.parse_start(text) == expected
    assert plan.parse_start(expected.describe()) == expected


@pytest.mark.parametrize("text", ["", "first", "timestamp:", "timestamp:-1", "snapshot:v3",
                                  "snapshot:01", "timestamp:1e9", "offset:5"])  # fmt: skip
def test_a_bad_start_position_says_which_ones_exist(text: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        plan.parse_start(text)
    assert "snapshot[:<Delta version>]" in (err.value.hint or "")


def test_a_bounded_read_starts_at_earliest_and_a_following_one_at_the_tables_startup_mode() -> None:
    log = _spec().log_store
    assert log is not None
    assert plan.default_start(log, follow=False) == plan.Start("earliest")
    assert plan.default_start(log, follow=True) == plan.Start("latest")
    stamped = _spec(", 'scan.startup.mode'='timestamp', 'scan.startup.timestamp-millis'='5'")
    assert stamped.log_store is not None
    assert plan.default_start(stamped.log_store, follow=True) == plan.Start("timestamp", 5)


@pytest.mark.parametrize(
    ("configured", "consistent", "given", "level"),
    [
        ("none", True, None, "committed"),  # strengthened
        ("eventual", True, None, "eventual"),
        ("committed", True, None, "committed"),
        ("none", False, None, "none"),
        ("eventual", False, None, "eventual"),
        ("committed", False, "none", "none"),
    ],
)
def test_the_read_level(configured: str, consistent: bool, given: str | None, level: str) -> None:
    log = _spec().log_store
    assert log is not None
    log = replace(log, consistency=configured)
    assert plan.resolve_level(log, consistent=consistent, consistency=given) == level


def test_consistent_and_consistency_together_are_refused() -> None:
    log = _spec().log_store
    assert log is not None
    with pytest.raises(InvalidInputError, match="cannot be combined"):
        plan.resolve_level(log, consistent=True, consistency="none")
    with pytest.raises(InvalidInputError, match="committed, eventual, none"):
        plan.resolve_level(log, consistent=False, consistency="exactly-once")


def test_append_only_is_refused_with_eventual_and_keeps_only_inserts() -> None:
    with pytest.raises(InvalidInputError, match="append-only cannot be combined") as err:
        plan.check_changelog("append-only", "eventual")
    assert "retracts" in (err.value.hint or "")
    assert plan.check_changelog("append-only", "committed") == "append-only"
    kept = [k for k in RowKind if k is not RowKind.COMMIT if plan.keeps(k, "append-only")]
    assert kept == [RowKind.INSERT]
    assert all(plan.keeps(k, "all-kinds") for k in RowKind)
    with pytest.raises(InvalidInputError, match="all-kinds, append-only"):
        plan.check_changelog("upsert", "none")


@pytest.mark.parametrize(
    ("text", "terminal", "expected"),
    [
        (None, True, plan.OutputSpec("table")),
        (None, False, plan.OutputSpec("jsonl")),
        ("jsonl", True, plan.OutputSpec("jsonl")),
        ("out/orders.parquet", True, plan.OutputSpec("parquet", "out/orders.parquet")),
        ("out/orders", True, plan.OutputSpec("delta", "out/orders")),
        ("parquet:out/x", True, plan.OutputSpec("parquet", "out/x")),
        ("delta:~/x", True, plan.OutputSpec("delta", "~/x")),  # as typed: never expanded
        ("c:/data/x", True, plan.OutputSpec("delta", "c:/data/x")),
        ("jsonl:out.jsonl", True, plan.OutputSpec("jsonl", "out.jsonl")),
        ("s3a://bucket/x", True, plan.OutputSpec("delta", "s3a://bucket/x")),
        ("./csv:x", True, plan.OutputSpec("delta", "./csv:x")),
    ],
)
def test_outputs(text: str | None, terminal: bool, expected: plan.OutputSpec) -> None:
    assert plan.parse_output(text, stdout_is_terminal=terminal) == expected


@pytest.mark.parametrize("text", ["delta:", "parquet:  ", "x\x00y"])
def test_an_output_without_a_usable_path_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        plan.parse_output(text, stdout_is_terminal=False)


@pytest.mark.parametrize("text", ["csv:out.csv", "json:out.json", "table:x", "JSONL:x"])
def test_an_unknown_output_kind_is_refused_with_the_valid_ones(text: str) -> None:
    # Taken as a Delta path, 'csv:out.csv' reached Spark as a URI scheme: a Java stack trace.
    with pytest.raises(InvalidInputError, match="is not an output kind") as caught:
        plan.parse_output(text, stdout_is_terminal=False)
    assert caught.value.hint is not None and "jsonl:PATH, delta:PATH" in caught.value.hint


def test_a_jsonl_file_is_streamed_by_the_consumer_and_may_follow() -> None:
    out = plan.OutputSpec("jsonl", "out.jsonl")
    assert out.streamed and not out.to_stdout
    req = _request(mode="log", output=out, follow=True)
    assert (req.engine, req.follow, req.output) == ("consumer", True, out)
    assert _request(mode="log", output=out, engine="spark").engine == "spark"
    with pytest.raises(InvalidInputError, match="Delta output is for bounded reads"):
        _request(mode="log", output=plan.OutputSpec("delta", "out"), follow=True)


def _commit(writer: str, epoch: int, version: int, offsets: dict[int, int]) -> EpochCommit:
    return EpochCommit(EpochId(writer, epoch, f"a{version}"), version, offsets, None)


def test_a_hybrid_start_continues_at_the_snapshots_offsets_and_skips_every_writers_epochs() -> None:
    commits = [
        _commit("w1", 0, 1, {0: 3, 1: 2}),
        _commit("w1", 1, 2, {0: 6, 1: 5}),
        _commit("w2", 0, 4, {0: 9, 1: 8}),  # a new checkpoint: a new writer
        _commit("w2", 1, 5, {0: 12, 1: 11}),
    ]
    at = plan.hybrid_start(reversed(commits), 4)
    assert (at.version, dict(at.offsets)) == (4, {0: 9, 1: 8})
    assert dict(at.committed_through) == {"w1": 1, "w2": 0}  # not w2's epoch 1 (version 5)
    newest = plan.hybrid_start(commits, None)
    assert newest.version == 5 and dict(newest.committed_through) == {"w1": 1, "w2": 1}


_HISTORY = [
    _commit("w1", 0, 1, {0: 3, 1: 2}),
    _commit("w1", 1, 2, {0: 6, 1: 5}),
    _commit("w2", 0, 4, {0: 9, 1: 8}),
    _commit("w2", 1, 5, {0: 12, 1: 8}),
]


def test_a_snapshot_whose_offsets_retention_deleted_is_refused_naming_the_oldest_that_works() -> (
    None
):
    log_start = {0: 6, 1: 3}  # partition 0 lost offsets 0-5, partition 1 offsets 0-2
    assert [c.version for c in usable_snapshots(_HISTORY, log_start)] == [5, 4, 2]
    assert plan.hybrid_start(_HISTORY, 2, log_start).version == 2  # offsets 6 and 5 are held
    with pytest.raises(RecordsDeletedError) as err:
        plan.hybrid_start(reversed(_HISTORY), 1, log_start)
    assert err.value.exit_code == 1
    assert "Delta version 1" in err.value.message
    assert "partition 0 offset 3 (the log now starts at 6)" in err.value.message
    assert "partition 1 offset 2 (the log now starts at 3)" in err.value.message
    assert "--from snapshot:2" in (err.value.hint or "")
    assert plan.hybrid_start(_HISTORY, 1).version == 1  # without the log's offsets: not checked


def test_the_default_snapshot_is_the_newest_whose_offsets_are_still_in_the_log() -> None:
    # The rule is per snapshot, not "the newest": offsets recorded need not grow (a topic deleted
    # and created again between epochs), and then an older snapshot may be the one that works.
    history = [*_HISTORY[:3], _commit("w2", 1, 5, {0: 7, 1: 8})]
    assert plan.hybrid_start(history, None, {0: 8, 1: 0}).version == 4
    assert plan.hybrid_start(history, None, {0: 0, 1: 0}).version == 5
    with pytest.raises(RecordsDeletedError) as err:
        plan.hybrid_start(_HISTORY, None, {0: 13, 1: 0})  # retention deleted every start
    assert "the newest snapshot, Delta version 5" in err.value.message
    assert "partition 0 offset 12 (the log now starts at 13)" in err.value.message
    assert "--mode file" in (err.value.hint or "")


def test_a_hybrid_start_needs_an_epoch_commit() -> None:
    with pytest.raises(InvalidInputError, match="no ingest epoch"):
        plan.hybrid_start([], None)
    with pytest.raises(InvalidInputError, match="version 3 is not an ingest epoch") as err:
        plan.hybrid_start([_commit("w", 0, 2, {0: 1}), _commit("w", 1, 4, {0: 2})], 3)
    assert "4, 2" in (err.value.hint or "")


def test_a_change_line_is_the_wire_row_plus_metadata() -> None:
    schema = RowSchema.of(_spec())
    row = {"id": 42, "name": "Zoë", "price": Decimal("12.5")}
    line = plan.change_json(RowKind.INSERT, row, schema, meta={"partition": 1, "offset": 7})
    assert (
        line == '{"kind":"+I","row":{"id":42,"name":"Zoë","price":12.50},"partition":1,"offset":7}'
    )
    assert json.loads(line)["row"]["name"] == "Zoë"
    deleted = plan.change_json(RowKind.DELETE, {"id": 42}, schema)
    assert json.loads(deleted) == {"kind": "-D", "row": {"id": 42}}


def test_a_retraction_says_so_in_its_metadata() -> None:
    record = ChangeRecord(RowKind.INSERT, {"id": 1}, {"id": 1}, EpochId("w", 3, "a"))
    meta = plan.emission_meta(2, Emission(9, RowKind.DELETE, record))
    assert meta == {"partition": 2, "offset": 9, "writer": "w", "epoch": 3, "retraction": True}
    assert "retraction" not in plan.emission_meta(2, Emission(9, RowKind.INSERT, record))


def test_a_request_for_the_log_resolves_level_start_and_engine() -> None:
    req = _request(mode="log", consistent=True)
    assert (req.mode, req.level, req.engine, req.start) == (
        "log", "committed", "consumer", plan.Start("earliest"),
    )  # fmt: skip
    assert req.bootstrap == "h:9092"
    to_path = _request(mode="log", output=plan.OutputSpec("delta", "out"))
    assert to_path.engine == "spark"
    assert _request(mode="log", follow=True).start == plan.Start("latest")


def test_a_pulsar_tables_log_is_read_by_either_engine() -> None:
    """Issue 23: the Spark engine reads a Pulsar log too (the ``logstore`` data source), where it
    was refused (exit 2)."""
    ddl = DDL.replace("'h:9092'", "'pulsar://h:6650'").format(extra=", 'log-store.type'='pulsar'")
    spec = parse_ddl(ddl)[0]
    assert spec.log_store is not None and spec.log_store.system == "pulsar"
    to_path = _request(spec, mode="log", output=plan.OutputSpec("delta", "out"))
    assert (to_path.engine, to_path.bootstrap) == ("spark", "pulsar://h:6650")
    following = _request(spec, mode="log", engine="spark", follow=True)
    assert (following.engine, following.follow) == ("spark", True)
    assert _request(spec, mode="log").engine == "consumer"


def test_the_default_mode_is_the_tables_read_mode() -> None:
    assert _request().mode == "file"
    assert _request(_spec(", 'mixed-format.read.mode'='log'")).mode == "log"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"mode": "file", "follow": True}, "--follow applies to the log"),
        ({"mode": "file", "consistency": "none"}, "--consistency applies to the log"),
        ({"mode": "file", "start": "earliest"}, "--from applies to the log"),
        ({"mode": "file", "engine": "consumer"}, "--engine consumer reads the log"),
        ({"mode": "log", "changes": True}, "--as-of and --changes read the Delta table"),
        ({"mode": "log", "as_of": "3"}, "--as-of and --changes read the Delta table"),
        ({"mode": "log", "engine": "consumer", "output": plan.OutputSpec("parquet", "p")},
         "the consumer engine does not"),
        ({"mode": "log", "changelog": "append-only", "consistency": "eventual"}, "append-only"),
        ({"mode": "stream"}, "--mode must be one of file, log"),
        ({"engine": "flink"}, "--engine must be one of auto, spark, consumer"),
        ({"limit": 0}, "--limit must be at least 1"),
        ({"mode": "log", "checkpoint": " "}, "--checkpoint is empty"),
        ({"mode": "log", "checkpoint": "ck", "engine": "spark"}, "needs --follow"),
        ({"mode": "log", "follow": True, "output": plan.OutputSpec("delta", "out")},
         "--follow writes changes as they come"),
    ],
)  # fmt: skip
def test_flags_that_do_not_go_together_are_refused(given: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        _request(**given)


def test_an_existing_output_path_is_refused_before_anything_starts(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    for path in (target, tmp_path / "link"):
        with pytest.raises(InvalidInputError, match="already exists"):
            _request(mode="log", output=plan.OutputSpec("delta", str(path)))
    fresh = plan.OutputSpec("delta", str(tmp_path / "new"))
    assert _request(mode="log", output=fresh).engine == "spark"


def test_a_log_read_of_a_table_without_a_log_store_says_how_to_read_it() -> None:
    spec = parse_ddl("CREATE TABLE db.orders (id BIGINT) USING delta")[0]
    with pytest.raises(InvalidInputError, match="has no log store") as err:
        _request(spec, mode="log")
    assert "--mode file" in (err.value.hint or "")
    assert _request(spec).mode == "file"


def test_change_lines_print_what_change_json_prints() -> None:
    schema = RowSchema.of(_spec())
    lines = plan.ChangeLines(schema)
    record = ChangeRecord(RowKind.INSERT, {"id": 1}, {"id": 1}, EpochId('w"x', 3, "a"))
    cases = [
        (RowKind.INSERT, {"id": 42, "name": "Zoë \"q\"", "price": Decimal("12.5")}, {}),
        (RowKind.UPDATE_BEFORE, {"id": 1, "name": None, "price": None},
         plan.emission_meta(2, Emission(9, RowKind.DELETE, record))),
        (RowKind.DELETE, {"id": 7}, {"partition": 0, "offset": 1}),
        (RowKind.INSERT, {"id": 5, "name": "v", "price": Decimal("1.00")}, {"version": 3}),
    ]  # fmt: skip
    for kind, row, meta in cases:
        assert lines.line(kind, row, meta) == plan.change_json(kind, row, schema, meta=meta)


@pytest.mark.parametrize(
    "as_of", ["3", "0", "2026-11-21", "2026-11-21 10:30:00", "2026-11-21T10:30:00Z", " 2026"]
)
def test_a_version_or_a_timestamp_passes_to_spark(as_of: str) -> None:
    assert _request(mode="file", as_of=as_of).as_of == as_of


@pytest.mark.parametrize("as_of", ["banana", "yesterday", "v3", "now()"])
def test_an_as_of_that_is_neither_is_refused_before_spark_starts(as_of: str) -> None:
    with pytest.raises(InvalidInputError, match="neither a Delta version nor a timestamp") as info:
        _request(mode="file", as_of=as_of)
    assert repr(as_of) in str(info.value) and "2026-11-21" in (info.value.hint or "")


def test_file_mode_reads_with_delta_rs_unless_spark_is_asked_for() -> None:
    assert _request(mode="file").engine == "delta-rs"
    assert _request(mode="file", engine="delta-rs").engine == "delta-rs"
    assert _request(mode="file", engine="spark").engine == "spark"
    to_path = _request(mode="file", output=plan.OutputSpec("parquet", "fresh.parquet"))
    assert to_path.engine == "delta-rs"
    with pytest.raises(InvalidInputError, match="--engine delta-rs reads the Delta table"):
        _request(mode="log", engine="delta-rs")
    with pytest.raises(InvalidInputError, match=r"--engine must be one of .*delta-rs"):
        _request(engine="duckdb")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", plan.AsOf(version=3)),
        (" 0 ", plan.AsOf(version=0)),
        ("2026-11-21T10:30:00Z", plan.AsOf(timestamp_ms=1_795_257_000_000)),
        ("2026-11-21T11:30:00.250+01:00", plan.AsOf(timestamp_ms=1_795_257_000_250)),
        ("2026-11-21 10:30:00+00:00", plan.AsOf(timestamp_ms=1_795_257_000_000)),
    ],
)
def test_as_of_is_a_version_or_a_time(text: str, expected: plan.AsOf) -> None:
    assert plan.parse_as_of(text) == expected


def test_an_as_of_without_a_zone_is_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert plan.parse_as_of("2026-11-21 19:30").timestamp_ms == 1_795_257_000_000
        assert plan.parse_as_of("2026-11-21") == plan.parse_as_of("2026-11-21T00:00:00+09:00")
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("text", ["banana", "2026-13-01", "3.5", "-1", "yesterday"])
def test_an_as_of_that_is_neither_is_refused_before_reading(text: str) -> None:
    with pytest.raises(InvalidInputError, match="neither a Delta version nor a timestamp"):
        _request(mode="file", as_of=text)


def test_a_delta_or_parquet_output_among_the_tables_is_refused(tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    table = warehouse / "db" / "orders"
    (table / "_delta_log").mkdir(parents=True)
    elsewhere = tmp_path / "other"
    (elsewhere / "_delta_log").mkdir(parents=True)
    stored = StoredTable(TableRef("db", "orders", table), _stored(_spec()).state, _spec())
    args: dict[str, Any] = {
        "mode": "file", "engine": "auto", "consistent": False, "consistency": None,
        "changelog": "all-kinds", "start": None, "follow": False, "limit": None,
        "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
        "client_properties": {}, "timeout_s": 5.0,
    }  # fmt: skip
    for path, why in [
        (warehouse / "db" / "copy", "inside the warehouse"),
        (table / "copy", "inside the warehouse"),
        (elsewhere / "part", "a directory holding a _delta_log"),
    ]:
        for kind in ("delta", "parquet"):
            out = plan.OutputSpec(kind, str(path))  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match=why):
                build_request(stored, output=out, **args)
    fine = plan.OutputSpec("delta", str(tmp_path / "copy"))
    assert build_request(stored, output=fine, **args).output == fine


def test_change_lines_show_a_row_decoded_before_a_column_was_added_with_null() -> None:
    from logstore_cli.logformat.errors import WireFormatError
    from logstore_cli.read.plan import ChangeLines

    schema = RowSchema((("id", "bigint"), ("name", "string"), ("n", "int")), ("id",))
    lines = ChangeLines(schema)
    line = lines.line(RowKind.INSERT, {"id": 1, "name": "a"}, {"offset": 3})
    assert line == '{"kind":"+I","row":{"id":1,"name":"a","n":null},"offset":3}'
    with pytest.raises(WireFormatError):  # a column the table lacks is still refused
        lines.line(RowKind.INSERT, {"id": 1, "zzz": 2}, {})


def _stored_on(tmp_path: Path) -> StoredTableOn:
    from logstore_cli.catalog.warehouse import StoredTable as TableOnStorage
    from logstore_cli.storage.local import LocalStorage

    storage = LocalStorage(tmp_path / "w").child("db").child("orders")
    state = _stored(_spec()).state._replace(path=storage.uri)
    return StoredTableOn(TableOnStorage("db", "orders", storage), state, _spec())


_ARGS: dict[str, Any] = {
    "mode": "log", "engine": "auto", "output": plan.OutputSpec("jsonl"), "consistent": False,
    "consistency": None, "changelog": "all-kinds", "start": None, "follow": False,
    "limit": None, "checkpoint": None, "as_of": None, "changes": False, "bootstrap": None,
    "client_properties": {}, "timeout_s": 5.0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "mode"),
    [({"mode": "file", "engine": "spark"}, "file"), ({"engine": "spark"}, "log"),
     ({"output": plan.OutputSpec("parquet", "/x/out")}, "log"),
     ({"mode": "file", "engine": "spark", "changes": True, "as_of": "1"}, "file")],
    ids=["file with spark", "spark engine", "spark for a path", "changes with spark"],
)  # fmt: skip
def test_a_read_on_object_storage_runs_spark_on_the_tables_uri(
    tmp_path: Path, given: dict[str, Any], mode: str
) -> None:
    stored = _stored_on(tmp_path)
    req = build_request(stored, **_ARGS)  # the consumer engine for stdout
    assert (req.mode, req.engine, req.location) == ("log", "consumer", stored.ref.storage)
    req = build_request(stored, **{**_ARGS, **given})
    assert (req.mode, req.engine, req.location) == (mode, "spark", stored.ref.storage)
    assert req.spark_path == str(tmp_path / "w" / "db" / "orders")  # a LocalStorage's root
    assert req.warehouse == str(tmp_path / "w")  # the data source's "warehouse" option
    local = build_request(_stored(_spec()), **{**_ARGS, **given})
    assert (local.spark_path, local.warehouse) == ("/w/db/orders", "/w")


@pytest.mark.parametrize("remote", [True, False], ids=["remote table", "local table"])
@pytest.mark.parametrize("uri", ["s3://b/out", "s3a://b/wh/db/orders2", "hdfs://nn:8020/out"])
def test_a_delta_or_parquet_output_is_a_local_path(tmp_path: Path, remote: bool, uri: str) -> None:
    stored = _stored_on(tmp_path) if remote else _stored(_spec())
    for kind in ("delta", "parquet"):
        with pytest.raises(InvalidInputError, match="a URI: a read writes") as info:
            build_request(stored, **{**_ARGS, "output": plan.OutputSpec(kind, uri)})  # type: ignore[arg-type]
        assert "give a local path" in (info.value.hint or "")


def test_the_warehouse_of_a_remote_tables_uri() -> None:
    assert warehouse_uri("s3://b/lake/wh/shop/orders") == "s3://b/lake/wh"
    assert warehouse_uri("s3://b/shop/orders") == "s3://b"
    assert warehouse_uri("hdfs://nn:8020/wh/shop/orders/") == "hdfs://nn:8020/wh"


@pytest.mark.parametrize(
    "output",
    [plan.OutputSpec("jsonl"), plan.OutputSpec("delta", "/x/copy")],
    ids=["to stdout", "to a delta path"],
)
def test_a_file_read_on_object_storage_runs_delta_rs(tmp_path: Path, output: Any) -> None:
    stored = _stored_on(tmp_path)
    req = build_request(
        stored, mode="file", engine="auto", output=output, consistent=False, consistency=None,
        changelog="all-kinds", start=None, follow=False, limit=None, checkpoint=None,
        as_of="3", changes=False, bootstrap=None, client_properties={}, timeout_s=5.0,
    )  # fmt: skip
    assert (req.mode, req.engine, req.location) == ("file", "delta-rs", stored.ref.storage)


def test_a_remote_tables_output_stays_out_of_local_delta_tables(tmp_path: Path) -> None:
    (tmp_path / "other" / "_delta_log").mkdir(parents=True)  # a Delta table on this disk
    inside = plan.OutputSpec("delta", str(tmp_path / "other" / "copy"))
    with pytest.raises(InvalidInputError, match="would be written among logstore's tables"):
        build_request(_stored_on(tmp_path), **{**_ARGS, "output": inside})
    beside = plan.OutputSpec("parquet", str(tmp_path / "copy.parquet"))
    assert build_request(_stored_on(tmp_path), **{**_ARGS, "output": beside}).engine == "spark"
