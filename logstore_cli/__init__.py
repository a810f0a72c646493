"""logstore: one table that is both a Delta Lake table and a consistent Kafka changelog."""

__version__ = "0.1.0"
