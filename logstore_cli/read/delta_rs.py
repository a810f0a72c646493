"""The delta-rs engine of ``logstore read --mode file``: the Delta table's snapshot (``--as-of``)
or its Change Data Feed (``--changes``) read with delta-rs and Arrow in this process, no JVM.

It gives what the Spark engine (``jobs/read.py``) gives for the same request: the same rows in the
same JSON lines (values through ``read.fold.ArrowRows`` and the wire format's encoders), the same
Change Data Feed order (by commit version, then primary key, a pre-image before its post-image),
and the same columns in a Delta or Parquet output (the table's columns, ``_ls_kind``, and with
``--changes`` ``_ls_version``). A timestamp resolves as Delta resolves it: a snapshot is the latest
version committed at or before it, a change feed starts at the first version committed at or
after it; a commit's time is its log file's modification time, or its in-commit timestamp when
the table records them.

Memory: a snapshot is read in Arrow batches (``to_pyarrow_dataset`` → ``to_batches``; delta-rs's
DataFusion scan for a table with deletion vectors, which pyarrow datasets do not read) and written
out batch by batch, so a table larger than memory streams through. The change feed is read in
windows of versions, each sorted, since delta-rs returns a range's changes in no particular order:
memory holds one window's changes (a window doubles only while the last held under 32,768 and
halves when one held over 65,536), or a single commit's when one holds more.
``--limit`` stops reading at the limit.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from logstore_cli.catalog import delta_log
from logstore_cli.catalog.delta_log import TableLocation
from logstore_cli.errors import InvalidInputError, LogstoreError
from logstore_cli.logformat.wire import RowKind
from logstore_cli.read import plan
from logstore_cli.read.service import ReadRequest, ReadSummary, Sink, check_new_path

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

ENGINE: Final = "delta-rs"
KIND: Final = "_ls_kind"  # the Spark engine's column names in a Delta or Parquet output
VERSION: Final = "_ls_version"
_BATCH_ROWS: Final = 8192
# A change feed is read in windows of versions of about this many changes (see _change_batches).
_WINDOW_ROWS: Final = 65_536
_ROW_GROUP_ROWS: Final = 131_072  # rows of a Parquet output's row group
_MAX_SPAN: Final = 1024
_CDF_KINDS: Final = {
    "insert": RowKind.INSERT,
    "update_preimage": RowKind.UPDATE_BEFORE,
    "update_postimage": RowKind.UPDATE_AFTER,
    "delete": RowKind.DELETE,
}
# A key's pre-image before its post-image (jobs/read.py orders the same way).
_CDF_RANK: Final = {"update_preimage": 0, "update_postimage": 1, "delete": 2, "insert": 3}
_COMMIT: Final = re.compile(r"(\d{20})\.json")
_VERSION_HINT = (
    "give a version or timestamp the table has (logstore status shows the latest version)"
)


def read_with_delta_rs(
    req: ReadRequest, sink: Sink | None, *, stop: Callable[[], bool] = lambda: False
) -> ReadSummary:
    """One ``--mode file`` read: to ``sink`` (a terminal table, JSON lines) or, when ``sink`` is
    None, to the request's Delta or Parquet path. ``stop()`` is asked between batches: a read to
    the sink ends there (what it emitted stays), a read to a path is removed and ends with
    ``KeyboardInterrupt``."""
    assert req.mode == "file"
    began = time.monotonic()
    summary = ReadSummary(req.name, "file", ENGINE, None)
    path = req.location
    table = _open(path)
    latest = table.version()
    as_of = None if req.as_of is None else plan.parse_as_of(req.as_of)
    if req.changes:
        first = 0 if as_of is None else _first_version(path, table, as_of, latest)
        _check_kept(path, first)
        batches = _change_batches(table, req, first, latest)
    else:
        version = latest if as_of is None else _snapshot_version(path, table, as_of, latest)
        if version != latest:
            table = _at_version(table, version)
        summary.snapshot_version = version
        batches = _snapshot_batches(table, req, version)
    batches = _limited(batches, req.limit, stop, stopping=req.output.path if sink is None else None)
    if sink is None:
        assert req.output.path is not None and req.output.kind in ("delta", "parquet")
        check_new_path(req.output.path)  # again, right before writing
        summary.rows = _write(req, _output_schema(req, table), batches)
    else:
        summary.rows = _drain(req, batches, sink)
    summary.limited = req.limit is not None and summary.rows >= req.limit
    if not req.changes:
        summary.snapshot_rows = summary.rows
    summary.seconds = time.monotonic() - began
    return summary


# -- the table and its versions ------------------------------------------------------------------


def _open(path: TableLocation) -> DeltaTable:
    from deltalake import DeltaTable

    uri, options = delta_log.delta_rs_args(path)
    try:
        return DeltaTable(uri, storage_options=options)
    except Exception as exc:  # delta-rs raises its own error types
        raise LogstoreError(
            f"cannot read the Delta table at {delta_log.where(path)}: {_first_line(exc)}",
            hint="check that the table's files are readable by this user",
        ) from exc


def _at_version(table: DeltaTable, version: int) -> DeltaTable:
    try:
        table.load_as_version(version)
    except Exception as exc:
        raise InvalidInputError(
            f"Delta cannot read that version: version {version} of {table.table_uri} is not "
            f"readable ({_first_line(exc)})",
            hint="its log may have been cleaned up; " + _VERSION_HINT,
        ) from None
    return table


def commit_times(path: TableLocation, *, in_commit: bool = False) -> dict[int, int]:
    """Each commit version the Delta log holds → its time in epoch milliseconds, as Delta takes
    it: the commit file's modification time, raised where needed so that times grow with
    versions (Delta's ``DeltaHistoryManager`` does the same); with ``in_commit`` (the table's
    ``delta.enableInCommitTimestamps``), a commit's own ``inCommitTimestamp`` where it has one."""
    found: dict[int, int] = {}
    if isinstance(path, Path):
        log = path / "_delta_log"
        try:
            with os.scandir(log) as entries:
                for entry in entries:
                    if m := _COMMIT.fullmatch(entry.name):
                        found[int(m.group(1))] = entry.stat().st_mtime_ns // 1_000_000
        except OSError as exc:
            raise LogstoreError(f"cannot list the Delta log {log}: {exc.strerror or exc}") from exc
    else:  # object storage: the objects' last-modified times, as Delta takes them there
        listing = path.list(delta_log.LOG_DIR)
        for name in listing.files:
            if m := _COMMIT.fullmatch(name):
                found[int(m.group(1))] = listing.modified[name]
    times: dict[int, int] = {}
    previous = None
    for version in sorted(found):
        at = found[version]
        if in_commit:
            at = _in_commit_timestamp(path, version, at)
        if previous is not None and at <= previous:
            at = previous + 1
        times[version] = previous = at
    return times


def _in_commit_timestamp(path: TableLocation, version: int, default: int) -> int:
    """The ``inCommitTimestamp`` of a commit's ``commitInfo`` (its first action when the table
    records them), else ``default``."""
    import json

    try:
        with delta_log.open_commit(path, version) as f:
            first = json.loads(f.readline() or b"{}")
    except (OSError, ValueError, LogstoreError):
        return default
    info = first.get("commitInfo") if isinstance(first, dict) else None
    at = info.get("inCommitTimestamp") if isinstance(info, dict) else None
    return at if isinstance(at, int) else default


def _describe_time(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _check_version(version: int, latest: int) -> None:
    if version > latest:
        raise InvalidInputError(
            f"Delta cannot read that version: version {version} is after the table's newest "
            f"version {latest}",
            hint=_VERSION_HINT,
        )


def _check_kept(path: TableLocation, first: int) -> None:
    """A change feed from ``first`` needs every commit from there: the Delta log still holds it."""
    kept = commit_times(path)
    oldest = min(kept, default=0)
    if first < oldest:
        raise InvalidInputError(
            f"Delta cannot read that version: the Delta log keeps commits from version {oldest} "
            f"on (older ones were cleaned up), so the changes from version {first} are gone",
            hint=f"read the changes it keeps with --as-of {oldest}",
        )


def _times(path: TableLocation, table: DeltaTable) -> dict[int, int]:
    config = table.metadata().configuration
    return commit_times(path, in_commit=config.get("delta.enableInCommitTimestamps") == "true")


def _snapshot_version(path: TableLocation, table: DeltaTable, as_of: plan.AsOf, latest: int) -> int:
    """``--as-of`` of a snapshot: the version itself, or the latest committed at or before the
    time."""
    if as_of.version is not None:
        _check_version(as_of.version, latest)
        return as_of.version
    assert as_of.timestamp_ms is not None
    times = {v: t for v, t in _times(path, table).items() if v <= latest}
    at = as_of.timestamp_ms
    before = [v for v, t in times.items() if t <= at]
    if not before:
        earliest = min(times.values(), default=None)
        raise InvalidInputError(
            f"Delta cannot read that version: {_describe_time(at)} is before the table's "
            "earliest commit" + ("" if earliest is None else f" ({_describe_time(earliest)})"),
            hint=_VERSION_HINT,
        )
    if at > times[latest]:
        # Delta refuses a time after its newest commit too: the snapshot then is not known yet.
        raise InvalidInputError(
            f"Delta cannot read that version: {_describe_time(at)} is after the table's newest "
            f"commit ({_describe_time(times[latest])}, version {latest})",
            hint=f"give --as-of {latest} for the newest version, or drop --as-of",
        )
    return max(before)


def _first_version(path: TableLocation, table: DeltaTable, as_of: plan.AsOf, latest: int) -> int:
    """``--as-of`` of a change feed: the version itself, or the first committed at or after the
    time."""
    if as_of.version is not None:
        _check_version(as_of.version, latest)
        return as_of.version
    assert as_of.timestamp_ms is not None
    times = {v: t for v, t in _times(path, table).items() if v <= latest}
    after = [v for v, t in times.items() if t >= as_of.timestamp_ms]
    if not after:
        newest = times.get(latest)
        raise InvalidInputError(
            f"Delta cannot read that version: {_describe_time(as_of.timestamp_ms)} is after the "
            "table's newest commit"
            + ("" if newest is None else f" ({_describe_time(newest)}, version {latest})"),
            hint=_VERSION_HINT,
        )
    return min(after)


# -- batches --------------------------------------------------------------------------------------

# One batch of output: the rows (the table's columns only), their kinds, their versions.
Batch = tuple["pa.RecordBatch", "pa.Array", "pa.Array"]


def _snapshot_batches(table: DeltaTable, req: ReadRequest, version: int) -> Iterator[Batch]:
    import pyarrow as pa

    names = list(req.schema.names)
    schema = _arrow_schema(table, names)
    try:
        for batch in _scan(table, names):
            if batch.num_rows:
                n = batch.num_rows
                rows = batch if batch.schema.equals(schema) else batch.cast(schema)
                yield rows, pa.repeat("+I", n), pa.repeat(version, n).cast(pa.int64())
    except LogstoreError:
        raise
    except Exception as exc:
        raise LogstoreError(
            f"cannot read the Delta table at {delta_log.where(req.location)} (version {version}): "
            f"{_first_line(exc)}",
            hint="check that the table's files are readable by this user",
        ) from exc


def _scan(table: DeltaTable, names: list[str]) -> Iterator[pa.RecordBatch]:
    """The table's rows in batches: a pyarrow dataset's scanner, or where the table needs a
    reader feature pyarrow datasets lack (deletion vectors, column mapping), delta-rs's own
    DataFusion scan, which streams too."""
    import pyarrow as pa
    from deltalake import QueryBuilder
    from deltalake.exceptions import DeltaProtocolError

    from logstore_cli.catalog.snapshot import pyarrow_dataset

    try:
        dataset = pyarrow_dataset(table)
    except DeltaProtocolError:
        columns = ", ".join('"' + name.replace('"', '""') + '"' for name in names)
        query = QueryBuilder({"datafusion.execution.batch_size": str(_BATCH_ROWS)})
        stream = query.register("t", table).execute(f"SELECT {columns} FROM t")
        yield from pa.RecordBatchReader.from_stream(stream)
        return
    # One file and one batch read ahead: pyarrow's defaults (4 files, 16 batches) run ahead of a
    # slower consumer (the JSON lines) and hold more the larger the table.
    scanner = dataset.scanner(
        columns=names, batch_size=_BATCH_ROWS, fragment_readahead=1, batch_readahead=1
    )
    yield from scanner.to_batches()


def _change_batches(
    table: DeltaTable, req: ReadRequest, first: int, latest: int
) -> Iterator[Batch]:
    """The Change Data Feed from version ``first`` to ``latest`` in Delta's order: by version,
    then primary key, then change type. Read a window of versions at a time and sorted: a window
    grows while its changes stay few (one call per version costs milliseconds, a thousand epochs
    seconds) and shrinks to one version when they are many, so memory stays near ``_WINDOW_ROWS``
    changes, or one commit's when a single commit holds more."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(req.schema.names)
    types = _arrow_schema(table, names).types
    order = [("_commit_version", "ascending")]
    order += [(k, "ascending") for k in req.spec.primary_key] + [("_ls_rank", "ascending")]
    rank_of = pa.array(list(_CDF_RANK))
    start, span = first, 1
    while start <= latest:
        last = min(latest, start + span - 1)
        changes = _changes_of(table, req, start, last)
        start = last + 1
        if changes.num_rows < _WINDOW_ROWS // 2:
            span = min(span * 2, _MAX_SPAN)
        elif changes.num_rows > _WINDOW_ROWS:
            span = max(span // 2, 1)
        if not changes.num_rows:
            continue
        # delta-rs gives strings as views, which some kernels (take) do not take: the table's types
        rows = pa.table([changes.column(n).cast(t) for n, t in zip(names, types, strict=True)],
                        names=names)  # fmt: skip
        change_type = changes.column("_change_type").cast(pa.string())
        version = changes.column("_commit_version").cast(pa.int64())
        ranked = rows.append_column("_commit_version", version).append_column(
            "_ls_rank", pc.index_in(change_type, value_set=rank_of)
        )
        indices = pc.sort_indices(ranked, sort_keys=order)
        rows = rows.take(indices).combine_chunks()
        kinds = pc.take(change_type, indices).combine_chunks()
        versions = pc.take(version, indices).combine_chunks()
        offset = 0
        for batch in rows.to_batches(max_chunksize=_BATCH_ROWS):
            size = batch.num_rows
            yield batch, kinds.slice(offset, size), versions.slice(offset, size)
            offset += size


def _arrow_schema(table: DeltaTable, names: list[str]) -> pa.Schema:
    """The Arrow types of the table's columns ``names`` (at the version loaded)."""
    import pyarrow as pa

    schema = pa.schema(table.schema().to_arrow())
    return pa.schema([schema.field(name) for name in names])


def _changes_of(table: DeltaTable, req: ReadRequest, first: int, last: int) -> pa.Table:
    """The Change Data Feed of versions ``first`` to ``last``, in delta-rs's order."""
    import pyarrow as pa

    versions = f"version {first}" if first == last else f"versions {first} to {last}"
    try:
        cdf = table.load_cdf(starting_version=first, ending_version=last)
        return pa.RecordBatchReader.from_stream(cdf).read_all()
    except Exception as exc:
        text = _first_line(exc)
        if "change data" in text.lower():
            raise InvalidInputError(
                f"Delta cannot read that version: the table has no Change Data Feed for "
                f"{versions} ({text})",
                hint="read its changes from a version after delta.enableChangeDataFeed was "
                "set (--as-of V), or read its snapshot without --changes",
            ) from None
        raise LogstoreError(
            f"cannot read the changes of {req.name} at {versions}: {text}",
            hint="check that the table's files are readable by this user",
        ) from exc


def _limited(
    batches: Iterator[Batch], limit: int | None, stop: Callable[[], bool], *, stopping: str | None
) -> Iterator[Batch]:
    """``batches`` cut at ``limit`` rows, or where ``stop()`` says; reading ends there. A stopped
    write to the path ``stopping`` raises ``KeyboardInterrupt`` (the write removes its output)."""
    left = limit
    for rows, kinds, versions in batches:
        if stop():
            if stopping is not None:
                interrupt = KeyboardInterrupt()
                interrupt.add_note(f"stopped: nothing was written to {stopping}")
                raise interrupt
            return
        if left is not None and rows.num_rows >= left:
            yield rows.slice(0, left), kinds.slice(0, left), versions.slice(0, left)
            return
        if left is not None:
            left -= rows.num_rows
        yield rows, kinds, versions


# -- sinks ----------------------------------------------------------------------------------------


def _drain(req: ReadRequest, batches: Iterator[Batch], sink: Sink) -> int:
    from logstore_cli.read.fold import ArrowRows

    arrow = ArrowRows(req.schema)
    kind_of: dict[str, RowKind] = {"+I": RowKind.INSERT, **_CDF_KINDS}
    count = 0
    for rows, kinds, versions in batches:
        for row, kind, version in zip(
            rows.to_pylist(), kinds.to_pylist(), versions.to_pylist(), strict=True
        ):
            sink.change(kind_of[kind], arrow(row), {"version": version})
            count += 1
        sink.flush()
    sink.flush()
    return count


def _output_batches(req: ReadRequest, batches: Iterator[Batch]) -> Iterator[pa.RecordBatch]:
    """What the Spark engine writes: the table's columns, ``_ls_kind`` (the row kind, ``+I`` in a
    snapshot) and, in a change feed, ``_ls_version``."""
    import pyarrow as pa

    for rows, kinds, versions in batches:
        columns = [*rows.columns, _row_kinds(kinds)]
        names = [*rows.schema.names, KIND]
        if req.changes:
            columns.append(versions)
            names.append(VERSION)
        yield pa.RecordBatch.from_arrays(columns, names=names)


def _row_kinds(kinds: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    text = kinds.cast(pa.string())
    for change, kind in _CDF_KINDS.items():
        text = pc.if_else(pc.equal(text, change), kind.value, text)
    return text


def _output_schema(req: ReadRequest, table: DeltaTable) -> pa.Schema:
    """The table's columns in its Arrow types (at the version read), then logstore's."""
    import pyarrow as pa

    fields = list(_arrow_schema(table, list(req.schema.names)))
    fields.append(pa.field(KIND, pa.string()))
    if req.changes:
        fields.append(pa.field(VERSION, pa.int64()))
    return pa.schema(fields)


def _conform(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch in ``schema``'s types (a change feed's strings come as string views)."""
    for batch in batches:
        yield batch if batch.schema.equals(schema) else batch.cast(schema)


def _write(req: ReadRequest, schema: pa.Schema, batches: Iterator[Batch]) -> int:
    import pyarrow as pa

    assert req.output.path is not None
    counted = _Counted(_conform(schema, _output_batches(req, batches)))
    target = Path(req.output.path)
    _create_dir(target)
    try:
        if req.output.kind == "parquet":
            _write_parquet(target, schema, counted)
        else:
            from deltalake import write_deltalake

            # delta-rs pulls the batches on its own runtime's thread, where reading the source
            # table (delta-rs again) cannot start a runtime: a thread of ours reads it.
            with _Ahead(iter(counted)) as ahead:
                reader = pa.RecordBatchReader.from_batches(schema, ahead)
                try:
                    write_deltalake(str(target), reader, mode="error")
                except Exception:
                    if ahead.failed is not None:  # the read's own error, not delta-rs's wrapper
                        raise ahead.failed from None
                    raise
    except BaseException as exc:
        # The directory is this read's (created above): what a failed or interrupted write
        # left there goes with it.
        shutil.rmtree(target, ignore_errors=True)
        if isinstance(exc, LogstoreError) or not isinstance(exc, Exception):
            raise
        raise LogstoreError(
            f"cannot write --output {req.output.kind}:{target}: {_first_line(exc)}",
            hint="give a new path in a directory that exists and is writable",
        ) from exc
    return counted.rows


def _create_dir(target: Path) -> None:
    """The output's directory, created here and only here (never one that exists)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # as Spark's writer does
        target.mkdir()
    except FileExistsError:
        check_new_path(str(target))  # its message and hint
        raise
    except OSError as exc:
        raise InvalidInputError(
            f"cannot create --output {target}: {exc.strerror or exc}",
            hint="give a new path in a directory that exists and is writable",
        ) from None


class _Ahead:
    """An iterator read in a thread of its own, at most ``depth`` items ahead of the consumer
    (memory stays that of a few batches); its errors reach the consumer."""

    _END: Final = object()

    def __init__(self, items: Iterator[Any], depth: int = 2) -> None:
        import queue
        import threading

        self._items = items
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="read-ahead", daemon=True)
        self.failed: BaseException | None = None

    def __enter__(self) -> _Ahead:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # a consumer that stopped early: the thread gives up its next put
        self._thread.join()

    def _put(self, item: Any) -> bool:
        import queue

        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
            self._put(self._END)
        except BaseException as exc:  # handed to the consumer, raised there
            self.failed = exc
            self._put(_Failed(exc))

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Counted:
    """Batches passed through, their rows counted."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self.rows = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self._batches:
            self.rows += batch.num_rows
            yield batch


def _write_parquet(target: Path, schema: pa.Schema, batches: _Counted) -> None:
    """Parquet as Spark writes it, a directory of part files (here one, then ``_SUCCESS``), so
    whatever reads the Spark engine's output reads this the same way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = target / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    with pq.ParquetWriter(part, schema, compression="snappy") as writer:
        # Row groups of _ROW_GROUP_ROWS (one per batch would be thousands of tiny ones)
        held: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            held.append(batch)
            rows += batch.num_rows
            if rows >= _ROW_GROUP_ROWS:
                writer.write_table(pa.Table.from_batches(held, schema))
                held, rows = [], 0
        if held:
            writer.write_table(pa.Table.from_batches(held, schema))
    (target / "_SUCCESS").touch()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
