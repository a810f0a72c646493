-- The demo tables: one in each vocabulary and SQL shape. No broker address is written, so the
-- local broker from 'logstore broker start' (or --bootstrap-servers / the config) is used.
-- scripts/demo.sh creates both and ingests into demo.orders (its log is read at level eventual).

-- Amoro / Arctic vocabulary, Spark shape (as in the Amoro docs)
CREATE TABLE IF NOT EXISTS demo.orders (
    id BIGINT,
    customer STRING,
    amount DECIMAL(10, 2),
    ts TIMESTAMP,
    PRIMARY KEY (id)
) USING delta
TBLPROPERTIES (
    "log-store.enabled" = "true",
    "log-store.topic" = "demo_orders_log",
    "log-store.consistency-guarantee.enabled" = "true",
    "log.system.partitions" = "3"
);

-- Paimon / Flink Table Store vocabulary, Flink shape: exactly-once (transactional) log reads
CREATE TABLE IF NOT EXISTS demo.users (
    `id` INT,
    `name` VARCHAR(64),
    `tags` ARRAY<STRING>,
    `address` ROW<city STRING, zip STRING>,
    PRIMARY KEY (`id`) NOT ENFORCED
) WITH (
    'log.system' = 'kafka',
    'kafka.topic' = 'demo_users_log',
    'log.consistency' = 'transactional',
    'log.system.partitions' = '2'
);
