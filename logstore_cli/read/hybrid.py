"""Where a hybrid read starts, with the topic asked where its log now starts (docs/consistency.md,
"Hybrid reads"): the decision is ``read.plan.hybrid_start``'s, the offsets the Kafka admin's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logstore_cli.catalog.epochs import epoch_commits
from logstore_cli.read import plan

if TYPE_CHECKING:
    from logstore_cli.catalog.delta_log import TableLocation
    from logstore_cli.read.consumer import SourceConf


def log_start_offsets(conf: SourceConf) -> dict[int, int]:
    """The topic's earliest offset still held, per partition (on Pulsar: the read engine's
    position of the first message held, ``read.pulsar_source``)."""
    if conf.system == "pulsar":
        from logstore_cli.read.pulsar_source import PulsarLogSource

        with PulsarLogSource(conf) as source:
            return {p: low for p, (low, _) in source.watermarks().items()}
    from logstore_cli.kafka.admin import KafkaAdmin

    with KafkaAdmin(conf.bootstrap, conf.client_properties, timeout_s=conf.timeout_s) as admin:
        return admin.start_offsets(conf.topic)


def resolve_hybrid(table: TableLocation, conf: SourceConf, version: int | None) -> plan.HybridStart:
    """The start of a hybrid read from snapshot ``version`` of the Delta table at ``table`` (None:
    the newest whose offsets the log still holds); a snapshot retention cut off is refused."""
    return plan.hybrid_start(epoch_commits(table), version, log_start_offsets(conf))
