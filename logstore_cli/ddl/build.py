"""Stage 4: syntax → model. Checks what the grammar cannot (names, keys, properties) and pins every
problem to the token it is about."""

from __future__ import annotations

from logstore_cli.ddl.options import ParseOptions
from logstore_cli.ddl.properties import check_properties
from logstore_cli.ddl.source import Issue, Span
from logstore_cli.ddl.syntax import CreateTable, Name
from logstore_cli.model import ColumnSpec, TableSpec
from logstore_cli.names import part_problems


def build_table(node: CreateTable, options: ParseOptions) -> tuple[TableSpec | None, list[Issue]]:
    """The table ``node`` declares, or None when it has errors; and every problem found."""
    issues: list[Issue] = []

    def error(message: str, span: Span) -> None:
        issues.append(Issue(message, span))

    name_span = Span(node.name[0].span.start, node.name[-1].span.end)
    display = ".".join(n.text for n in node.name)
    # Database and table become directories of the warehouse: one rule, shared with the CLI.
    for index, problem in part_problems([n.text for n in node.name]):
        error(f"invalid table name: {problem}", node.name[index].span)
    if node.elided is not None:
        error(
            "the column list is elided ('...'), as in documentation; write out the columns, "
            "e.g. (id BIGINT, name STRING, PRIMARY KEY (id))",
            node.elided,
        )
    elif node.column_list is None:
        error(
            f"table {display} has no column list; declare its columns: {display} (id BIGINT, …)",
            name_span,
        )
    elif not node.columns:
        error(f"table {display} has no columns", node.column_list)

    by_name: dict[str, Name] = {}
    for column in node.columns:
        key = column.name.text.lower()  # Spark resolves column names case-insensitively
        if key in by_name:
            error(f"duplicate column '{column.name.text}'", column.name.span)
        else:
            by_name[key] = column.name

    pk_defs = [(d.columns, d.span) for d in node.primary_keys]
    pk_defs += [((c.name,), c.primary_key) for c in node.columns if c.primary_key is not None]
    pk_defs.sort(key=lambda d: d[1].start)
    primary_key: list[str] = []
    if len(pk_defs) > 1:
        error("more than one PRIMARY KEY; declare one key listing all its columns", pk_defs[1][1])
    if pk_defs:
        for name in pk_defs[0][0]:
            declared = by_name.get(name.text.lower())
            if declared is None:
                if node.elided is None:
                    error(_not_a_column("primary key column", name, by_name), name.span)
            elif declared.text in primary_key:
                error(f"column '{name.text}' appears twice in the primary key", name.span)
            else:
                primary_key.append(declared.text)
    partitioned_by: list[str] = []
    for name in node.partitioned_by:
        declared = by_name.get(name.text.lower())
        if declared is None:
            if node.elided is None:
                error(_not_a_column("partition column", name, by_name), name.span)
        else:
            partitioned_by.append(declared.text)

    props: dict[str, str] = {}
    entries = {}
    for entry in node.properties:
        if entry.key in entries:
            error(f"duplicate property '{entry.key}'", entry.key_span)
            continue
        props[entry.key] = entry.value
        entries[entry.key] = entry
    log_store, problems = check_properties(props, primary_key=primary_key, options=options)
    for p in problems:
        at = entries.get(p.key) if p.key is not None else None
        span = name_span if at is None else at.value_span if p.on_value else at.key_span
        issues.append(Issue(p.message, span, p.severity))

    if any(i.severity == "error" for i in issues):
        return None, issues
    keys = {k.lower() for k in primary_key}
    columns = tuple(
        ColumnSpec(
            name=c.name.text,
            type=c.type,
            nullable=not c.not_null and c.name.text.lower() not in keys,
            comment=c.comment,
        )
        for c in node.columns
    )
    parts = [n.text for n in node.name]
    table = TableSpec(
        catalog=parts[-3] if len(parts) == 3 else None,
        database=parts[-2] if len(parts) >= 2 else None,
        table=parts[-1],
        columns=columns,
        primary_key=tuple(primary_key),
        using=node.using.text if node.using else None,
        properties=props,
        log_store=log_store,
        partitioned_by=tuple(partitioned_by),
        comment=node.comment,
        location=node.location,
        if_not_exists=node.if_not_exists,
        or_replace=node.or_replace,
    )
    return table, issues


def _not_a_column(what: str, name: Name, columns: dict[str, Name]) -> str:
    listed = ", ".join(n.text for n in columns.values())
    return f"{what} '{name.text}' is not a column of the table (columns: {listed})"
