"""Time windows are exact on integer times of any size (int64 nanoseconds included).

The engine once compared times as float64, which rounds above 2**53: a match one
nanosecond outside a window at 1.7e18 ns was kept. Every case is checked against the
reference evaluator, also across batch cuts and a snapshot/restore.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel.reference import evaluate


class Tick(pycel.Event):
    x: pycel.Field[int]
    at: pycel.Field[int]


class Up(Tick): ...


class Down(Tick): ...


class Stamped(pycel.Event):
    ts: pycel.Field[datetime]


class Open(Stamped): ...


class Close(Stamped): ...


def _engine(
    pattern: pycel.Pattern, events: list[pycel.Event], cuts: list[int], close: bool = False
) -> set[object]:
    """The match keys of ``events`` pushed in pieces, through a snapshot after each (and
    the matches still waiting at the close, if ``close``)."""
    stream = pycel.compile(pattern).stream()
    keys: set[object] = set()
    for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
        keys |= stream.push(events[lo:hi]).keys()
        stream = pycel.Stream.restore(stream.snapshot())
    if close:
        keys |= stream.close().keys()
    return keys


def test_one_nanosecond_outside_a_second_at_1_7e18() -> None:
    t0 = 1_700_000_000_000_000_000  # ns since the epoch (November 2023)
    o, c = pycel.alias(Open, "o"), pycel.alias(Close, "c")
    pattern = pycel.seq(o, c).within(seconds=1, on=Stamped.ts)
    frame = pd.DataFrame(
        {
            "event_type": ["Open", "Close", "Close"],
            "ts": pd.to_datetime([t0, t0 + 1_000_000_100, t0 + 1_000_000_000], unit="ns", utc=True),
        }
    )
    # times must not go backwards: the Close exactly 1 s later comes first, then +100 ns
    frame = frame.sort_values("ts", kind="stable").reset_index(drop=True)
    expected = evaluate(pattern, frame)
    assert [(m.start, m.end) for m in expected] == [(0, 1)]  # exactly 1 s later: inside
    assert pycel.compile(pattern).run(frame).keys() == expected.keys()


@settings(max_examples=60)
@given(
    base=st.sampled_from([0, 2**53, 2**62, 2**63 - 10_000, -(2**63)]),
    gaps=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    kinds=st.lists(st.booleans(), min_size=12, max_size=12),
    size=st.integers(0, 6) | st.sampled_from([2.5, 0.5]),
    cuts=st.lists(st.integers(0, 12), max_size=2),
)
def test_integer_time_windows_equal_the_reference(
    base: int, gaps: list[int], kinds: list[bool], size: float, cuts: list[int]
) -> None:
    times, t = [], base
    for g in gaps:
        t += g
        times.append(t)
    if times[-1] > 2**63 - 1:
        return
    events: list[pycel.Event] = [
        (Up if kinds[k] else Down)(x=k % 2, at=v) for k, v in enumerate(times)
    ]
    u, d = pycel.alias(Up, "u"), pycel.alias(Down, "d")
    pattern = pycel.seq(u, pycel.plus(d)).within(size, on=Tick.at)
    cuts = sorted(c for c in set(cuts) if 0 < c < len(events))
    assert _engine(pattern, events, cuts) == evaluate(pattern, events).keys()


def test_times_at_both_ends_of_int64_are_far_apart() -> None:
    """time(end) - time(start) of -(2**63 - 1) and 2**63 - 1 is 2**64 - 2, not -2 (the
    reference once subtracted int64 values, which wrap around, and found a match)."""
    u, d = pycel.alias(Up, "u"), pycel.alias(Down, "d")
    pattern = pycel.seq(u, d).within(5, on=Tick.at)
    events: list[pycel.Event] = [Up(x=0, at=-(2**63) + 1), Down(x=0, at=2**63 - 1)]
    assert list(evaluate(pattern, events)) == []
    assert len(pycel.compile(pattern).run(events)) == 0


@pytest.mark.parametrize(
    ("seconds", "fits"), [(1e300, True), (1e10, True), (9.47e9, True), (9.4e9, False), (5e9, False)]
)
def test_windows_longer_than_int64_nanoseconds(seconds: float, fits: bool) -> None:
    """Two timestamps 300 years apart (9.47e9 s, more nanoseconds than int64 holds): a
    window of 1e300 s (infinite in nanoseconds as a float) raised OverflowError, and one of
    1e10 s was cut to int64's 292 years, so neither found the pair."""
    o, c = pycel.alias(Open, "o"), pycel.alias(Close, "c")
    pattern = pycel.seq(o, c).within(seconds=seconds, on=Stamped.ts)
    for tail in ([], [Close(ts=datetime(2100, 1, 1))]):  # a horizon, a later event
        events: list[pycel.Event] = [Open(ts=datetime(1800, 1, 1)), Close(ts=datetime(2100, 1, 1)), *tail]
        expected = evaluate(pattern, events)
        assert bool(expected) == fits
        assert pycel.compile(pattern).run(events).keys() == expected.keys()
        ended = pycel.seq(o, pycel.absent(pycel.alias(Open, "x"))).within(seconds=seconds, on=Stamped.ts)
        assert pycel.compile(ended).run(events).keys() == evaluate(ended, events).keys()


class Reading(pycel.Event):
    at: pycel.Field[float]


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_a_float_time_must_be_finite(bad: float) -> None:
    """inf - inf is no duration: the engine matched two events at inf inside a window of 5,
    the reference did not. Both refuse such a time, naming the row (NaN is a missing time,
    refused as such)."""
    a, b = pycel.alias(Reading, "a"), pycel.alias(Reading, "b")
    pattern = pycel.seq(a, b).within(5, on=Reading.at)
    events: list[pycel.Event] = [Reading(at=1.0), Reading(at=bad), Reading(at=bad)]
    with pytest.raises(pycel.DataError, match="finite number.*row 1"):
        pycel.compile(pattern).run(events)
    with pytest.raises(pycel.DataError, match="finite number.*row 1"):
        evaluate(pattern, events)


class Quote(pycel.Event):
    at: pycel.Field[float]


class Bid(Quote): ...


class Ask(Quote): ...


def test_a_float_window_is_time_of_end_minus_time_of_start() -> None:
    """2.0 - 1.7 is 0.30000000000000004 in float64 (and above 0.3 exactly too): outside
    within(0.3). The engine tested 1.7 >= 2.0 - 0.3, which rounds the other way (and
    0.1 >= 2.1 - 2.0 is false while 2.1 - 0.1 <= 2.0 is true)."""
    b, a = pycel.alias(Bid, "b"), pycel.alias(Ask, "a")
    pattern = pycel.seq(b, a).within(0.3, on=Quote.at)
    events: list[pycel.Event] = [Bid(at=1.7), Bid(at=1.8), Ask(at=2.0)]
    expected = evaluate(pattern, events)
    assert [(m.start, m.end) for m in expected] == [(1, 2)]
    assert pycel.compile(pattern).run(events).keys() == expected.keys()
    assert pycel.compile(pattern.strategy("next")).run(events).keys() == expected.keys()
    # and the other way: 2.1 - 2.0 > 0.1, yet 2.1 - 0.1 is 2.0, inside within(2.0)
    wide = pycel.seq(b, a).within(2.0, on=Quote.at)
    events = [Bid(at=0.1), Ask(at=2.1)]
    assert [(m.start, m.end) for m in evaluate(wide, events)] == [(0, 1)]
    assert pycel.compile(wide).run(events).keys() == evaluate(wide, events).keys()


@settings(max_examples=200)
@given(
    tenths=st.lists(st.integers(0, 40), min_size=2, max_size=14),
    kinds=st.lists(st.booleans(), min_size=14, max_size=14),
    size=st.sampled_from([0.1, 0.2, 0.3, 0.7, 1.1, 2.0, 2.6, 0.0]),
    cuts=st.lists(st.integers(0, 14), max_size=2),
)
def test_float_time_windows_equal_the_reference(
    tenths: list[int], kinds: list[bool], size: float, cuts: list[int]
) -> None:
    """Times that are decimal fractions (k / 10, as data often holds), where the float
    differences fall just above or below the window: engine and reference agree, also
    across pushes and snapshots, and with an absence at the end."""
    times = [k / 10 for k in sorted(tenths)]
    events: list[pycel.Event] = [(Bid if kinds[k] else Ask)(at=t) for k, t in enumerate(times)]
    b, a = pycel.alias(Bid, "b"), pycel.alias(Ask, "a")
    cuts = sorted(c for c in set(cuts) if 0 < c < len(events))
    for pattern in (
        pycel.seq(b, pycel.plus(a)).within(size, on=Quote.at),
        pycel.seq(b, pycel.absent(Ask)).within(size, on=Quote.at),
    ):
        expected = evaluate(pattern, events).keys()
        assert pycel.compile(pattern).run(events).keys() == expected
        assert _engine(pattern, events, cuts, close=True) == expected
