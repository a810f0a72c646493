#!/usr/bin/env python3
"""Spark + Delta + Kafka smoke run for the demo: write a Delta table, double-write its rows to a topic.

Usage: demo_smoke.py BOOTSTRAP WAREHOUSE
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path


def main(bootstrap: str, warehouse: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from logstore_cli.jobs.spark import SparkSettings, build_session

    topic = f"demo-smoke-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference: futures need it
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)

    spark = build_session(SparkSettings(app_name="logstore-demo"))
    try:
        path = str(warehouse / "demo" / "smoke")
        rows = [(i, f"user-{i}") for i in range(10)]
        df = spark.createDataFrame(rows, "id int, name string")
        df.write.format("delta").mode("overwrite").save(path)
        back = spark.read.format("delta").load(path)
        print(
            f"Delta table {path}: {back.count()} rows, version "
            f"{spark.sql(f'DESCRIBE HISTORY delta.`{path}`').first()['version']}"
        )  # type: ignore[index]
    finally:
        spark.stop()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, name in rows:
        producer.produce(
            topic, key=str(i).encode(), value=name.encode(), headers=[("ls.kind", b"+I")]
        )
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = 0
    while seen < len(rows):
        msg = consumer.poll(10)
        if msg is None:
            raise SystemExit("demo: timed out reading back the topic")
        if not msg.error():
            seen += 1
    consumer.close()
    print(f"Kafka topic {topic}: {seen} records produced and consumed back")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
