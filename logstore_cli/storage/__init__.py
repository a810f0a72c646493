"""The storage seam (issue 19): one interface for what logstore itself reads and writes, chosen by
the warehouse's scheme. ``open_storage`` imports a backend's client only when it is used (boto3 for
``s3://``, hdfs-native for ``hdfs://``), so commands on a local warehouse never load it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from logstore_cli.storage.base import Blob, Listing, Storage
from logstore_cli.storage.uri import StorageURI, parse_storage_uri

if TYPE_CHECKING:
    from logstore_cli.storage.s3 import S3Settings

__all__ = [
    "Blob",
    "Listing",
    "Storage",
    "StorageURI",
    "delta_rs_location",
    "open_storage",
    "parse_storage_uri",
]


def open_storage(location: StorageURI | str, *, s3: S3Settings | None = None) -> Storage:
    """The ``Storage`` rooted at ``location``; S3 settings from the environment unless given."""
    uri = parse_storage_uri(location) if isinstance(location, str) else location
    if uri.scheme == "file":
        from logstore_cli.storage.local import LocalStorage

        return LocalStorage(Path(uri.local_path).expanduser())
    if uri.scheme == "s3":
        from logstore_cli.storage.s3 import S3Settings, S3Storage

        return S3Storage.open(uri.bucket, uri.segments, s3 or S3Settings.from_env())
    from logstore_cli.storage.hdfs import HdfsStorage

    return HdfsStorage.open(uri.host, uri.segments)


def delta_rs_location(storage: Storage) -> tuple[str, dict[str, str] | None]:
    """The URI and ``storage_options`` delta-rs opens ``storage``'s root with (the options may
    hold keys: give them to delta-rs only, never show or store them)."""
    from logstore_cli.storage.hdfs import HdfsStorage
    from logstore_cli.storage.local import LocalStorage
    from logstore_cli.storage.s3 import S3Storage

    if isinstance(storage, LocalStorage):
        return str(storage.root), None
    if isinstance(storage, S3Storage):
        return storage.uri, storage.settings.delta_rs_options()
    if isinstance(storage, HdfsStorage):
        return storage.uri, None  # delta-rs's hdfs:// is built in and needs no option
    raise TypeError(f"no delta-rs location for {storage!r}")
