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
    json_: JsonOpt = False,
    *,
    overrides: Overrides,
) -> None:
    """Fetch the Spark (Delta, Kafka connector) and Kafka-broker jars from Maven Central into the
    local cache.

    The S3 jars (Spark's s3a:// connector) are fetched only for a warehouse on S3 (``--warehouse``,
    ``LOGSTORE_WAREHOUSE`` or the config's ``warehouse``) or with ``--s3``: a local warehouse never
    needs them.
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
    rows = [(r["classpath"], r["jars"], r["dir"]) for r in result]
    out.emit(
        result,
        lambda c: c.print(simple_table("JVM classpaths", ["classpath", "jars", "directory"], rows)),
    )
