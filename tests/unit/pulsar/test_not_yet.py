"""An ingest into a Pulsar table's log is refused before anything starts (issue 23: the log is
provisioned, not written yet); the Delta table alone (--emit file) is not."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import parse_ddl
from logstore_cli.errors import EXIT_INVALID_INPUT, LogSystemNotSupportedError
from logstore_cli.ingest import plan

pytestmark = pytest.mark.unit

DDL = """CREATE TABLE shop.orders (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'log-store.enabled' = 'true', 'log-store.type' = 'pulsar',
  'log-store.address' = 'pulsar://127.0.0.1:6650', 'log-store.topic' = 'orders');"""


@pytest.mark.parametrize("emit", [None, "auto", "log", "file,log"])
def test_an_ingest_to_a_pulsar_log_is_refused(emit: str | None) -> None:
    (table,) = parse_ddl(DDL)
    with pytest.raises(LogSystemNotSupportedError) as info:
        plan.resolve_stores(table, emit)
    assert info.value.exit_code == EXIT_INVALID_INPUT
    assert "(issue 23)" in info.value.message and "--emit file" in (info.value.hint or "")


def test_the_delta_table_alone_is_not_refused() -> None:
    (table,) = parse_ddl(DDL)
    assert plan.resolve_stores(table, "file") == plan.Stores(file=True, log=False)
