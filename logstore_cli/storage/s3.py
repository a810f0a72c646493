"""``Storage`` on S3 and S3-compatible servers, through boto3.

Why boto3 (and not obstore, the Python binding of Rust's object_store that delta-rs uses): the
issue asks that the configuration a user already has be enough, "as it does for the AWS CLI".
boto3/botocore *is* that standard credential chain: environment variables, shared config and
credentials files with profiles, SSO, assume-role, web identity, container and instance metadata,
plus ``AWS_ENDPOINT_URL[_S3]``. object_store reads environment variables and instance metadata but
not profiles. botocore sends ``If-None-Match: *`` and ``If-Match`` on ``PutObject`` (the two
conditional writes the lease needs) and is maintained by AWS. Its cost is a heavy import (~0.3 s),
so this module is imported only when a warehouse is on S3 (never by ``--help`` or ``validate``).

Settings (``S3Settings.from_env``): the endpoint from ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` (boto3 reads them itself), the region from ``AWS_REGION``, then
``AWS_DEFAULT_REGION`` or the profile, else ``us-east-1``; path-style addressing whenever an endpoint
is given (S3-compatible servers rarely have per-bucket DNS names). A plain ``http://`` endpoint is
accepted on loopback only, or anywhere with ``AWS_ALLOW_HTTP=true`` (delta-rs's variable).
Secrets are never part of a message, a ``repr`` or a URI: ``S3Settings`` hides them.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from logstore_cli.errors import ConfigError, WarehouseError
from logstore_cli.storage.base import Blob, Listing, Storage
from logstore_cli.storage.uri import key_segments, segment_problem

if TYPE_CHECKING:
    from collections.abc import Iterator

DEFAULT_REGION = "us-east-1"
_LOST = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "404", "412"})
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3. Credentials None: boto3's own chain (environment, profile, ...) finds them."""

    endpoint: str | None = None
    region: str = DEFAULT_REGION
    profile: str | None = None
    path_style: bool = False
    allow_http: bool = False
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> S3Settings:
        """The settings of the process's environment (``env`` None: credentials and profile are
        left to boto3's own chain, with its precedence), or of an explicit mapping (its keys and
        profile are used, e.g. a test server's)."""
        source = os.environ if env is None else env
        endpoint = source.get("AWS_ENDPOINT_URL_S3") or source.get("AWS_ENDPOINT_URL") or None
        region = source.get("AWS_REGION") or source.get("AWS_DEFAULT_REGION") or ""
        explicit = env if env is not None else {}
        settings = cls(
            endpoint=endpoint,
            region=region or DEFAULT_REGION,
            profile=explicit.get("AWS_PROFILE") or None,
            path_style=endpoint is not None,
            allow_http=_truthy(source.get("AWS_ALLOW_HTTP")),
            access_key_id=explicit.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=explicit.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=explicit.get("AWS_SESSION_TOKEN") or None,
        )
        settings.check()
        return settings

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's ``storage_options`` for the same store (object_store's AWS keys). Holds the
        keys when these settings carry them: pass it to delta-rs, never show or store it."""
        options = {"AWS_REGION": self.region}
        if self.endpoint is not None:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            if urlsplit(self.endpoint).scheme == "http":
                options["AWS_ALLOW_HTTP"] = "true"  # check() allowed it (loopback or opted in)
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if self.path_style else "true"
        if self.profile is not None:
            options["AWS_PROFILE"] = self.profile
        for name, value in (
            ("AWS_ACCESS_KEY_ID", self.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key),
            ("AWS_SESSION_TOKEN", self.session_token),
        ):
            if value is not None:
                options[name] = value
        return options

    def check(self) -> None:
        """ConfigError (exit 2) for an endpoint that is no URL, or plain HTTP off loopback."""
        if self.endpoint is None:
            return
        parts = urlsplit(self.endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"the S3 endpoint {_endpoint_shown(self.endpoint)!r} is not an http(s) URL",
                hint="set AWS_ENDPOINT_URL to e.g. https://s3.example.com or http://127.0.0.1:9000",
            )
        if parts.username or parts.password:
            raise ConfigError(
                "the S3 endpoint URL holds credentials",
                hint="give credentials through AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a "
                "profile, never in the URL",
            )
        if parts.scheme == "http" and not self.allow_http and not _is_loopback(parts.hostname):
            raise ConfigError(
                f"the S3 endpoint {self.endpoint} is plain HTTP on a host that is not loopback: "
                "credentials and data would cross the network unencrypted",
                hint="use https://, or set AWS_ALLOW_HTTP=true if this network is trusted",
            )


# The AWS SDK v2's default chain (environment variables, system properties, web identity, the
# profile files with AWS_PROFILE, container and instance credentials): the same sources as boto3's,
# read by the JVM itself, so no key is ever a Spark setting. Hadoop 3.4 takes SDK v2 providers
# through their static create().
S3A_DEFAULT_CHAIN = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
S3A_KEYS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
S3A_SESSION_KEYS_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
_S3A = "spark.hadoop.fs.s3a."


def s3a_spark_conf(settings: S3Settings) -> dict[str, str]:
    """The Spark settings of Hadoop's ``s3a://`` connector for ``settings``'s store. Pure.

    Credentials come from the AWS SDK's default chain in the JVM (``S3A_DEFAULT_CHAIN``). Only
    settings that carry keys themselves (an explicit mapping, e.g. a test server's) add
    ``fs.s3a.access.key``/``secret.key``/``session.token``: secret settings (``model.is_secret``),
    which ``jobs.spark`` hands to the running JVM over its gateway and ``--print-spark-submit``
    leaves out, never a command line. A profile is not a setting: the chain reads ``AWS_PROFILE``
    from the JVM's environment, which is the process's.
    """
    conf = {
        _S3A + "endpoint.region": settings.region,
        _S3A + "path.style.access": "true" if settings.path_style else "false",
        _S3A + "aws.credentials.provider": S3A_DEFAULT_CHAIN,
    }
    if settings.endpoint is not None:
        conf[_S3A + "endpoint"] = settings.endpoint
        # Kept equal to the URL's scheme (S3A uses the switch for an endpoint written without
        # one); check() has allowed plain HTTP (loopback, or AWS_ALLOW_HTTP).
        secure = urlsplit(settings.endpoint).scheme != "http"
        conf[_S3A + "connection.ssl.enabled"] = "true" if secure else "false"
    if settings.access_key_id is not None and settings.secret_access_key is not None:
        conf[_S3A + "access.key"] = settings.access_key_id
        conf[_S3A + "secret.key"] = settings.secret_access_key
        conf[_S3A + "aws.credentials.provider"] = S3A_KEYS_PROVIDER
        if settings.session_token is not None:
            conf[_S3A + "session.token"] = settings.session_token
            conf[_S3A + "aws.credentials.provider"] = S3A_SESSION_KEYS_PROVIDER
    return conf


def _endpoint_shown(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.username or parts.password:
        return parts._replace(netloc=f"***@{parts.hostname or ''}").geturl()
    return endpoint


def make_client(settings: S3Settings) -> Any:
    """A boto3 S3 client for ``settings`` (boto3 imported here, lazily)."""
    import boto3
    from botocore.config import Config as BotoConfig

    session = boto3.session.Session(profile_name=settings.profile)
    config = BotoConfig(
        region_name=settings.region,
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        retries={"mode": "standard"},
        # No checksum headers the S3-compatible servers may not know (botocore >= 1.36 adds them).
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client(
        "s3",
        endpoint_url=settings.endpoint,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        aws_session_token=settings.session_token,
        config=config,
    )


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


def _failure(what: str, uri: str, exc: Exception) -> WarehouseError:
    """A boto3/botocore failure as a WarehouseError; never with credentials (botocore's own
    messages name the operation, the error code and the server's message, not the keys)."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return WarehouseError(
            f"cannot {what} {uri}: no AWS credentials were found",
            hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, as for the "
            "AWS CLI",
        )
    code = _code(exc)
    if code in ("NoSuchBucket",):
        return WarehouseError(
            f"cannot {what} {uri}: the bucket does not exist",
            hint="create it first (e.g. 'aws s3 mb'), or fix the warehouse URI",
        )
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return WarehouseError(
            f"cannot {what} {uri}: access denied ({code})",
            hint="check the credentials and that they may read and write this bucket",
        )
    return WarehouseError(
        f"cannot {what} {uri}: {exc}",
        hint="check AWS_ENDPOINT_URL, the region and that the server is reachable",
    )


class S3Storage:
    """``Storage`` below ``s3://bucket/prefix``. ``client`` is a boto3 S3 client (shared by
    children; boto3 clients are thread-safe)."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        segments: tuple[str, ...] = (),
        settings: S3Settings | None = None,
    ) -> None:
        for segment in segments:
            if segment_problem(segment):
                raise ValueError(f"bad prefix segment {segment!r}")  # callers pass checked ones
        self._client = client
        self._bucket = bucket
        self._segments = tuple(segments)
        self.settings = settings or S3Settings()  # what the client was made with (for delta-rs)

    @classmethod
    def open(cls, bucket: str, segments: tuple[str, ...], settings: S3Settings) -> S3Storage:
        return cls(make_client(settings), bucket, segments, settings)

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix of this root: '' or 'a/b/' (always ending in '/')."""
        return "".join(f"{s}/" for s in self._segments)

    @property
    def uri(self) -> str:
        return f"s3://{self._bucket}/{self.prefix}".rstrip("/")

    @property
    def spark_uri(self) -> str:
        """The same location as Spark (Hadoop's S3A connector, ``s3a_spark_conf``) names it."""
        return f"s3a://{self._bucket}/{self.prefix}".rstrip("/")

    def __repr__(self) -> str:
        return f"S3Storage({self.uri!r})"

    def key(self, key: str) -> str:
        """The full object key of ``key``: built from checked segments, never normalized."""
        return "/".join((*self._segments, *key_segments(key)))

    def child(self, key: str) -> Storage:
        segments = (*self._segments, *key_segments(key))
        return S3Storage(self._client, self._bucket, segments, self.settings)

    def _where(self, key: str) -> str:
        return f"s3://{self._bucket}/{self.key(key)}"

    def read(self, key: str) -> Blob | None:
        full = self.key(key)
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=full)
            return Blob(response["Body"].read(), str(response["ETag"]))
        except Exception as exc:
            if _code(exc) in _MISSING:
                return None
            raise _failure("read", self._where(key), exc) from None

    def write(self, key: str, data: bytes) -> str:
        try:
            response = self._client.put_object(Bucket=self._bucket, Key=self.key(key), Body=data)
        except Exception as exc:
            raise _failure("write", self._where(key), exc) from None
        return str(response["ETag"])

    def _conditional_put(self, key: str, data: bytes, condition: dict[str, str]) -> str | None:
        try:
            response = self._client.put_object(
                Bucket=self._bucket, Key=self.key(key), Body=data, **condition
            )
        except Exception as exc:
            # 412: the condition failed; 409: a concurrent conditional write to the key won
            # (AWS asks to retry: the retry would read the winner's version); 404: If-Match on a
            # key that is gone.
            if _code(exc) in _LOST or _code(exc) == "409":
                return None
            raise _failure("write", self._where(key), exc) from None
        return str(response["ETag"])

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        return self._conditional_put(key, data, {"IfNoneMatch": "*"})

    def replace_if_version(self, key: str, data: bytes, version: str) -> str | None:
        return self._conditional_put(key, data, {"IfMatch": version})

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=self.key(key))
        except Exception as exc:
            if _code(exc) in _MISSING:
                return
            raise _failure("delete", self._where(key), exc) from None

    def delete_all(self) -> int:
        """Delete every object below this root, its prefix ('db/table/') and nothing else: how
        many. Refused on a bucket's root (a warehouse's table is always some levels down)."""
        if not self._segments:
            raise WarehouseError(
                f"refusing to delete everything in the bucket {self._bucket}",
                hint="logstore deletes only below a table's own prefix",
            )
        prefix, deleted = self.prefix, 0
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            # A listing page holds at most 1,000 keys, what one DeleteObjects takes.
            for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
                keys = [str(item["Key"]) for item in page.get("Contents", ())]
                # The server's answer, checked all the same: nothing outside the prefix.
                batch = [{"Key": key} for key in keys if key.startswith(prefix)]
                if not batch:
                    continue
                answer = self._client.delete_objects(
                    Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True}
                )
                if errors := answer.get("Errors"):
                    first = errors[0]
                    raise WarehouseError(
                        f"could not delete {len(errors)} of {len(batch)} objects under "
                        f"s3://{self._bucket}/{prefix}: {first.get('Key')}: "
                        f"{first.get('Code')} {first.get('Message', '')}".rstrip(),
                        hint="check the credentials' delete permission on the prefix, then "
                        "run the command again (what was deleted stays deleted)",
                    )
                deleted += len(batch)
        except WarehouseError:
            raise
        except Exception as exc:
            raise _failure("delete", f"s3://{self._bucket}/{prefix}", exc) from None
        return deleted

    def exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self._bucket, Key=self.key(key))
        except Exception as exc:
            if _code(exc) in _MISSING:
                return False
            raise _failure("read", self._where(key), exc) from None
        return True

    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self._client.get_paginator("list_objects_v2")
        yield from paginator.paginate(Bucket=self._bucket, Prefix=prefix, Delimiter="/")

    def list(self, key: str = "") -> Listing:
        prefix = self.key(key) + "/" if key else self.prefix
        files: list[str] = []
        dirs: list[str] = []
        modified: dict[str, int] = {}
        try:
            for page in self._pages(prefix):
                for item in page.get("Contents", ()):
                    name = str(item["Key"])[len(prefix) :]
                    if not segment_problem(name):
                        files.append(name)
                        modified[name] = int(item["LastModified"].timestamp() * 1000)
                for common in page.get("CommonPrefixes", ()):
                    name = str(common["Prefix"])[len(prefix) :].removesuffix("/")
                    if not segment_problem(name):
                        dirs.append(name)
        except Exception as exc:
            raise _failure("list", f"s3://{self._bucket}/{prefix}", exc) from None
        return Listing(tuple(sorted(files)), tuple(sorted(dirs)), modified)
