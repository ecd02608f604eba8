"""Hierarchical conjunctions with nested join classes on the parallelized automaton
(pycel/plan/hcq.py, pycel/jit/pcea.py): identical to the reference, no duplicates.

Generated patterns: an AND of 2–4 events (distinct types, or self-joins: a repeated type,
or a type and its subtype, where one event may serve two atoms), a random laminar family of
join classes over them (nested or disjoint, 1–3 levels, each level on its own attribute),
sometimes a last event in sequence (the PCEA paper's P0 shape), unary filters, windows
and LIMIT; streams with values in 0..2 so joins hit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel.dsl import Limit, Pattern, as_pattern
from pycel.reference import evaluate


class Q(pycel.Event):
    x: pycel.Field[int]
    y: pycel.Field[int]
    z: pycel.Field[int]
    time: pycel.Field[int]


class Q0(Q): ...


class Q1(Q): ...


class Q2(Q): ...


class Q3(Q): ...


class Q0Sub(Q0): ...  # a Q0Sub event is also a Q0: it can serve both atoms of a self-join


TYPES = (Q0, Q1, Q2, Q3)
LEVEL_ATTR = ("x", "y", "z")


def _same(pattern: Pattern, events: list[Any]) -> int:
    query = pycel.compile(pattern)
    assert query.hcq is not None, "expected the parallelized automaton"
    got = query.run(events)
    assert len(got.keys()) == len(got), "duplicate match"
    if isinstance(pattern, Limit):
        full = evaluate(pattern.inner, events)
        assert got.keys() <= full.keys()
        per_end: dict[int, int] = {}
        for m in full:
            per_end[m.end] = per_end.get(m.end, 0) + 1
        assert sorted(m.end for m in got) == sorted(
            e for e, c in per_end.items() for _ in range(min(c, pattern.n))
        )
        return len(got)
    expected = evaluate(pattern, events).keys()
    assert got.keys() == expected
    return len(expected)


@st.composite
def hcq_cases(draw: st.DrawFn) -> tuple[Pattern, list[Q]]:
    n = draw(st.integers(2, 4))
    # Distinct types, or (self-joins) some repeated, or a type and its subtype.
    pool = draw(st.sampled_from([TYPES, (Q0, Q0, Q1, Q1), (Q0, Q0Sub, Q1, Q0)]))
    kinds = [pool[k] for k in range(n)]
    occ = [pycel.alias(t, f"v{k}") for k, t in enumerate(kinds)]
    joins: list[Any] = []

    def split(members: list[int], level: int) -> None:
        """Make ``members`` a class at ``level`` (maybe), then split it further."""
        if len(members) >= 2 and level < 3 and (level > 0 or draw(st.booleans())):
            attr = LEVEL_ATTR[level]
            first = getattr(occ[members[0]], attr)
            joins.extend(getattr(occ[m], attr) == first for m in members[1:])
            level += 1
        if len(members) <= 2 and level > 0:
            return
        cut = draw(st.integers(1, len(members) - 1))
        for part in (members[:cut], members[cut:]):
            if len(part) >= 2 and draw(st.integers(0, 3)) > 0:
                split(part, level)

    split(list(range(n)), 0)
    items: list[Pattern] = []
    for v in occ:
        item: Pattern = as_pattern(v)
        if draw(st.integers(0, 4)) == 0:
            item = v.where(v.x != draw(st.integers(0, 2)))
        items.append(item)
    if n >= 3 and draw(st.integers(0, 2)) == 0:
        conj = items[0]
        for it in items[1:-1]:
            conj = conj & it
        body = pycel.seq(conj, items[-1])
    else:
        body = items[0]
        for it in items[1:]:
            body = body & it
    pattern = body
    if joins:
        pred = joins[0]
        for j in joins[1:]:
            pred = pred & j
        pattern = pattern.where(pred)
    window = draw(st.sampled_from(["none", "events", "time"]))
    if window == "events":
        pattern = pattern.within(events=draw(st.integers(1, 8)))
    elif window == "time":
        pattern = pattern.within(draw(st.integers(0, 3)), on=Q.time)
    if draw(st.integers(0, 3)) == 0:  # a class over every atom (z is sometimes null)
        pattern = pattern.partition_by(draw(st.sampled_from([Q.x, Q.z])))
    if draw(st.integers(0, 3)) == 0:
        names = [f"v{k}" for k in range(n)]
        pattern = pattern.select(*draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    if draw(st.integers(0, 4)) == 0:
        pattern = pattern.limit(draw(st.integers(1, 2)))
    length = draw(st.integers(0, 28))
    stream: list[Q] = []
    time = 0
    for _ in range(length):
        time += draw(st.integers(0, 1))
        t = draw(st.sampled_from((*kinds, Q0Sub, Q3)))
        stream.append(
            t(
                x=draw(st.integers(0, 1)),
                y=draw(st.integers(0, 1)),
                z=None if draw(st.integers(0, 12)) == 0 else draw(st.integers(0, 1)),
                time=time,
            )
        )
    return pattern, stream


def _nested(pattern: Pattern) -> bool:
    """Whether the engine takes the parallelized path (nested classes) for ``pattern``."""
    try:
        return pycel.compile(pattern).hcq is not None
    except pycel.UnsupportedError:
        return False


@settings(max_examples=500, deadline=None)
@given(hcq_cases())
def test_generated_hierarchical_conjunctions_equal_reference(case: tuple[Pattern, list[Q]]) -> None:
    pattern, stream = case
    if _nested(pattern):
        _same(pattern, stream)
    else:  # a single class over all events, or none: the run-key / interleaving path
        got = pycel.compile(pattern)
        if not isinstance(pattern, Limit):
            assert got.run(stream).keys() == evaluate(pattern, stream).keys()


def test_three_levels_and_two_branches() -> None:
    a, b, c, d = (pycel.alias(t, f"v{k}") for k, t in enumerate(TYPES))
    # x over all four; y over {a, b}; z over {c, d}
    pattern = (a & b & c & d).where(
        (a.x == b.x) & (b.x == c.x) & (c.x == d.x) & (a.y == b.y) & (c.z == d.z)
    ).within(events=6)
    events = [TYPES[k % 4](x=(k // 4) % 2, y=(k // 8) % 2, z=(k // 5) % 2, time=k) for k in range(24)]
    assert _same(pattern, events) > 0


def test_pushing_in_pieces_and_restoring_equal_one_run() -> None:
    a, b, c = (pycel.alias(t, f"v{k}") for k, t in enumerate(TYPES[:3]))
    pattern = (a & b & c).where((a.x == b.x) & (b.x == c.x) & (b.y == c.y)).within(events=7)
    events = [TYPES[k % 3](x=(k // 6) % 2, y=(k // 3) % 2, z=0, time=k) for k in range(30)]
    query = pycel.compile(pattern)
    assert query.hcq is not None
    whole = query.run(events).keys()
    assert whole
    for cut in (0, 7, 16, 29):
        st1 = query.stream()
        got = st1.push(events[:cut]).keys()
        got |= pycel.Stream.restore(st1.snapshot()).push(events[cut:]).keys()
        assert got == whole


def test_partition_and_projection_on_the_parallel_path() -> None:
    """PARTITION BY is a class over every atom; a projection lists each match once, and
    LIMIT counts distinct matches."""
    a, b, c = pycel.alias(Q0, "a"), pycel.alias(Q1, "b"), pycel.alias(Q2, "c")
    pattern = (a & b & c).where((b.x == c.x) & (b.y == c.y))
    events = [Q0(x=0, y=0, z=1), Q1(x=0, y=0, z=1), Q1(x=0, y=0, z=1), Q2(x=0, y=0, z=1), Q2(x=0, y=0, z=2)]
    assert _same(pattern.partition_by(Q.z), events) == 2  # b1 or b2 with c3; none with c4
    query = pycel.compile(pattern.partition_by(Q.z))
    assert query.hcq is not None and len(query.hcq.nodes) == 5  # root {a,b,c} (z), {b,c}, atoms
    assert _same(pattern.select("a"), events) == 2  # [0, 3] and [0, 4], each once
    got = pycel.compile(pattern.select("a", "c").limit(1)).run(events)
    assert [(m.start, m.end) for m in got] == [(0, 3), (0, 4)]


def test_tuple_keys_of_the_parallel_path_are_forgotten() -> None:
    """Leaves under three classes (z from PARTITION BY, x and y) use tuple keys; with
    keys churning, the tuples that left every window are forgotten."""
    a, b, c = pycel.alias(Q0, "a"), pycel.alias(Q1, "b"), pycel.alias(Q2, "c")
    pattern = (a & b & c).where((b.x == c.x) & (b.y == c.y)).partition_by(Q.z).within(events=100)
    stream = pycel.compile(pattern).stream()
    rng = np.random.default_rng(4)
    sizes, found = [], 0
    chunk = 50_000
    for k in range(4):
        pos = np.arange(k * chunk, (k + 1) * chunk)
        frame = pd.DataFrame(
            {
                "event_type": rng.choice(["Q0", "Q1", "Q2"], size=chunk),
                "x": rng.integers(0, 2, size=chunk),
                "y": rng.integers(0, 2, size=chunk),
                "z": pos // 20,
                "time": pos,
            }
        )
        found += len(stream.push(frame))
        sizes.append(max(len(t.ids) for t in stream.runner.shape_tuples.values()))
    assert found > 0
    assert max(sizes) <= 2 * 4096, sizes  # ~10k distinct tuples per chunk otherwise kept


def test_one_event_serving_two_atoms_of_a_class_needs_a_value() -> None:
    """v0 and v1 in one class on z, both served by one Q0 event whose z is null: null ==
    null is false, so there is no match (this used to match)."""
    v0, v1, v2 = pycel.alias(Q0, "v0"), pycel.alias(Q0, "v1"), pycel.alias(Q1, "v2")
    pattern = (v0 & v1 & v2).where((v1.x == v0.x) & (v2.x == v0.x) & (v1.z == v0.z))
    assert _same(pattern, [Q0(x=0, y=0, z=None, time=0), Q1(x=0, y=0, z=None, time=0)]) == 0
    assert _same(pattern, [Q0(x=0, y=0, z=1, time=0), Q1(x=0, y=0, z=None, time=0)]) == 1


def test_self_join_lets_one_event_serve_two_atoms() -> None:
    """r1 and r2 are both Q0 events; y of r1 must equal z of r2, nested under x."""
    r1, r2, t = pycel.alias(Q0, "r1"), pycel.alias(Q0, "r2"), pycel.alias(Q1, "t")
    pattern = (r1 & r2 & t).where((r1.x == r2.x) & (r2.x == t.x) & (r1.y == r2.z))
    events = [Q0(x=0, y=1, z=1, time=0), Q1(x=0, y=0, z=0, time=1), Q0(x=0, y=0, z=1, time=2)]
    assert _same(pattern, events) == 2
    got = [m.variables for m in pycel.compile(pattern).run(events)]
    # event 0 is both r1 and r2 (its y equals its z); and r1 = 0, r2 = 2
    assert {"r1": (0,), "r2": (0,), "t": (1,)} in got and {"r1": (0,), "r2": (2,), "t": (1,)} in got
