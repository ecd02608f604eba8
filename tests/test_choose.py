"""LAST, NEXT and MAX with a window choose on the run DAG (pycel/jit/choose.py,
pycel/jit/choose_max.py): LAST walks it back from the end, NEXT forward from the earliest
start over the end's region, MAX searches the region one path at a time. Denser
cases than the generated ones of test_strategies_window.py (longer streams, windows up
to 12 events, Kleene plus over alternatives, so that a layer holds several nodes and a
node several steps), checked against the reference evaluator."""

from __future__ import annotations

import random
from typing import Any

import pytest

import pycel
from pycel.reference import evaluate


class T(pycel.Event):
    x: pycel.Field[int]
    time: pycel.Field[int]


class A(T): ...


class B(T): ...


class C(T): ...


a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")
a2, b2, c2 = pycel.alias(A, "a2"), pycel.alias(B, "b2"), pycel.alias(C, "c2")

BODIES = [
    pycel.seq(a, pycel.plus(b), c),
    pycel.seq(pycel.plus(a), pycel.plus(b)),
    pycel.seq(a, pycel.plus(b | c2), c),
    pycel.seq(a, pycel.plus(b), pycel.plus(b2)),
    pycel.seq(pycel.plus(a | b), c),
    pycel.seq(a, pycel.plus(pycel.seq(b, c))),
    pycel.seq(a.where(a.x < 2), pycel.plus(b.where(b.x > 0)), c),
    pycel.seq(a, b, c) | pycel.seq(a2, c),
    pycel.seq(pycel.plus(a), b.where(b.x == 1), pycel.plus(c)),
]


def _case(rnd: random.Random, strategy: str) -> tuple[Any, list[T]]:
    body = rnd.choice(BODIES)
    events = [rnd.choice([A, B, C])(x=rnd.randrange(3), time=i) for i in range(rnd.randint(5, 16))]
    width = rnd.randint(2, 12)
    pattern = body.within(events=width) if rnd.random() < 0.7 else body.within(width, on=T.time)
    if rnd.random() < 0.3:
        pattern = pattern.partition_by(T.x)
    return pattern.strategy(strategy), events  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_the_choice_on_the_run_dag_equals_the_reference(strategy: str) -> None:
    rnd = random.Random({"last": 13, "next": 17, "max": 19}[strategy])
    matches = 0
    for _ in range(60):
        pattern, events = _case(rnd, strategy)
        query = pycel.compile(pattern)
        assert query.family == "windowed"
        expected = evaluate(pattern, events).keys()
        assert query.run(events).keys() == expected, (pattern, events)
        matches += len(expected)
    assert matches > 50  # the cases are not all empty


def test_next_takes_the_earliest_start_then_the_earliest_step_at_each_position() -> None:
    """Runs of seq(a, b+, c) ending at the c start at either a: NEXT's C starts at the
    first a and takes the earliest next position each time, LAST's starts at the last a
    (the two choices differ, and both are the reference's)."""
    events = [A(x=0, time=0), B(x=0, time=1), A(x=0, time=2), B(x=0, time=3), B(x=0, time=4), C(x=0, time=5)]
    chosen = {}
    for strategy in ("next", "last"):
        pattern = pycel.seq(a, pycel.plus(b), c).within(events=6).strategy(strategy)  # type: ignore[arg-type]
        got = pycel.compile(pattern).run(events).keys()
        assert got == evaluate(pattern, events).keys()
        chosen[strategy] = got
    assert chosen["next"] != chosen["last"]


@pytest.mark.parametrize(
    ("body", "size"),
    [
        (pycel.seq(a, b, c), 3),
        (pycel.seq(a, b, c) | pycel.seq(c2, b2, a2), 3),
        (pycel.seq(a, pycel.absent(b), c), 2),
        (pycel.seq(a, pycel.plus(b), c), None),
        (pycel.seq(a, b, c) | pycel.seq(a2, c), None),
    ],
)
def test_max_over_matches_of_one_size_keeps_every_match_that_fits(body: Any, size: int | None) -> None:
    """When every match has the same number of events (the automaton's match_size), none
    contains another: MAX with a window returns what ALL with the window returns (the
    runner skips the search), and otherwise the search's answer; both the reference's."""
    rnd = random.Random(23)
    events = [rnd.choice([A, B, C])(x=rnd.randrange(3), time=i) for i in range(40)]
    pattern = body.within(events=6).strategy("max")
    query = pycel.compile(pattern)
    assert query.plan.nfa.match_size == size
    got = query.run(events).keys()
    assert got == evaluate(pattern, events).keys()
    every = pycel.compile(body.within(events=6)).run(events).keys()
    if size is None:
        assert got < every  # some match contains another here
    else:
        assert got == every and len(got) > 0
