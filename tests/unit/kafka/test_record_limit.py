"""``max_key_and_value_bytes``: the largest key + value a record of the log may carry."""

from __future__ import annotations

from logstore_cli.kafka.producer import RECORD_OVERHEAD, max_key_and_value_bytes


def test_defaults_are_the_clients_limit_less_the_overhead() -> None:
    # librdkafka's 1,000,000 is below Kafka's topic default of 1,048,588.
    assert max_key_and_value_bytes({}, {}) == 1_000_000 - RECORD_OVERHEAD


def test_a_smaller_topic_limit_wins_without_compression() -> None:
    assert max_key_and_value_bytes({}, {"max.message.bytes": "4096"}) == 4096 - RECORD_OVERHEAD
    conf = {"message.max.bytes": 2048}
    assert max_key_and_value_bytes(conf, {"max.message.bytes": "4096"}) == 2048 - RECORD_OVERHEAD


def test_with_compression_only_the_clients_limit_is_known_ahead() -> None:
    conf = {"compression.type": "lz4"}
    assert (
        max_key_and_value_bytes(conf, {"max.message.bytes": "4096"}) == 1_000_000 - RECORD_OVERHEAD
    )


def test_unreadable_values_fall_back_to_the_defaults_and_never_go_negative() -> None:
    assert max_key_and_value_bytes({"message.max.bytes": "lots"}, {"max.message.bytes": "x"}) == (
        1_000_000 - RECORD_OVERHEAD
    )
    assert max_key_and_value_bytes({"message.max.bytes": "100"}, {}) == 0
