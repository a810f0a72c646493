"""What commands share: the resolved configuration, the default broker, and the stores."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from logstore_cli import config as cfg
from logstore_cli.errors import InvalidInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstore_cli.catalog.tables import StoredTable, StoredTableOn
    from logstore_cli.model import LogStoreSpec
    from logstore_cli.provision.pulsar_topics import TopicStoreBySystem
    from logstore_cli.provision.service import Stores
    from logstore_cli.storage import Storage
    from logstore_cli.storage.s3 import S3Settings


class Context:
    """The resolved configuration a command runs with."""

    # A plain class, not a dataclass: nothing compares or copies one, and every command creates
    # this class at start-up (a frozen dataclass compiles six methods, 0.4-0.5 ms; issue 20).
    def __init__(self, config: cfg.Config) -> None:
        self.config = config

    @property
    def warehouse(self) -> Path:
        return self.config.warehouse_path()

    @property
    def remote(self) -> bool:
        """Whether the warehouse is on object storage (``storage``), not a local ``warehouse``."""
        return self.config.remote_warehouse

    @cached_property
    def storage(self) -> Storage:
        """The remote warehouse (``s3://`` with the standard AWS settings, ``hdfs://``; remote
        only)."""
        from logstore_cli.storage import open_storage

        return open_storage(self.config.warehouse)

    @cached_property
    def spark_s3(self) -> S3Settings | None:
        """The S3 settings Spark gets for a warehouse on S3 (``SparkSettings.s3``: the s3a jars
        and settings), from the same standard AWS environment as ``storage``; None when local."""
        if not self.config.s3_warehouse:
            return None
        from logstore_cli.storage.s3 import S3Settings

        return S3Settings.from_env()

    @cached_property
    def default_bootstrap(self) -> str | None:
        """The config's brokers, else the local broker's ('logstore broker start'): where it runs,
        else where it ran last (stopped: Delta-only commands still resolve the table, and a
        command that needs Kafka fails as unreachable, naming that address)."""
        if self.config.kafka.bootstrap_servers:
            return self.config.kafka.bootstrap_servers
        from logstore_cli.kafka import local_state
        from logstore_cli.paths import state_home

        home = state_home()
        # a cluster: every node's address
        return local_state.local_bootstrap(home) or local_state.last_local_bootstrap(home)

    def bootstrap_lookup(self) -> str | None:
        """``default_bootstrap`` as a lookup for the DDL stages: the local broker's state files
        are read only for a table without an address of its own."""
        return self.default_bootstrap

    def load_table(self, name: str) -> StoredTable:
        """The table ``name`` of the warehouse, its model rebuilt from its Delta metadata."""
        from logstore_cli.catalog.tables import load_table

        return load_table(self.warehouse, name, default_bootstrap=self.bootstrap_lookup)

    def load_table_on(self, name: str) -> StoredTableOn:
        """``load_table`` of a warehouse on object storage."""
        from logstore_cli.catalog.tables import load_table_on

        return load_table_on(self.storage, name, default_bootstrap=self.bootstrap_lookup)

    def load_any(self, name: str) -> StoredTable | StoredTableOn:
        """The table ``name``, wherever the warehouse is."""
        return self.load_table_on(name) if self.remote else self.load_table(name)


def parse_pairs(pairs: Sequence[str] | None, flag: str) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a pair without '=' is an error naming the flag."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(
                f"{flag} expects KEY=VALUE, got {pair!r}",
                hint=f"e.g. {flag} log.system.partitions=4",
            )
        out[key.strip()] = value  # stored exactly as given: spaces may be meant
    return out


def make_context(overrides: cfg.Overrides) -> Context:
    """The configuration from ``overrides`` (see ``options.config_options``), the file and env."""
    return Context(cfg.load(overrides.config_path, os.environ, overrides.flags))


def topic_stores(ctx: Context) -> TopicStoreBySystem:
    """Kafka's topic store, and Pulsar's (built on a Pulsar table's first call), by log system."""
    from logstore_cli.provision.kafka_topics import KafkaTopicStore
    from logstore_cli.provision.pulsar_topics import PulsarTopicStore, TopicStoreBySystem

    def pulsar() -> PulsarTopicStore:
        return PulsarTopicStore(
            ctx.config.pulsar, timeout_s=ctx.config.kafka.timeout_s, local=_local_pulsar
        )

    return TopicStoreBySystem(KafkaTopicStore(ctx.config.kafka), pulsar)


def pulsar_admin_url(ctx: Context, log: LogStoreSpec) -> str:
    """The admin API of the Pulsar that holds ``log`` (``[pulsar] admin_url``, else the local
    standalone's when ``log`` is on it, else port 8080 of its first host)."""
    from logstore_cli.pulsar.admin import admin_url_for

    configured = ctx.config.pulsar.admin_url
    return admin_url_for(log.address, configured, None if configured else _local_pulsar())


def _local_pulsar() -> tuple[str, str] | None:
    """(service URL, admin URL) of the local standalone's last start ('logstore pulsar start')."""
    from logstore_cli.paths import state_home
    from logstore_cli.pulsar import local_standalone

    return local_standalone.last_urls(state_home())


@contextmanager
def open_topics(ctx: Context) -> Iterator[TopicStoreBySystem]:
    """The topic stores alone (a warehouse on object storage has no ``DeltaStore``)."""
    topics = topic_stores(ctx)
    try:
        yield topics
    finally:
        topics.close()


@contextmanager
def open_stores(ctx: Context) -> Iterator[Stores]:
    """The real Delta (Spark started on the first write only) and Kafka stores; closed on exit."""
    from logstore_cli.provision.delta_log import SPARK_DEFAULTS_PREFIX, DeltaLogStore
    from logstore_cli.provision.delta_spark import SparkDeltaStore
    from logstore_cli.provision.service import Stores

    def session() -> SparkSession:
        from logstore_cli.jobs.spark import SparkSettings, build_session

        return build_session(
            SparkSettings(
                master=ctx.config.spark.master, conf=ctx.config.spark.conf, s3=ctx.spark_s3
            )
        )

    defaults = [k for k in ctx.config.spark.conf if k.startswith(SPARK_DEFAULTS_PREFIX)]
    delta = DeltaLogStore(
        ctx.warehouse, SparkDeltaStore(ctx.warehouse, session), spark_defaults=defaults
    )
    topics = topic_stores(ctx)
    try:
        yield Stores(delta, topics)
    finally:
        topics.close()
        delta.close()
