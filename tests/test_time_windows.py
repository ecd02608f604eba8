"""Time windows are exact on integer times of any size (int64 nanoseconds included).

The engine once compared times as float64, which rounds above 2**53: a match one
nanosecond outside a window at 1.7e18 ns was kept. Every case is checked against the
reference evaluator, also across batch cuts and a snapshot/restore.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
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


def _engine(pattern: pycel.Pattern, events: list[pycel.Event], cuts: list[int]) -> set[object]:
    stream = pycel.compile(pattern).stream()
    keys: set[object] = set()
    for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
        keys |= stream.push(events[lo:hi]).keys()
        stream = pycel.Stream.restore(stream.snapshot())
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
