"""Window starts: for each event, the first stream position inside its window.

A count window of n events starts n positions back; a time window reaches back to the
first event whose time is within ``size`` of the event's (the stream keeps a *tail* of
recent positions and times for that). The loops drop runs that started before.

Example::

    count_window_starts(np.arange(5), 2)      # array([-2, -1, 0, 1, 2])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch, Schema, time_values
from pycel.plan.planner import Plan

Ints = npt.NDArray[np.int64]
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def count_window_starts(positions: Ints, size: float) -> Ints:
    """The first position inside a count window of ``size`` events ending at each of
    ``positions``."""
    return positions - np.int64(size)


def window_reach(plan: Plan, schema: Schema) -> float:
    """The window in its own units: n events, or d in the time column's units
    (nanoseconds for a ``Timestamp`` attribute)."""
    size = plan.window_size
    if plan.window_unit == "seconds" and schema.fields.get(str(plan.time_attribute)) == "time":
        size = size * 1_000_000_000  # timestamps are nanoseconds (an int size stays exact)
    return size


def integer_reach(size: float) -> int:
    """A time window of ``size`` on integer times as a Python int: floor(size), at most
    2**64 (two int64 times are never further apart; ``within(seconds=1e300)`` in
    nanoseconds is infinite as a float). time(end) − time(start) ≤ size holds exactly when
    the difference is at most that int."""
    return 2**64 if not size < 2**64 else math.floor(size)


def minus_saturating(times: Ints, amount: int) -> Ints:
    """``times`` − ``amount`` (≥ 0, any Python int), at least the int64 minimum."""
    while amount > 0:  # in steps that fit int64 (at most three)
        step = min(amount, _I64_MAX)
        times = np.maximum(times, np.int64(_I64_MIN + step)) - np.int64(step)
        amount -= step
    return times


def plus_saturating(times: Ints, amount: int) -> Ints:
    """``times`` + ``amount`` (≥ 0, any Python int), at most the int64 maximum."""
    while amount > 0:
        step = min(amount, _I64_MAX)
        times = np.minimum(times, np.int64(_I64_MAX - step)) + np.int64(step)
        amount -= step
    return times


def window_times(plan: Plan, batch: EventBatch, last_time: int | float | None) -> npt.NDArray[Any]:
    """The window time of each event of ``batch``: int64 for integer times (exact), else
    float64. Raises DataError when time goes backwards (``last_time``: the stream's last)."""
    assert plan.time_attribute is not None
    times = time_values(batch, plan.time_attribute, last_time)
    return times.astype(np.int64 if times.dtype.kind in "iu" else np.float64)


def time_window_starts(
    plan: Plan,
    batch: EventBatch,
    schema: Schema,
    positions: Ints,
    tail_pos: Ints,
    tail_time: npt.NDArray[Any],
    times: npt.NDArray[Any],
) -> tuple[Ints, tuple[Ints, npt.NDArray[Any], int | float] | None]:
    """For a time window: each event's window start, and the new tail (positions, times
    and the last time) that the next batch's windows may reach; None for an empty batch.
    ``times``: the batch's window times (:func:`window_times`).
    """
    n = len(batch)
    size = window_reach(plan, schema)
    if times.dtype.kind in "iu":
        # Integer times stay integers: time(end) - time(start) <= size holds exactly when
        # time(start) >= time(end) - floor(size); float64 would round above 2**53 (ns).
        lower: npt.NDArray[Any] = minus_saturating(times, integer_reach(size))
    else:
        lower = times - size
    all_t = np.concatenate([tail_time.astype(times.dtype, copy=False), times])
    all_p = np.concatenate([tail_pos, positions])
    if n == 0:
        return positions, None
    first = np.searchsorted(all_t, lower, side="left")
    if times.dtype.kind == "f":
        first = _exact_float_starts(all_t, times, size, first)
    starts = all_p[first]
    return starts, (all_p[first[-1] :], all_t[first[-1] :], times[-1].item())


def _exact_float_starts(all_t: npt.NDArray[Any], times: npt.NDArray[Any], size: float, first: Ints) -> Ints:
    """For float times: the first index whose time t has ``time - t <= size`` as the
    window defines it (in float64), from ``first``, found with ``t >= time - size``: the two
    roundings may disagree near the boundary (2.0 - 1.7 > 0.3 while 1.7 >= 2.0 - 0.3), by a
    few distinct values at most. Those in the window are a suffix (``time - t`` falls as
    t grows), so step one distinct value at a time: back while the one before is inside,
    then on while this one is outside."""
    while True:
        before = all_t[np.maximum(first - 1, 0)]
        back = (first > 0) & (times - before <= size)
        if not back.any():
            break
        first = np.where(back, np.searchsorted(all_t, before, side="left"), first)
    while True:
        here = all_t[np.minimum(first, len(all_t) - 1)]
        on = (first < len(all_t)) & ~(times - here <= size)
        if not on.any():
            return first
        first = np.where(on, np.searchsorted(all_t, here, side="right"), first)
