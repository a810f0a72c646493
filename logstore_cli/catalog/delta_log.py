"""Where a table's Delta log is read from (issue 19 stage 2b): a ``TableLocation`` is a local table
directory (``Path``, today's case, read with plain file calls: no storage client is imported and no
extra call is made) or a ``Storage`` rooted at the table (an S3 prefix, ``catalog.warehouse.
table_storage``), read through the seam.

Every key read here is ``_delta_log/<20-digit version>.json`` or the ``_delta_log`` listing below
the table's own root, built from an integer, never from a name found in the log: a ``Storage``
checks each key's segments and never addresses anything outside its root, so nothing outside the
table's prefix is read.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # a local table never imports the seam (the Spark job calls these per epoch)
    from logstore_cli.storage.base import Storage

TableLocation: TypeAlias = "Path | Storage"

LOG_DIR = "_delta_log"
COMMIT_FILE = re.compile(r"(\d{20})\.json")


def commit_name(version: int) -> str:
    """The file name of commit ``version`` in ``_delta_log``."""
    return f"{version:020d}.json"


def where(table: TableLocation, version: int | None = None) -> str:
    """The table (or its commit ``version``) as a message names it (a path, a URI: no secret)."""
    if isinstance(table, Path):
        return str(table if version is None else table / LOG_DIR / commit_name(version))
    return table.uri if version is None else f"{table.uri}/{LOG_DIR}/{commit_name(version)}"


def log_names(table: TableLocation) -> list[str]:
    """The names in the table's ``_delta_log`` (OSError when it cannot be listed locally; a
    ``Storage`` raises its own LogstoreError, and lists a missing directory as empty)."""
    if isinstance(table, Path):
        return os.listdir(table / LOG_DIR)
    return list(table.list(LOG_DIR).files)


def open_commit(table: TableLocation, version: int) -> IO[bytes]:
    """Commit ``version``'s JSON, to read line by line; FileNotFoundError when it is not there."""
    if isinstance(table, Path):
        return (table / LOG_DIR / commit_name(version)).open("rb")
    blob = table.read(f"{LOG_DIR}/{commit_name(version)}")
    if blob is None:
        raise FileNotFoundError(where(table, version))
    return io.BytesIO(blob.data)


def has_commit(table: TableLocation, version: int) -> bool:
    """Whether commit ``version``'s file is there."""
    if isinstance(table, Path):
        return (table / LOG_DIR / commit_name(version)).exists()
    return table.exists(f"{LOG_DIR}/{commit_name(version)}")


def spark_path(table: TableLocation) -> str:
    """The table as Spark opens it: the local path, or the Hadoop URI of its ``Storage``
    (``s3a://`` for S3, ``hdfs://`` for HDFS). Only Spark gets this text: logstore's own reads and writes go through
    ``table`` itself, never through a path made of a URI."""
    if isinstance(table, Path):
        return str(table)
    from logstore_cli.storage.hdfs import HdfsStorage
    from logstore_cli.storage.local import LocalStorage
    from logstore_cli.storage.s3 import S3Storage

    if isinstance(table, (S3Storage, HdfsStorage)):
        return table.spark_uri
    if isinstance(table, LocalStorage):
        return str(table.root)
    raise TypeError(f"no Spark location for {table!r}")


def delta_rs_args(table: TableLocation) -> tuple[str, dict[str, str] | None]:
    """The URI and ``storage_options`` delta-rs opens the table with (the options may hold keys:
    give them to delta-rs only, never show or store them)."""
    if isinstance(table, Path):
        return str(table), None
    from logstore_cli.storage import delta_rs_location

    return delta_rs_location(table)
