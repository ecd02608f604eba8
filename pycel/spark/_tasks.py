"""Placing the ranges of :mod:`pycel.spark._ranges` in Spark tasks: one range per task.

Spark hash-partitions a repartitioned column by Murmur3 of its values, so the range
numbers themselves would share tasks; :func:`partition_slots` finds, per range, a value
that lands in its own partition, and :func:`one_task_per_range` repartitions by it.

Example::

    placed, task_column = one_task_per_range(events_with_ranges, 8)
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ._ranges import RANGE


def partition_slots(count: int) -> list[int]:
    """For each range ``r < count``, the smallest non-negative long whose Spark hash
    lands in shuffle partition ``r`` of ``count`` (``pmod(hash(v), count) == r``):
    repartitioning by these values puts every range in a task of its own, where hashing
    the range numbers themselves would put several ranges in one task and leave others
    empty.

    Example::

        slots = partition_slots(4)  # pmod(hash(slots[r]), 4) == r for r in 0..3
    """
    slots: list[int | None] = [None] * count
    missing, value = count, 0
    while missing:
        target = spark_long_hash(value) % count
        if slots[target] is None:
            slots[target] = value
            missing -= 1
        value += 1
    return [v for v in slots if v is not None]


def spark_long_hash(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` (Murmur3 x86 32-bit, seed 42) of a ``bigint``, as a signed int,
    as hash partitioning computes it.

    Example::

        spark_long_hash(0)  # the value of SELECT hash(CAST(0 AS BIGINT))
    """

    def mix(h: int, word: int) -> int:
        k = (word * 0xCC9E2D51) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * 0x1B873593) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        return (h * 5 + 0xE6546B64) & _MASK

    bits = value & 0xFFFFFFFFFFFFFFFF
    h = mix(mix(seed, bits & _MASK), bits >> 32)
    h ^= 8  # the input's length in bytes
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


_MASK = 0xFFFFFFFF


def one_task_per_range(events: DataFrame, count: int) -> tuple[DataFrame, str]:
    """``events`` (with :data:`RANGE`) repartitioned into ``count`` partitions, range
    ``r`` alone in partition ``r``; and the column to add to the group-by keys so that
    the grouped step keeps that partitioning (no second shuffle).

    An explicit partition count is kept by adaptive execution (it coalesces only
    shuffles whose count it chose), so each range runs as one task."""
    slots = F.array(*(F.lit(v).cast("long") for v in partition_slots(count)))
    column = "_pycel_task"
    at = (F.coalesce(F.col(RANGE), F.lit(0)) + F.lit(1)).cast("int")  # a null range: task 0
    placed = events.withColumn(column, F.element_at(slots, at))
    return placed.repartition(count, F.col(column)), column
