"""Run by PyFlink's own venv (scripts/flink-env.sh), not the project's: a Flink SQL job that reads a
logstore topic with Flink's Kafka connector and ``'format' = 'debezium-json'`` from the earliest
to the latest offset, and writes each changelog row to OUT as a JSON line
``{"kind": "+I", "row": {...}}`` (a file, not stdout: Flink's JVM logs to the process's stdout, at
times an ERROR line as the job ends).

    python flink_read.py JAR BOOTSTRAP TOPIC OUT
"""

from __future__ import annotations

import json
import sys

KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


def main(jar: str, bootstrap: str, topic: str, out: str) -> None:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("pipeline.jars", f"file://{jar}")
    env.get_config().set("parallelism.default", "1")
    env.execute_sql(f"""
        CREATE TABLE orders_log (
            id BIGINT, name STRING, qty INT, price DECIMAL(10, 2)
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{topic}',
            'properties.bootstrap.servers' = '{bootstrap}',
            'properties.group.id' = 'flink-debezium-test',
            'scan.startup.mode' = 'earliest-offset',
            'scan.bounded.mode' = 'latest-offset',
            'format' = 'debezium-json'
        )""")
    query = env.execute_sql("SELECT id, name, qty, price FROM orders_log")
    with query.collect() as rows, open(out, "w", encoding="utf-8") as lines:
        for row in rows:
            kind = KINDS[row.get_row_kind().name]
            id_, name, qty, price = row[0], row[1], row[2], row[3]
            values = {
                "id": id_,
                "name": name,
                "qty": qty,
                "price": None if price is None else str(price),
            }
            lines.write(json.dumps({"kind": kind, "row": values}) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:5])
