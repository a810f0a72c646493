"""Kafka's murmur2 partitioner in pure Python, checked against Kafka's own test vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore_cli.logformat import murmur2, partition_for
from logstore_cli.logformat.partitioner import to_positive

pytestmark = pytest.mark.unit

# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
KAFKA_UTILS_TEST = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# More values of Kafka's Utils.murmur2 (the ones akka's Murmur2Spec checks its port against):
# every key length modulo 4.
KAFKA_MORE = {
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
}


@pytest.mark.parametrize(("key", "hashed"), [*KAFKA_UTILS_TEST.items(), *KAFKA_MORE.items()])
def test_murmur2_matches_kafkas_vectors(key: bytes, hashed: int) -> None:
    assert murmur2(key) == hashed


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    # Not abs(): Kafka's Utils.toPositive(n) is n & 0x7fffffff.
    assert to_positive(-973932308) == 0x7FFFFFFF & -973932308 == 1173551340
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_partition_of_the_documented_key() -> None:
    # docs/design.md section 7: {"id":42} -> murmur2 486015037.
    assert murmur2(b'{"id":42}') == 486015037
    assert [partition_for(b'{"id":42}', n) for n in (1, 3, 6, 12)] == [0, 1, 1, 1]
    assert partition_for(b"21", 10) == 1173551340 % 10


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_murmur2_is_a_signed_32_bit_int_and_partitions_are_in_range(key: bytes, n: int) -> None:
    hashed = murmur2(key)
    assert -(2**31) <= hashed < 2**31
    assert 0 <= partition_for(key, n) < n


@pytest.mark.parametrize("n", [0, -1])
def test_a_topic_without_partitions_is_an_error(n: int) -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"k", n)
