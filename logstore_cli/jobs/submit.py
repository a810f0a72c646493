"""``--print-spark-submit``: the spark-submit command that runs a logstore job on any master.

The driver is ``logstore`` itself, started by a two-line launcher in the state directory, with the
same arguments; the jars are the resolved classpath (``--jars``, no network at submit time) and
the package travels to the executors as ``--py-files`` (a zip built in the state directory), so a
cluster whose Python has the dependencies but not logstore still runs the job's tasks.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import logstore_cli
from logstore_cli.jobs.spark import DELTA_CONF, defaults_for
from logstore_cli.paths import state_home, state_subdir

LAUNCHER = "from logstore_cli.cli.app import main\n\nmain()\n"


def _package_zip(target_dir: Path) -> Path:
    """A zip of the installed ``logstore_cli`` package (rebuilt when a file changed)."""
    root = Path(logstore_cli.__file__).parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    newest = max((p.stat().st_mtime_ns for p in files), default=0)
    target = target_dir / f"logstore_cli-{logstore_cli.__version__}.zip"
    if target.is_file() and target.stat().st_mtime_ns >= newest:
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, Path("logstore_cli") / path.relative_to(root))
    os.replace(tmp, target)
    return target


def _launcher(target_dir: Path) -> Path:
    path = target_dir / "logstore_submit.py"
    if not path.is_file() or path.read_text("utf-8") != LAUNCHER:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(LAUNCHER, encoding="utf-8")
        os.replace(tmp, path)
    return path


def pin_options(args: Sequence[str], pins: Mapping[str, str]) -> list[str]:
    """``args`` with each flag of ``pins`` (``--flag value`` or ``--flag=value``) replaced by the
    pinned value at the end: the printed command must not depend on the shell's environment or
    directory (a relative warehouse, ``LOGSTORE_SPARK_MASTER``) to run the same job."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        flag = arg.partition("=")[0]
        if flag in pins:
            skip = "=" not in arg
            continue
        out.append(arg)
    for flag, value in pins.items():
        out += [flag, value]
    return out


def submit_command(master: str, conf: Mapping[str, str], args: Sequence[str]) -> list[str]:
    """``[spark-submit, --master, …, launcher, *args]``, ready for ``shlex.join``."""
    from pyspark.find_spark_home import _find_spark_home

    from logstore_cli.jvm.deps import Classpath, ensure_classpath

    jars = ensure_classpath(Classpath.SPARK)
    work = state_subdir(state_home(), "spark", "submit")
    confs = defaults_for(master)
    confs.update(DELTA_CONF)
    confs["spark.pyspark.python"] = sys.executable
    confs["spark.pyspark.driver.python"] = sys.executable
    confs.update(conf)
    command = [
        str(Path(_find_spark_home()) / "bin" / "spark-submit"),  # type: ignore[no-untyped-call]
        "--master", master,
        "--name", "logstore " + " ".join(args[:2]),
        "--jars", ",".join(str(j) for j in jars),
        "--py-files", str(_package_zip(work)),
    ]  # fmt: skip
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(_launcher(work)), *args]
