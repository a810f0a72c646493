"""The warehouse: ``<warehouse>/<database>/<table>`` Delta tables that describe themselves.

A table's Delta properties hold the DDL's properties as written (secret values are never stored:
they come from the config file or the environment at run time) and logstore's own keys below.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logstore_cli.errors import LogstoreError, TableNotFoundError, WarehouseError
from logstore_cli.model import TableSpec, is_secret

DEFAULT_DATABASE = "default"
FORMAT_VERSION = "1"

# logstore's own table properties.
P_NAME = "logstore.name"  # the name as written in the DDL
P_PRIMARY_KEY = "logstore.primary-key"  # comma-separated; Delta has no primary keys of its own
P_USING = "logstore.using"  # the DDL's USING format (e.g. arctic), kept for describe
P_SECRET_KEYS = "logstore.secret-keys"  # DDL keys whose secret values were not stored
P_FORMAT_VERSION = "logstore.format-version"
CDF = "delta.enableChangeDataFeed"
OWN_PREFIXES = ("logstore.", "delta.")


@dataclass(frozen=True)
class TableRef:
    database: str
    table: str
    path: Path

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


def split_name(name: str) -> tuple[str, str]:
    """``db.table`` -> (db, table); a bare ``table`` is in the default database. Pure."""
    parts = [p.strip("`") for p in name.strip().split(".")]
    if len(parts) == 1:
        return DEFAULT_DATABASE, parts[0]
    return parts[-2], parts[-1]  # a leading catalog name is ignored: one warehouse, one catalog


def table_path(warehouse: Path, database: str | None, table: str) -> Path:
    return warehouse / (database or DEFAULT_DATABASE) / table


def is_delta_table(path: Path) -> bool:
    log = path / "_delta_log"
    return log.is_dir() and any(log.glob("*.json"))


def list_tables(warehouse: Path) -> list[TableRef]:
    """Every Delta table two levels below the warehouse, sorted by name."""
    if not warehouse.is_dir():
        return []
    refs = []
    for db in sorted(p for p in warehouse.iterdir() if p.is_dir()):
        for table in sorted(p for p in db.iterdir() if p.is_dir()):
            if is_delta_table(table):
                refs.append(TableRef(db.name, table.name, table))
    return refs


def find_table(warehouse: Path, name: str) -> TableRef:
    """The table called ``name``, or TableNotFoundError naming the nearest existing ones."""
    database, table = split_name(name)
    path = table_path(warehouse, database, table)
    if is_delta_table(path):
        return TableRef(database, table, path)
    existing = [r.name for r in list_tables(warehouse)]
    near = difflib.get_close_matches(f"{database}.{table}", existing, n=3, cutoff=0.5)
    if near:
        hint = "did you mean " + ", ".join(f"'{n}'" for n in near) + "?"
    elif existing:
        hint = f"existing tables: {', '.join(existing[:10])}" + (" …" if len(existing) > 10 else "")
    else:
        hint = "the warehouse has no tables yet; create one with 'logstore create-table'"
    raise TableNotFoundError(
        f"table '{database}.{table}' not found in warehouse {warehouse}", hint=hint
    )


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


@dataclass(frozen=True)
class DeltaState:
    """What the Delta log says about a table, read without a JVM."""

    path: Path
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
    import json

    from deltalake import DeltaTable

    try:
        dt = DeltaTable(str(path))
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


def ensure_writable(warehouse: Path) -> None:
    """Create the warehouse directory if needed and prove a file can be written there.

    A real write, not ``os.access``: root passes permission checks but not a read-only mount.
    """
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
