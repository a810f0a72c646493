"""Run by PyFlink's own venv (scripts/flink-env.sh), not the project's: a Flink SQL job that reads a
logstore topic with Flink's Kafka connector and ``'format' = 'debezium-json'`` from the earliest
to the latest offset, and prints each changelog row as a JSON line ``{"kind": "+I", "row": {...}}``.

    python flink_read.py JAR BOOTSTRAP TOPIC
"""

from __future__ import annotations

import json
import sys

KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


def main(jar: str, bootstrap: str, topic: str) -> None:
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
    with env.execute_sql("SELECT id, name, qty, price FROM orders_log").collect() as rows:
        for row in rows:
            kind = KINDS[row.get_row_kind().name]
            id_, name, qty, price = row[0], row[1], row[2], row[3]
            values = {
                "id": id_,
                "name": name,
                "qty": qty,
                "price": None if price is None else str(price),
            }
            sys.stdout.write(json.dumps({"kind": kind, "row": values}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(*sys.argv[1:4])
