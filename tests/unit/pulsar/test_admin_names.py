"""Pulsar topic names and message positions: checked before they reach a URL path, ordered as
Pulsar orders message ids, and written and read back as the Delta commit metadata holds them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.errors import InvalidInputError
from logstore_cli.pulsar.admin import MessagePosition, PulsarAdmin, TopicName

pytestmark = pytest.mark.unit


def test_short_and_full_names() -> None:
    assert str(TopicName.parse("orders")) == "persistent://public/default/orders"
    full = TopicName.parse("persistent://shop/eu/orders.v2")
    assert (full.tenant, full.namespace, full.topic) == ("shop", "eu", "orders.v2")
    assert full.partition(3) == "persistent://shop/eu/orders.v2-partition-3"
    assert full.path == "/admin/v2/persistent/shop/eu/orders.v2"


@pytest.mark.parametrize(
    "bad",
    [
        "non-persistent://public/default/t",
        "public/t",
        "a/b/c/d",
        "persistent://public/default/..",
        "persistent://public/../t",
        "t%2Fx",
        "t?x=1",
        "t#x",
        "t x",
        "t\n",
        "",
        "orders-partition-1",
        "x" * 129,
    ],
)
def test_names_that_would_bend_a_url_or_name_a_partition_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        TopicName.parse(bad)


def test_positions_order_as_pulsar_orders_message_ids() -> None:
    assert MessagePosition(3, 9) < MessagePosition(4, 0) < MessagePosition(4, 1)
    assert MessagePosition(4, 1, 0) < MessagePosition(4, 1, 1)


@given(st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1), st.integers(-1, 2**31))
def test_a_position_reads_back_from_its_text(ledger: int, entry: int, batch: int) -> None:
    position = MessagePosition(ledger, entry, batch)
    assert MessagePosition.parse(str(position)) == position


@pytest.mark.parametrize("bad", ["", "1:2", "1:2:3:4", "a:b:c", "1:2:3 ", "1: 2:3"])
def test_a_position_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Pulsar message position"):
        MessagePosition.parse(bad)


@pytest.mark.parametrize("bad", ["pulsar://127.0.0.1:6650", "http://", "http://h:1/admin", "h:1"])
def test_the_admin_url_is_checked(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="invalid Pulsar admin URL"):
        PulsarAdmin(bad)
