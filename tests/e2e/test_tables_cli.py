"""The table commands as a shell script calls them: subprocesses, exit codes, parseable --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from logstore_cli.kafka.admin import KafkaAdmin
from logstore_cli.kafka.local_broker import free_port
from tests.plugins.authz_broker import AuthzBroker


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "LOGSTORE_WAREHOUSE": str(cwd / "wh"),
        "LOGSTORE_STATE_DIR": str(cwd / "state"),  # no local broker: defaults come from flags
        **(env or {}),
    }
    full_env.pop("LOGSTORE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "logstore_cli", *args],
        cwd=cwd, env=full_env, input=stdin, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


DDL = """
-- a Flink-shaped table with Paimon's vocabulary; the brokers come from --bootstrap-servers
CREATE TABLE IF NOT EXISTS app.users (
  `id` INT,
  `name` VARCHAR(64),
  `signup` TIMESTAMP(3),
  PRIMARY KEY (`id`) NOT ENFORCED
) WITH (
  'log.system' = 'kafka',
  'kafka.topic' = '{topic}',
  'log.system.partitions' = '3'
);
"""


def test_create_describe_list_alter_drop(
    tmp_path: Path, kafka_bootstrap: str, topic_name: str
) -> None:
    ddl = tmp_path / "users.sql"
    ddl.write_text(DDL.format(topic=topic_name))
    boot = ["--bootstrap-servers", kafka_bootstrap]

    dry = _run("create-table", str(ddl), "--dry-run", "--json", *boot, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan[0]["status"] == "planned" and plan[0]["topic"]["action"] == "create"
    assert not (tmp_path / "wh").exists()

    created = _run("create-table", str(ddl), "--json", *boot, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)[0]["status"] == "created"

    # the DDL says IF NOT EXISTS: running it again is a no-op that says so
    again = _run("create-table", str(ddl), "--json", *boot, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)[0]["status"] == "exists"

    described = _run("describe", "app.users", "--json", *boot, cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    d = json.loads(described.stdout)
    assert d["primary_key"] == ["id"]
    assert [c["type"] for c in d["columns"]] == ["int", "string", "timestamp"]
    assert d["log_store"]["consistency"] == "committed"
    assert len(d["topic"]["partitions"]) == 3

    listed = _run(
        "list", "--json", cwd=tmp_path, env={"LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    )
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["app.users"]

    altered = _run(
        "alter-table", "app.users", "--set", "log.consistency=eventual", "--json", *boot,
        cwd=tmp_path,
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    d = json.loads(
        _run("describe", "app.users", "--json", "--no-topic", *boot, cwd=tmp_path).stdout
    )
    assert d["log_store"]["consistency"] == "eventual"

    # no terminal and no --yes: refused, nothing dropped
    refused = _run("drop-table", "app.users", *boot, cwd=tmp_path, stdin="")
    assert refused.returncode == 2
    assert "--yes" in refused.stderr
    assert (tmp_path / "wh" / "app" / "users").exists()

    dropped = _run(
        "drop-table", "app.users", "--delete-topic", "--yes", "--json", *boot, cwd=tmp_path
    )
    assert dropped.returncode == 0, dropped.stderr
    assert json.loads(dropped.stdout)["topic"] == {"name": topic_name, "deleted": True}
    assert not (tmp_path / "wh" / "app" / "users").exists()
    with KafkaAdmin(kafka_bootstrap, timeout_s=15) as admin:
        assert admin.describe_topic(topic_name) is None


def test_errors_have_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    missing = _run("describe", "app.nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert "table 'app.nope' not found" in missing.stderr
    assert "Traceback" not in missing.stderr

    bad_ddl = _run(
        "create-table",
        "-",
        cwd=tmp_path,
        stdin="CREATE TABLE t (id INT) WITH ('log-store.topik' = 'x');",
    )
    assert bad_ddl.returncode == 2
    assert "<stdin>:1:" in bad_ddl.stderr and "did you mean 'log-store.topic'" in bad_ddl.stderr

    # an unreachable broker fails (its message says how), and nothing is created
    dead = f"127.0.0.1:{free_port()}"
    down = _run(
        "create-table", "--sql",
        f"CREATE TABLE db.t (id INT) WITH ('log.system'='kafka', 'kafka.topic'='x', "
        f"'kafka.bootstrap.servers'='{dead}')",
        "--kafka-timeout", "3", cwd=tmp_path,
    )  # fmt: skip
    assert down.returncode == 1, down.stderr
    assert f"cannot reach Kafka at {dead}" in down.stderr
    assert not (tmp_path / "wh" / "db" / "t").exists()

    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    unwritable = _run(
        "create-table", "--sql", "CREATE TABLE db.t (id INT)", "--warehouse", str(blocked / "wh"),
        cwd=tmp_path,
    )  # fmt: skip
    assert unwritable.returncode == 1
    assert "not writable" in unwritable.stderr


def test_topic_authorization_failure_is_clear_and_keeps_the_secret(
    tmp_path: Path, authz_broker: AuthzBroker
) -> None:
    # alice's password lives in the config file, as docs/guide.md says secrets should
    password = authz_broker.passwords["alice"]
    config = tmp_path / "logstore.toml"
    config.write_text(f'[kafka.client]\n"sasl.password" = "{password}"\n')
    ddl = (
        "CREATE TABLE db.denied (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        "'log.system' = 'kafka', 'kafka.topic' = 'denied_log', "
        f"'kafka.bootstrap.servers' = '{authz_broker.sasl_bootstrap}', "
        "'kafka.security.protocol' = 'SASL_PLAINTEXT', 'kafka.sasl.mechanism' = 'PLAIN', "
        "'kafka.sasl.username' = 'alice')"
    )
    result = _run("create-table", "--sql", ddl, "--config", str(config), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "denied User:alice DESCRIBE on topic 'denied_log'" in result.stderr
    assert "Traceback" not in result.stderr
    assert password not in result.stdout + result.stderr
    assert not (tmp_path / "wh" / "db" / "denied").exists()
