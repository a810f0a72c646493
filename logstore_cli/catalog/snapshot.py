"""A Delta snapshot's rows read with delta-rs (no JVM): the first half of a hybrid read by the
consumer engine, and what ``verify`` compares the log with.

Rows come in Arrow batches (``to_pyarrow_dataset``), so a large table is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from logstore_cli.catalog.delta_log import TableLocation, delta_rs_args, where
from logstore_cli.errors import LogstoreError

_BATCH_ROWS = 8192


def pyarrow_dataset(dt: Any) -> Any:
    """``dt.to_pyarrow_dataset()``, also for a table with Delta's ``typeWidening`` reader feature
    (``alter-table --widen-column``), which delta-rs 1.x refuses only for not knowing its name:
    the dataset reads every file with the table's (widened) schema, and pyarrow casts a file's
    narrower integers and decimals up as it reads, which is all the feature asks of a reader."""
    import deltalake.table as delta_table

    if "typeWidening" in (dt.protocol().reader_features or ()):
        delta_table.SUPPORTED_READER_FEATURES.add("typeWidening")
    return dt.to_pyarrow_dataset()


def snapshot_batches(
    table: TableLocation, version: int | None = None, columns: list[str] | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The rows of the table at ``version`` (None: the latest), in batches of Python dicts; on
    object storage delta-rs reads it with the storage's options."""
    from deltalake import DeltaTable

    try:
        uri, options = delta_rs_args(table)
        dt = DeltaTable(uri, version=version, storage_options=options)
        dataset = pyarrow_dataset(dt)
        scanner = dataset.scanner(columns=columns, batch_size=_BATCH_ROWS)
        for batch in scanner.to_batches():
            if batch.num_rows:
                yield batch.to_pylist()
    except LogstoreError:
        raise
    except Exception as exc:  # delta-rs and pyarrow raise their own error types
        at = "its latest version" if version is None else f"version {version}"
        raise LogstoreError(
            f"cannot read the Delta table at {where(table)} ({at}): {exc}",
            hint="check that the version exists (logstore status shows the latest) and that the "
            "table's files are readable by this user",
        ) from exc
