"""``LogstoreError.plain``: how the dev scripts (the S3 and HDFS servers) print an error without
Rich: the message, the hint, the detail, each only when there is one."""

from __future__ import annotations

import pytest

from logstore_cli.errors import LogstoreError

pytestmark = pytest.mark.unit


def test_plain_has_the_parts_there_are() -> None:
    assert LogstoreError("it broke").plain() == "error: it broke"
    full = LogstoreError("it broke", hint="do this", detail="line 1\nline 2")
    assert full.plain() == "error: it broke\nhint: do this\nline 1\nline 2"
