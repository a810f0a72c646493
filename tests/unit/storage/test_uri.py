"""The warehouse's location parsed from its text, and the one rule for a key's segments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.errors import InvalidInputError
from logstore_cli.storage.uri import StorageURI, key_segments, parse_storage_uri, segment_problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("./warehouse", StorageURI("file", local_path="./warehouse")),
        ("/data/wh", StorageURI("file", local_path="/data/wh")),
        ("file:///data/my%20wh", StorageURI("file", local_path="/data/my wh")),
        ("file://localhost/data", StorageURI("file", local_path="/data")),
        ("C:\\wh", StorageURI("file", local_path="C:\\wh")),
        ("s3://bucket", StorageURI("s3", bucket="bucket")),
        ("s3://bucket/", StorageURI("s3", bucket="bucket")),
        ("s3://my.bucket-1/a/b/", StorageURI("s3", bucket="my.bucket-1", segments=("a", "b"))),
        ("S3A://bucket/wh", StorageURI("s3", bucket="bucket", segments=("wh",))),
        ("hdfs://nn:8020/user/wh", StorageURI("hdfs", host="nn:8020", segments=("user", "wh"))),
    ],
)
def test_locations_are_recognised(text: str, expected: StorageURI) -> None:
    assert parse_storage_uri(text) == expected


def test_a_location_is_written_back_as_given() -> None:
    assert str(parse_storage_uri("s3://b12/x/y/")) == "s3://b12/x/y"
    assert str(parse_storage_uri("s3://b12")) == "s3://b12"
    assert str(parse_storage_uri("hdfs://nn:9000/w")) == "hdfs://nn:9000/w"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("s3://Bucket/x", "not an S3 bucket name"),
        ("s3://ab/x", "not an S3 bucket name"),
        ("s3://a..b/x", "not an S3 bucket name"),
        ("s3:bucket/x", "must be followed by '//'"),
        ("s3://bucket//x", "is not allowed: it is empty"),
        ("s3://bucket/a/../b", "'..' names a directory"),
        ("s3://bucket/a/./b", "'.' names a directory"),
        ("s3://bucket/%2e%2e/x", "percent-encoding"),
        ("s3://bucket/a\\b", "path separator"),
        ("s3://bucket/a\x00b", "control character"),
        ("s3://bucket/a\nb", "control character"),
        ("s3://bucket/x?versionId=1", "'?' or '#'"),
        ("gs://bucket/x", "scheme 'gs:' is not supported"),
        ("file://host/x", "with a host"),
        ("hdfs://nn:99999/x", "not a NameNode address"),
        ("hdfs://-nn/x", "not a NameNode address"),
    ],
)
def test_bad_locations_are_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_storage_uri(text)
    assert says in caught.value.message
    assert caught.value.exit_code == 2


def test_credentials_in_a_uri_are_refused_and_never_echoed() -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_storage_uri("s3://AKIAKEY:s3cr3t@bucket/x")
    assert "credentials" in caught.value.message
    assert "s3cr3t" not in caught.value.message and "AKIAKEY" not in caught.value.message


HOSTILE = ["", ".", "..", "a/b", "/a", "a/", "a\\b", "%2e%2e", "%2F", "a\x00", "\x7f", "\t", "x" * 256]  # fmt: skip


@pytest.mark.parametrize("segment", HOSTILE)
def test_hostile_segments_are_refused(segment: str) -> None:
    assert segment_problem(segment) is not None


@pytest.mark.parametrize(
    "key", ["../x", "a/../../x", "a//b", "/etc/passwd", "a/", "%2e%2e/x", "..\\x", "a/\x00/b", ""]
)
def test_hostile_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidInputError):
        key_segments(key)


def test_plain_keys_split_into_their_segments() -> None:
    assert key_segments("db/t/_logstore/lease.json") == ("db", "t", "_logstore", "lease.json")
    assert key_segments("ünï-cödé_1") == ("ünï-cödé_1",)


@given(st.text(max_size=40))
def test_an_accepted_key_has_only_plain_segments(key: str) -> None:
    """Whatever text comes in, an accepted key never holds a segment that moves up or escapes."""
    try:
        segments = key_segments(key)
    except InvalidInputError:
        return
    assert "/".join(segments) == key
    for segment in segments:
        assert segment not in ("", ".", "..")
        assert not {"/", "\\", "%"} & set(segment)
        assert all(ord(c) >= 0x20 and ord(c) != 0x7F for c in segment)
