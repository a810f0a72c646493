"""The warehouse: ``<warehouse>/<database>/<table>`` Delta tables that describe themselves.

A table's Delta properties hold the DDL's properties as written (secret values are never stored:
they come from the config file's ``[kafka.client]`` or ``LOGSTORE_KAFKA_CLIENT_<PROPERTY>``
variables at run time) and logstore's own keys below.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from logstore_cli.errors import LogstoreError, TableNotFoundError, WarehouseError
from logstore_cli.model import TableSpec, is_secret
from logstore_cli.names import (
    TableName,
    identifier_problem,
    parse_table_name,
    table_name_from_parts,
)

if TYPE_CHECKING:  # annotations only: a local warehouse's commands never load the seam
    from logstore_cli.storage import Storage

FORMAT_VERSION = "1"

# logstore's own table properties.
P_NAME = "logstore.name"  # the name as written in the DDL
P_PRIMARY_KEY = "logstore.primary-key"  # comma-separated; Delta has no primary keys of its own
P_USING = "logstore.using"  # the DDL's USING format (e.g. arctic), kept for describe
P_SECRET_KEYS = "logstore.secret-keys"  # DDL keys whose secret values were not stored
P_FORMAT_VERSION = "logstore.format-version"
P_CATALOG = "logstore.catalog"  # the catalog part of a three-part DDL name, recorded only
# JSON {partition: position}: where the adopted topic's own records ended (adopted_positions_text)
P_ADOPTED_TOPIC = "logstore.adopted-topic"
CDF = "delta.enableChangeDataFeed"
OWN_PREFIXES = ("logstore.", "delta.")
# Properties logstore relies on: never changed or removed by alter-table.
MANAGED_KEYS = frozenset({CDF})
MANAGED_PREFIX = "logstore."


def adopted_positions_text(positions: Mapping[int, int]) -> str:
    """``P_ADOPTED_TOPIC``'s value: each partition's read position at adoption, before which a
    record is not logstore's, as compact JSON with string keys in partition order
    (``{"0":2,"1":1}``). Kafka: the partition's end offset; Pulsar: the position just after its
    last message (``logformat.pulsar_form``'s odd ordinal), 0 when it held none (design §7.1)."""
    return json.dumps({str(p): o for p, o in sorted(positions.items())}, separators=(",", ":"))


def adopted_positions(properties: Mapping[str, str]) -> dict[int, int]:
    """``adopted_positions_text`` read back from a table's properties; empty when the topic was
    not adopted, or the value is not such a map (every record is then taken as the table's)."""
    raw = properties.get(P_ADOPTED_TOPIC)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
        out = {int(p): int(o) for p, o in parsed.items()}
    except (ValueError, TypeError, AttributeError):
        return {}
    return {p: o for p, o in out.items() if p >= 0 and o >= 0}


# A committed Delta version: a commit file, a checkpoint, or the pointer to the last checkpoint.
_COMMITTED = re.compile(r"\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet)|_last_checkpoint")


class TableRef(NamedTuple):
    """A table directory of the warehouse, by database and table name."""

    database: str
    table: str
    path: Path
    committed: bool = True  # False: a directory left by an interrupted create (no Delta version)

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


def table_path(warehouse: Path, name: TableName) -> Path:
    """Where table ``name`` lives: ``<warehouse>/<database>/<table>``, checked to stay inside."""
    # Defence in depth: names are validated where they are parsed, and again here.
    checked = table_name_from_parts([name.database, name.table])
    return contained(warehouse, warehouse / checked.database / checked.table)


def spec_table_name(spec: TableSpec) -> TableName:
    """The validated warehouse name of a table declared in DDL (a missing database is default)."""
    parts = [spec.database, spec.table] if spec.database is not None else [spec.table]
    name = table_name_from_parts(parts, shown=spec.name)
    return TableName(name.database, name.table, spec.catalog)


def contained(warehouse: Path, path: Path) -> Path:
    """``path`` if it resolves (symlinks followed) strictly inside the resolved warehouse.

    Called right before anything is written or deleted, so a symlink planted in the warehouse can
    never redirect a write or a delete outside it.
    """
    root = warehouse.resolve()
    target = path.resolve()
    if target == root or not target.is_relative_to(root):
        raise WarehouseError(
            f"refusing to touch {path}: it resolves to {target}, which is not inside the "
            f"warehouse {root}",
            hint="logstore only writes and deletes below its warehouse; remove the symlink or "
            "choose the warehouse with --warehouse",
        )
    return path


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # unreadable: not known to be a table
        return False


def delta_table_holding(path: Path) -> Path | None:
    """The directory at or above ``path`` (resolved, symlinks followed) that holds a ``_delta_log``:
    the Delta table ``path`` is part of (its data, its log, logstore's files under it); else None."""
    target = path.resolve()
    for directory in (target, *target.parents):
        if _is_dir(directory / "_delta_log"):
            return directory
    return None


# Directories looked at below a source for a Delta table: bounded, since a source may be large.
MAX_DIRS_BELOW = 10_000


def delta_table_below(path: Path, *, max_dirs: int = MAX_DIRS_BELOW) -> Path | None:
    """A directory strictly below ``path`` that holds a ``_delta_log``, searched the way Spark's
    file listing descends (symlinks followed, names starting with ``.`` or ``_`` passed over:
    Spark reads no file below those); None when there is none among the first ``max_dirs``."""
    seen: set[Path] = set()
    pending = [path.resolve()]
    while pending and len(seen) < max_dirs:
        directory = pending.pop()
        if directory in seen:  # a symlink loop
            continue
        seen.add(directory)
        try:
            with os.scandir(directory) as entries:
                subdirs = [Path(e.path) for e in entries if not e.name.startswith((".", "_"))
                           and _entry_is_dir(e)]  # fmt: skip
        except OSError:  # unreadable: Spark could not list it either
            continue
        for sub in subdirs:
            if _is_dir(sub / "_delta_log"):
                return sub
            pending.append(sub.resolve())
    return None


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows a symlink, as Hadoop's local listing does
    except OSError:
        return False


def table_overlap(path: Path, warehouse: Path | None, *, below: bool) -> str | None:
    """Why files under ``path`` belong to a table, or None: ``path`` resolves into the warehouse
    or into a directory holding a ``_delta_log`` (with ``below``, also: the warehouse or such a
    directory lies below it). For an ingest's source and checkpoint: reading a table's own files
    as input writes old values back; a checkpoint inside a table is fair game for its VACUUM.
    ``warehouse`` None: it is not on this file system (S3), only Delta tables here are looked for."""
    target = path.resolve()
    root = None if warehouse is None else warehouse.resolve()
    if root is not None and (target == root or target.is_relative_to(root)):
        return f"it resolves to {target}, inside the warehouse {root}"
    table = delta_table_holding(target)
    if table is not None:
        where = "" if table == target else f", inside the Delta table {table}"
        return f"it resolves to {target}{where} (a directory holding a _delta_log)"
    if not below:
        return None
    if root is not None and root.is_relative_to(target):
        return f"it resolves to {target}, which holds the warehouse {root}"
    nested = delta_table_below(target)
    if nested is not None:
        return f"it resolves to {target}, which holds the Delta table {nested}"
    return None


def has_committed_version(path: Path) -> bool:
    """Whether ``path`` holds a Delta table with at least one committed version."""
    log = path / "_delta_log"
    try:
        return any(_COMMITTED.fullmatch(entry.name) for entry in os.scandir(log))
    except OSError:
        return False


def is_uncommitted_leftover(path: Path) -> bool:
    """A table directory whose first Delta commit never happened (an interrupted create-table):
    a ``_delta_log`` without any committed version. It holds no table data anyone committed."""
    return (path / "_delta_log").is_dir() and not has_committed_version(path)


def list_tables(warehouse: Path) -> list[TableRef]:
    """Every table two levels below the warehouse, sorted by name, with uncommitted leftovers
    (``committed=False``) so that they can be shown and dropped. Entries whose names are no valid
    table names, or that resolve outside the warehouse, are not logstore's and are passed over."""
    if not warehouse.is_dir():
        return []
    root = warehouse.resolve()
    refs = []
    for db in sorted(warehouse.iterdir()):
        if identifier_problem(db.name, "database") or not _inside(db, root) or not db.is_dir():
            continue
        for table in sorted(db.iterdir()):
            if identifier_problem(table.name, "table") or not _inside(table, root):
                continue
            if has_committed_version(table):
                refs.append(TableRef(db.name, table.name, table))
            elif is_uncommitted_leftover(table):
                refs.append(TableRef(db.name, table.name, table, committed=False))
    return refs


def _inside(path: Path, root: Path) -> bool:
    target = path.resolve()
    return target != root and target.is_relative_to(root)


def find_table(warehouse: Path, name: str, *, uncommitted: bool = False) -> TableRef:
    """The table called ``name``, or TableNotFoundError naming the nearest existing ones.

    With ``uncommitted`` a directory left by an interrupted create-table is returned too (with
    ``committed=False``), for drop-table; otherwise it is reported with the command that removes it.
    """
    parsed = parse_table_name(name)
    path = table_path(warehouse, parsed)
    if has_committed_version(path):
        return TableRef(parsed.database, parsed.table, path)
    if is_uncommitted_leftover(path):
        if uncommitted:
            return TableRef(parsed.database, parsed.table, path, committed=False)
        raise _uncommitted_error(parsed, str(path))
    existing = [r.name for r in list_tables(warehouse) if r.committed]
    raise _not_found(parsed, existing, str(warehouse))


def _uncommitted_error(parsed: TableName, where: str) -> TableNotFoundError:
    return TableNotFoundError(
        f"table '{parsed}' has no committed Delta version at {where} (an interrupted "
        "create-table leaves this behind)",
        hint=f"remove it with 'logstore drop-table {parsed} --yes', then create it again",
    )


def _not_found(parsed: TableName, existing: list[str], warehouse: str) -> TableNotFoundError:
    near = difflib.get_close_matches(parsed.qualified, existing, n=3, cutoff=0.5)
    if near:
        hint = "did you mean " + ", ".join(f"'{n}'" for n in near) + "?"
    elif existing:
        hint = f"existing tables: {', '.join(existing[:10])}" + (" …" if len(existing) > 10 else "")
    else:
        hint = "the warehouse has no tables yet; create one with 'logstore create-table'"
    return TableNotFoundError(f"table '{parsed}' not found in warehouse {warehouse}", hint=hint)


# -- the same on the storage seam (issue 19, stage 1: S3; local commands still use the above) --


class StoredTable(NamedTuple):
    """A table of a warehouse on any ``Storage``: ``storage`` is rooted at the table."""

    database: str
    table: str
    storage: Storage
    committed: bool = True

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


def table_storage(warehouse: Storage, name: TableName) -> Storage:
    """Where table ``name`` lives: ``<warehouse>/<database>/<table>``, built from checked names."""
    checked = table_name_from_parts([name.database, name.table])
    return warehouse.child(checked.database).child(checked.table)


def has_committed_version_on(table: Storage) -> bool:
    """Whether the table stored at ``table`` has at least one committed Delta version."""
    return any(_COMMITTED.fullmatch(name) for name in table.list("_delta_log").files)


def is_uncommitted_leftover_on(table: Storage) -> bool:
    """Something under the table's ``_delta_log`` but no committed version (see the local one)."""
    listing = table.list("_delta_log")
    if not listing.files and not listing.dirs:
        return False
    return not any(_COMMITTED.fullmatch(name) for name in listing.files)


def list_tables_on(warehouse: Storage) -> list[StoredTable]:
    """Every table two levels below the warehouse (listed by prefix and delimiter on S3), sorted
    by name, uncommitted leftovers with ``committed=False``; names that are no valid database or
    table names are not logstore's and are passed over."""
    refs = []
    for db in warehouse.list().dirs:
        if identifier_problem(db, "database"):
            continue
        for name in warehouse.list(db).dirs:
            if identifier_problem(name, "table"):
                continue
            table = warehouse.child(db).child(name)
            if has_committed_version_on(table):
                refs.append(StoredTable(db, name, table))
            elif is_uncommitted_leftover_on(table):
                refs.append(StoredTable(db, name, table, committed=False))
    return refs


def find_table_on(warehouse: Storage, name: str, *, uncommitted: bool = False) -> StoredTable:
    """The table called ``name``, or TableNotFoundError naming the nearest existing ones (as
    ``find_table``)."""
    parsed = parse_table_name(name)
    table = table_storage(warehouse, parsed)
    if has_committed_version_on(table):
        return StoredTable(parsed.database, parsed.table, table)
    if is_uncommitted_leftover_on(table):
        if uncommitted:
            return StoredTable(parsed.database, parsed.table, table, committed=False)
        raise _uncommitted_error(parsed, table.uri)
    existing = [r.name for r in list_tables_on(warehouse) if r.committed]
    raise _not_found(parsed, existing, warehouse.uri)


def stored_properties(spec: TableSpec) -> tuple[dict[str, str], list[str]]:
    """The Delta table properties for ``spec`` and the keys left out as secrets. Pure."""
    props: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in spec.properties.items():
        if is_secret(key, value):
            secrets.append(key)
        elif not key.startswith("logstore."):
            props[key] = value
    props[CDF] = "true"
    props[P_NAME] = spec.name
    if spec.catalog:
        props[P_CATALOG] = spec.catalog
    props[P_FORMAT_VERSION] = FORMAT_VERSION
    if spec.primary_key:
        props[P_PRIMARY_KEY] = ",".join(spec.primary_key)
    if spec.using:
        props[P_USING] = spec.using
    if secrets:
        props[P_SECRET_KEYS] = ",".join(secrets)
    return props, secrets


def user_properties(delta_props: Mapping[str, str]) -> dict[str, str]:
    """The DDL's properties back from the Delta ones (without logstore's and Delta's own)."""
    return {k: v for k, v in delta_props.items() if not k.startswith(OWN_PREFIXES)}


class DeltaState(NamedTuple):
    """What the Delta log says about a table, read without a JVM."""

    path: Path | str  # a local directory, or the table's URI on object storage
    version: int
    num_files: int
    schema: dict[str, Any]
    properties: Mapping[str, str]
    partition_columns: tuple[str, ...]
    description: str | None

    @property
    def primary_key(self) -> tuple[str, ...]:
        pk = self.properties.get(P_PRIMARY_KEY, "")
        return tuple(c for c in pk.split(",") if c)


def read_delta(path: Path) -> DeltaState:
    # A small table's log is read here (importing delta-rs costs more than reading it); anything
    # else by delta-rs, which also says what is wrong with a log that is not readable.
    state = _read_json_log(path)
    if state is not None:
        return state
    return _read_with_delta_rs(path, str(path), None)


def read_delta_on(table: Storage) -> DeltaState:
    """``read_delta`` of the table stored at ``table`` (any ``Storage``): its JSON log read through
    the seam when it is small and plain, else by delta-rs with the storage's options."""
    from logstore_cli.storage import delta_rs_location

    def read(name: str) -> bytes:
        blob = table.read(f"_delta_log/{name}")
        if blob is None:
            raise OSError(f"{name} is gone")
        return blob.data

    state = _state_from_json_log(table.uri, table.list("_delta_log").files, read)
    if state is not None:
        return state
    uri, options = delta_rs_location(table)
    return _read_with_delta_rs(uri, uri, options)


def _read_with_delta_rs(path: Path | str, uri: str, options: dict[str, str] | None) -> DeltaState:
    import json

    from deltalake import DeltaTable

    try:
        dt = DeltaTable(uri, storage_options=options)
        meta = dt.metadata()
        return DeltaState(
            path=path,
            version=dt.version(),
            num_files=len(dt.file_uris()),
            schema=json.loads(dt.schema().to_json()),
            properties=dict(meta.configuration),
            partition_columns=tuple(meta.partition_columns),
            description=meta.description,
        )
    except Exception as exc:  # delta-rs raises its own TableNotFoundError, OSError, ...
        raise LogstoreError(
            f"cannot read the Delta table at {path}: {exc}",
            hint="check that the path holds a Delta table readable by this user",
        ) from exc


# The logs read without delta-rs: commits 0..N as JSON, no checkpoint, at most this many commits.
_MAX_JSON_COMMITS = 100
_COMMIT_FILE = re.compile(r"(\d{20})\.json")
# Reader protocols whose snapshot is the JSON actions alone: 1; 2 (column mapping) with no mapping
# in use; 3 with these features only (no deletion vectors, ...).
_PLAIN_READER_FEATURES = frozenset({"timestampNtz"})


def _read_json_log(path: Path) -> DeltaState | None:
    """``read_delta``'s answer from the JSON commits alone, when the log is only those (versions
    0..N, no checkpoint, a plain reader protocol); None when it is not, or not as expected, so that
    delta-rs reads it. The same values as delta-rs's: the last protocol and metadata, the files
    added and not removed since (``tests/unit/catalog/test_warehouse.py`` compares the two)."""
    log = path / "_delta_log"
    try:
        names = os.listdir(log)
    except OSError:
        return None

    def read(name: str) -> bytes:
        return (log / name).read_bytes()

    return _state_from_json_log(path, names, read)


def _state_from_json_log(
    path: Path | str, names: Sequence[str], read: Callable[[str], bytes]
) -> DeltaState | None:
    """The state of the log whose ``_delta_log`` holds ``names``, each read by ``read`` (a file,
    an object): see ``_read_json_log``; any backend's OSError or LogstoreError reads as None."""
    import json

    versions: list[int] = []
    for name in names:
        if "checkpoint" in name:
            return None
        if (m := _COMMIT_FILE.fullmatch(name)) is not None:
            versions.append(int(m.group(1)))
    versions.sort()
    if not versions or versions != list(range(len(versions))) or len(versions) > _MAX_JSON_COMMITS:
        return None
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    files: set[str] = set()
    try:
        for version in versions:
            for line in read(f"{version:020d}.json").decode("utf-8").split("\n"):
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:
                    add = action["add"]
                    if add.get("deletionVector"):
                        return None
                    files.add(add["path"])
                elif "remove" in action:
                    files.discard(action["remove"]["path"])
                elif "metaData" in action:
                    metadata = action["metaData"]
                elif "protocol" in action:
                    protocol = action["protocol"]
        if protocol is None or metadata is None:
            return None
        configuration = metadata.get("configuration") or {}
        reader = protocol["minReaderVersion"]
        mapped = configuration.get("delta.columnMapping.mode", "none") != "none"
        if mapped or not (reader in (1, 2) or (reader == 3 and _plain_features(protocol))):
            return None
        partition_columns = metadata.get("partitionColumns") or []
        description = metadata.get("description")
        if not (
            all(isinstance(v, str) for v in configuration.values())
            and all(isinstance(c, str) for c in partition_columns)
            and (description is None or isinstance(description, str))
        ):
            return None
        return DeltaState(
            path=path,
            version=versions[-1],
            num_files=len(files),
            schema=json.loads(metadata["schemaString"]),
            properties=dict(configuration),
            partition_columns=tuple(partition_columns),
            description=description,
        )
    except (OSError, LogstoreError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _plain_features(protocol: dict[str, Any]) -> bool:
    features = protocol.get("readerFeatures") or []
    return isinstance(features, list) and set(features) <= _PLAIN_READER_FEATURES


def ensure_writable(warehouse: Path) -> None:
    """Create the warehouse directory if needed and prove a file can be written there.

    A real write, not ``os.access``: root passes permission checks but not a read-only mount.
    """
    import tempfile  # here: reads (list, describe) never write

    try:
        warehouse.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".logstore-probe-", dir=warehouse)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise WarehouseError(
            f"the warehouse {warehouse} is not writable: {exc.strerror or exc}",
            hint="choose a writable directory with --warehouse / LOGSTORE_WAREHOUSE, "
            "or fix its permissions",
        ) from None
