"""Delta's own properties: the values checked as delta-spark checks them, and which keys (and
which changes on which protocols) only Spark handles."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.ddl.delta_properties import (
    DELETED_FILE_RETENTION,
    LOG_RETENTION,
    Protocol,
    interval_ms,
    retention_ms,
    spark_only,
    spark_only_change,
    value_problem,
)
from logstore_cli.errors import DDLError


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.logRetentionDuration", "interval 30 days"),
        ("delta.logRetentionDuration", "30 days"),
        ("delta.deletedFileRetentionDuration", "INTERVAL 1 WEEK 2 hours"),
        ("delta.checkpointRetentionDuration", "  interval 90 minutes "),
        ("delta.setTransactionRetentionDuration", "interval 90.5 seconds"),
        ("delta.appendOnly", "TRUE"),
        ("delta.enableChangeDataFeed", "false"),
        ("delta.checkpointInterval", "10"),
        ("delta.dataSkippingNumIndexedCols", "-1"),
        ("delta.isolationLevel", "anything: Spark checks keys not listed here"),
        ("my.own", "x"),
    ],
)
def test_valid_values_pass(key: str, value: str) -> None:
    assert value_problem(key, value) is None


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("delta.logRetentionDuration", "garbage", "is not an interval"),
        ("delta.logRetentionDuration", "", "is empty"),
        ("delta.logRetentionDuration", "interval 1 month", "no fixed length"),
        ("delta.logRetentionDuration", "2 years", "no fixed length"),
        ("delta.logRetentionDuration", "-1 day", "is negative"),
        ("delta.logRetentionDuration", "3 fortnights", "unknown unit 'fortnights'"),
        ("delta.logRetentionDuration", "1.5 hours", "only seconds"),
        ("delta.appendOnly", "yes", "is not true or false"),
        ("delta.appendOnly", " true", "is not true or false"),
        ("delta.checkpointInterval", "0", "at least 1"),
        ("delta.checkpointInterval", "ten", "not a whole number"),
        ("delta.checkpointInterval", "99999999999", "not a whole number"),
        ("delta.dataSkippingNumIndexedCols", "-2", "at least -1"),
    ],
)
def test_invalid_values_are_named_with_what_is_expected(key: str, value: str, says: str) -> None:
    problem = value_problem(key, value)
    assert problem is not None and says in problem and "expected" in problem


def test_validate_reports_a_bad_delta_value_at_its_position() -> None:
    ddl = "CREATE TABLE d.t (id INT) USING delta\nTBLPROPERTIES ('delta.appendOnly' = 'maybe')"
    with pytest.raises(DDLError) as info:
        parse_ddl(ddl, "t.sql", ParseOptions())
    assert "t.sql:2:" in str(info.value) and "'delta.appendOnly' = 'maybe'" in str(info.value)


def test_keys_only_spark_lays_out_go_to_spark() -> None:
    keys = [
        "delta.enableChangeDataFeed", "logstore.name", "log-store.topic", "my.prop",
        "delta.columnMapping.mode", "delta.enableDeletionVectors", "delta.constraints.positive",
        "delta.AppendOnly", "DELTA.foo",
    ]  # fmt: skip
    assert spark_only(keys) == [
        "delta.columnMapping.mode", "delta.enableDeletionVectors", "delta.constraints.positive",
        "delta.AppendOnly", "DELTA.foo",
    ]  # fmt: skip


def test_turning_on_a_feature_the_protocol_lacks_goes_to_spark() -> None:
    legacy = Protocol(4)
    features = Protocol(7, ("timestampNtz", "changeDataFeed"))
    on = {"delta.appendOnly": "true"}
    assert spark_only_change(on, [], legacy) == []
    assert spark_only_change(on, [], Protocol(1)) == ["delta.appendOnly"]
    assert spark_only_change(on, [], features) == ["delta.appendOnly"]
    assert spark_only_change({"delta.appendOnly": "false"}, [], features) == []
    assert spark_only_change({"x": "1"}, ["delta.enableDeletionVectors"], legacy) == [
        "delta.enableDeletionVectors"
    ]


def test_a_metadata_only_commit_is_refused_on_features_that_ask_more_of_commits() -> None:
    assert Protocol(4).metadata_commit_safe()
    assert Protocol(
        7, ("changeDataFeed", "deletionVectors", "columnMapping")
    ).metadata_commit_safe()
    assert not Protocol(7, ("changeDataFeed", "inCommitTimestamp")).metadata_commit_safe()
    assert not Protocol(7, ("someFutureFeature",)).metadata_commit_safe()


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("interval 30 days", 30 * 86_400_000),
        ("INTERVAL 1 WEEK 2 hours", 7 * 86_400_000 + 2 * 3_600_000),
        ("  interval 90 minutes ", 90 * 60_000),
        ("interval 90.5 seconds", 90_500),
        ("1 millisecond 1500 microseconds", 2),
    ],
)
def test_an_interval_has_a_length_in_milliseconds(value: str, ms: int) -> None:
    assert interval_ms(value) == ms


def test_an_invalid_interval_has_no_length() -> None:
    with pytest.raises(ValueError, match="no fixed length"):
        interval_ms("interval 1 month")


def test_a_retention_unset_is_deltas_default() -> None:
    assert retention_ms({}, LOG_RETENTION) == 30 * 86_400_000
    assert retention_ms({}, DELETED_FILE_RETENTION) == 7 * 86_400_000
    assert retention_ms({DELETED_FILE_RETENTION: "2 days"}, DELETED_FILE_RETENTION) == 172_800_000
