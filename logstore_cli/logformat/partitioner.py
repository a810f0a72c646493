"""Kafka's default partitioner for keyed records, in pure Python.

``partition_for`` is what the Java producer's built-in partitioner (``Utils.murmur2``,
``Utils.toPositive``), Spark's Kafka sink and librdkafka's ``murmur2_random`` compute for a record
with a key, so a reader or a check can tell where a key's records are without asking a producer.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data``, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest:  # Java's switch falls through from 3 to 1
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: the sign bit cleared (not the absolute value)."""
    return number & 0x7FFFFFFF


def partition_for(key: bytes, num_partitions: int) -> int:
    """The partition of a record with this key in a topic of ``num_partitions`` partitions."""
    if num_partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
