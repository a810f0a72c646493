"""An ingest into a Pulsar table's log is planned like a Kafka one (issue 23: the write side of the
log seam): the job gets the table's Pulsar service URL, admin API and full topic name, and no
Kafka target; its epoch line names Pulsar message ids as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstore_cli import config as cfg
from logstore_cli.cli.context import Context
from logstore_cli.cli.ingest import build_job
from logstore_cli.ddl import parse_ddl
from logstore_cli.ingest import plan
from logstore_cli.logformat.wire import LogPosition
from tests.deltalog import write_table

pytestmark = pytest.mark.unit

DDL = """CREATE TABLE shop.orders (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
  'log-store.address' = 'pulsar://127.0.0.1:6650', 'log-store.topic' = 'orders');"""


@pytest.mark.parametrize("emit", [None, "auto", "log", "file,log"])
def test_an_ingest_to_a_pulsar_log_writes_the_log(emit: str | None) -> None:
    (table,) = parse_ddl(DDL)
    assert plan.resolve_stores(table, emit).log


def test_the_delta_table_alone_is_not_refused() -> None:
    (table,) = parse_ddl(DDL)
    assert plan.resolve_stores(table, "file") == plan.Stores(file=True, log=False)


def test_the_job_gets_the_pulsar_target_and_no_kafka_one(tmp_path: Path) -> None:
    write_table(tmp_path / "wh", DDL)
    ctx = Context(
        cfg.Config(
            warehouse=str(tmp_path / "wh"),
            pulsar=cfg.PulsarConfig(admin_url="http://127.0.0.1:18080"),
        )
    )
    job = build_job(
        ctx, "shop.orders", source="generate", format=None, source_options={},
        source_bootstrap=None, generate=plan.GenerateSource(10, 10, 10, 0.5, 0.1),
        op_column=None, sequence_column=None, emit=None, trigger_s=1.0, once=True,
        job="ingest", checkpoint=None, lease_ttl_s=30.0, max_epochs=None,
    )  # fmt: skip
    assert job.kafka is None and job.stores == plan.Stores(file=True, log=True)
    assert job.pulsar is not None
    assert job.pulsar.service_url == "pulsar://127.0.0.1:6650"
    assert job.pulsar.admin_url == "http://127.0.0.1:18080"
    assert job.pulsar.topic == "persistent://public/default/orders"
    assert job.source.kafka_bootstrap != job.pulsar.service_url  # no Kafka source default


def test_an_epoch_line_names_pulsar_message_ids_and_kafka_offsets_as_before() -> None:
    from logstore_cli.cli.ingest import _epoch_line
    from logstore_cli.ingest.epoch import EpochReport

    def line(offsets: dict[int, LogPosition]) -> str:
        return _epoch_line(EpochReport("w", 3, "a", 5, 5, 0, 7, offsets, False, 1.0), 0)

    assert "; log last message ids 0=11:7:-1 1=12:0:-1;" in line({0: "11:7:-1", 1: "12:0:-1"})
    assert "; log end offsets 0:5 1:9;" in line({0: 5, 1: 9})
    assert "; log end offsets -;" in line({})
