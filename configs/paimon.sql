-- A Paimon-style table: the Paimon / Flink Table Store vocabulary, Flink shape. Its log is written
-- in Paimon's default 'log.format' = 'debezium-json' (Flink's debezium-json envelope), so Flink SQL
-- jobs downstream read the topic as they read a Paimon table's Kafka log (docs/guide.md, "The log
-- as a change stream"). 'log.changelog-mode' = 'all' because a keyed Paimon table's default, upsert,
-- writes deletes as tombstones (a null value), which Flink's debezium-json source skips. No broker
-- address is written: the default broker is used.
CREATE TABLE IF NOT EXISTS shop.orders (
    `id` BIGINT,
    `customer` STRING,
    `amount` DECIMAL(10, 2),
    `updated_at` TIMESTAMP_LTZ(6),
    PRIMARY KEY (`id`) NOT ENFORCED
) WITH (
    'log.system' = 'kafka',
    'kafka.topic' = 'shop_orders_log',
    'log.format' = 'debezium-json',
    'log.key.format' = 'json',
    'log.consistency' = 'transactional',
    'log.changelog-mode' = 'all',
    'log.system.partitions' = '3'
);
