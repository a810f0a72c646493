"""``logstore setup``: resolve the JVM jars once, so later runs need no network."""

from __future__ import annotations

from typing import Annotated

import typer

from logstore_cli.cli.options import JsonOpt
from logstore_cli.cli.output import Output, simple_table
from logstore_cli.jvm.deps import Classpath


def setup(
    only: Annotated[
        list[Classpath] | None,
        typer.Option("--only", help="Resolve just this classpath (repeatable)."),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Fetch the Spark (Delta, Kafka connector) and Kafka-broker jars from Maven Central into the
    local cache."""
    from logstore_cli.jvm.deps import classpath_dir, ensure_classpath

    out = Output(json_mode=json_)
    result = []
    for cp in only or list(Classpath):
        out.info(f"resolving the {cp.value} classpath …")
        jars = ensure_classpath(cp)
        result.append({"classpath": cp.value, "dir": str(classpath_dir(cp)), "jars": len(jars)})
    rows = [(r["classpath"], r["jars"], r["dir"]) for r in result]
    out.emit(
        result,
        lambda c: c.print(simple_table("JVM classpaths", ["classpath", "jars", "directory"], rows)),
    )
