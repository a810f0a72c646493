"""The warm-up that ``logstore setup`` runs to build the Spark driver's class archive.

``python -m logstore_cli.cli.warmup TARGET WORKDIR``: starts the driver JVM with
``-XX:ArchiveClassesAtExit=TARGET`` and runs, in that one JVM, what users run most — logstore's own
commands, in this process, on a small table in a warehouse and state directory under WORKDIR (a
file-only table: no broker needed): ``ingest`` of inserts, updates and deletes over three epochs
(Spark's file source, ``foreachBatch``, Delta's MERGE with the Change Data Feed, the job's commit
checks and compaction), ``read --engine spark`` of the snapshot and of the changes, and
``optimize``. It then ends the JVM itself and waits for it: HotSpot writes the archive as the JVM
exits, and ``class_archive.build`` installs the file only once this process has exited.

Exit codes: 0 archive written; 3 (``NO_ARCHIVE_EXIT``) the JVM wrote none, its reason in
``WORKDIR/REASON_FILE`` (a Java without a base CDS archive, a non-empty directory such as
``SPARK_CONF_DIR`` on the class path: Spark jobs then simply run without); anything else a failed
warm-up (its output says which step).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from logstore_cli.jvm.class_archive import NO_ARCHIVE_EXIT, REASON_FILE

_DECORATIONS = re.compile(r"^(\[[^\]]*\])+")  # HotSpot's [uptime][level][tags]
TABLE = "warmup.changes"
DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, name STRING, qty INT, price DECIMAL(10,2), "
    "PRIMARY KEY (id) NOT ENFORCED) WITH ('full-compaction.delta-commits' = '2');"
)
JVM_EXIT_TIMEOUT_S = 300.0  # writing the archive (~180 MB) as it exits takes seconds


def epoch_files() -> list[list[dict[str, object]]]:
    """Three epochs: inserts; updates and a delete; an insert again of the deleted key. No I/O."""
    first = [
        {"op": "+I", "id": i, "name": f"n{i}", "qty": i, "price": f"{i}.50"} for i in range(20)
    ]
    second = [
        {"op": "+U", "id": i, "name": f"m{i}", "qty": i + 1, "price": "1.25"} for i in range(10)
    ]
    second.append({"op": "-D", "id": 19, "name": "n19", "qty": 19, "price": "19.50"})
    third = [{"op": "+I", "id": 19, "name": "again", "qty": 0, "price": "0.00"}]
    return [first, second, third]


def _cli(*args: str) -> None:
    from logstore_cli.cli.app import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = run(list(args))
    if code != 0:
        raise RuntimeError(
            f"warm-up step 'logstore {' '.join(args)}' exited {code}:\n{out.getvalue()[-3000:]}"
        )


def _run(target: Path, work: Path) -> None:
    from logstore_cli.config import CONFIG_ENV, ENV_VARS
    from logstore_cli.jobs.spark import SparkSettings, build_session, submit_opts
    from logstore_cli.jvm.class_archive import dump_options

    options = dump_options(target)
    if options is None:
        raise RuntimeError(f"the archive's path cannot be passed to the JVM: {target}")
    # Hermetic: none of the user's config file or settings (their warehouse, master, brokers);
    # LOGSTORE_HOME stays, the jar cache the jobs' classes come from.
    for var in [*ENV_VARS, CONFIG_ENV]:
        os.environ.pop(var, None)
    os.environ["LOGSTORE_WAREHOUSE"] = str(work / "warehouse")
    os.environ["LOGSTORE_STATE_DIR"] = str(work / "state")
    # As logstore passes its own driver options: the user's spark-defaults.conf applies as it will
    # to their jobs, whose JVMs then accept the archive. The JVM is started here with the dump
    # option (logstore then adds no archive of its own: the option decides class sharing); the
    # commands below reuse it (PySpark keeps one gateway per process, getOrCreate the session).
    with submit_opts(options):
        build_session(SparkSettings(work_dir=work / "state" / "spark"))
    _cli("create-table", "--sql", DDL)
    source = work / "source"
    source.mkdir()
    for i, rows in enumerate(epoch_files()):
        path = source / f"part-{i}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # oldest first: the epochs in this order
    _cli("ingest", TABLE, "--source", str(source), "--format", "json",
         "--source-option", "maxFilesPerTrigger=1", "--once", "--emit", "file")  # fmt: skip
    _cli("read", TABLE, "--mode", "file", "--engine", "spark", "-o", "jsonl")
    _cli("read", TABLE, "--mode", "file", "--engine", "spark", "--changes", "-o", "jsonl")
    _cli("optimize", TABLE)


def _end_jvm() -> None:
    """End the driver JVM and wait for it: it writes the archive on its way out."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if proc is None:
        raise RuntimeError("no driver JVM to end")
    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    assert proc.stdin is not None
    proc.stdin.close()  # PySpark's gateway server exits the JVM when its stdin ends
    proc.wait(timeout=JVM_EXIT_TIMEOUT_S)


def cds_errors(log: str) -> list[str]:
    """The JVM's class-sharing errors in its log, e.g. ``[error][cds] Error: non-empty directory
    '/etc/spark/conf/'``: why it wrote no archive. No I/O."""
    return [_DECORATIONS.sub("", line).strip() for line in log.splitlines()
            if "][cds" in line and "[error" in line]  # fmt: skip


def main(argv: list[str]) -> int:
    target, work = Path(argv[0]), Path(argv[1])
    _run(target, work)
    _end_jvm()
    if target.is_file():
        return 0
    # The JVM's stderr went to the log of the session that started it; each command after it
    # opened a log of its own (empty): every one is read.
    logs = sorted((work / "state" / "spark" / "logs").glob("driver-*.log"))
    errors = [e for log in logs for e in cds_errors(log.read_text("utf-8", "replace"))]
    reason = "; ".join(errors) or "the JVM wrote no archive and said nothing about it"
    (work / REASON_FILE).write_text(reason, encoding="utf-8")
    return NO_ARCHIVE_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
