"""``--print-spark-submit``: the spark-submit command that runs a logstore job on any master.

The driver is ``logstore`` itself, started by a two-line launcher in the state directory, with the
same arguments; the jars are the resolved classpath (``--jars``, no network at submit time) and
the package travels to the executors as ``--py-files`` (a zip built in the state directory), so a
cluster whose Python has the dependencies but not logstore still runs the job's tasks.

A user's ``spark.jars`` and ``spark.submit.pyFiles`` join ``--jars`` and ``--py-files`` (spark-submit
would let its own options win and drop them). Secret confs (``model.is_secret``) are never printed:
one from the config file is left out, since the driver (``logstore`` reading the same ``--config``)
sets it on its session; one given with ``--conf`` is in the launcher's arguments, so it is refused.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import logstore_cli
from logstore_cli.errors import InvalidInputError
from logstore_cli.jobs.spark import DELTA_CONF, defaults_for
from logstore_cli.model import is_secret
from logstore_cli.paths import state_home, state_subdir

if TYPE_CHECKING:
    from logstore_cli.storage.s3 import S3Settings

LAUNCHER = "from logstore_cli.__main__ import main\n\nmain()\n"


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


def submit_command(
    master: str,
    conf: Mapping[str, str],
    args: Sequence[str],
    *,
    s3: S3Settings | None = None,
) -> list[str]:
    """``[spark-submit, --master, …, launcher, *args]``, ready for ``shlex.join``; with ``s3`` (a
    warehouse on S3) the S3 jars and the s3a settings too (``submit_confs``)."""
    from pyspark.find_spark_home import _find_spark_home

    from logstore_cli.jvm.deps import spark_jars

    check_no_secret_flags(args)  # before the jars are resolved: bad input fails at once
    jars = spark_jars(s3=s3 is not None)
    work = state_subdir(state_home(), "spark", "submit")
    confs = submit_confs(master, conf, s3)
    spark_submit = str(Path(_find_spark_home()) / "bin" / "spark-submit")  # type: ignore[no-untyped-call]
    return submit_argv(
        spark_submit, master, confs, [str(j) for j in jars], [str(_package_zip(work))],
        str(_launcher(work)), args,
    )  # fmt: skip


def submit_confs(
    master: str, conf: Mapping[str, str], s3: S3Settings | None = None
) -> dict[str, str]:
    """The command's confs, as the session builder orders them: the master's defaults < the s3a
    settings (a warehouse on S3) < Delta's < the user's. Secret ones are in it: ``submit_argv``
    leaves them out of the command."""
    confs = defaults_for(master)
    if s3 is not None:
        from logstore_cli.storage.s3 import s3a_spark_conf

        confs.update(s3a_spark_conf(s3))
    confs.update(DELTA_CONF)
    confs["spark.pyspark.python"] = sys.executable
    confs["spark.pyspark.driver.python"] = sys.executable
    confs.update(conf)
    return confs


# spark-submit's own options set these confs and win over a --conf of them: merged, not printed.
_LIST_CONFS = {"spark.jars": "--jars", "spark.submit.pyFiles": "--py-files"}


def submit_argv(
    spark_submit: str,
    master: str,
    confs: Mapping[str, str],
    jars: Sequence[str],
    py_files: Sequence[str],
    launcher: str,
    args: Sequence[str],
) -> list[str]:
    """The printed command (pure): ``confs``' ``spark.jars``/``spark.submit.pyFiles`` appended to
    ``jars``/``py_files``, secret confs left out (the driver sets them from the config file)."""
    check_no_secret_flags(args)
    lists = {"--jars": list(jars), "--py-files": list(py_files)}
    for key, option in _LIST_CONFS.items():
        lists[option] += [p.strip() for p in confs.get(key, "").split(",") if p.strip()]
    command = [spark_submit, "--master", master, "--name", "logstore " + " ".join(args[:2])]
    for option, paths in lists.items():
        if paths:
            command += [option, ",".join(dict.fromkeys(paths))]  # once each, in order
    for key, value in confs.items():
        if key not in _LIST_CONFS and not is_secret(key, value):
            command += ["--conf", f"{key}={value}"]
    return [*command, launcher, *args]


def _pairs(args: Sequence[str], flag: str) -> list[tuple[str, str]]:
    """The ``KEY=VALUE`` pairs of option ``flag`` in ``args`` (``flag P`` or ``flag=P``)."""
    pairs = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            pair = args[i + 1]
        elif arg.startswith(f"{flag}="):
            pair = arg.removeprefix(f"{flag}=")
        else:
            continue
        key, _, value = pair.partition("=")
        pairs.append((key.strip(), value.strip()))
    return pairs


# Where a secret of each KEY=VALUE option belongs instead of the command line.
_SECRET_HOMES = {
    "--conf": "under [spark.conf] in the config file (readable by you only): the printed command "
    "leaves it out and its driver reads it from there; or prefer a credentials provider "
    "(docs/cluster.md, section 5)",
    "--source-option": "in [kafka.client] of the config file or a LOGSTORE_KAFKA_CLIENT_<PROPERTY> "
    "variable: a kafka: source gets the client properties (docs/cluster.md, section 4)",
}


def check_no_secret_flags(args: Sequence[str]) -> None:
    """Refuse a secret in a ``KEY=VALUE`` option: the launcher's arguments are printed as given."""
    for flag, home in _SECRET_HOMES.items():
        secret = [key for key, value in _pairs(args, flag) if is_secret(key, value)]
        if secret:
            raise InvalidInputError(
                f"--print-spark-submit would print the secret value of {flag} {secret[0]}",
                hint=f"put it {home}",
            )
