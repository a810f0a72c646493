"""Configuration: the declarations, precedence, and bad values named by where they came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from logstore_cli import config as cfg
from logstore_cli.cli import app as app_module
from logstore_cli.cli.options import config_options
from logstore_cli.errors import EXIT_INVALID_INPUT, ConfigError

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
WIDE = {"COLUMNS": "300"}  # one help line per option, so a default is never wrapped apart


def test_defaults_work_with_no_file() -> None:
    c = cfg.resolve()
    assert c == cfg.Config()
    assert c.warehouse_path(Path("/home/u")) == Path("/home/u") / cfg.Config().warehouse


def test_precedence_file_then_env_then_flags() -> None:
    data = {
        "warehouse": "/from/file",
        "kafka": {"bootstrap_servers": "file:9092", "timeout_s": 3, "client": {"acks": "all"}},
        "spark": {"master": "local[2]", "conf": {"a": 1, "b": True}},
    }
    c = cfg.resolve(data)
    assert (c.warehouse, c.kafka.bootstrap_servers, c.kafka.timeout_s) == (
        "/from/file",
        "file:9092",
        3.0,
    )
    assert dict(c.kafka.client) == {"acks": "all"}
    assert dict(c.spark.conf) == {"a": "1", "b": "true"}

    env = {"LOGSTORE_WAREHOUSE": "/from/env", "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": "env:9092"}
    c = cfg.resolve(data, env)
    assert (c.warehouse, c.kafka.bootstrap_servers) == ("/from/env", "env:9092")
    assert c.spark.master == "local[2]"

    flags = {"warehouse": "/from/flag", "kafka.timeout_s": "7", "spark.conf": ["b=false", "c=3"]}
    c = cfg.resolve(data, env, flags)
    assert c.warehouse == "/from/flag"
    assert c.kafka.bootstrap_servers == "env:9092"
    assert c.kafka.timeout_s == 7.0
    # --conf adds to the file's [spark.conf]: 'a' stays
    assert dict(c.spark.conf) == {"a": "1", "b": "false", "c": "3"}


def test_an_empty_env_var_counts_as_unset() -> None:
    assert cfg.resolve({"warehouse": "/w"}, {"LOGSTORE_WAREHOUSE": ""}).warehouse == "/w"


def test_unknown_key_suggests_the_nearest() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'kafka\.bootstrap_server'") as info:
        cfg.resolve({"kafka": {"bootstrap_server": "x"}}, source="my.toml")
    assert info.value.hint == "did you mean 'kafka.bootstrap_servers'?"
    assert "my.toml" in info.value.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kafka": {"timeout_s": "soon"}}, "'kafka.timeout_s' must be a number of seconds"),
        ({"kafka": {"timeout_s": -1}}, "more than 0"),
        ({"kafka": {"timeout_s": True}}, "must be a number of seconds"),  # not 1 second
        ({"kafka": "x"}, r"'kafka' must be a table \(\[kafka\]\)"),
        ({"kafka": {"client": "acks=all"}}, "must be a table of key = value pairs"),
        ({"kafka": {"client": {"acks": ["all"]}}}, "must be a table of key = value pairs"),
        ({"spark": {"conf": {"nested": {"a": 1}}}}, "must be a table of key = value pairs"),
        ({"warehouse": ["a"]}, "'warehouse' must be a non-empty string"),
        ({"warehouse": "  "}, "'warehouse' must be a non-empty string"),
        ({"spark": {"master": True}}, "'spark.master' must be a non-empty string"),
    ],
)
def test_bad_values_are_config_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        cfg.resolve(data, source="c.toml")
    assert info.value.message.startswith("c.toml: ")
    assert info.value.exit_code == EXIT_INVALID_INPUT


BAD_SECONDS = ["nan", "inf", "-inf", "1e400", "-1", "0", "301", "ten", ""]


@pytest.mark.parametrize("text", BAD_SECONDS)
def test_bad_timeout_names_its_source_and_the_valid_range(text: str) -> None:
    valid = f"a number of seconds, more than 0 and at most {cfg.MAX_KAFKA_TIMEOUT_S:g}"
    with pytest.raises(ConfigError) as flag:
        cfg.resolve(flags={"kafka.timeout_s": text})
    assert flag.value.message == f"--kafka-timeout must be {valid}, got {text!r}"
    assert flag.value.hint == "e.g. --kafka-timeout 10"

    if text:  # an empty variable is unset
        with pytest.raises(ConfigError) as env:
            cfg.resolve(env={"LOGSTORE_KAFKA_TIMEOUT": text})
        assert env.value.message.startswith("environment variable LOGSTORE_KAFKA_TIMEOUT must be")
        assert env.value.hint == "fix or unset LOGSTORE_KAFKA_TIMEOUT"


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf", "1e400", "-1", "0", "301.5", "true"])
def test_bad_timeout_in_a_file_names_file_and_key(tmp_path: Path, literal: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(f"[kafka]\ntimeout_s = {literal}\n")  # TOML itself has nan, inf and 1e400 (=inf)
    with pytest.raises(ConfigError, match=r"'kafka\.timeout_s' must be a number of seconds") as e:
        cfg.load(f, {})
    assert e.value.message.startswith(f"{f}: ")
    assert e.value.hint is not None and str(f) in e.value.hint


def test_timeout_bounds_are_inclusive_at_the_top() -> None:
    top = cfg.MAX_KAFKA_TIMEOUT_S
    assert cfg.resolve(flags={"kafka.timeout_s": f"{top:g}"}).kafka.timeout_s == top
    assert cfg.resolve({"kafka": {"timeout_s": 0.001}}).kafka.timeout_s == 0.001


def test_bad_conf_pair_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--conf must be KEY=VALUE, got 'novalue'$"):
        cfg.resolve(flags={"spark.conf": ["a=1", "novalue"]})


@pytest.mark.parametrize(
    ("data", "flags", "got"),
    [
        ({"kafka": {"client": {"sasl.password": ["hunter2"]}}}, None, "a list for 'sasl.password'"),
        ({"kafka": {"client": "sasl.password=hunter2"}}, None, "a string"),
        ({}, {"spark.conf": ["fs.s3a.secret.key:hunter2"]}, "a value without '='"),
    ],
)
def test_table_errors_never_show_values(
    data: dict[str, object], flags: dict[str, object] | None, got: str
) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve(data, flags=flags)
    assert info.value.message.endswith(f"got {got}")
    assert "hunter2" not in f"{info.value.message} {info.value.hint}"


def test_load_reads_file_from_flag_or_env(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('warehouse = "/w"\n[kafka]\ntimeout_s = 2.5\n')
    assert cfg.load(f, {}).warehouse == "/w"
    assert cfg.load(None, {"LOGSTORE_CONFIG": str(f)}).kafka.timeout_s == 2.5
    assert cfg.load(None, {}) == cfg.Config()
    assert cfg.load(f, {}).source == str(f)


def test_missing_malformed_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        cfg.load(tmp_path / "nope.toml", {})
    bad = tmp_path / "bad.toml"
    bad.write_text("warehouse = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        cfg.load(bad, {})
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('warehouse = "/données"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.toml: config file is not UTF-8") as info:
        cfg.load(latin1, {})
    assert info.value.hint == "TOML files are UTF-8: save the file as UTF-8"
    with pytest.raises(ConfigError, match="cannot read config file"):
        cfg.load(tmp_path, {})  # a directory


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "bom.toml"
    f.write_bytes('warehouse = "/w"\n'.encode("utf-8-sig"))
    assert cfg.load(f, {}).warehouse == "/w"


def test_example_config_in_repo_is_valid() -> None:
    example = Path(__file__).parents[2] / "configs" / "logstore.toml"
    c = cfg.load(example, {})
    assert c.warehouse == cfg.Config().warehouse
    assert c.spark.master == cfg.Config().spark.master


# -- one declaration per setting ---------------------------------------------------------------


def _toml_data(key: str, value: object) -> dict[str, object]:
    head, _, tail = key.partition(".")
    return {head: {tail: value}} if tail else {head: value}


def _sample(setting: cfg.Setting) -> tuple[object, object]:
    """(a value to give, the value the Config then holds) that differs from the default."""
    if setting.merge or isinstance(setting.default, Mapping):
        return {"k": "v"}, {"k": "v"}
    if isinstance(setting.default, float):
        return "2.5", 2.5
    if setting.key == "pulsar.admin_url":  # a URL, checked
        return "http://pulsar.example:8080/", "http://pulsar.example:8080"
    return "given-value", "given-value"


@pytest.mark.parametrize("setting", cfg.SETTINGS, ids=lambda s: s.key)
def test_each_setting_is_a_toml_key_env_var_and_flag(setting: cfg.Setting) -> None:
    given, held = _sample(setting)
    assert cfg.setting_value(cfg.Config(), setting) == setting.default  # a real field

    from_file = cfg.resolve(_toml_data(setting.key, given))
    assert cfg.setting_value(from_file, setting) == held
    if setting.env:
        assert cfg.ENV_VARS[setting.env] == setting.key
        from_env = cfg.resolve(env={setting.env: str(given)})
        assert cfg.setting_value(from_env, setting) == held
    if setting.flag:
        flag_value = ["k=v"] if setting.merge else given
        from_flag = cfg.resolve(flags={setting.key: flag_value})
        assert cfg.setting_value(from_flag, setting) == held


def test_settings_without_env_or_flag_are_the_tables() -> None:
    # kafka.client holds secrets: file (or a table's DDL) only, never a flag in shell history.
    no_env = {s.key for s in cfg.SETTINGS if not s.env}
    no_flag = {s.key for s in cfg.SETTINGS if not s.flag}
    assert no_env == {"kafka.client", "spark.conf"}
    assert no_flag == {"kafka.client"}


def test_create_table_help_shows_every_flag_env_var_and_code_default() -> None:
    result = CliRunner().invoke(app_module.app, ["create-table", "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for s in cfg.SETTINGS:
        if not s.flag:
            continue
        [line] = [ln for ln in lines if f" {s.flag} " in ln]
        assert s.help in line
        if s.env:
            assert f"[env var: {s.env}]" in line
        if s.default is None:
            assert f"[default: ({s.default_help})]" in line
        elif not s.merge:
            assert f"[default: {s.default_text}]" in line


def test_help_default_follows_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = dataclasses.replace(
        cfg.DEFAULTS, kafka=dataclasses.replace(cfg.DEFAULTS.kafka, timeout_s=42.5)
    )
    monkeypatch.setattr(cfg, "DEFAULTS", changed)
    app = typer.Typer()

    @app.command()
    @config_options(cfg.Uses.KAFKA)
    def probe(*, overrides: cfg.Overrides) -> None:
        typer.echo(repr(dict(overrides.flags)))

    result = CliRunner().invoke(app, ["--help"], env=WIDE)
    assert "[default: 42.5]" in result.output
    assert cfg.resolve().kafka.timeout_s == 42.5


def test_config_options_pass_command_line_values_only(tmp_path: Path) -> None:
    app = typer.Typer()
    seen: list[cfg.Overrides] = []

    @app.command()
    @config_options(cfg.Uses.WAREHOUSE, cfg.Uses.SPARK)
    def probe(name: str, *, overrides: cfg.Overrides) -> None:
        seen.append(overrides)
        typer.echo(name)

    env = {"LOGSTORE_WAREHOUSE": "/env", "LOGSTORE_SPARK_MASTER": "yarn"}
    args = ["n", "--config", str(tmp_path / "c.toml"), "--master", "local[1]"]
    result = CliRunner().invoke(app, [*args, "--conf", "a=1", "--conf", "b=2"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "n"
    # env and defaults stay with resolve (which names the env var in its errors)
    assert seen[-1] == cfg.Overrides(
        tmp_path / "c.toml", {"spark.master": "local[1]", "spark.conf": ["a=1", "b=2"]}
    )
    bad = CliRunner().invoke(app, ["n", "--kafka-timeout", "1"])
    assert bad.exit_code == 2 and "No such option" in bad.output  # not a KAFKA command


def test_config_options_require_the_overrides_parameter() -> None:
    def no_overrides(name: str) -> None:
        del name

    with pytest.raises(TypeError, match="overrides"):
        config_options(cfg.Uses.WAREHOUSE)(no_overrides)


def test_guide_table_matches_the_declarations() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    assert cfg.README_BEGIN in guide  # the generated table is in the guide
    assert cfg.update_readme(guide) == guide, (
        "docs/guide.md's configuration table is stale: run .venv/bin/python -c 'from pathlib import "
        'Path; from logstore_cli.config import update_readme as u; p = Path("docs/guide.md"); '
        "p.write_text(u(p.read_text()))'"
    )
    with pytest.raises(ValueError, match="markers"):
        cfg.update_readme("no markers")


# -- through the CLI edge: exit code 2 and one message naming the source -----------------------


def _run_main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        app_module.main(argv)
    code = info.value.code
    return code if isinstance(code, int) else -1


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in (*cfg.ENV_VARS, cfg.CONFIG_ENV, "LOGSTORE_STATE_DIR"):
        monkeypatch.delenv(var, raising=False)
    # any config that got through would look for the table here and fail with exit 1, not 2
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize("text", ["nan", "inf", "1e400", "-1", "0", "301"])
def test_cli_bad_kafka_timeout_flag_exits_2(
    clean_env: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    assert _run_main(["describe", "db.t", "--kafka-timeout", text]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert (
        f"--kafka-timeout must be a number of seconds, more than 0 and at most 300, got '{text}'"
        in err
    )
    assert "Traceback" not in err


def test_cli_bad_kafka_timeout_env_exits_2(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOGSTORE_KAFKA_TIMEOUT", "nan")
    assert _run_main(["describe", "db.t"]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert "environment variable LOGSTORE_KAFKA_TIMEOUT must be a number of seconds" in err
    assert "--kafka-timeout" not in err.split("hint")[0]  # Typer's env reading is not a flag


def test_cli_bad_kafka_timeout_in_file_exits_2(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = clean_env / "c.toml"
    f.write_text("[kafka]\ntimeout_s = nan\n")
    assert _run_main(["describe", "db.t", "--config", str(f)]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert f"{f}: 'kafka.timeout_s' must be a number of seconds" in err


def test_cli_non_utf8_config_exits_2(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = clean_env / "latin1.toml"
    f.write_bytes(b'warehouse = "/donn\xe9es"\n')
    monkeypatch.setenv("LOGSTORE_CONFIG", str(f))
    assert _run_main(["list"]) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert f"{f}: config file is not UTF-8 text" in err
    assert "internal error" not in err


def test_cli_good_timeout_reaches_the_command(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a valid value passes the config and the command fails later, for its own reason (exit 1)
    assert _run_main(["describe", "db.t", "--kafka-timeout", "2.5"]) == 1
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url", ["pulsar://h:6650", "http://h:8080/admin", "h:8080", "http://user:pw@h:8080"]
)
def test_pulsar_admin_url_must_be_a_root_http_url(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve(env={"LOGSTORE_PULSAR_ADMIN_URL": url})
    assert (
        "environment variable LOGSTORE_PULSAR_ADMIN_URL must be an admin URL" in info.value.message
    )
    assert "pw" not in info.value.message  # credentials are never echoed
