"""Where table definitions live: the warehouse layout and the Delta tables' own metadata.

The Delta table is the source of truth: its schema, and table properties holding the DDL's properties
(secrets excepted) plus logstore's own ``logstore.*`` keys. Reading it needs no JVM (delta-rs).
"""
