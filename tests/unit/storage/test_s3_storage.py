"""``S3Storage`` without a server: settings from the standard AWS variables, the keys it builds
(checked segments under its prefix, never normalized), and messages that hold no secret."""

from __future__ import annotations

from typing import Any

import pytest

from logstore_cli.errors import ConfigError
from logstore_cli.storage.s3 import S3Settings, S3Storage
from tests import storage_contract as contract


class RecordingClient:
    """Records every key an operation is sent for; answers as an empty bucket."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def put_object(self, **kw: Any) -> dict[str, Any]:
        self.keys.append(kw["Key"])
        return {"ETag": '"e"'}

    def delete_object(self, **kw: Any) -> None:
        self.keys.append(kw["Key"])


def test_keys_are_built_under_the_prefix() -> None:
    client = RecordingClient()
    storage = S3Storage(client, "bucket", ("wh", "v1"))
    storage.write("db/t/_logstore/lease.json", b"x")
    storage.child("db").child("t").delete("x")
    assert client.keys == ["wh/v1/db/t/_logstore/lease.json", "wh/v1/db/t/x"]
    assert storage.uri == "s3://bucket/wh/v1"
    assert S3Storage(client, "bucket").key("a/b") == "a/b"


def test_hostile_keys_never_reach_the_client() -> None:
    client = RecordingClient()
    contract.check_containment(S3Storage(client, "bucket", ("wh",)))
    assert client.keys == []


def test_settings_from_the_standard_variables() -> None:
    s = S3Settings.from_env(
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:7070", "AWS_REGION": "eu-west-1",
         "AWS_DEFAULT_REGION": "us-west-2", "AWS_PROFILE": "dev"}
    )  # fmt: skip
    assert (s.endpoint, s.region, s.profile, s.path_style) == (
        "http://127.0.0.1:7070", "eu-west-1", "dev", True,
    )  # fmt: skip
    assert S3Settings.from_env({"AWS_DEFAULT_REGION": "us-west-2"}).region == "us-west-2"
    default = S3Settings.from_env({})
    assert (default.endpoint, default.region, default.path_style) == (None, "us-east-1", False)
    s3_only = S3Settings.from_env(
        {"AWS_ENDPOINT_URL": "https://a.example", "AWS_ENDPOINT_URL_S3": "https://s3.example"}
    )
    assert s3_only.endpoint == "https://s3.example"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.1.2.3"])
def test_plain_http_is_accepted_on_loopback(host: str) -> None:
    S3Settings.from_env({"AWS_ENDPOINT_URL": f"http://{host}:9000"})


def test_plain_http_elsewhere_needs_allow_http() -> None:
    with pytest.raises(ConfigError, match="not loopback"):
        S3Settings.from_env({"AWS_ENDPOINT_URL": "http://s3.internal:9000"})
    S3Settings.from_env({"AWS_ENDPOINT_URL": "http://s3.internal:9000", "AWS_ALLOW_HTTP": "true"})


@pytest.mark.parametrize("endpoint", ["ftp://x", "127.0.0.1:9000", "http://"])
def test_an_endpoint_that_is_no_url_is_refused(endpoint: str) -> None:
    with pytest.raises(ConfigError, match="not an http"):
        S3Settings.from_env({"AWS_ENDPOINT_URL": endpoint})


def test_credentials_in_the_endpoint_are_refused_unshown() -> None:
    with pytest.raises(ConfigError) as caught:
        S3Settings.from_env({"AWS_ENDPOINT_URL": "https://key:s3cr3t@s3.example"})
    assert "s3cr3t" not in caught.value.message and "s3cr3t" not in (caught.value.hint or "")


def test_the_settings_repr_holds_no_secret() -> None:
    s = S3Settings(access_key_id="AKIAEXAMPLE", secret_access_key="s3cr3t", session_token="tok")
    assert "AKIAEXAMPLE" not in repr(s) and "s3cr3t" not in repr(s) and "tok" not in repr(s)


def test_boto3_is_imported_only_when_a_client_is_made() -> None:
    """The seam, the S3 backend's module and the lease on it load without boto3: only an s3://
    warehouse's first client pays its import."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import logstore_cli.storage, logstore_cli.storage.s3, logstore_cli.storage.local\n"
        "import logstore_cli.catalog.storage_lease, logstore_cli.catalog.warehouse\n"
        "import logstore_cli.provision.delta_log\n"
        "assert not {'boto3', 'botocore'} & set(sys.modules), 'boto3 loaded'\n"
        "from logstore_cli.storage.s3 import S3Settings, make_client\n"
        "make_client(S3Settings(endpoint='http://127.0.0.1:9'))\n"
        "assert 'boto3' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
