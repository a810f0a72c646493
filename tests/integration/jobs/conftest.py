"""The ``backend`` fixture of the job tests parametrized over warehouse backends (``backends.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .backends import Backend

# The remote cases carry their server's mark: ``-m s3`` / ``-m hdfs`` select them, ``-m "not s3"``
# leaves them out, and the scheduler runs them with the other users of that server.
BACKEND_PARAMS = [
    pytest.param("local", id="local"),
    pytest.param("s3", id="s3", marks=pytest.mark.s3),
    pytest.param("hdfs", id="hdfs", marks=pytest.mark.hdfs),
]


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh, empty warehouse on each backend in turn; only that backend's server is asked for
    (at run time: the marks above tell the scheduler which server the case uses)."""
    name = request.param
    if name == "local":
        return Backend("local", str(tmp_path / "wh"), local=tmp_path / "wh")
    if name == "s3":
        bucket = request.getfixturevalue("s3_bucket")  # and s3_env: the AWS variables, set
        return Backend("s3", f"s3://{bucket}/lake/wh")
    if name == "hdfs":
        return Backend("hdfs", f"{request.getfixturevalue('hdfs_dir')}/wh")
    raise AssertionError(f"no backend {name!r}")
