"""``vacuum`` (and ``optimize`` on HDFS) on a remote warehouse, checked the same way on each backend
(issue 19): a table written locally (no Spark, no log store) and uploaded as it is, whose
overwrite left two removed data files; the remote vacuum says what the local one says for the copy,
then deletes exactly those files, below the table's own root only."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.deltalog import write_table
from tests.e2e.cli_support import run_cli

Run = Callable[..., subprocess.CompletedProcess[str]]
TABLE = "shop.orders"
DDL = "CREATE TABLE shop.orders (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED)"


def _batch(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "name": pa.array([f"n{i}" for i in ids], pa.string())})  # fmt: skip


def small_files_table(tmp: Path, appends: int) -> Path:
    """``shop.orders`` in ``tmp/wh``: ``appends`` appends of a file each (versions 1…)."""
    table = write_table(tmp / "wh", DDL)
    for n in range(appends):
        write_deltalake(str(table), _batch(range(n * 3, n * 3 + 3)), mode="append")
    return table


def table_with_removed_files(tmp: Path) -> Path:
    """Two appended files, then an overwrite that removes both: two files for a vacuum."""
    table = small_files_table(tmp, 2)
    write_deltalake(str(table), _batch(range(100, 104)), mode="overwrite")
    return table


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def check_vacuum(run: Run, tmp: Path, files: Callable[[], set[str]]) -> None:
    """``tmp/wh``'s table (``table_with_removed_files``) is uploaded below the remote warehouse;
    ``files()`` lists every object below the remote warehouse, relative to it."""
    args = ("vacuum", TABLE, "--retain", "0", "--force", "--json")
    here = _json(run_cli(*args, "--dry-run", cwd=tmp))
    assert here["files"] == 2 and here["bytes"] > 0 and here["dry_run"] is True
    before = files()
    # the dry run lists the same files and sizes there, and deletes none
    assert _json(run(*args, "--dry-run")) == here
    assert files() == before
    done = _json(run(*args))
    assert done["dry_run"] is False
    assert (done["files"], done["bytes"], done["paths"]) == (2, here["bytes"], here["paths"])
    after = files()
    assert before - after == {f"shop/orders/{p}" for p in here["paths"]}
    # delta-rs records the vacuum in the table's log (commits without data), as it does locally
    assert all(f.startswith("shop/orders/_delta_log/") for f in after - before), after - before
    # nothing but those went: the siblings beside the table are there, the rows are the same
    assert {"shop/orders2/part-0.parquet", "shop/ordersx.parquet"} <= files()
    read = run("read", TABLE, "--mode", "file", "--json")
    assert read.returncode == 0, read.stderr
    assert sorted(json.loads(line)["row"]["id"] for line in read.stdout.splitlines()) == [
        100,
        101,
        102,
        103,
    ]
    assert _json(run(*args))["files"] == 0  # nothing is left to delete


def check_optimize(run: Run, table_uri: str) -> None:
    """Three one-file appends compacted by Spark on the table's URI; the rows are the same."""
    done = _json(run("optimize", TABLE, "--json"))
    assert (done["files_removed"], done["files_added"]) == (3, 1), done
    assert DeltaTable(table_uri).version() == done["delta_version"]
    read = run("read", TABLE, "--mode", "file", "--json")
    assert read.returncode == 0, read.stderr
    assert sorted(json.loads(line)["row"]["id"] for line in read.stdout.splitlines()) == list(
        range(9)
    )
