"""create-table / alter-table warn when the topic's retention is shorter than what Delta keeps: a
hybrid read from a snapshot Delta still has would find the log's offsets after it deleted."""

from __future__ import annotations

from logstore_cli.provision.plan import retention_warnings

HOUR_MS = 3_600_000


def test_a_topic_retention_shorter_than_deltas_defaults_is_warned_about() -> None:
    [warning] = retention_warnings({"log.topic.retention.ms": str(24 * HOUR_MS)}, log_store=True)
    assert "log.topic.retention.ms = 86400000 (1 day) is shorter than" in warning
    assert "delta.logRetentionDuration (30 days)" in warning
    assert "delta.deletedFileRetentionDuration (7 days)" in warning
    assert "read --from snapshot:V" in warning
    assert f"set log.topic.retention.ms to {30 * 24 * HOUR_MS} or more" in warning


def test_only_the_delta_retentions_longer_than_the_topics_are_named() -> None:
    props = {
        "log.topic.retention.ms": str(10 * 24 * HOUR_MS),
        "delta.logRetentionDuration": "interval 2 weeks",
        "delta.deletedFileRetentionDuration": "interval 36 hours",
    }
    [warning] = retention_warnings(props, log_store=True)
    assert "delta.logRetentionDuration (14 days)" in warning
    assert "deletedFileRetentionDuration" not in warning


def test_no_warning_when_the_topic_keeps_long_enough_or_forever_or_is_not_set() -> None:
    assert retention_warnings({"log.topic.retention.ms": "-1"}, log_store=True) == []
    long = {"log.topic.retention.ms": str(31 * 24 * HOUR_MS)}
    assert retention_warnings(long, log_store=True) == []
    assert retention_warnings({}, log_store=True) == []  # the broker's default is not asked for
    short = {"log.topic.retention.ms": "1000"}
    assert retention_warnings(short, log_store=False) == []  # no log store: no hybrid reads
    # Delta keeping less: nothing a hybrid read needs is lost first.
    props = short | {"delta.logRetentionDuration": "0 hours",
                     "delta.deletedFileRetentionDuration": "0 hours"}  # fmt: skip
    assert retention_warnings(props, log_store=True) == []
