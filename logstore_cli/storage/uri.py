"""Where a warehouse lives, parsed from its text, and the key segments every backend builds from.

Pure: no I/O. ``parse_storage_uri`` tells a local path (a plain path or a ``file:`` URI without a
host) from ``s3://bucket/prefix`` and ``hdfs://host:port/path``; ``segment_problem`` is the one rule
for a single name a backend appends under its prefix (a database, a table, ``_logstore``,
``lease.json``): keys are *built* from checked segments, never normalized from user text, so no
``..``, ``//``, ``%2e%2e``, backslash or control character can move a key out of its prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from logstore_cli.errors import InvalidInputError

Scheme = Literal["file", "s3", "hdfs"]

MAX_SEGMENT_BYTES = 255  # a file name's limit on every local file system; S3 keys allow more
# S3's bucket naming rules (general purpose buckets): 3-63 of a-z, 0-9, '.', '-', starting and
# ending with a letter or digit; no '..'. Legacy upper-case/underscore names are not accepted.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<rest>.*)", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]")  # 'C:\...' is no scheme


def segment_problem(segment: str) -> str | None:
    """Why ``segment`` cannot be one level of a key or path below a prefix; None when it can."""
    if not segment:
        return "it is empty"
    if segment in (".", ".."):
        return f"'{segment}' names a directory relative to another"
    if "/" in segment or "\\" in segment:
        return "it holds a path separator ('/' or '\\')"
    if "%" in segment:
        return "it holds '%' (percent-encoding would be read differently by each client)"
    if _CONTROL.search(segment):
        return "it holds a control character"
    if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
        return f"it is longer than {MAX_SEGMENT_BYTES} bytes"
    try:
        segment.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid Unicode text (a lone surrogate)"
    return None


def key_segments(key: str, *, what: str = "key") -> tuple[str, ...]:
    """``key`` ('a/b/c') split into checked segments; InvalidInputError naming the bad one."""
    segments = tuple(key.split("/"))
    for segment in segments:
        problem = segment_problem(segment)
        if problem is not None:
            raise InvalidInputError(
                f"refusing the {what} {key!r}: a segment {segment!r} is not allowed ({problem})",
                hint="logstore builds keys from validated names only; nothing may reach outside "
                "the warehouse's prefix",
            )
    return segments


@dataclass(frozen=True)
class StorageURI:
    """A parsed warehouse location. ``path`` is the local path (``file``), the key prefix as
    segments (``s3``, empty for a bucket's root) or the absolute path's segments (``hdfs``)."""

    scheme: Scheme
    bucket: str = ""  # s3
    host: str = ""  # hdfs: 'namenode' or 'namenode:port'
    local_path: str = ""  # file
    segments: tuple[str, ...] = ()

    @property
    def prefix(self) -> str:
        """The key prefix (s3) or path (hdfs) without leading or trailing '/'."""
        return "/".join(self.segments)

    def __str__(self) -> str:
        if self.scheme == "file":
            return self.local_path
        root = f"{self.scheme}://{self.bucket or self.host}"
        return f"{root}/{self.prefix}" if self.segments else root


def _invalid(text: str, problem: str, hint: str) -> InvalidInputError:
    return InvalidInputError(f"the warehouse '{_shown(text)}' is not valid: {problem}", hint=hint)


def _shown(text: str) -> str:
    """``text`` fit to show: no ``user:password@`` (a credential must never be echoed)."""
    shown = re.sub(r"^([^:/]+://)[^/@]*@", r"\1***@", text)
    return _CONTROL.sub("?", shown)


def _path_segments(text: str, path: str, *, what: str) -> tuple[str, ...]:
    """The segments of ``path`` (trailing '/' ignored); an empty segment ('//') is refused."""
    path = path.rstrip("/")
    if not path:
        return ()
    segments = tuple(path.split("/"))
    for segment in segments:
        problem = segment_problem(segment)
        if problem is not None:
            raise _invalid(
                text,
                f"the {what} segment {segment!r} is not allowed: {problem}",
                hint=f"give the {what} as plain names separated by single '/'",
            )
    return segments


def parse_storage_uri(text: str) -> StorageURI:
    """The location ``text`` names; InvalidInputError (exit 2) saying what is wrong otherwise."""
    raw = text.strip()
    if not raw:
        raise _invalid(text, "it is empty", hint="give a directory, or s3://bucket/prefix")
    found = _URI.fullmatch(raw)
    if found is None or _WINDOWS_DRIVE.fullmatch(found.group("scheme")):
        return StorageURI("file", local_path=raw)
    scheme, rest = found.group("scheme").lower(), found.group("rest")
    if scheme == "file":
        host, path = "", rest
        if rest.startswith("//"):
            host, _, tail = rest[2:].partition("/")
            path = "/" + tail
        if host not in ("", "localhost") or path.startswith("//"):
            raise _invalid(
                text, "a file: URI with a host is a remote file system",
                hint="give a local path, or file:///absolute/path",
            )  # fmt: skip
        return StorageURI("file", local_path=unquote(path))
    if scheme not in ("s3", "s3a", "hdfs"):
        raise _invalid(
            text, f"the scheme '{scheme}:' is not supported",
            hint="use a local path, s3://bucket/prefix or hdfs://namenode:port/path",
        )  # fmt: skip
    if not rest.startswith("//"):
        raise _invalid(text, f"'{scheme}:' must be followed by '//'", hint=f"{scheme}://…")
    authority, slash, path = rest[2:].partition("/")
    if "@" in authority:
        raise _invalid(
            text, "credentials in the URI are not accepted (they would end up in logs)",
            hint="give credentials through the standard AWS variables or a profile",
        )  # fmt: skip
    if "?" in raw or "#" in raw:
        raise _invalid(text, "it holds '?' or '#'", hint="give the location without a query")
    if scheme in ("s3", "s3a"):
        if not _BUCKET.fullmatch(authority) or ".." in authority:
            raise _invalid(
                text, f"'{authority}' is not an S3 bucket name",
                hint="bucket names are 3-63 lower-case letters, digits, '.' and '-'",
            )  # fmt: skip
        segments = _path_segments(text, path, what="prefix") if slash else ()
        return StorageURI("s3", bucket=authority, segments=segments)
    host, _, port = authority.partition(":")
    if not _HOST.fullmatch(host) or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise _invalid(
            text, f"'{authority}' is not a NameNode address",
            hint="write hdfs://namenode:port/path",
        )  # fmt: skip
    segments = _path_segments(text, path, what="path") if slash else ()
    return StorageURI("hdfs", host=authority, segments=segments)
