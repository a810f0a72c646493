"""Kafka client properties from ``LOGSTORE_KAFKA_CLIENT_*`` variables, and warehouse/checkpoint
paths that are URIs (refused: object storage is not supported for them today)."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli import config as cfg
from logstore_cli.cli import app as app_module
from logstore_cli.errors import EXIT_INVALID_INPUT, ConfigError, InvalidInputError
from logstore_cli.kafka.client_config import JAVA_ONLY_KEYS, librdkafka_config
from tests.deltalog import write_table

SECRET = "hunter2-'\"$x-secret"
PREFIX = "LOGSTORE_KAFKA_CLIENT_"


def _run_main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        app_module.main(argv)
    code = info.value.code
    return code if isinstance(code, int) else -1


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import os

    for var in [*cfg.ENV_VARS, cfg.CONFIG_ENV, *(v for v in os.environ if v.startswith(PREFIX))]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOGSTORE_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("LOGSTORE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


# ----------------------------------------------------------------- client properties from env


def test_a_variable_sets_its_client_property_over_the_files_key() -> None:
    file = {"kafka": {"client": {"sasl.password": "from-file", "sasl.username": "etl"}}}
    env = {
        f"{PREFIX}SASL_PASSWORD": SECRET,
        f"{PREFIX}SECURITY_PROTOCOL": "SASL_SSL",
        "LOGSTORE_KAFKA_CLIENTX": "not ours",
    }
    client = cfg.resolve(file, env).kafka.client
    assert dict(client) == {
        "sasl.password": SECRET,  # the variable wins over the file's key of the same name
        "sasl.username": "etl",  # the file's other keys stay
        "security.protocol": "SASL_SSL",
    }
    conf, ignored = librdkafka_config("b:9092", client)
    assert conf["sasl.password"] == SECRET and not ignored


def test_an_empty_client_variable_counts_as_unset() -> None:
    file = {"kafka": {"client": {"sasl.password": "from-file"}}}
    assert cfg.resolve(file, {f"{PREFIX}SASL_PASSWORD": ""}).kafka.client["sasl.password"] == (
        "from-file"
    )


def test_a_secret_from_the_environment_is_redacted_in_the_configs_repr() -> None:
    resolved = cfg.resolve({}, {f"{PREFIX}SASL_PASSWORD": SECRET, f"{PREFIX}SASL_USERNAME": "etl"})
    shown = repr(resolved)
    assert SECRET not in shown and "'sasl.password': '***'" in shown and "'etl'" in shown


@pytest.mark.parametrize(
    "var",
    [f"{PREFIX}sasl_password", f"{PREFIX}SASL__PASSWORD", f"{PREFIX}SASL_PASSWORD_", PREFIX,
     f"{PREFIX}SASL-PASSWORD"],
)  # fmt: skip
def test_a_variable_that_names_no_property_is_a_config_error(var: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve({}, {var: SECRET})
    assert info.value.message == f"environment variable {var} does not name a Kafka client property"
    assert info.value.hint is not None and f"{PREFIX}SASL_PASSWORD sets sasl.password" in (
        info.value.hint
    )
    assert SECRET not in f"{info.value.message} {info.value.hint}"


def test_bootstrap_servers_from_a_client_variable_points_to_the_real_setting() -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve({}, {f"{PREFIX}BOOTSTRAP_SERVERS": "b:9092"})
    assert info.value.hint is not None and "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS" in info.value.hint


def test_every_client_property_spelling_is_unambiguous() -> None:
    # The variable's name reads '_' as '.': that works because client properties have neither '_'
    # nor '-'. The names in the mapping that do are no properties: Python callbacks or Flink's.
    not_properties = {k for k in JAVA_ONLY_KEYS if "_" in k or "-" in k}
    assert not_properties
    assert all(
        "callback" in JAVA_ONLY_KEYS[k] or "Flink" in JAVA_ONLY_KEYS[k] for k in not_properties
    )
    for key in [k for k in JAVA_ONLY_KEYS if k not in not_properties] + [
        "sasl.jaas.config", "sasl.oauthbearer.client.secret", "ssl.key.password",
        "security.protocol", "ssl.ca.location", "ssl.endpoint.identification.algorithm",
    ]:  # fmt: skip
        assert cfg.client_env_key(PREFIX + key.upper().replace(".", "_")) == key


def test_the_guide_table_names_the_client_variables() -> None:
    assert f"`{PREFIX}<PROPERTY>`" in cfg.markdown_table()


def test_cli_never_prints_a_secret_from_the_environment(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ddl = (
        "CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('log.system' = "
        "'kafka', 'kafka.bootstrap.servers' = '127.0.0.1:1', 'kafka.topic' = 't')"
    )
    write_table(clean_env / "wh", ddl)
    monkeypatch.setenv(f"{PREFIX}SASL_PASSWORD", SECRET)
    monkeypatch.setenv(f"{PREFIX}SASL_USERNAME", "etl")
    # An invalid value from the environment reaches librdkafka: the command fails on it.
    monkeypatch.setenv(f"{PREFIX}SECURITY_PROTOCOL", "bogus")
    code = _run_main(["--verbose", "verify", "db.t", "--kafka-timeout", "1"])
    out, err = capsys.readouterr()
    assert code == EXIT_INVALID_INPUT
    assert 'Invalid value "bogus" for configuration property "security.protocol"' in err
    assert SECRET not in out + err and "hunter2" not in out + err


# ------------------------------------------------------------------------------ URIs as paths


@pytest.mark.parametrize(
    "uri",
    ["abfss://c@acct.dfs.core.windows.net/wh", "gs://b/wh", "file://otherhost/data/wh"],
)  # fmt: skip
def test_a_warehouse_uri_is_a_config_error_from_every_source(tmp_path: Path, uri: str) -> None:
    sources: list[tuple[str, dict[str, object], dict[str, str], dict[str, object]]] = [
        ("environment variable LOGSTORE_WAREHOUSE", {}, {"LOGSTORE_WAREHOUSE": uri}, {}),
        ("--warehouse", {}, {}, {"warehouse": uri}),
        ("logstore.toml: 'warehouse'", {"warehouse": uri}, {}, {}),
    ]
    for where, file, env, flags in sources:
        with pytest.raises(ConfigError) as info:
            cfg.resolve(file, env, flags, source="logstore.toml")
        message = info.value.message
        assert message.startswith(
            f"{where} must be a local or mounted POSIX directory, s3://bucket/prefix or "
            "hdfs://namenode:port/path"
        )
        assert "other object storage is not supported for the warehouse today" in message
        assert "docs/cluster.md" in message and repr(uri) in message


def test_an_hdfs_warehouse_is_accepted_and_a_malformed_one_says_the_form() -> None:
    for uri in ("hdfs://namenode:8020/wh/", "HDFS://namenode:8020/wh"):
        config = cfg.resolve({}, {"LOGSTORE_WAREHOUSE": uri})
        assert config.warehouse == "hdfs://namenode:8020/wh"
        assert config.remote_warehouse and not config.s3_warehouse
    assert cfg.resolve({}, {"LOGSTORE_WAREHOUSE": "s3://bucket-1/wh"}).s3_warehouse
    for uri, problem in (("hdfs:/wh", "must be followed by '//'"),
                         ("hdfs://nn:99999/wh", "not a NameNode address"),
                         ("hdfs://nn:8020/a/../b", "'..'")):  # fmt: skip
        with pytest.raises(ConfigError) as info:
            cfg.resolve({}, {"LOGSTORE_WAREHOUSE": uri})
        message = info.value.message
        assert message.startswith(
            "environment variable LOGSTORE_WAREHOUSE must be hdfs://namenode:port/path"
        ), message
        assert problem in message and "docs/cluster.md" in message


def test_a_uri_never_shows_its_credentials() -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve({}, {"LOGSTORE_WAREHOUSE": "s3a://AKIAXX:s3cr3t@bucket/wh"})
    assert "s3cr3t" not in info.value.message and "s3a://***@bucket/wh" in info.value.message
    assert "AKIAXX" not in info.value.message


@pytest.mark.parametrize(
    ("uri", "path"),
    [("file:///data/wh", "/data/wh"), ("file:/data/wh", "/data/wh"),
     ("file://localhost/data/wh", "/data/wh"), ("file:///data/my%20wh", "/data/my wh")],
)  # fmt: skip
def test_a_local_file_uri_is_its_absolute_path(uri: str, path: str) -> None:
    resolved = cfg.resolve({}, {"LOGSTORE_WAREHOUSE": uri})
    assert resolved.warehouse == path and resolved.warehouse_path() == Path(path)


@pytest.mark.parametrize("text", ["./warehouse", "/data/wh", "~/wh", "a:b", "wh:", "x:/y"])
def test_paths_that_are_no_uri_stay_as_written(text: str) -> None:
    # One-letter schemes and a colon without a slash are file names, not URIs.
    assert cfg.local_path(text, "--checkpoint") == text


@pytest.mark.parametrize(
    ("given", "resolved"),
    [("s3://bucket-1/wh", "s3://bucket-1/wh"), ("s3a://bucket-1/a/b/", "s3://bucket-1/a/b"),
     ("S3://bucket-1", "s3://bucket-1"), ("  s3://my.bucket/wh  ", "s3://my.bucket/wh")],
)  # fmt: skip
def test_an_s3_warehouse_is_accepted_from_every_source(given: str, resolved: str) -> None:
    for file, env, flags in [
        ({}, {"LOGSTORE_WAREHOUSE": given}, {}),
        ({}, {}, {"warehouse": given}),
        ({"warehouse": given}, {}, {}),
    ]:
        config = cfg.resolve(file, env, flags, source="logstore.toml")
        assert config.warehouse == resolved and config.remote_warehouse
    assert not cfg.resolve({}, {}).remote_warehouse


@pytest.mark.parametrize(
    ("uri", "problem"),
    [("s3://bucket-1/a/../b", "'..'"), ("s3://bucket-1/a//b", "''"),
     ("s3://bucket-1/%2e%2e/b", "percent-encoding"), ("s3://B/wh", "not an S3 bucket name"),
     ("s3://bucket-1/wh?x=1", "'?' or '#'")],
)  # fmt: skip
def test_an_s3_warehouse_that_could_escape_its_prefix_is_refused(uri: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve({}, {"LOGSTORE_WAREHOUSE": uri})
    assert info.value.message.startswith("environment variable LOGSTORE_WAREHOUSE must be s3://")
    assert problem in info.value.message


@pytest.mark.parametrize("uri", ["s3://AKIAXX:s3cr3t@bucket/wh", "s3://AKIAXXs3cr3t@bucket/wh"])
def test_an_s3_warehouse_with_credentials_in_it_is_refused_unshown(uri: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.resolve({"warehouse": uri}, {}, source="logstore.toml")
    shown = f"{info.value.message} {info.value.hint}"
    assert "credentials in the URI are not accepted" in shown
    assert "s3cr3t" not in shown and "AKIAXX" not in shown and "s3://***@bucket/wh" in shown


def test_a_config_built_directly_with_a_uri_is_refused_by_warehouse_path() -> None:
    with pytest.raises(ConfigError, match="object storage"):
        cfg.Config(warehouse="gs://b/wh").warehouse_path()


def test_local_path_names_what_it_was_given_for() -> None:
    with pytest.raises(InvalidInputError) as info:
        cfg.local_path("s3a://b/chk", "--checkpoint")
    assert info.value.message.startswith("--checkpoint is given as the URI 's3a://b/chk'")
    assert info.value.hint is not None and "docs/cluster.md" in info.value.hint


@pytest.mark.parametrize(
    "argv",
    [["list", "--warehouse", "gs://b/wh"],
     ["ingest", "db.t", "--source", "generate", "--total", "5", "--once",
      "--checkpoint", "s3a://b/chk"],
     ["read", "db.t", "--mode", "log", "--checkpoint", "gs://b/reader.json"]],
    ids=["warehouse", "ingest-checkpoint", "read-checkpoint"],
)  # fmt: skip
def test_cli_refuses_a_uri_path_with_exit_2(
    clean_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert _run_main(argv) == EXIT_INVALID_INPUT
    err = capsys.readouterr().err
    assert "not supported" in err and "docs/cluster.md" in err and "Traceback" not in err
    assert not (clean_env / "s3a:").exists() and not Path("s3a:").exists()
    assert not (clean_env / "gs:").exists() and not Path("gs:").exists()
