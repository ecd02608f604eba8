"""LAST, NEXT and MAX with a window choose among the matches that fit the window on the
run DAG (pycel/jit/choose.py, pycel/jit/choose_max.py): no bound, no refusal. With
post-filters the strategy compares every match that fits and passes them
(pycel/runtime/runners/windowed.py): above MAX_WINDOWED_CHOICES per end that stream is
refused with a clear error, never cut short; at or below it the answers are exact."""

from __future__ import annotations

from typing import Any

import pytest

import pycel
import pycel.runtime.runners.windowed as windowed
from pycel.errors import UnsupportedError
from pycel.reference import evaluate


class A(pycel.Event):
    x: pycel.Field[int]


class B(pycel.Event):
    x: pycel.Field[int]


class C(pycel.Event):
    x: pycel.Field[int]


a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")


def _events(bs: int) -> list[Any]:
    """a, ``bs`` b's, c: seq(a, plus(b), c) has 2**bs - 1 matches ending at c."""
    return [A(x=0), *(B(x=0) for _ in range(bs)), C(x=0)]


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_an_end_with_too_many_filtered_matches_to_compare_is_refused(strategy: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(windowed, "MAX_WINDOWED_CHOICES", 10)
    pattern = (
        pycel.seq(a, pycel.plus(b), c)
        .where(a.x + c.x >= 0, post_filter=True)
        .within(events=20)
        .strategy(strategy)  # type: ignore[arg-type]
    )
    stream = pycel.compile(pattern).stream()
    first = stream.push(_events(3))  # 7 matches end at c: compared exactly
    assert first.keys() == evaluate(pattern, _events(3)).keys()
    with pytest.raises(UnsupportedError, match=r"position 10 has more than 10"):
        stream.push(_events(4))  # 15 matches end at position 10
    with pytest.raises(UnsupportedError, match="has more than 10"):
        stream.push(_events(1))  # the stream stays refused
    with pytest.raises(UnsupportedError, match="has more than 10"):
        stream.snapshot()


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_the_strategies_choose_without_comparing_every_match(strategy: str, monkeypatch: Any) -> None:
    """2**24 - 1 matches of seq(a, b+, c) end at the c; LAST, NEXT and MAX keep the one
    with every b, found on the run DAG, whatever the bound on compared matches."""
    monkeypatch.setattr(windowed, "MAX_WINDOWED_CHOICES", 10)
    pattern = pycel.seq(a, pycel.plus(b), c).within(events=30).strategy(strategy)  # type: ignore[arg-type]
    stream = pycel.compile(pattern).stream()
    small = stream.push(_events(4))
    assert small.keys() == evaluate(pattern, _events(4)).keys()  # the reference can do 15
    big = stream.push(_events(24))
    assert [(m.start, m.end, m.variables["b"]) for m in big] == [(6, 31, tuple(range(7, 31)))]


def test_max_keeps_one_match_per_start_among_exponentially_many() -> None:
    """Two a's, then 30 b's and a c in a window of 40: 2 * (2**30 - 1) matches end at the
    c; MAX keeps, for each a, the one with every b (an a is never a b, so neither
    contains the other), and a shorter window keeps only the later a's."""
    events = [A(x=0), A(x=1), *(B(x=0) for _ in range(30)), C(x=0)]
    for window, starts in ((40, [0, 1]), (31, [1])):
        pattern = pycel.seq(a, pycel.plus(b), c).within(events=window).strategy("max")
        got = pycel.compile(pattern).run(events)
        assert sorted((m.start, m.variables["b"]) for m in got) == [(s, tuple(range(2, 32))) for s in starts]


def test_at_the_bound_the_choice_is_exact(monkeypatch: Any) -> None:
    monkeypatch.setattr(windowed, "MAX_WINDOWED_CHOICES", 15)
    for strategy in ("last", "next", "max"):
        pattern = pycel.seq(a, pycel.plus(b), c).within(events=20).strategy(strategy)  # type: ignore[arg-type]
        got = pycel.compile(pattern).run(_events(4))  # exactly 15 matches to compare
        assert got.keys() == evaluate(pattern, _events(4)).keys()
        assert len(got) >= 1


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_slices_of_a_batch_give_the_batch_answers(strategy: str, monkeypatch: Any) -> None:
    """The runner feeds the loop a slice of the batch at a time (to bound the work before
    a refusal): cut every 3 events, the answers are the reference's."""
    monkeypatch.setattr(windowed, "_SLICE", 3)
    events = [[A, B, C][k % 3](x=(k * 7) % 2) for k in range(40)] + _events(2)
    pattern = pycel.seq(a, pycel.plus(b), c).within(events=5).partition_by(A.x).strategy(strategy)  # type: ignore[arg-type]
    got = pycel.compile(pattern).run(events)
    assert got.keys() == evaluate(pattern, events).keys()
    assert len(got) > 0
