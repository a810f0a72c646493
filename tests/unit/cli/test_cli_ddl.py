"""``logstore validate`` and ``logstore properties`` through Typer's CliRunner (and ``main()``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logstore_cli.cli.app import app, main
from logstore_cli.ddl import BOOTSTRAP_SERVERS_ENV

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ddl"
runner = CliRunner()

GOOD = """CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) USING delta
TBLPROPERTIES ('log-store.enabled' = 'true', 'log-store.topic' = 't_log',
  'properties.sasl.jaas.config' = 'PlainLoginModule required password="hunter2";');
CREATE TABLE db.u (x INT);
"""
BAD = """CREATE TABLE db.t (
  id BIGINT,
  id STRING
) WITH ('log-store.enabled' = 'ture', 'properties.ssl.key.password' = 'hunter2');
"""


@pytest.fixture(autouse=True)
def _no_default_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BOOTSTRAP_SERVERS_ENV, raising=False)


def test_validate_json_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BOOTSTRAP_SERVERS_ENV, "broker:9092")
    result = runner.invoke(app, ["validate", "-", "--json"], input=GOOD)
    assert result.exit_code == 0, result.output
    tables = json.loads(result.stdout)
    assert [t["name"] for t in tables] == ["db.t", "db.u"]
    t = tables[0]
    assert t["log_store"]["address"] == "broker:9092"  # from the environment
    assert t["log_store"]["client_properties"]["sasl.jaas.config"] == "***"
    assert t["properties"]["properties.sasl.jaas.config"] == "***"
    assert t["columns"][0] == {"name": "id", "type": "bigint", "nullable": False, "comment": None}
    assert tables[1]["log_store"] is None and tables[1]["database"] == "db"
    assert "hunter2" not in result.output


def test_validate_defaults_to_stdin() -> None:
    result = runner.invoke(app, ["validate", "--json"], input="CREATE TABLE t (a INT);")
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["name"] == "t"


def test_validate_rich_summary(tmp_path: Path) -> None:
    path = tmp_path / "t.sql"
    path.write_text(GOOD.replace("'t_log',", "'t_log', 'log-store.address' = 'h:9092',"))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "db.t" in result.stdout and "t_log @ h:9092" in result.stdout
    assert "2 tables valid" in result.stderr
    assert "hunter2" not in result.output


def test_validate_errors_exit_2_with_locations(tmp_path: Path) -> None:
    path = tmp_path / "bad.sql"
    path.write_text(BAD)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 2
    assert result.stdout == ""  # nothing to parse on stdout when the input is invalid
    lines = result.stderr.splitlines()
    assert lines[0] == f"{path}:3:3: error: duplicate column 'id'"
    assert lines[1:3] == ["  id STRING", "  ^~"]
    assert lines[3] == (
        f"{path}:4:31: error: invalid value 'ture' for 'log-store.enabled'; valid values: true, false"
    )
    assert "hunter2" not in result.output and "*******" in result.stderr


@pytest.mark.parametrize(
    ("setting", "valid"),
    [
        ("'log.format' = 'avro'", "json, debezium-json"),
        ("'log.key.format' = 'avro'", "json"),
        ("'log-store.data-format' = 'avro'", "json, debezium-json"),
    ],
)
def test_validate_refuses_an_unknown_log_format(setting: str, valid: str) -> None:
    store = (
        "'log.system' = 'kafka', 'kafka.topic' = 't'"
        if "'log." in setting
        else "'log-store.enabled' = 'true', 'log-store.topic' = 't'"
    )
    ddl = (
        f"CREATE TABLE t (id INT) WITH ({store}, 'kafka.bootstrap.servers' = 'h:9092', {setting});"
    )
    if "log-store" in setting:
        ddl = ddl.replace("'kafka.bootstrap.servers'", "'log-store.address'")
    result = runner.invoke(app, ["validate", "-"], input=ddl)
    assert result.exit_code == 2
    key = setting.split("'")[1]
    assert f"invalid value 'avro' for '{key}'; valid values: {valid}" in result.stderr


def test_validate_stdin_name_in_errors() -> None:
    result = runner.invoke(app, ["validate", "-"], input="CREATE TABLE t (a INTT);")
    assert result.exit_code == 2
    assert result.stderr.startswith("<stdin>:1:19: error: unknown type 'INTT'; did you mean INT?")


def test_validate_warnings_do_not_fail(tmp_path: Path) -> None:
    path = tmp_path / "w.sql"
    path.write_text("SELECT 1;\nCREATE TABLE t (a INT);")
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 0
    assert result.stderr.startswith(f"{path}:1:1: warning: skipped this SELECT statement")
    assert len(json.loads(result.stdout)) == 1


@pytest.mark.parametrize("seed", sorted(FIXTURES.glob("seed*.sql")), ids=lambda p: p.stem)
def test_validate_every_seed(seed: Path) -> None:
    expected = json.loads(seed.with_suffix(".json").read_text())
    result = runner.invoke(app, ["validate", str(seed), "--json"])
    if any(d["severity"] == "error" for d in expected["diagnostics"]):
        assert result.exit_code == 2
    else:
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == expected["tables"]


def test_missing_file_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "/no/such/file.sql"])
    assert exit_info.value.code == 2
    assert "cannot read /no/such/file.sql" in capsys.readouterr().err


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.sql"
    path.write_bytes("CREATE TABLE t (a INT) COMMENT 'caf\xe9';".encode("latin-1"))
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(path)])
    assert exit_info.value.code == 2
    assert "is not UTF-8 text" in capsys.readouterr().err


def test_many_tables_summary_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.sql"
    path.write_text("".join(f"CREATE TABLE t{i} (a INT);\n" for i in range(120)))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0
    assert "t99 " in result.stdout and "t100 " not in result.stdout
    assert "… and 20 more tables (--json lists all)" in result.stdout


def test_properties_json() -> None:
    result = runner.invoke(app, ["properties", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    by_key = {r["key"]: r for r in rows}
    assert by_key["mixed-format.read.mode"]["aliases"] == ["arctic.read.mode"]
    assert by_key["log.consistency"]["vocabulary"] == "paimon"


def test_properties_table() -> None:
    result = runner.invoke(app, ["properties"])
    assert result.exit_code == 0
    assert "log-store.consistency-guarantee.enabled" in result.stdout


def test_help_does_not_import_spark() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from logstore_cli.cli.app import main\n"
        "try:\n    main(['validate', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert not any(m.split('.')[0] in ('pyspark', 'py4j') for m in sys.modules), 'spark'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_ddl_errors_of_other_commands_show_the_source_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["create-table", "--sql", "CREATE TABLE t (a INTT)", "--warehouse", str(tmp_path)])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "<sql>:1:19: error: unknown type 'INTT'; did you mean INT?",
        "CREATE TABLE t (a INTT)",
        "                  ^~~~",
    ]
    assert captured.out == ""
    assert list(tmp_path.iterdir()) == []  # nothing was created
