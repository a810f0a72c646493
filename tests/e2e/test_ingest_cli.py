"""``logstore ingest`` as a script runs it: exit codes, --json events, the lease, Ctrl-C."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logstore_cli.catalog.epochs import commit_info, latest_epoch_commit
from logstore_cli.kafka.local_broker import free_port
from tests.deltalog import write_table
from tests.e2e.cli_support import create_tables
from tests.integration.jobs.ingest_support import changes, orders_ddl, write_files

pytestmark = pytest.mark.integration


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LOGSTORE_WAREHOUSE": str(tmp / "wh"), "LOGSTORE_KAFKA_TIMEOUT": "5",
            **extra}  # fmt: skip


def engine_of(table: Path, version: int) -> str:
    """The engine that wrote Delta commit ``version`` (its commitInfo's engineInfo)."""
    info = commit_info(table, version) or {}
    return str(info.get("engineInfo", ""))


def _run(tmp: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args], cwd=tmp, env=_env(tmp),
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_json_events_per_epoch_and_exit_0_with_once(tmp_path: Path, kafka_bootstrap: str,
                                                     topic_name: str) -> None:  # fmt: skip
    create_tables(
        tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=2)
    )
    log = changes(300, keys=40, seed=5)
    write_files(tmp_path / "in", [log[:150], log[150:]])
    result = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once", "--json",
                  "--source-option", "maxFilesPerTrigger=1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert sum(e["rows"] for e in epochs) == len(log)
    for e in epochs:
        assert {"epoch", "rows", "quarantined", "delta_version", "offsets"} <= set(e)
        assert set(e["offsets"]) == {"0", "1"} and e["quarantined"] == 0
    assert epochs[1]["delta_version"] == epochs[0]["delta_version"] + 1
    assert events[-1]["event"] == "done" and events[-1]["rows"] == len(log)
    assert "Traceback" not in result.stderr
    # a small local table: delta-rs committed the epochs (--delta-engine auto, the default)
    table = tmp_path / "wh" / "shop" / "orders"
    engines = [engine_of(table, e["delta_version"]) for e in epochs]
    assert all(engine.startswith("delta-rs") for engine in engines), (engines, result.stderr)

    # without --json and without a terminal: nothing on stdout, one plain line per epoch on stderr
    # (and Spark's MERGE commits it when asked)
    write_files(tmp_path / "in", [changes(20, keys=5, seed=6)], start=2)
    plain = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once",
                 "--delta-engine", "spark")  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    newest = latest_epoch_commit(table)
    assert newest is not None and newest.epoch.epoch == 2
    assert engine_of(table, newest.version).startswith("Apache-Spark")
    assert plain.stdout == ""
    lines = [line for line in plain.stderr.splitlines() if line.startswith("epoch ")]
    assert (
        len(lines) == 1 and lines[0].startswith("epoch 2: 20 rows") and "\x1b" not in plain.stderr
    )


def test_a_missing_topic_and_an_unreachable_broker_fail_fast_with_exit_1(tmp_path: Path) -> None:
    port = free_port()
    write_table(tmp_path / "wh", orders_ddl("shop.orders", "t-gone", f"127.0.0.1:{port}"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1, "name": "a", "qty": 1, "price": "1.00"}\n')
    result = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once")
    assert result.returncode == 1, result.stderr
    assert f"127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    # failed before the first epoch (no waiting on the dead broker epoch after epoch)
    assert not [line for line in result.stderr.splitlines() if line.startswith("epoch ")]
    assert sorted(p.name for p in (tmp_path / "wh" / "shop" / "orders" / "_delta_log").glob(
        "*.json")) == [f"{0:020d}.json"]  # fmt: skip


def test_a_missing_topic_is_named(tmp_path: Path, kafka_bootstrap: str, topic_name: str) -> None:
    write_table(tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1, "name": "a", "qty": 1, "price": "1.00"}\n')
    result = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once")
    assert result.returncode == 1, result.stderr
    assert topic_name in result.stderr and "Traceback" not in result.stderr


def test_invalid_input_exits_2_naming_what(tmp_path: Path, kafka_bootstrap: str,
                                           topic_name: str) -> None:  # fmt: skip
    write_table(tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,name,qty,price\n1,a,1,1.00\n")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "a.csv").write_text("id,name,qty,price,kind\n1,a,1,1.00,+I\n")
    cases = [
        (["--op-column", "change"], "change"),  # not in the CSV header
        (["--op-column", "qty"], "qty"),  # a table column
        (["--emit", "everything"], "emit"),
        (["--format", "xml"], "xml"),
        (["--source", "extra"], "kind"),  # a column the table does not have
        (["--source", "missing-dir"], "missing-dir"),
        (["--delta-engine", "rust"], "use one of auto, spark"),
    ]
    for args, named in cases:
        source = [] if "--source" in args else ["--source", "in"]
        result = _run(tmp_path, "ingest", "shop.orders", *source, "--once", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert named in result.stderr and "Traceback" not in result.stderr


def test_a_second_writer_is_refused_and_ctrl_c_stops_after_the_epoch(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    create_tables(
        tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=1)
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "logstore_cli", "ingest", "shop.orders", "--source", "generate",
         "--rate", "200", "--keys", "20", "--trigger", "1", "--job", "demo", "--json"],
        cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert first.stdout is not None
        events = []
        deadline = time.monotonic() + 180
        while not any(e.get("event") == "epoch" for e in events):  # its first epoch committed
            assert time.monotonic() < deadline and first.poll() is None, first.stderr
            events.append(json.loads(first.stdout.readline() or "{}"))
        second = _run(tmp_path, "ingest", "shop.orders", "--source", "generate", "--total", "10",
                      "--once", timeout=120)  # fmt: skip
        assert second.returncode == 1, second.stderr
        assert "demo" in second.stderr and str(first.pid) in second.stderr
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=120)
        assert first.returncode == 130, err
        assert "stopped after epoch" in err and "Traceback" not in err
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[-1]["event"] == "done" and lines[-1]["stopped_by_user"] is True
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()


def test_print_spark_submit_prints_a_runnable_command(tmp_path: Path, kafka_bootstrap: str,
                                                       topic_name: str) -> None:  # fmt: skip
    write_table(tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    result = _run(tmp_path, "ingest", "shop.orders", "--source", "generate", "--total", "10",
                  "--once", "--print-spark-submit")  # fmt: skip
    assert result.returncode == 0, result.stderr
    argv = shlex.split(result.stdout)
    assert Path(argv[0]).name == "spark-submit" and Path(argv[0]).is_file()
    jars = argv[argv.index("--jars") + 1].split(",")
    assert any("delta-spark" in j for j in jars) and all(Path(j).is_file() for j in jars)
    assert Path(argv[argv.index("--py-files") + 1]).is_file()
    tail = argv[argv.index("--py-files") + 2 :]
    launcher = next(a for a in tail if a.endswith(".py"))
    given = tail[tail.index(launcher) + 1 :]
    assert given[:7] == ["ingest", "shop.orders", "--source", "generate", "--total", "10", "--once"]
    # What this run resolved from the environment and directory is pinned after the user's own.
    pinned = dict(zip(given[7::2], given[8::2], strict=True))
    assert pinned["--warehouse"] == str((tmp_path / "wh").absolute()) and "--master" in pinned


def test_print_spark_submit_merges_jars_and_never_prints_a_secret(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    write_table(tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap))
    extra = tmp_path / "extra.jar"
    extra.write_bytes(b"PK")
    secret = "wJalrXUtnFEMI-secret"
    config = tmp_path / "logstore.toml"
    config.write_text(
        f'[spark.conf]\n"spark.jars" = "{extra}"\n'
        f'"spark.hadoop.fs.s3a.secret.key" = "{secret}"\n"spark.executor.memory" = "1g"\n',
        encoding="utf-8",
    )
    base = ("ingest", "shop.orders", "--source", "generate", "--total", "10", "--once",
            "--config", str(config), "--print-spark-submit")  # fmt: skip
    result = _run(tmp_path, *base, "--json")
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["command"]
    launcher = next(i for i, a in enumerate(argv) if a.endswith("logstore_submit.py"))
    jars = argv[argv.index("--jars") + 1].split(",")
    assert jars[-1] == str(extra) and any("delta-spark" in j for j in jars)  # spark-submit keeps it
    confs = [argv[i + 1] for i in range(launcher) if argv[i] == "--conf"]
    assert "spark.executor.memory=1g" in confs
    assert not any(c.startswith("spark.jars=") for c in confs)
    assert secret not in result.stdout + result.stderr  # the driver reads it from --config
    refused = _run(tmp_path, *base, "--conf", f"spark.hadoop.fs.s3a.access.key={secret}")
    assert refused.returncode == 2, refused.stderr
    assert "would print the secret value of --conf spark.hadoop.fs.s3a.access.key" in refused.stderr
    assert secret not in refused.stdout + refused.stderr


def test_coercions_are_quarantined_unless_accepted_and_then_counted(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    create_tables(
        tmp_path / "wh", orders_ddl("shop.orders", topic_name, kafka_bootstrap, partitions=1)
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text(
        '{"id": 1, "name": "a", "qty": 1, "price": 1.005}\n'  # decimal-round: accepted below
        '{"id": 2, "name": true, "qty": 1, "price": 1}\n'  # bool-to-string: not accepted
        '{"id": 3, "name": "c", "qty": 1, "price": 2.5}\n',
        encoding="utf-8",
    )
    bad = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once", "--coerce", "round")
    assert bad.returncode == 2, bad.stderr
    assert "unknown coercion 'round'" in bad.stderr and "decimal-round" in bad.stderr
    assert "Traceback" not in bad.stderr

    result = _run(tmp_path, "ingest", "shop.orders", "--source", "in", "--once", "--json",
                  "--coerce", "decimal-round")  # fmt: skip
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert sum(e["rows"] for e in epochs) == 2 and sum(e["quarantined"] for e in epochs) == 1
    assert [e["counts"] for e in events if e["event"] == "coerced"] == [{"decimal-round": 1}]
    assert events[-1]["event"] == "done" and events[-1]["coerced"] == {"decimal-round": 1}
    quarantine = [
        json.loads(line)
        for path in (tmp_path / "wh").rglob("quarantine/ingest/*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert len(quarantine) == 1
    assert "column 'name': expected a string, got true" in quarantine[0]["reason"]
    assert "--coerce bool-to-string" in quarantine[0]["reason"]
