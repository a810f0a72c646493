"""Whether a table's columns changed while an ingest job ran: the job's records carry the columns
of the table it started on, so a column added since (``alter-table --add-column``) is written to
neither store until the job is started again; a column widened since (``alter-table
--widen-column``) would still be written with the job's narrower type. Read from the commit files
new since the last look (one existence probe per epoch when nothing was committed, the job's own
commit otherwise)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from logstore_cli.catalog import warehouse as wh
from logstore_cli.catalog.delta_log import TableLocation, open_commit, where
from logstore_cli.catalog.epochs import commit_versions
from logstore_cli.catalog.schema import delta_type_to_sql
from logstore_cli.errors import LogstoreError


class SchemaChangedError(LogstoreError):
    """The table's columns are no longer the job's: it stops, to be started again (exit 1)."""


class SchemaWatch:
    """``SchemaGuard`` over the Delta log of the table at ``path`` (a directory, or a ``Storage``
    rooted at the table), for a job writing ``columns``."""

    def __init__(
        self,
        path: TableLocation,
        table: str,
        columns: Sequence[str],
        types: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self.table = table
        self.columns = tuple(columns)
        self.types = dict(types or {})  # name -> Spark SQL type; compared where given
        versions = commit_versions(path)
        self.seen = versions[0] if versions else -1
        # Added between the job reading the table and now: the job would never write the column.
        state = wh.read_delta(path) if isinstance(path, Path) else wh.read_delta_on(path)
        self._compare(state.schema)

    def check(self) -> None:
        """Raise SchemaChangedError when a commit since the last look changed the columns."""
        version = self.seen + 1
        while True:
            exists, schema = _new_schema(self.path, version)
            if not exists:
                return
            if schema is not None:
                self._compare(schema)
            self.seen = version
            version += 1

    def _compare(self, schema: dict[str, Any]) -> None:
        fields = schema.get("fields", [])
        names = [f["name"] for f in fields]
        if names == list(self.columns):
            changed = [
                f"{f['name']} {self.types[f['name']].upper()} → {now.upper()}"
                for f in fields
                if f["name"] in self.types
                and (now := delta_type_to_sql(f["type"])) != self.types[f["name"]]
            ]
            if not changed:
                return
            raise SchemaChangedError(
                f"table {self.table} had column(s) widened ({', '.join(changed)}; alter-table "
                "--widen-column) while this job ran: restart the job to pick up the new "
                "type(s); this epoch was not written",
                hint=_RESTART_HINT,
            )
        added = [n for n in names if n not in self.columns]
        if added and names[: len(self.columns)] == list(self.columns):
            what = f"gained column(s) {', '.join(added)} (alter-table --add-column)"
        else:
            what = f"has columns {', '.join(names)}, not the job's {', '.join(self.columns)}"
        raise SchemaChangedError(
            f"table {self.table} {what} while this job ran: restart the job to pick up the new "
            "column(s); this epoch was not written",
            hint=_RESTART_HINT,
        )


_RESTART_HINT = (
    "run the same command again: the epoch runs again with the table's columns, nothing is lost "
    "or written twice"
)


def _new_schema(path: TableLocation, version: int) -> tuple[bool, dict[str, Any] | None]:
    """Whether commit ``version`` exists (yet), and the schema of its metaData action (None: it
    has none)."""
    file = where(path, version)
    try:
        with open_commit(path, version) as fh:
            for line in fh:
                if line.startswith(b'{"metaData"'):  # one action a line, as Delta writes them
                    schema: dict[str, Any] = json.loads(
                        json.loads(line)["metaData"]["schemaString"]
                    )
                    return True, schema
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError, KeyError) as exc:
        raise LogstoreError(
            f"cannot read Delta commit {file}: {exc}",
            hint="check the table's _delta_log directory: its commit files are Delta's JSON",
        ) from exc
    return True, None
