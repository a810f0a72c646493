"""The Spark session builder: the JVM's own error when it cannot start; Spark's files in their place.

Spark writes its driver log and SQL warehouse under the state dir, never into the current directory.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest

from logstore_cli.jvm import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_jvm_start_failure_shows_the_jvm_error(tmp_path: Path) -> None:
    # A fresh interpreter: the session fixture's JVM must not be reused. A bad heap size makes the
    # JVM itself refuse to start; the user must see the JVM's words, not JAVA_GATEWAY_EXITED only.
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from logstore_cli.errors import SparkStartError
        from logstore_cli.jobs.spark import SparkSettings, build_session
        try:
            build_session(SparkSettings(
                master="local[1]",
                conf={{"spark.driver.memory": "12zz"}},
                log_dir=Path({str(tmp_path)!r}),
            ))
        except SparkStartError as exc:
            print("MESSAGE:", exc.message)
            print("DETAIL:", exc.detail)
        else:
            print("STARTED")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert "STARTED" not in proc.stdout, proc.stdout
    assert "MESSAGE: the Spark JVM did not start" in proc.stdout, proc.stdout + proc.stderr
    assert "Invalid maximum heap size: -Xmx12zz" in proc.stdout, proc.stdout


def test_session_keeps_its_warehouse_and_logs_in_its_work_dir(spark: SparkSession) -> None:
    value = spark.conf.get("spark.sql.warehouse.dir")
    assert value is not None and value.startswith("file:"), value
    warehouse = Path(urlparse(value).path)
    assert warehouse.name == "warehouse" and Path.cwd() not in warehouse.parents
    logs = warehouse.parent / "logs"
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    driver_logs = list(logs.glob("driver-*.log"))
    assert driver_logs and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in driver_logs)


def _setup_archive() -> Path:
    """The class archive scripts/setup.sh built ('logstore setup'); the test is skipped only where
    this machine's JVM wrote none, saying why."""
    key = class_archive.current_key()
    assert key is not None, "no Java or no pyspark"
    unavailable = class_archive.known_unavailable(key)
    if unavailable is not None:
        pytest.skip(f"this machine's JVM wrote no class archive: {unavailable.reason}")
    archive = class_archive.current_archive()
    assert archive is not None, "no class archive: scripts/setup.sh ('logstore setup') builds it"
    return archive


def test_the_tests_driver_options_and_the_class_archive_reach_the_session(
    spark: SparkSession,
) -> None:
    """The tests' JVM options (tests/conftest.py, through SPARK_SUBMIT_OPTS) reach every Spark JVM
    the tests start: without them each JVM would quietly take about twice the CPU. The class
    archive 'logstore setup' built (scripts/setup.sh) is passed before them."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    flags = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in flags and "-XX:+UseSerialGC" in flags, flags
    assert "-XX:-BytecodeVerificationRemote" in flags and "-XX:CICompilerCount=1" in flags, flags
    archive = _setup_archive()
    assert flags.index(f"-XX:SharedArchiveFile={archive}") < flags.index("-XX:+UseSerialGC")
    shown = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['SPARK_SUBMIT_OPTS'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "-XX:TieredStopAtLevel=1" in shown.stdout  # the CLI's jobs get them too
    assert "SPARK_CONF_DIR" not in os.environ


_MAPPED = """
import sys
from pathlib import Path
from logstore_cli.jobs.spark import SparkSettings, build_session
spark = build_session(SparkSettings(work_dir=Path(sys.argv[1]), class_archive=False))
print(spark.range(7).count())
"""


@pytest.mark.parametrize("archive", ["built", "other"])
def test_a_driver_jvm_maps_the_class_archive_setup_built(tmp_path: Path, archive: str) -> None:
    """With -Xshare:on a JVM that cannot map its archive does not start: the archive 'logstore
    setup' built is mapped by a driver started as logstore starts one (the tests' own JVM options
    included); a file that is not an archive for this class path is refused (the check can fail)."""
    built = _setup_archive()
    path = built if archive == "built" else tmp_path / "other.jsa"
    if archive == "other":
        path.write_bytes(b"not an archive")
    options = class_archive.use_options(path)
    assert options is not None
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{options.replace('-Xshare:auto', '-Xshare:on')} "
        + os.environ["SPARK_SUBMIT_OPTS"],
    }
    proc = subprocess.run(
        [sys.executable, "-c", _MAPPED, str(tmp_path / "spark")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if archive == "built":
        assert proc.returncode == 0 and proc.stdout.strip() == "7", proc.stderr[-3000:]
    else:
        assert proc.returncode != 0 and "did not start" in proc.stderr, proc.stderr[-3000:]


def test_create_table_leaves_nothing_in_the_current_directory(tmp_path: Path) -> None:
    cwd, state = tmp_path / "cwd", tmp_path / "state"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "logstore_cli", "create-table", "--json",
         "--sql", "CREATE TABLE db.t (id INT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) USING delta "
         "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"],  # a Spark-only property
        cwd=cwd, env={**os.environ, "LOGSTORE_STATE_DIR": str(state)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(cwd)) == ["warehouse"]  # no spark-warehouse/, metastore_db, derby.log
    assert (cwd / "warehouse" / "db" / "t" / "_delta_log").is_dir()
    logs = state / "spark" / "logs"
    assert stat.S_IMODE((state / "spark").stat().st_mode) == 0o700
    assert [p.name[:7] for p in logs.iterdir()] == ["driver-"]


def test_a_failed_query_prints_no_json_log_line(
    spark: SparkSession, capfd: pytest.CaptureFixture[str]
) -> None:
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException):
        spark.sql("ALTER TABLE delta.`/nonexistent` SET TBLPROPERTIES ('owner' = 'x')")
    captured = capfd.readouterr()
    assert "SQLQueryContextLogger" not in captured.err and "Py4JJavaError" not in captured.err


_EXIT_SCRIPT = """
import gc, io, sys, time
from pathlib import Path
from pyspark import SparkContext
from logstore_cli.jobs.spark import SparkSettings, build_session

mode, log_dir = sys.argv[1], Path(sys.argv[2])
spark = build_session(SparkSettings(master="local[1]", log_dir=log_dir))
# A Python task: the JVM then holds a connection to the accumulator server.
assert spark.sparkContext.parallelize([1, 2], 1).map(lambda x: x + 1).collect() == [2, 3]
server = spark.sparkContext._accumulatorServer
captured = sys.stderr = io.StringIO()  # socketserver prints the handler's errors here
if mode == "exiting":
    import atexit
    atexit._run_exitfuncs()  # what the interpreter runs first on its way out
proc = SparkContext._gateway.proc
proc.kill()  # the JVM ends as it does when the exiting interpreter closes its stdin
proc.wait()
del spark
gc.collect()  # py4j tells the JVM of each collected Java object: a command that finds it gone
if mode == "running":  # the handler reads end-of-file and reports it (proves the set-up)
    deadline = time.monotonic() + 30
    while "EOFError" not in captured.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
server.shutdown()  # returns once the handler has seen the JVM's end and returned
sys.__stdout__.write(captured.getvalue())
"""


@pytest.mark.parametrize("mode", ["running", "exiting"])
def test_no_pyspark_traceback_once_the_process_exits(mode: str, tmp_path: Path) -> None:
    # Seen in a full run: `ingest` failing fast printed socketserver's EOFError after its message.
    # "running" proves the set-up makes PySpark print; "exiting" is after the exit hooks ran.
    proc = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT, mode, str(tmp_path)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    if mode == "running":
        assert "EOFError" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    else:
        assert proc.stdout == "", proc.stdout


_SECRET_SCRIPT = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
from logstore_cli.jobs.spark import SparkSettings, build_session

work = Path(sys.argv[1])
hadoop_secret, core_secret = sys.stdin.readline().split()  # not in argv: ps would show them
spark = build_session(SparkSettings(master="local[1]", work_dir=work, conf={
    "spark.hadoop.fs.s3a.secret.key": hadoop_secret,  # where docs/cluster.md sends S3 keys
    "spark.ssl.keyStorePassword": core_secret,  # a core conf: read only as the context starts
}))
jsc = spark.sparkContext._jsc
print(json.dumps({
    "jvm_pid": SparkContext._gateway.proc.pid,
    "hadoop": jsc.hadoopConfiguration().get("fs.s3a.secret.key"),
    # what Spark SQL's file sources and Delta give the file systems they open
    "sql_hadoop": spark._jsparkSession.sessionState().newHadoopConf().get("fs.s3a.secret.key"),
    "core": spark.sparkContext.getConf().get("spark.ssl.keyStorePassword"),
}), flush=True)
sys.stdin.readline()  # the JVM runs while the test samples every process
"""


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def _processes_showing(needles: tuple[str, ...]) -> list[str]:
    """Every process's command line and environment (what this user can read) holding a needle."""
    found = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        for name in ("cmdline", "environ"):
            try:
                data = (proc_dir / name).read_bytes().decode("utf-8", "replace")
            except OSError:  # gone, or another user's environment
                continue
            found += [f"{proc_dir.name}/{name}: {n}" for n in needles if n in data]
    ps = subprocess.run(
        ["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True, check=True
    )
    found += [
        f"ps: {line[:200]}" for line in ps.stdout.splitlines() if any(n in line for n in needles)
    ]
    return found


def test_secret_confs_never_reach_a_command_line_yet_take_effect(tmp_path: Path) -> None:
    # Issue 18 item 1: PySpark passed every builder conf to spark-submit as `--conf k=v`, so the
    # S3 secret key of [spark.conf] was in the JVM's command line for `ps` of any user.
    hadoop_secret, core_secret = f"s3-{secrets.token_hex(12)}", f"ks-{secrets.token_hex(12)}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SECRET_SCRIPT, str(tmp_path / "spark")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(f"{hadoop_secret} {core_secret}\n")
        proc.stdin.flush()
        line = _readline(proc, timeout=300)
        if not line:
            proc.kill()
            err = proc.communicate()[1]
            pytest.fail(f"the session did not start ({proc.returncode}): {err[-3000:]}")
        seen = json.loads(line)
        jvm_cmdline = Path(f"/proc/{seen['jvm_pid']}/cmdline").read_bytes()
        assert b"SparkSubmit" in jvm_cmdline  # the JVM is running while the processes are sampled
        assert _processes_showing((hadoop_secret, core_secret)) == []
        assert seen["hadoop"] == seen["sql_hadoop"] == hadoop_secret
        assert seen["core"] == core_secret
        for path in tmp_path.rglob("*"):  # nor in a file: driver log, properties, warehouse
            if path.is_file():
                data = path.read_bytes()
                assert hadoop_secret.encode() not in data and core_secret.encode() not in data, path
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
