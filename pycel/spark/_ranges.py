"""Range-parallel evaluation of windowed patterns: the stream cut into position ranges.

A match ends at one event and, with a window, reaches back at most the window's span:
``within(events=n)`` covers the positions ``end - n .. end``, a time window the events
whose time is at least ``time(end) - d``. So the task for the positions ``[lo, hi)`` can
push the events of ``[lo, hi)`` plus those of the window's span before ``lo`` (the
*halo*) into a fresh engine stream and keep the matches that end in ``[lo, hi)``: these
are exactly the whole stream's matches ending there, whenever the output at a position
depends only on the events of the window before it. That holds for every strategy (ALL,
STRICT, and NEXT, LAST and MAX, which choose among the outputs that fit the window), with
SELECT, post-filters and any pattern shape; it does not hold for CONSUME BY (a match
discards runs that started before the window), nor for which n matches of an end LIMIT
keeps (the engine's enumeration order can depend on older events), so those run as
before (:func:`range_refusal` says why).

Every event goes to its own range (its *home*) and, as a halo copy, to the later ranges
whose span reaches back to it. An absence at the pattern's end also reads the events
after a match, up to its window's end: then the task also reads a halo *ahead*, the
window's span after ``hi`` (the n positions after it, or the events whose time is at most
the range's last time plus ``d``), and closes its stream; each event is also copied to
the earlier ranges whose span reaches forward to it. Under ``partition_by`` the same cut
applies per key (positions and count windows are global): a hot key's events are spread
over the ranges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pycel.engine import CompiledQuery

from ._plan import query_strategy

#: The group column: the range a copy of an event is evaluated in.
RANGE = "_pycel_range"
#: The event's own range, while the halo copies are made (not shipped to the groups).
HOME = "_pycel_home"
#: Marks the events of hot keys (cut into ranges) in a partitioned pattern.
HOT = "_pycel_hot"
#: With automatic ranges, each range holds at least this many events.
MIN_RANGE_EVENTS = 100_000
#: With automatic ranges, at most this many ranges per core (each range is one task).
RANGES_PER_CORE = 2
#: A count window's range holds at least this many times the window's span.
_SPANS_PER_RANGE = 4
#: A time window's cut is planned in one query from buckets of 2**BUCKET_BITS positions
#: (:func:`position_buckets`) when there are at most MAX_BUCKETS of them holding events
#: and every range spans at least BUCKETS_PER_RANGE buckets (ranges are then whole
#: buckets: their sizes differ by at most one bucket, 1/16 of a range).
BUCKET_BITS = 12
MAX_BUCKETS = 10_000
BUCKETS_PER_RANGE = 16


def range_refusal(query: CompiledQuery) -> str | None:
    """Why the stream of ``query`` cannot be cut into ranges with a halo (None: it can).

    Example::

        range_refusal(pycel.compile(seq(a, b).within(events=10)))  # None
        range_refusal(pycel.compile(seq(a, b)))  # 'the pattern has no window'
    """
    if query.window_unit not in ("events", "seconds", "units") or not math.isfinite(query.window_size):
        return "the pattern has no window"
    strategy = query_strategy(query)
    if strategy not in ("all", "any", "strict", "next", "last", "max"):
        return f"the {strategy.upper()} strategy is not known to be local to the window"
    if query.consume != 0:
        return "CONSUME BY discards runs when a match is found, also runs older than the window"
    if query.limit >= 0:
        return (
            "LIMIT keeps n of an end position's matches in the engine's enumeration order, "
            "which can depend on events before the window"
        )
    return None


@attrs.frozen
class RangePlan:
    """How a stream is cut: range ``r`` holds the positions ``[first + r * length,
    first + (r + 1) * length)``; ``count`` ranges in all.

    ``halo_events``: for a count window, how many positions before its start a range
    reads. ``thresholds``: for a time window, per range, the smallest time key an
    earlier event needs to be in its halo (None: the range holds no event); ``reach``:
    how many ranges back a halo can reach (no halo copy goes further).

    The halo *ahead* (a pattern ending in an absence; ``ahead_reach`` 0: none), the same
    after the range: ``ahead_events`` positions after its end, or per range the largest
    time key a later event may have (``ahead_thresholds``), reaching ``ahead_reach``
    ranges forward.
    """

    first: int
    length: int
    count: int
    halo_events: int | None = None
    thresholds: tuple[int | float | None, ...] | None = None
    reach: int = 1
    ahead_events: int | None = None
    ahead_thresholds: tuple[int | float | None, ...] | None = None
    ahead_reach: int = 0

    def homes(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each position's own range."""
        return (positions - self.first) // self.length

    def members(
        self, positions: npt.NDArray[np.int64], times: npt.NDArray[Any] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(row, range) pairs: every event in its own range and in the halos it belongs
        to. The numpy twin of :meth:`spark_halos`, for tests and small inputs."""
        homes = self.homes(positions)
        rows, ranges = [np.arange(len(positions))], [homes]
        for step in range(1, self.reach + 1):
            later = homes + step
            keep = later < self.count
            if self.halo_events is not None:
                keep &= self.first + later * self.length - self.halo_events <= positions
            else:
                assert self.thresholds is not None and times is not None
                keep &= _beyond(self.thresholds, later, times, np.greater_equal)
            rows.append(np.flatnonzero(keep))
            ranges.append(later[keep])
        for step in range(1, self.ahead_reach + 1):
            earlier = homes - step
            keep = earlier >= 0
            if self.ahead_events is not None:
                keep &= positions < self.first + (earlier + 1) * self.length + self.ahead_events
            else:
                assert self.ahead_thresholds is not None and times is not None
                keep &= _beyond(self.ahead_thresholds, earlier, times, np.less_equal)
            rows.append(np.flatnonzero(keep))
            ranges.append(earlier[keep])
        return np.concatenate(rows), np.concatenate(ranges)

    def spark_halos(self, home: Column, position: str, time: Column | None) -> list[Column]:
        """Per later range ``home + 1 .. home + reach``, a column holding that range if
        the event (own range ``home``, at the ``position`` column, with time key
        ``time``) is in its halo, else null: plain arithmetic and comparisons, which
        Spark compiles, rather than a higher-order function per row."""
        last = self.count - 1
        halos = []
        for step in range(1, self.reach + 1):
            later = home + F.lit(step)
            if self.halo_events is not None:
                start = F.lit(self.first) + later * F.lit(self.length)
                reaches = start - F.lit(self.halo_events) <= F.col(position)
            else:
                assert self.thresholds is not None and time is not None
                limits = F.array(*(F.lit(t) for t in self.thresholds))
                # Clamped: ANSI mode makes an index past the end an error, even where later > last.
                at = (F.least(later, F.lit(last)) + F.lit(1)).cast("int")
                reaches = F.element_at(limits, at) <= time  # null for an empty range: no halo
            halos.append(F.when((later <= F.lit(last)) & reaches, later))
        for step in range(1, self.ahead_reach + 1):
            earlier = home - F.lit(step)
            if self.ahead_events is not None:
                end = F.lit(self.first) + (earlier + F.lit(1)) * F.lit(self.length)
                reaches = F.col(position) < end + F.lit(self.ahead_events)
            else:
                assert self.ahead_thresholds is not None and time is not None
                limits = F.array(*(F.lit(t) for t in self.ahead_thresholds))
                at = (F.greatest(earlier, F.lit(0)) + F.lit(1)).cast("int")
                reaches = F.element_at(limits, at) >= time
            halos.append(F.when((earlier >= F.lit(0)) & reaches, earlier))
        return halos


def _beyond(
    thresholds: tuple[int | float | None, ...],
    ranges: npt.NDArray[np.int64],
    times: npt.NDArray[Any],
    holds: Any,
) -> npt.NDArray[np.bool_]:
    """Whether each time is in the halo of its range in ``ranges`` (``holds(time,
    threshold)``); false past the last range, for a range without a threshold and for a
    null (NaN) time."""
    known = np.array([t is not None for t in thresholds] + [False])
    limits = np.array([0 if t is None else t for t in thresholds] + [0])
    at = np.where((ranges >= 0) & (ranges < len(thresholds)), ranges, len(thresholds))
    inside: npt.NDArray[np.bool_] = known[at] & holds(times, limits[at])
    return inside


def home_range(position_column: str, first: int, length: int) -> Column:
    """Each event's own range: ``(position - first) div length``, in exact integer
    arithmetic (Spark's ``/`` is a double division)."""
    name = position_column.replace("`", "``")
    return F.expr(f"(cast(`{name}` as bigint) - ({first})) div {length}")


def time_key(query: CompiledQuery, schema: T.StructType) -> tuple[Column, int | float] | None:
    """The time window's attribute as a number a halo can be measured on, and the
    window's span in that number's unit (rounded up: a wider halo costs a little work,
    a narrower one would lose matches); None for count windows.

    Timestamps become epoch microseconds (Spark's resolution); an integral column of a
    ``Timestamp`` attribute holds nanoseconds; other columns are taken as they are."""
    if query.window_unit == "events" or query.time_attribute is None:
        return None
    column = query.time_attribute
    dtype = schema[column].dataType
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(F.col(column)), window_span(query, "micros")
    if isinstance(dtype, T.TimestampNTZType):  # (a cast to timestamp reads it in the session's
        # time zone, whose DST changes would move the halo; the engine reads it as UTC)
        quoted = "`" + column.replace("`", "``") + "`"  # (the SQL form: Spark 3.5 has no F.timestamp_diff)
        micros = F.expr(f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {quoted})")
        return micros, window_span(query, "micros")
    if isinstance(dtype, T.IntegralType):
        return F.col(column).cast("long"), window_span(query, "integer")
    return F.col(column).cast("double"), window_span(query, "float")


def _ceil_in_keys(span: float) -> int:
    """ceil(span), at most 2**64: no two integer keys are further apart (a float span may
    be infinite)."""
    return 2**64 if not span < 2**64 else math.ceil(span)


def window_span(query: CompiledQuery, kind: str) -> int | float:
    """The time window's span, rounded up, for time keys of ``kind``: ``"micros"``
    (a timestamp column), ``"integer"`` (an integral column: nanoseconds for a
    ``Timestamp`` attribute, else the attribute's own unit) or ``"float"``."""
    size = query.window_size
    if kind == "micros":
        return _ceil_in_keys(size * 1_000_000) + 1
    if kind == "integer":
        timestamp = (
            query.window_unit == "seconds" and query.schema.fields.get(query.time_attribute or "") == "time"
        )
        return _ceil_in_keys(size * 1_000_000_000 if timestamp else size) + 1
    return size * (1 + 1e-9) + 1e-9


def auto_range_count(events: int, span: int, window_events: int | None, cores: int) -> int:
    """How many ranges to cut ``events`` events (over ``span`` positions) into: one per
    core on a single core (a cut gains nothing there), else :data:`RANGES_PER_CORE` per
    core, each range holding at least :data:`MIN_RANGE_EVENTS` events and, for a count
    window, several window spans.

    Example::

        auto_range_count(1_000_000, 1_000_000, None, cores=2)  # 4
        auto_range_count(1_000_000, 1_000_000, None, cores=1)  # 1
    """
    if cores <= 1:
        return 1
    count = min(RANGES_PER_CORE * cores, events // MIN_RANGE_EVENTS)
    if window_events is not None:
        count = min(count, span // max(_SPANS_PER_RANGE * window_events, 1))
    return max(count, 1)


def plan_ranges(
    events: DataFrame,
    query: CompiledQuery,
    position_column: str,
    ranges: int | None,
    cores: int,
    keys: Sequence[str] = (),
) -> tuple[RangePlan, DataFrame | None] | None:
    """Cut ``events`` into ranges; None when one range would do (then no job runs for
    automatic ranges on one core).

    One aggregation job finds the smallest and largest position and the number of
    events; under ``keys`` (the group-by keys of a partitioned pattern) the same job
    counts each key's events and keeps the largest count. Only hot keys are cut, those
    holding more events than one range's share of the whole: when the largest key is not
    hot, that is the end; else one more job lists them, and the plan comes with a small
    DataFrame of them (the key columns and :data:`HOT`). A time window takes one more job
    for each range's times, except without keys when :func:`position_buckets` (which
    replaces the first job) already holds them. ``ranges``: how many (None:
    :func:`auto_range_count`).
    """
    if ranges is None and cores <= 1:
        return None
    key = time_key(query, events.schema)
    buckets = position_buckets(events, position_column, key[0]) if key is not None and not keys else None
    summary = buckets.summary() if buckets is not None else _summary(events, position_column, keys)
    if summary is None:
        return None
    first, last, total, largest = summary
    span = last - first + 1
    window_events = int(query.window_size) if query.window_unit == "events" else None
    count = auto_range_count(total, span, window_events, cores) if ranges is None else ranges
    count = max(1, min(count, span))
    if count == 1 or (keys and largest * count <= total):
        return None  # one range, or no key holds more than one range's share
    hot = hot_keys(events, keys, count, total) if keys else None
    length = -(-span // count)
    count = -(-span // length)
    ahead = bool(query.nfa.end_atoms)  # an absence at the end reads after its match
    if window_events is not None:
        reach = max(min(count - 1, -(-window_events // length)), 1)
        plan = RangePlan(first, length, count, halo_events=window_events, reach=reach)
        if ahead:
            plan = attrs.evolve(plan, ahead_events=window_events, ahead_reach=reach)
        return plan, hot
    assert key is not None
    if buckets is not None and length >= BUCKETS_PER_RANGE << BUCKET_BITS:
        return buckets.plan(length, key[1], ahead), hot
    return _time_plan(events, position_column, key, RangePlan(first, length, count), ahead), hot


@attrs.frozen
class PositionBuckets:
    """Per bucket of 2**:data:`BUCKET_BITS` positions holding events (``index``: the
    bucket numbers, ``position >> BUCKET_BITS``, ascending): the smallest and largest
    position and time key (None where every time is null), and the events; ``unplaced``:
    the events without a position."""

    index: npt.NDArray[np.int64]
    first: npt.NDArray[np.int64]
    last: npt.NDArray[np.int64]
    events: npt.NDArray[np.int64]
    lows: tuple[int | float | None, ...]
    highs: tuple[int | float | None, ...]
    unplaced: int = 0

    def summary(self) -> tuple[int, int, int, int] | None:
        """What :func:`_summary` finds without keys, from the buckets."""
        if not len(self.index):
            return None
        return int(self.first.min()), int(self.last.max()), int(self.events.sum()) + self.unplaced, 0

    def plan(self, length: int, span: int | float, ahead: bool = False) -> RangePlan:
        """The cut into ranges of at least ``length`` positions, whole buckets each (the
        first range starts at the first bucket's start, the length is rounded up to whole
        buckets), with each range's halo threshold from its buckets' times: the same as
        :func:`_time_plan` finds for that cut, without reading the events again (with
        ``ahead``, the halos ahead too).

        Example::

            b = PositionBuckets(np.array([0, 1]), np.array([0, 4096]), np.array([9, 4099]),
                                np.array([10, 4]), (0, 50), (9, 60))
            b.plan(4096, 5)  # RangePlan(0, 4096, 2, thresholds=(-5, 45), reach=1)
        """
        size = 1 << BUCKET_BITS
        start = int(self.index[0]) << BUCKET_BITS
        length = -(-length // size) * size
        count = -(-(int(self.last.max()) - start + 1) // length)
        ranges = ((self.index << BUCKET_BITS) - start) // length
        lows: list[int | float | None] = [None] * count
        highs: list[int | float | None] = [None] * count
        for r, lo, hi in zip(ranges.tolist(), self.lows, self.highs, strict=True):
            if lo is not None and (lows[r] is None or lo < lows[r]):
                lows[r] = lo
            if hi is not None and (highs[r] is None or hi > highs[r]):
                highs[r] = hi
        return with_time_halos(RangePlan(start, length, count), lows, highs, span, ahead)


def position_buckets(events: DataFrame, position_column: str, time: Column) -> PositionBuckets | None:
    """The events' :class:`PositionBuckets` in one aggregation query, or None when more
    than :data:`MAX_BUCKETS` buckets hold events (positions spread very thinly or over
    more than 40 million; the planning then takes two queries, the second only on a large
    input)."""
    bucket = F.shiftright(F.col(position_column).cast("long"), BUCKET_BITS)
    pos = F.col(position_column)
    rows = (
        events.select(bucket.alias("b"), pos.alias("p"), time.alias("t"))
        .groupBy("b")
        .agg(
            F.min("p").alias("lo"),
            F.max("p").alias("hi"),
            F.count(F.lit(1)).alias("n"),
            F.min("t").alias("tlo"),
            F.max("t").alias("thi"),
        )
        .limit(MAX_BUCKETS + 2)  # the buckets and the events without a position
        .collect()
    )
    placed = sorted((r for r in rows if r["b"] is not None), key=lambda r: int(r["b"]))
    if len(placed) > MAX_BUCKETS:
        return None
    return PositionBuckets(
        index=np.array([r["b"] for r in placed], dtype=np.int64),
        first=np.array([r["lo"] for r in placed], dtype=np.int64),
        last=np.array([r["hi"] for r in placed], dtype=np.int64),
        events=np.array([r["n"] for r in placed], dtype=np.int64),
        lows=tuple(r["tlo"] for r in placed),
        highs=tuple(r["thi"] for r in placed),
        unplaced=sum(int(r["n"]) for r in rows if r["b"] is None),
    )


def _summary(
    events: DataFrame, position_column: str, keys: Sequence[str]
) -> tuple[int, int, int, int] | None:
    """(smallest position, largest position, events, events of the largest key) in one
    job; None without events (or without positions). Without keys the last is 0."""
    pos = F.col(position_column)
    if keys:
        per_key = events.groupBy(*keys).agg(
            F.min(pos).alias("lo"), F.max(pos).alias("hi"), F.count(F.lit(1)).alias("n")
        )
        row = per_key.agg(
            F.min("lo").alias("lo"), F.max("hi").alias("hi"), F.sum("n").alias("n"), F.max("n").alias("top")
        ).collect()[0]
    else:
        whole = events.agg(F.min(pos).alias("lo"), F.max(pos).alias("hi"), F.count(F.lit(1)).alias("n"))
        row = whole.collect()[0]
    if not row["n"] or row["lo"] is None:
        return None
    return int(row["lo"]), int(row["hi"]), int(row["n"]), int(row["top"]) if keys else 0


def hot_keys(events: DataFrame, keys: Sequence[str], count: int, total: int) -> DataFrame:
    """The keys holding more than ``total / count`` events (one range's share), as a
    small DataFrame of the key columns and :data:`HOT` (true)."""
    counted = events.groupBy(*keys).agg(F.count(F.lit(1)).alias("_pycel_events"))
    rows = counted.where(F.col("_pycel_events") * F.lit(count) > F.lit(total)).select(*keys).collect()
    schema = T.StructType([events.schema[k] for k in keys] + [T.StructField(HOT, T.BooleanType(), False)])
    return events.sparkSession.createDataFrame([(*r, True) for r in rows], schema)


def _time_plan(
    events: DataFrame, position_column: str, key: tuple[Column, int | float], cut: RangePlan, ahead: bool
) -> RangePlan:
    """``cut`` with each range's halo threshold: the smallest time key among its
    events minus the window's span, and how far back the halos reach (with ``ahead``,
    the halos ahead too: :func:`with_time_halos`).

    Under ``partition_by`` these are over all keys' events: a key's own smallest time
    in a range is no smaller, so the halo is a superset of the one it needs (exact)."""
    time, span = key
    home = home_range(position_column, cut.first, cut.length)
    rows = (
        events.select(home.alias("r"), time.alias("t"))
        .groupBy("r")
        .agg(F.min("t").alias("lo"), F.max("t").alias("hi"))
        .collect()
    )
    lows: list[int | float | None] = [None] * cut.count
    highs: list[int | float | None] = [None] * cut.count
    for r in rows:
        if r["r"] is not None:  # null positions: their group's check fails the job
            lows[r["r"]], highs[r["r"]] = r["lo"], r["hi"]
    return with_time_halos(cut, lows, highs, span, ahead)


def with_time_halos(
    cut: RangePlan,
    lows: Sequence[int | float | None],
    highs: Sequence[int | float | None],
    span: int | float,
    ahead: bool,
) -> RangePlan:
    """``cut`` with the time window's halos from each range's smallest and largest time
    key: before each range (:func:`time_thresholds`) and, with ``ahead``, after it
    (:func:`ahead_thresholds`)."""
    thresholds, reach = time_thresholds(lows, highs, span)
    cut = attrs.evolve(cut, thresholds=thresholds, reach=reach)
    if not ahead:
        return cut
    thresholds, reach = ahead_thresholds(lows, highs, span)
    return attrs.evolve(cut, ahead_thresholds=thresholds, ahead_reach=reach)


def time_thresholds(
    lows: Sequence[int | float | None], highs: Sequence[int | float | None], span: int | float
) -> tuple[tuple[int | float | None, ...], int]:
    """Per range, the time key an earlier event needs to be in its halo (the range's
    smallest time minus the window's span; None for a range without times), and how
    many ranges back any halo reaches, from each range's smallest and largest time key.

    Example::

        time_thresholds([0, 10, None], [9, 19, None], 5)  # ((-5, 5, None), 1)
    """
    thresholds = tuple(None if lo is None else _in_long(lo - span) for lo in lows)
    # A halo of range j reaches back to range i when i holds a time at or above j's threshold.
    reach = 1
    for j, limit in enumerate(thresholds):
        if limit is None:
            continue
        earliest = next((i for i in range(j) if _at_least(highs[i], limit)), j)
        reach = max(reach, j - earliest)
    return thresholds, reach


def ahead_thresholds(
    lows: Sequence[int | float | None], highs: Sequence[int | float | None], span: int | float
) -> tuple[tuple[int | float | None, ...], int]:
    """:func:`time_thresholds` for the halos ahead: per range, the largest time key a
    later event may have to be in its halo (the range's largest time plus the window's
    span), and how many ranges forward any halo reaches.

    Example::

        ahead_thresholds([0, 10, None], [9, 19, None], 5)  # ((14, 24, None), 1)
    """
    thresholds = tuple(None if hi is None else _in_long(hi + span) for hi in highs)
    reach = 1
    for i, limit in enumerate(thresholds):
        if limit is None:
            continue
        latest = next((j for j in range(len(lows) - 1, i, -1) if _at_most(lows[j], limit)), i)
        reach = max(reach, latest - i)
    return thresholds, reach


def _in_long(threshold: int | float) -> int | float:
    """An integer threshold clamped to Spark's long (a window longer than the keys' range,
    such as ``within(seconds=1e300)``, reaches every key: the clamped value still does);
    a float one as it is (infinite thresholds compare as they should)."""
    if isinstance(threshold, int):
        return max(min(threshold, 2**63 - 1), -(2**63))
    return threshold


def _at_least(value: int | float | None, limit: int | float) -> bool:
    return value is not None and value >= limit


def _at_most(value: int | float | None, limit: int | float) -> bool:
    return value is not None and value <= limit


def with_range_groups(
    events: DataFrame, plan: RangePlan, position_column: str, time: Column | None, hot: Column | None = None
) -> DataFrame:
    """``events`` with each event once per range it is evaluated in, in the column
    :data:`RANGE` (an int: the group's range).

    An event is in its own range and in at most ``plan.reach`` later ones: each row
    becomes the array of its own range and the later ranges' halo columns (null where
    the event is not in that halo), exploded, keeping the own range and the non-null
    halo entries. ``hot``: a boolean column; events where it is false are not cut (one
    range, -1). The own range is not kept as a column: the group computes it from the
    position (:func:`pycel.spark._runner.ending_at_home`), so the shuffle and the Arrow
    batches carry one int per copy, not two longs."""
    home = home_range(position_column, plan.first, plan.length)
    if hot is not None:
        home = F.when(hot, home).otherwise(F.lit(-1).cast("long"))
    marked = events.withColumn(HOME, home)
    halos = plan.spark_halos(F.col(HOME), position_column, time)
    if hot is not None:
        halos = [F.when(hot, h) for h in halos]
    slot = "_pycel_slot"
    exploded = marked.select("*", F.posexplode(F.array(F.col(HOME), *halos)).alias(slot, RANGE))
    # The own range stays even when it is null (a null position: the group's check
    # reports it); a halo entry only where it is set.
    kept = exploded.where((F.col(slot) == 0) | F.col(RANGE).isNotNull())
    return kept.drop(slot, HOME).withColumn(RANGE, F.col(RANGE).cast("int"))
