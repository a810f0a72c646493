"""A real local Spark session with Delta, started once per run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from logstore_cli.errors import LogstoreError
    from logstore_cli.jobs.spark import SparkSettings, build_session

    # Spark's own files (driver logs, SQL warehouse) in the run's temp dir, not the user's state dir.
    work_dir = tmp_path_factory.mktemp("spark")
    try:
        session = build_session(
            SparkSettings(master="local[2]", app_name="logstore-tests", work_dir=work_dir)
        )
    except LogstoreError as exc:
        pytest.fail(f"could not start Spark: {exc}\n{exc.detail or ''}", pytrace=False)
    try:
        yield session
    finally:
        session.stop()
