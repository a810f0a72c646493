"""``backend`` (``tests/backends.py``): a fresh warehouse on each backend in turn (local, S3, HDFS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import BACKENDS, Backend


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """An empty warehouse on the backend of the parameter (see ``open_backend``)."""
    return open_backend(request, request.param, tmp_path)


def open_backend(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Backend:
    """An empty warehouse on backend ``name``; only that backend's server is asked for (at run
    time: the parameter's mark tells the scheduler which server the case uses)."""
    if name == "local":
        return Backend("local", str(tmp_path / "wh"), local=tmp_path / "wh")
    if name == "s3":
        bucket = request.getfixturevalue("s3_bucket")  # and s3_env: the AWS variables, set
        return Backend("s3", f"s3://{bucket}/lake/wh")
    if name == "hdfs":
        return Backend("hdfs", f"{request.getfixturevalue('hdfs_dir')}/wh")
    raise AssertionError(f"no backend {name!r}")
