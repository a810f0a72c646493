"""Plain results of the Kafka clients. No confluent-kafka import: the pure planning code
(``provision/plan.py``) and the in-memory test stores use them without loading the client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class TopicInfo(NamedTuple):
    """A topic as the cluster describes it."""

    name: str
    partitions: int
    replication: int  # replicas of partition 0
    configs: Mapping[str, str]  # only non-default topic configs (source DYNAMIC_TOPIC_CONFIG)
