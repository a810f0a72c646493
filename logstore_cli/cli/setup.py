"""``logstore setup``: resolve the JVM jars once, so later runs need no network."""

from __future__ import annotations

from typing import Annotated

import typer

from logstore_cli.cli.options import JsonOpt, config_options
from logstore_cli.cli.output import Output, simple_table
from logstore_cli.config import Overrides, Uses
from logstore_cli.jvm.deps import Classpath


@config_options(Uses.WAREHOUSE)
def setup(
    only: Annotated[
        list[Classpath] | None,
        typer.Option("--only", help="Resolve just this classpath (repeatable)."),
    ] = None,
    s3: Annotated[
        bool,
        typer.Option(
            "--s3",
            help="Also resolve the S3 jars (hadoop-aws and the AWS SDK bundle, about 560 MB); "
            "implied when the warehouse is s3://….",
        ),
    ] = False,
    class_archive: Annotated[
        bool,
        typer.Option(
            "--class-archive/--no-class-archive",
            help="Also build the Spark driver's class archive (a one-time warm-up of about a "
            "minute, ~200 MB in the jar cache) when the Spark classpath is resolved: every later "
            "Spark start maps its classes instead of loading them, seconds faster.",
        ),
    ] = True,
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Fetch the Spark (Delta, Kafka connector) and Kafka-broker jars from Maven Central into the
    local cache.

    The S3 jars (Spark's s3a:// connector) are fetched only for a warehouse on S3 (``--warehouse``,
    ``LOGSTORE_WAREHOUSE`` or the config's ``warehouse``) or with ``--s3``: a local warehouse never
    needs them. With the Spark classpath, a small Spark job is run once to build the driver's class
    archive for this Java (``--no-class-archive``: not).
    """
    from logstore_cli.cli.context import make_context
    from logstore_cli.jvm.deps import classpath_dir, ensure_classpath, setup_classpaths

    out = Output(json_mode=json_)
    classpaths = only or setup_classpaths(s3=s3 or make_context(overrides).config.s3_warehouse)
    result = []
    for cp in classpaths:
        out.info(f"resolving the {cp.value} classpath …")
        jars = ensure_classpath(cp)
        result.append({"classpath": cp.value, "dir": str(classpath_dir(cp)), "jars": len(jars)})
    if class_archive and Classpath.SPARK in classpaths:
        _class_archive(out)
    rows = [(r["classpath"], r["jars"], r["dir"]) for r in result]
    out.emit(
        result,
        lambda c: c.print(simple_table("JVM classpaths", ["classpath", "jars", "directory"], rows)),
    )


def _class_archive(out: Output) -> None:
    """Build the archive unless there is one; a JVM that writes none is a warning, not an error
    (Spark runs without it)."""
    from logstore_cli.jvm import class_archive

    archive = class_archive.current_archive()
    if archive is None:
        out.info("building the Spark class archive (a one-time Spark warm-up) …")
        built = class_archive.build()
        if isinstance(built, class_archive.Unavailable):
            out.warning(
                f"the JVM wrote no Spark class archive ({built.reason}): Spark starts without "
                "one, seconds slower"
            )
            return
        archive = built
    out.info(f"Spark class archive: {archive}")
