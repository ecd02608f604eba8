"""Post-filters pruning the enumeration (pycel.jit.residual, pycel.runtime.residual).

The enumerator checks each post-filter conjunct as soon as the path it walks (from a
match's last event back to its first) binds the conjunct's variables, and does not go
below a node where one combination fails. The complete-match check stays the authority,
so pruning must never drop a match the reference keeps: generated predicates over ints
(with values near the int64 limits and beyond 2**53), floats (NaN, infinities, -0.0),
bools and strings, with nulls, are checked against the reference evaluator. The work
saved is counted (nodes visited), not timed.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel import Event, Field
from pycel.errors import DataError


class Tick(Event):
    i: Field[int]
    f: Field[float]
    flag: Field[bool]
    s: Field[str]


class Up(Tick): ...


class Down(Tick): ...


class Flat(Tick): ...


u, d, w = pycel.alias(Up, "u"), pycel.alias(Down, "d"), pycel.alias(Flat, "w")
seq, plus = pycel.seq, pycel.plus

_INTS = [0, 1, -1, 2, 3, 7, 2**53 + 1, -(2**53) - 1, 2**62, -(2**62), 2**63 - 1, -(2**63)]
_FLOATS = [0.0, -0.0, 0.5, 1.0, 2.0, 3.0, -1.5, 2.0**53, float("nan"), float("inf"), float("-inf")]
_TYPES = (Up, Down, Flat)


@st.composite
def _ticks(draw: st.DrawFn, n: int) -> list[Tick]:
    out = []
    for _ in range(n):
        values: dict[str, Any] = {}
        if draw(st.integers(0, 5)):
            values["i"] = draw(st.sampled_from(_INTS[:5]) if draw(st.booleans()) else st.sampled_from(_INTS))
        if draw(st.integers(0, 5)):
            values["f"] = draw(st.sampled_from(_FLOATS))
        if draw(st.integers(0, 5)):
            values["flag"] = draw(st.booleans())
        if draw(st.integers(0, 5)):
            values["s"] = draw(st.sampled_from(["x", "y"]))
        out.append(draw(st.sampled_from(_TYPES))(**values))
    return out


def _numbers(x: Any, y: Any) -> st.SearchStrategy[Any]:
    leaves = st.sampled_from([x.i, y.i, x.f, y.f, x.flag, 2, -1, 0.5, 3])
    ops = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
           "/": lambda p, q: p / q, "%": lambda p, q: p % q}  # fmt: skip

    def build(t: tuple[str, Any, Any]) -> Any:
        op, p, q = t
        # An expression on the left (Python numbers have no operators with expressions).
        return ops[op](p, q) if isinstance(p, pycel.Expr) or not isinstance(q, pycel.Expr) else ops[op](q, p)

    return st.recursive(
        leaves, lambda inner: st.tuples(st.sampled_from(sorted(ops)), inner, inner).map(build), max_leaves=4
    )


@st.composite
def _predicate(draw: st.DrawFn, x: Any, y: Any) -> Any:
    def atom(draw2: st.DrawFn) -> Any:
        kind = draw2(st.integers(0, 3))
        if kind == 0:
            op = draw2(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
            left, right = draw2(_numbers(x, y)), draw2(_numbers(x, y))
            if not isinstance(left, pycel.Expr):
                left, right = (right, left) if isinstance(right, pycel.Expr) else (x.i, right)
            return {"==": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
                    ">": left > right, ">=": left >= right}[op]  # fmt: skip
        if kind == 1:
            return (x.s == y.s) if draw2(st.booleans()) else (x.s != "x")
        if kind == 2:
            return y.flag if draw2(st.booleans()) else ~x.flag
        return x.s < y.s  # string order: left to the complete-match check

    parts = [draw(st.composite(atom)()) for _ in range(draw(st.integers(1, 3)))]
    pred = parts[0]
    for p in parts[1:]:
        pred = (pred & p) if draw(st.booleans()) else (pred | p)
    return ~pred if draw(st.integers(0, 4)) == 0 else pred


def _agree(pattern: Any, events: list[Tick]) -> None:
    """Engine == reference, or both raise a DataError (an overflowing post-filter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = pycel.reference.evaluate(pattern, events).keys()
        except DataError:
            with pytest.raises(DataError):
                pycel.compile(pattern).run(events)
            return
        got = pycel.compile(pattern).run(events)
    assert len(got.keys()) == len(got)
    missing, extra = sorted(expected - got.keys())[:3], sorted(got.keys() - expected)[:3]
    assert got.keys() == expected, (pattern, missing, extra)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_pruning_never_drops_a_match_the_reference_keeps(data: st.DataObject) -> None:
    shape = data.draw(st.integers(0, 2))
    if shape == 0:
        body, x, y = seq(u, d), u, d
    elif shape == 1:
        body, x, y = seq(u, plus(d), w), d, w
    else:
        body, x, y = seq(plus(u), d), u, d
    pattern = body.where(data.draw(_predicate(x, y)), post_filter=True)
    pattern = pattern.within(events=data.draw(st.integers(2, 6)))
    _agree(pattern, data.draw(_ticks(data.draw(st.integers(4, 12)))))


def _pruning(stream: pycel.Stream) -> Any:
    return stream.__dict__["pruning"]


def _ticks_of(n: int) -> list[Tick]:
    """Runs of an Up, eight Downs and a Flat, i in 0..9 scattered."""
    kinds = (Up,) + (Down,) * 8 + (Flat,)
    return [kinds[k % 10](i=(k * 7919) % 10, f=float(k % 5), flag=k % 3 == 0, s="x") for k in range(n)]


def test_pruning_cuts_the_walk_below_a_failing_node() -> None:
    """seq(u, d+, w) where every d is above w: the walk from w back stops at the first d
    that is not, instead of walking every longer path through it. Counted: the nodes the
    enumerator visits. The same condition inside an OR with a LIKE is not interpreted (no
    pruning), so that query shows the unpruned walk's matches; both equal the reference
    where it can enumerate (a short prefix: it expands every subset of the Downs)."""
    body = seq(u, plus(d), w)
    pruned = body.where(d.i > w.i + 5, post_filter=True).within(events=10)
    unpruned = body.where((d.i > w.i + 5) | d.s.like("no%"), post_filter=True).within(events=10)
    for pattern in (pruned, unpruned):
        _agree(pattern, _ticks_of(21))
    events = _ticks_of(2000)
    stream = pycel.compile(pruned).stream()
    got = stream.push(events)
    assert len(got) > 0 and got.keys() == pycel.compile(unpruned).run(events).keys()
    # Every d+ path of every w: what a walk without pruning visits (2**8 per w, 8 nodes deep).
    always = pycel.compile(body.where(d.i == d.i, post_filter=True).within(events=10)).stream()
    every = always.push(events)
    print(len(every), len(got), _pruning(stream).visits, _pruning(always).visits)
    assert len(every) > 30 * len(got)
    assert _pruning(stream).visits * 20 < _pruning(always).visits


def test_most_failing_conjunct_is_tried_first() -> None:
    """Two conjuncts complete at the same node: after a push, the one that failed more
    often leads the next push's order."""
    events = _ticks_of(200)
    pattern = seq(d, w).where((d.f >= 0.0) & (d.i > w.i + 3), post_filter=True).within(events=6)
    stream = pycel.compile(pattern).stream()
    stream.push(events[:100])
    stats = _pruning(stream).stats
    assert stats[1, 1] > stats[0, 1] == 0  # d.i > w.i + 3 fails more often than d.f >= 0
    before = stats.copy()
    stream.push(events[100:])
    _agree(pattern, events)
    # The second push tried the selective conjunct first, so it checked the other one
    # exactly where the selective one passed (one combination per node here).
    after = _pruning(stream).stats
    checked, failed = (after - before).T
    assert failed[0] == 0 and checked[1] > failed[1] > 0
    assert checked[0] == checked[1] - failed[1]


def test_unsupported_conjuncts_are_left_to_the_complete_check() -> None:
    """LIKE and string order are not interpreted: those conjuncts do not prune, the
    complete-match check still applies them (same matches as the reference)."""
    events = _ticks_of(60)
    pattern = seq(u, d).where(u.s.like("x%") & (u.s <= d.s), post_filter=True).within(events=5)
    stream = pycel.compile(pattern).stream()
    stream.push(events)
    assert "pruning" not in stream.__dict__ or _pruning(stream).visits == 0
    _agree(pattern, events)


def test_the_ordered_loop_prunes_too() -> None:
    """With a trend on the automaton (the ordered loop, its runs in treaps) the walk is
    pruned as in the ALL loop: counted, the nodes the enumerator visits, against the same
    query whose post-filter always holds; the matches are the reference's."""
    rising = plus(d.where(d.f >= pycel.prev(d).f))
    body = seq(u, rising, w)
    pruned = body.where(d.i > w.i + 5, post_filter=True).within(events=10)
    query = pycel.compile(pruned)
    assert query.plan.nfa.conditions  # the ordered loop runs it
    _agree(pruned, _ticks_of(31))
    events = _ticks_of(2000)
    stream = query.stream()
    got = stream.push(events)
    always = pycel.compile(body.where(d.i == d.i, post_filter=True).within(events=10)).stream()
    every = always.push(events)
    print(len(every), len(got), _pruning(stream).visits, _pruning(always).visits)
    assert 0 < len(got) < len(every)
    assert _pruning(stream).visits * 3 < _pruning(always).visits
