-- The demo's table on Pulsar (scripts/demo.sh --log pulsar): Amoro's Pulsar DDL, Spark shape.
-- Amoro names the Pulsar service in 'log-store.address'; the demo writes a copy of this file with
-- the address of its own standalone (whose first start takes free ports) and creates the table
-- from that copy.

CREATE TABLE IF NOT EXISTS demo.orders (
    id BIGINT,
    customer STRING,
    amount DECIMAL(10, 2),
    ts TIMESTAMP,
    PRIMARY KEY (id)
) USING delta
TBLPROPERTIES (
    "log-store.enabled" = "true",
    "log-store.type" = "pulsar",
    "log-store.address" = "pulsar://127.0.0.1:6650",
    "log-store.topic" = "demo_orders_log",
    "log-store.consistency-guarantee.enabled" = "true",
    "log.system.partitions" = "3"
);
