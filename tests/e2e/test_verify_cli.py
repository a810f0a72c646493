"""``logstore verify`` as a script calls it: a table whose Delta commits hold epoch metadata
(written with delta-rs, no JVM) and whose topic on the real broker holds the epochs' records and
markers; equal (exit 0), a forged epoch (exit 1), markers not published (exit 1), a missing table
and a table without a log store."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from logstore_cli.errors import EXIT_INVALID_INPUT, TableNotFoundError
from logstore_cli.logformat.wire import EpochId
from tests.deltalog import write_table
from tests.e2e.cli_support import keyed_table, run_cli

_run = run_cli


def test_verify_exits_0_when_equal_and_1_with_a_forged_epoch(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name)
    try:
        rows = [{"id": i, "name": f"n{i}"} for i in range(50)]
        writer.epoch(EpochId("w-e2e", 0, "a-0"), rows[:30])
        version = writer.epoch(EpochId("w-e2e", 1, "a-1"), rows[30:])

        t0 = time.monotonic()
        result = _run("verify", "db.orders", "--json", cwd=tmp_path)
        took = time.monotonic() - t0
        assert result.returncode == 0, result.stderr
        d = json.loads(result.stdout)
        assert d["equal"] is True and d["table"] == "db.orders" and d["delta_version"] == version
        assert d["epoch"] == {"writer": "w-e2e", "epoch": 1, "attempt": "a-1"}
        assert d["log"]["records"] == 50 and d["log"]["markers"] == 4
        assert d["log"]["partitions"] == 2 and d["delta"]["rows"] == 50
        assert sum(d["log"]["end_offsets"].values()) == 54
        assert [d[k]["count"] for k in ("missing", "extra", "different")] == [0, 0, 0]
        assert result.stderr == ""  # --json: no success line
        print(f"verify --json (a process, 50 rows): {took:.2f} s")

        people = _run("verify", "db.orders", cwd=tmp_path)
        assert people.returncode == 0, people.stderr
        assert "equal" in people.stdout and "w-e2e" in people.stdout
        assert f"the committed log equals the Delta table at version {version}" in people.stderr

        # a writer that never committed to Delta, whose markers claim the last version: Delta
        # does not confirm them, so nothing of it is compared, and they are the reason (exit 1)
        forged = EpochId("intruder", 0, "x")
        writer.records(forged, [{"id": 7, "name": "forged"}, {"id": 1000, "name": "new"}])
        writer.markers(forged, version)
        result = _run("verify", "db.orders", "--json", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        d = json.loads(result.stdout)
        assert d["equal"] is False
        assert [d[k]["count"] for k in ("missing", "extra", "different")] == [0, 0, 0]
        assert d["log"]["unconfirmed"] == {"markers": 2, "records": 2}
        claim = (
            f"epoch 0 of writer intruder attempt x as Delta version {version}, which holds epoch 1 "
            "of writer w-e2e attempt a-1"
        )
        assert d["reason"].startswith("2 commit markers in topic ") and claim in d["reason"]
        assert "ACLs" in d["hint"]
        assert "error: 2 commit markers in topic " in result.stderr

        people = _run("verify", "db.orders", cwd=tmp_path)
        assert people.returncode == 1
        assert claim in " ".join(people.stderr.split()), people.stderr
    finally:
        writer.close()


def test_markers_not_published_exit_1_with_the_reason(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name)
    try:
        eid = EpochId("w-crash", 0, "a-0")
        rows = [{"id": i, "name": "x"} for i in range(10)]
        writer.records(eid, rows)
        version = writer.commit(eid, rows)  # and the job died before its markers
        result = _run("verify", "db.orders", "--json", cwd=tmp_path)
        assert result.returncode == 1
        d = json.loads(result.stdout)
        reason = (
            f"epoch 0 of writer w-crash committed as Delta version {version} but its commit "
            "markers are not in partitions [0, 1]: run the ingest job again (same "
            "--job/--checkpoint) to publish them"
        )
        assert d["equal"] is False and d["reason"] == reason and d["missing"] is None
        assert f"error: {reason}" in result.stderr

        writer.markers(eid, version)  # what the next run of the job does first
        assert _run("verify", "db.orders", "--json", cwd=tmp_path).returncode == 0
    finally:
        writer.close()


def test_a_missing_table_and_a_table_without_a_log(tmp_path: Path) -> None:
    write_table(tmp_path / "wh", "CREATE TABLE db.orders (id BIGINT) USING delta")
    result = _run("verify", "db.ordrs", "--json", cwd=tmp_path)
    assert result.returncode == TableNotFoundError.exit_code == 1
    assert "error: table 'db.ordrs' not found" in result.stderr and "db.orders" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr

    result = _run("verify", "db.orders", "--json", cwd=tmp_path)
    assert result.returncode == EXIT_INVALID_INPUT
    assert "error: table db.orders has no log store to verify" in result.stderr


def test_verify_starts_no_spark(tmp_path: Path, kafka_bootstrap: str, topic_name: str) -> None:
    writer = keyed_table(tmp_path, kafka_bootstrap, topic_name)
    try:
        writer.epoch(EpochId("w", 0, "a"), [{"id": 1, "name": "x"}])
    finally:
        writer.close()
    code = (
        "import sys\n"
        "from logstore_cli.cli.app import run\n"
        f"rc = run(['verify', 'db.orders', '--json', '--warehouse', {str(tmp_path / 'wh')!r}])\n"
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=tmp_path)  # fmt: skip
    assert proc.stderr.strip().splitlines()[-1] == "0 []"
    assert json.loads(proc.stdout)["equal"] is True
