"""A command imports only what it runs (issue 20): the package's own modules each command loads are
within its allow-list below, and no command here loads a heavy library it does not use.

Each command runs in a fresh interpreter through the console script's entry point
(``logstore_cli.__main__.main``), so modules other tests have already loaded hide nothing. The lists
are what the command needs, read by a reviewer: a module that is added to a command's imports
without being in its list fails here, and the fix is either a lazier import or a list entry that
says why the command needs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deltalog import write_table

# What every command loads: the entry point (signal handler first), the app and its lazy command
# registry, the error edge and its output.
BASE = frozenset({"__main__", "interrupt", "errors", "cli", "cli.app", "cli.lazy", "cli.output"})
# A command with options: its flags from the config's declarations; and what the root's callback
# sets up before any command runs (log records to stderr).
OPTIONS = frozenset({"cli.options", "config", "model", "cli.logs"})
# The configuration.
CONTEXT = frozenset({"cli.context", "names", "paths"})
# The address of the local broker ("logstore broker start"), read from its state files (not
# local_broker: no JVM launcher): only for a table without an address of its own (none below has
# one, but 'status' looks the broker up for the topic).
LOCAL_BROKER = frozenset({"kafka", "kafka.local_state"})
# The property registry and log-store resolution, without the DDL parser (and without sqlglot).
PROPERTIES = frozenset(
    {"ddl", "ddl.options", "ddl.registry", "ddl.properties", "ddl.delta_properties"}
)
PARSER = frozenset(
    {"ddl.document", "ddl.source", "ddl.lexer", "ddl.parser", "ddl.syntax", "ddl.types"}
    | {"ddl.build"}
)
# A stored table: the warehouse layout, its Delta metadata (delta-rs) and the model rebuilt from it.
CATALOG = frozenset(
    {"cli.tables", "catalog", "catalog.warehouse", "catalog.tables", "catalog.schema"}
    | {"kafka", "kafka.types"}
)
# What 'status' adds: lease, the epochs Delta records (their wire metadata), the job's paths.
STATUS = frozenset(
    {"cli.status", "catalog.status", "catalog.lease", "catalog.epochs", "ingest", "ingest.plan"}
    | {"catalog.delta_log"}  # where the Delta log is read (a local path: the seam is not imported)
    | {"catalog.outside", "ingest.outside"}  # writes made outside logstore, not carried yet
    | {"logformat", "logformat.errors", "logformat.partitioner", "logformat.values"}
    | {"logformat.wire"}
)
HISTORY = frozenset(
    {"cli.history", "catalog", "catalog.warehouse", "catalog.history", "catalog.epochs"}
    | {"catalog.delta_log"}
    | {"catalog.lease", "catalog.outside", "ingest", "ingest.outside", "ingest.plan"}
    | {"logformat", "logformat.errors", "logformat.partitioner", "logformat.values"}
    | {"logformat.wire", "names"}
)
# What 'read --mode file' adds: the read's plan and request, the wire format's encoders of the JSON
# lines, the delta-rs engine (the consumer engine's module is not loaded).
READ = frozenset(
    {"cli.read", "read", "read.plan", "read.service", "read.delta_rs", "read.fold"}
    | {"catalog.epochs", "logformat", "logformat.errors", "logformat.values", "logformat.wire"}
    | {"catalog.delta_log"}
    | {"logformat.consistency", "logformat.partitioner"}
)
VACUUM = frozenset({"cli.vacuum", "catalog.vacuum", "catalog.epochs"}) | (HISTORY - {"cli.history"})
# Libraries no command here may load: the JVM side, the Kafka client, pydantic (Typer's
# coercion of values that are already text; see cli/lazy.py), and the S3 client (only for an
# s3:// warehouse, which none of these uses).
NEVER = frozenset({"pyspark", "py4j", "delta", "confluent_kafka", "pydantic", "boto3", "botocore"})
# ... nor, with no config file (none here: LOGSTORE_CONFIG is unset), the TOML parser.
NEVER |= {"tomllib"}
# Libraries some commands below need and the others must not load; ``logging`` costs a quarter of
# Typer and Rich, and the log handler waits for it (cli/logs.py).
HEAVY_ELSEWHERE = frozenset({"sqlglot", "deltalake", "pyarrow", "logging"})

TABLE = "shop.orders"
ROWS_TABLE = "shop.items"  # a table with rows, for read
DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) "
    "WITH ('log.system' = 'kafka', 'kafka.topic' = 'orders', "
    "'kafka.bootstrap.servers' = '127.0.0.1:9')"
)
PLAIN_TABLE = "shop.plain"
PLAIN_DDL = f"CREATE TABLE {PLAIN_TABLE} (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)"
ONE_TABLE = str(Path(__file__).parents[2] / "fixtures" / "ddl" / "paimon_kafka_filled.sql")

# command id: (argv after 'logstore', extra env, allowed logstore_cli modules, allowed libraries)
CASES: dict[str, tuple[list[str], dict[str, str], frozenset[str], frozenset[str]]] = {
    "--help": (["--help"], {}, BASE | {"cli.group_help"}, frozenset()),
    "--version": (["--version"], {}, BASE, frozenset()),
    "validate": (
        ["validate", ONE_TABLE],
        {},
        BASE | OPTIONS | {"cli.ddl"} | CONTEXT | PROPERTIES | PARSER,
        frozenset(),
    ),
    # Typer draws a command's help (its renderer loads Rich's tracebacks, and they logging).
    "validate --help": (
        ["validate", "--help"],
        {},
        BASE | OPTIONS | {"cli.ddl"},
        frozenset({"logging"}),
    ),
    "properties": (["properties"], {}, BASE | OPTIONS | {"cli.ddl"} | PROPERTIES, frozenset()),
    "list": (
        ["list"],
        {},
        BASE | OPTIONS | CONTEXT | PROPERTIES | CATALOG,
        frozenset(),
    ),
    "describe": (
        ["describe", TABLE, "--no-topic"],
        {},
        BASE | OPTIONS | CONTEXT | PROPERTIES | CATALOG,
        frozenset(),
    ),
    "status": (
        ["status", TABLE, "--no-topic"],
        {},
        BASE | OPTIONS | CONTEXT | LOCAL_BROKER | PROPERTIES | CATALOG | STATUS,
        frozenset({"deltalake", "logging"}),  # the epochs Delta records (transaction versions)
    ),
    "history": (
        ["history", TABLE],
        {},
        BASE | OPTIONS | CONTEXT | HISTORY,
        frozenset({"deltalake", "logging"}),
    ),
    # delta-rs and Arrow, no JVM: a PATH without java and a JAVA_HOME that is none (issue 20)
    "read --mode file": (
        ["read", ROWS_TABLE, "--mode", "file", "--changes", "-o", "jsonl"],
        {"PATH": "/nonexistent", "JAVA_HOME": "/nonexistent/java"},
        BASE | OPTIONS | CONTEXT | PROPERTIES | CATALOG | READ,
        frozenset({"deltalake", "pyarrow", "logging"}),
    ),
    # A table without a log store: no broker to ask where its log starts (confluent_kafka).
    "vacuum": (
        ["vacuum", PLAIN_TABLE, "--dry-run"],
        {},
        BASE | OPTIONS | CONTEXT | PROPERTIES | CATALOG | VACUUM,
        frozenset({"deltalake", "logging"}),
    ),
    "complete a command name": (
        [],
        {"_LOGSTORE_COMPLETE": "complete_bash", "COMP_WORDS": "logstore des", "COMP_CWORD": "1"},
        BASE,
        frozenset(),
    ),
    "complete a table name": (
        [],
        {
            "_LOGSTORE_COMPLETE": "complete_bash",
            "COMP_WORDS": "logstore describe sh",
            "COMP_CWORD": "2",
        },
        BASE | OPTIONS | {"cli.context", "cli.tables", "names", "catalog", "catalog.warehouse"},
        frozenset(),
    ),
}

# Runs the console script's main() and prints its exit code, the start of its output, and the
# package's modules and the top-level libraries it loaded. A command that ran delta-rs ends
# without the interpreter's teardown (os._exit): here a SystemExit instead, so the probe prints.
_PROBE = """
import contextlib, io, sys
import logstore_cli.__main__ as entry
from logstore_cli.__main__ import main
entry._exit_before_teardown = sys.exit
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
print(code)
print(out.getvalue().strip().splitlines()[0] if out.getvalue().strip() else "")
print(" ".join(sorted(m.removeprefix("logstore_cli.") for m in sys.modules if m.startswith("logstore_cli."))))
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
print(" ".join(sorted(m for m in sys.modules if m == "sqlglot" or m.startswith("sqlglot."))))
"""


def _probe(
    args: list[str], env: dict[str, str], warehouse: Path
) -> tuple[int, str, set[str], set[str], set[str]]:
    environ = {
        **os.environ,
        "LOGSTORE_WAREHOUSE": str(warehouse),
        "LOGSTORE_STATE_DIR": str(warehouse.parent / "state"),
        **env,
    }
    environ.pop("LOGSTORE_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    code, first, ours, libraries, sqlglot = proc.stdout.split("\n")[:5]
    return int(code), first, set(ours.split()), set(libraries.split()), set(sqlglot.split())


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("startup") / "warehouse"
    write_table(root, DDL)
    import pyarrow as pa
    from deltalake import write_deltalake

    items = write_table(root, f"CREATE TABLE {ROWS_TABLE} (id BIGINT NOT NULL, name STRING)")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    write_deltalake(str(items), rows, mode="append")
    write_table(root, PLAIN_DDL)
    return root


@pytest.mark.parametrize("case", CASES)
def test_a_command_imports_only_what_it_runs(case: str, warehouse: Path) -> None:
    args, env, allowed, libraries = CASES[case]
    code, first, ours, loaded, _ = _probe(args, env, warehouse)
    assert code == 0, f"{case} failed"
    assert first, f"{case} printed nothing"  # it ran: the list below is of a real run
    extra = sorted(ours - allowed)
    assert not extra, f"{case} imports {extra}, not in its allow-list"
    heavy = sorted(loaded & (NEVER | (HEAVY_ELSEWHERE - libraries)))
    assert not heavy, f"{case} loads {heavy}"


def test_validate_loads_sqlglot_only_for_ddl_the_scanner_leaves_to_it(warehouse: Path) -> None:
    """A backslash escape is left to sqlglot's Spark tokenizer (ddl/spark_lexer.py)."""
    ddl = warehouse.parent / "escapes.sql"
    ddl.write_text("CREATE TABLE t (a INT COMMENT 'it\\'s') WITH ('k' = 'v');", encoding="utf-8")
    code, _, ours, _, sqlglot = _probe(["validate", str(ddl)], {}, warehouse)
    assert code == 0
    assert ours >= PARSER | {"ddl.spark_lexer"} and "sqlglot.tokens" in sqlglot


def test_the_probe_sees_what_a_command_imports(warehouse: Path) -> None:
    """The check is not vacuous: 'validate' does load the parser, 'status' delta-rs; 'list' reads
    a small table's JSON log itself (catalog/warehouse.py), without delta-rs."""
    _, _, ours, loaded, sqlglot = _probe(["validate", ONE_TABLE], {}, warehouse)
    assert ours >= PARSER and "ddl.spark_lexer" not in ours and not sqlglot
    _, first, ours, loaded, _ = _probe(["list"], {}, warehouse)
    assert "catalog.tables" in ours and "deltalake" not in loaded
    assert "Tables in" in first
    _, _, _, loaded, _ = _probe(["status", TABLE, "--no-topic"], {}, warehouse)
    assert "deltalake" in loaded


def test_create_and_alter_table_run_without_java(tmp_path: Path) -> None:
    """No JVM for a table without Spark-only properties: no pyspark loaded, and none to start."""
    warehouse = tmp_path / "warehouse"
    ddl = tmp_path / "t.sql"
    ddl.write_text(
        "CREATE TABLE db.t (id BIGINT, seen TIMESTAMP_NTZ, PRIMARY KEY (id)) USING delta "
        "TBLPROPERTIES ('delta.logRetentionDuration' = '7 days')"
    )
    no_java = {
        "JAVA_HOME": str(tmp_path / "no-java"),
        "PATH": os.pathsep.join(
            d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "java").exists()
        ),
    }
    for args in (["create-table", str(ddl)], ["alter-table", "db.t", "--set", "k=v"]):
        code, _, _, loaded, _ = _probe(args, no_java, warehouse)
        assert code == 0, f"{args[0]} failed without Java"
        assert not loaded & {"pyspark", "py4j", "delta"}, f"{args[0]} loaded the JVM side"
    props = (warehouse / "db" / "t" / "_delta_log" / "00000000000000000001.json").read_text()
    assert '"k":"v"' in props


# Prints the package's dataclasses that 'validate', 'describe' and 'status' load without a docstring.
_UNDOCUMENTED = """
import contextlib, dataclasses, inspect, io, sys
from logstore_cli.__main__ import main
for args in sys.argv[1:]:
    sys.argv = ["logstore", *args.split("\\x1f")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main()
        except SystemExit:
            pass
for name, module in sorted(sys.modules.items()):
    if name.startswith("logstore_cli"):
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == name and dataclasses.is_dataclass(cls):
                if (cls.__doc__ or "").startswith(cls.__name__ + "("):
                    print(name, cls.__name__)
"""


def test_start_up_dataclasses_have_docstrings(warehouse: Path) -> None:
    """A dataclass without a docstring gets one made from ``inspect.signature`` when its module is
    imported (0.3-0.4 ms each here, some 10 ms over the 32 of these paths): the classes the
    commands without Spark load each have their own."""
    commands = [
        ["validate", ONE_TABLE],
        ["describe", TABLE, "--no-topic", "--warehouse", str(warehouse)],
        ["status", TABLE, "--no-topic", "--warehouse", str(warehouse)],
    ]
    environ = {**os.environ, "LOGSTORE_STATE_DIR": str(warehouse.parent / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", _UNDOCUMENTED, *("\x1f".join(c) for c in commands)],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", f"dataclasses without a docstring:\n{proc.stdout}"


# Prints the package's classes 'validate', 'list' and 'describe' load that are dataclasses compiling
# methods of their own at import (init, repr or eq generated).
_COMPILED_DATACLASSES = """
import contextlib, dataclasses, inspect, io, sys
from logstore_cli.__main__ import main
for args in sys.argv[1:]:
    sys.argv = ["logstore", *args.split("\\x1f")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main()
        except SystemExit:
            pass
for name, module in sorted(sys.modules.items()):
    if name.startswith("logstore_cli"):
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == name and dataclasses.is_dataclass(cls):
                params = cls.__dataclass_params__
                if params.init or params.repr or params.eq or params.frozen:
                    print(name, cls.__name__)
"""


def test_start_up_creates_no_compiled_dataclass(warehouse: Path) -> None:
    """A frozen dataclass compiles six methods when its module is imported (0.4-1 ms a class on
    Python 3.11; some 40 classes made 'validate', 'list' and 'describe' 1.5x the Typer + Rich
    import, issue 20). The classes these commands load are named tuples, plain classes, or
    ``model.FrozenRecord`` dataclasses whose methods are written once."""
    commands = [
        ["validate", ONE_TABLE],
        ["list", "--warehouse", str(warehouse)],
        ["describe", TABLE, "--no-topic", "--warehouse", str(warehouse)],
    ]
    environ = {**os.environ, "LOGSTORE_STATE_DIR": str(warehouse.parent / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILED_DATACLASSES, *("\x1f".join(c) for c in commands)],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", f"dataclasses compiled at start-up:\n{proc.stdout}"


# Runs the console script's main() and prints the garbage collections it ran by generation, whether
# the collector is on afterwards, and how many objects it froze.
_GC_PROBE = """
import contextlib, gc, io, sys
runs = [0, 0, 0]
gc.callbacks.append(lambda phase, info: phase == "stop" and runs.__setitem__(
    info["generation"], runs[info["generation"]] + 1))
from logstore_cli.__main__ import main
runs[:] = [0, 0, 0]  # from main() on: compiling this module may collect (no bytecode cache)
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(*runs, int(gc.isenabled()), gc.get_freeze_count())
"""


@pytest.mark.parametrize(
    "args", [["--version"], ["validate", ONE_TABLE]], ids=["--version", "validate"]
)
def test_start_up_runs_no_garbage_collection(args: list[str], warehouse: Path) -> None:
    """Importing Typer, Rich and the command runs the collector some 40 times over objects that
    live as long as the process (5-7 ms; issue 20): the entry point pauses it, and the command
    runs with it on again, what start-up made frozen (so no later collection scans it)."""
    environ = {**os.environ, "LOGSTORE_STATE_DIR": str(warehouse.parent / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, *args],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    young, middle, old, enabled, frozen = map(int, proc.stdout.split())
    assert enabled == 1, "the collector is left off"
    assert frozen > 10_000, "start-up's objects were not frozen"
    assert middle == old == 0, f"start-up ran {middle} + {old} collections of older generations"
    # 'validate' parses and draws with the collector on: a few young collections, not 40
    assert young <= (0 if args == ["--version"] else 10), f"{young} young collections"


def test_resume_gc_leaves_a_collector_that_is_on_alone() -> None:
    """In a caller's process (tests, an embedding program) the collector is on: nothing frozen."""
    import gc

    from logstore_cli.cli.app import resume_gc

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    resume_gc()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
