"""``logstore history``: each Delta commit named for what it was, from a hand-written Delta log (no
JVM), through the catalog function and the command (CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logstore_cli.catalog.history import read_history
from logstore_cli.cli import app as app_module
from logstore_cli.logformat.wire import (
    EpochId,
    Fence,
    commit_metadata,
    fence_metadata,
    fenced_txn_version,
    unfence_metadata,
)
from tests.deltalog import write_table

DDL = """CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('log.system' = 'kafka', 'kafka.topic' = 't_log', 'kafka.bootstrap.servers' = 'b:9092');"""
T0 = 1_764_000_000_000


def write(table: Path, *actions: dict[str, Any]) -> int:
    log = table / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json")) + 1
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return version


def add(path: str, data_change: bool) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {}, "size": 1, "modificationTime": T0,
                    "dataChange": data_change}}  # fmt: skip


def info(operation: str, **extra: Any) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": T0, "operation": operation, **extra}}


def epoch(table: Path, writer: str, n: int, rows: int) -> int:
    meta = commit_metadata(EpochId(writer, n, f"a-{n}"), {0: 10 * n, 1: 5 * n})
    return write(
        table,
        info("MERGE", userMetadata=meta, operationMetrics={"numSourceRows": str(rows)}),
        {"txn": {"appId": writer, "version": n}},
    )


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_table(tmp_path, DDL)


def test_each_commit_is_named_for_what_it_was_newest_first(table: Path) -> None:
    e0 = epoch(table, "w-1", 0, 120)
    removed = {"remove": {"path": "a.parquet", "dataChange": True}}
    gdpr = write(table, info("DELETE", engineInfo="Apache-Spark/4.0.1"), removed)
    compacted = write(table, info("OPTIMIZE"), add("b.parquet", False),
                      {"remove": {"path": "a.parquet", "dataChange": False}})  # fmt: skip
    props = write(table, info("SET TBLPROPERTIES"))
    later = write(table, info("WRITE"), add("c.parquet", True))
    carry = write(
        table,
        info("WRITE", userMetadata=commit_metadata(EpochId("delta-outside", gdpr, "c"), {0: 11})),
        {"txn": {"appId": "delta-outside", "version": gdpr}},
    )
    found = read_history(table, "db.t").to_json()
    assert found["total"] == found["latest_version"] + 1 == carry + 1
    kinds = [(c["version"], c["kind"], c["operation"]) for c in found["commits"]]
    assert kinds == [
        (carry, "carry", "WRITE"), (later, "outside", "WRITE"), (props, "table", "SET TBLPROPERTIES"),
        (compacted, "maintenance", "OPTIMIZE"), (gdpr, "outside", "DELETE"), (e0, "epoch", "MERGE"),
        (0, "table", "CREATE TABLE"),
    ]  # fmt: skip
    by_version = {c["version"]: c for c in found["commits"]}
    assert by_version[e0]["writer"] == "w-1" and by_version[e0]["attempt"] == "a-0"
    assert by_version[e0]["rows"] == 120 and by_version[e0]["offsets"] == {"0": 0, "1": 0}
    assert by_version[gdpr]["carried"] is True  # the carry covers it
    assert by_version[later]["carried"] is False  # committed after the carry's version
    assert by_version[gdpr]["engine"] == "Apache-Spark/4.0.1"
    assert read_history(table, "db.t", limit=2).to_json()["commits"][1]["version"] == later


def test_broken_epoch_metadata_is_shown_not_fatal(table: Path) -> None:
    bad = write(table, info("MERGE", userMetadata='{"logstore": {"writer": 3}}'))
    (entry,) = [c for c in read_history(table, "db.t").to_json()["commits"] if c["version"] == bad]
    assert entry["kind"] == "table" and "writer" in entry["problem"]


def test_an_epoch_on_pulsar_shows_its_message_ids(table: Path) -> None:
    """A Pulsar table's epoch records message ids (design §7.1): shown, not taken for broken."""
    from logstore_cli.cli.history import _what

    meta = commit_metadata(EpochId("w-p", 0, "a-p"), {0: "11:7:-1", 1: "12:0:-1"})
    version = write(
        table, info("MERGE", userMetadata=meta), {"txn": {"appId": "w-p", "version": 0}}
    )
    (entry,) = [
        c for c in read_history(table, "db.t").to_json()["commits"] if c["version"] == version
    ]
    assert entry["kind"] == "epoch" and entry["offsets"] == {"0": "11:7:-1", "1": "12:0:-1"}
    assert _what(entry).endswith("; log ends 0=11:7:-1 1=12:0:-1")


def test_the_command_prints_a_table_or_json_and_checks_its_limit(
    table: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    epoch(table, "w-1", 0, 7)
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(table.parents[1]))

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            app_module.main(list(argv))
        out, err = capsys.readouterr()
        return int(ended.value.code or 0), out, err

    code, out, _ = run("history", "db.t", "--limit", "1")
    assert code == 0 and "w-1 epoch 0 attempt a-0" in out and "1 of 2 commits" in out
    code, out, _ = run("history", "db.t", "--json")
    assert code == 0 and [c["kind"] for c in json.loads(out)["commits"]] == ["epoch", "table"]
    code, _, err = run("history", "db.t", "--limit", "0")
    assert code == 2 and "--limit must be 1 or more" in err
    code, _, err = run("history", "db.nope")
    assert code == 1 and "not found" in err


def test_a_fence_and_its_taking_down_are_named_fence_not_outside_or_maintenance(
    table: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    epoch(table, "w-1", 0, 7)
    meta = fence_metadata(Fence(3, "w-2", "w-1", "thief"))
    fenced = write(  # an empty append: Delta adds an empty file with dataChange true
        table, info("WRITE", userMetadata=meta), add("empty.parquet", True),
        {"txn": {"appId": "w-1", "version": fenced_txn_version(0)}},
    )  # fmt: skip
    down = write(
        table,
        info("Manual Update", userMetadata=unfence_metadata("w-1", 0)),
        {"txn": {"appId": "w-1", "version": 0}},
    )
    by_version = {c["version"]: c for c in read_history(table, "db.t").to_json()["commits"]}
    assert by_version[fenced]["kind"] == by_version[down]["kind"] == "fence"
    assert by_version[fenced]["fence"] == {"token": 3, "by": "w-2", "fenced": "w-1", "job": "thief"}
    assert by_version[down]["fence"] == {"unfenced": "w-1", "after": 0}
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(table.parents[1]))
    with pytest.raises(SystemExit):
        app_module.main(["history", "db.t"])
    out = capsys.readouterr().out
    assert "w-1 fenced by w-2 (job thief, token 3)" in out
    assert "w-1 took its fence down (last epoch 0)" in out
