"""Kafka: the local development broker, and admin/producer/consumer helpers (confluent-kafka)."""
