"""Provisioning: turn a TableSpec into a Delta table and a Kafka topic, idempotently, with rollback."""
