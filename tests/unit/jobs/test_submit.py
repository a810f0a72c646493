"""The printed spark-submit command (pure part): the user's jars and Python files join
spark-submit's own options, and no secret conf is ever printed."""

from __future__ import annotations

import shlex

import pytest

from logstore_cli.errors import InvalidInputError
from logstore_cli.jobs.submit import check_no_secret_flags, submit_argv
from logstore_cli.model import is_secret_key

SECRET = "wJalrXUtnFEMI-K7MDENG-secret"
ARGS = ["ingest", "shop.orders", "--source", "/in", "--config", "/etc/logstore.toml"]


def _argv(confs: dict[str, str], args: list[str] | None = None) -> list[str]:
    return submit_argv(
        "/spark/bin/spark-submit", "spark://m:7077", confs, ["/cache/delta.jar", "/cache/kafka.jar"],
        ["/state/logstore_cli.zip"], "/state/logstore_submit.py", args or ARGS,
    )  # fmt: skip


def _option(argv: list[str], option: str) -> str:
    launcher = argv.index("/state/logstore_submit.py")
    assert argv[:launcher].count(option) == 1
    return argv[argv.index(option) + 1]


def _confs(argv: list[str]) -> dict[str, str]:
    launcher = argv.index("/state/logstore_submit.py")
    pairs = [argv[i + 1] for i in range(launcher) if argv[i] == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def test_the_users_jars_and_python_files_join_spark_submits_own_options() -> None:
    argv = _argv({
        "spark.jars": "/opt/extra/hadoop-aws.jar, /cache/kafka.jar,/opt/extra/bundle.jar",
        "spark.submit.pyFiles": "/opt/udfs.zip",
        "spark.executor.memory": "4g",
    })  # fmt: skip
    # spark-submit lets --jars win over a --conf spark.jars: everything must be in --jars.
    assert _option(argv, "--jars").split(",") == [
        "/cache/delta.jar", "/cache/kafka.jar", "/opt/extra/hadoop-aws.jar",
        "/opt/extra/bundle.jar",
    ]  # fmt: skip
    assert _option(argv, "--py-files").split(",") == ["/state/logstore_cli.zip", "/opt/udfs.zip"]
    assert _confs(argv) == {"spark.executor.memory": "4g"}
    assert argv[argv.index("/state/logstore_submit.py") + 1 :] == ARGS


def test_without_user_jars_the_command_is_unchanged() -> None:
    argv = _argv({"spark.executor.cores": "2"})
    assert _option(argv, "--jars") == "/cache/delta.jar,/cache/kafka.jar"
    assert _option(argv, "--py-files") == "/state/logstore_cli.zip"
    assert _confs(argv) == {"spark.executor.cores": "2"}


SECRET_CONFS = [
    "spark.hadoop.fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.access.key",
    "spark.hadoop.fs.s3a.session.token",
    "spark.hadoop.fs.s3a.bucket.landing.secret.key",
    "spark.hadoop.fs.azure.account.key.lake.dfs.core.windows.net",
    "spark.hadoop.fs.azure.account.oauth2.client.secret",
    "spark.hadoop.fs.azure.sas.fixed.token.lake.dfs.core.windows.net",
    "spark.hadoop.javax.jdo.option.ConnectionPassword",
    "spark.ssl.keyStorePassword",
    "spark.authenticate.secret",
    "spark.kubernetes.authenticate.submission.oauthToken",
]


@pytest.mark.parametrize("key", SECRET_CONFS)
def test_hadoop_and_spark_credential_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)


def test_secret_confs_from_the_config_file_are_never_printed() -> None:
    confs = {key: SECRET for key in SECRET_CONFS}
    confs["spark.executor.extraJavaOptions"] = f"-Dstore.password={SECRET}"  # secret by value
    confs["spark.hadoop.fs.s3a.aws.credentials.provider"] = "IAMInstanceCredentialsProvider"
    argv = _argv(confs)
    assert SECRET not in shlex.join(argv)
    # The driver is logstore reading the same --config: it sets them on its session.
    assert _confs(argv) == {
        "spark.hadoop.fs.s3a.aws.credentials.provider": "IAMInstanceCredentialsProvider"
    }


@pytest.mark.parametrize(
    "given",
    [["--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}"],
     [f"--conf=spark.hadoop.fs.azure.account.key.lake.dfs.core.windows.net={SECRET}"],
     ["--conf", f"spark.driver.extraJavaOptions=-Dtoken={SECRET}"],
     ["--source-option", f"kafka.sasl.jaas.config=x required password=\"{SECRET}\";"]],
    ids=["conf", "conf=", "conf-value", "source-option"],
)  # fmt: skip
def test_a_secret_on_the_command_line_is_refused_not_printed(given: list[str]) -> None:
    with pytest.raises(InvalidInputError) as info:
        _argv({}, [*ARGS, *given])
    text = f"{info.value.message} {info.value.hint}"
    assert info.value.message.startswith("--print-spark-submit would print the secret value of")
    assert SECRET not in text and "config file" in text


def test_plain_confs_on_the_command_line_pass() -> None:
    args = [*ARGS, "--conf", "spark.executor.memory=4g", "--source-option", "maxFilesPerTrigger=5"]
    check_no_secret_flags(args)
    assert _argv({}, args)[-len(args) :] == args


@pytest.mark.parametrize(
    "key",
    ["spark.hadoop.fs.s3a.aws.credentials.provider", "spark.hadoop.fs.gs.auth.access.token.provider",
     "spark.hadoop.fs.azure.sas.token.provider.type"],
)  # fmt: skip
def test_a_credential_provider_is_no_secret_and_is_printed(key: str) -> None:
    # The way docs/cluster.md recommends must survive --print-spark-submit.
    assert not is_secret_key(key)
    args = [*ARGS, "--conf", f"{key}=org.example.Provider"]
    assert _confs(_argv({key: "org.example.Provider"}, args)) == {key: "org.example.Provider"}
