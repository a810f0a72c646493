"""The ``logstore`` data source on a Pulsar table (issue 23), decided without Spark: the log source
it opens, ``_ls_offset`` as a message id's text, and where the admin API is."""

from __future__ import annotations

import sys

import pytest

from logstore_cli import config as cfg
from logstore_cli.errors import InvalidInputError
from logstore_cli.jobs import datasource
from logstore_cli.logformat.consistency import Emission
from logstore_cli.logformat.pulsar_form import ordinal
from logstore_cli.logformat.wire import ChangeRecord, EpochId, RowKind, RowSchema
from logstore_cli.model import ColumnSpec
from logstore_cli.read import plan
from logstore_cli.read.consumer import SourceConf

SCHEMA = RowSchema.of(datasource._Columns((ColumnSpec("id", "bigint", nullable=False),), ("id",)))


def _spec(system: str) -> datasource.ReadSpec:
    conf = SourceConf("pulsar://h:6650" if system == "pulsar" else "h:9092", {}, "t", 5.0,
                      system=system, admin_url="http://h:8080" if system == "pulsar" else None)  # fmt: skip
    start = plan.Start("earliest")
    return datasource.ReadSpec("db.t", SCHEMA, conf, "committed", "all-kinds", start, start)


def test_the_offset_column_is_a_message_id_on_pulsar_and_a_bigint_on_kafka() -> None:
    from pyspark.sql import types as T

    def schema(offset: T.DataType) -> T.StructType:  # spec.ddl() as Spark parses it (no JVM here)
        meta = [("_ls_kind", T.StringType()), ("_ls_partition", T.IntegerType()),
                ("_ls_offset", offset), ("_ls_writer", T.StringType()),
                ("_ls_epoch", T.LongType())]  # fmt: skip
        return T.StructType([T.StructField(n, t) for n, t in [("id", T.LongType()), *meta]])

    assert "`_ls_offset` string" in _spec("pulsar").ddl()
    assert "`_ls_offset` bigint" in _spec("kafka").ddl()
    position = ordinal(123_456, 789)  # far above a bigint: ledger << 64
    assert position > 2**63
    cases = (("pulsar", position, "123456:789:-1", T.StringType()), ("kafka", 42, 42, T.LongType()))
    for system, offset, shown, offset_type in cases:
        record = ChangeRecord(RowKind.INSERT, {"id": 1}, {"id": 1}, EpochId("w", 1, "a"))
        spec = _spec(system)
        rows = datasource._ArrowRows(spec, schema(offset_type))
        rows.add(0, [Emission(offset, RowKind.INSERT, record)])
        assert rows.take().column("_ls_offset").to_pylist() == [shown]


def test_the_admin_url_is_the_option_else_the_config_else_the_service_hosts() -> None:
    config = cfg.Config()
    given = {"pulsaradminurl": "http://admin:9"}
    assert datasource._pulsar_admin_url(given, config, "pulsar://h:6650") == "http://admin:9"
    assert datasource._pulsar_admin_url({}, config, "pulsar://h:6650") == "http://h:8080"
    with pytest.raises(InvalidInputError, match='option "pulsarAdminUrl" is'):
        datasource._pulsar_admin_url({"pulsaradminurl": "h:8080"}, config, "pulsar://h:6650")


def test_a_kafka_table_never_loads_the_pulsar_client() -> None:
    from logstore_cli.read.consumer import LogSource, open_source

    sys.modules.pop("logstore_cli.read.pulsar_source", None)
    source = open_source(_spec("kafka").source)
    try:
        assert isinstance(source, LogSource)
    finally:
        source.close()
    assert "logstore_cli.read.pulsar_source" not in sys.modules
