"""Emptiness probes (pycel.jit.probe, pycel.plan.probes): the delay of comparisons between
occurrences that are not adjacent.

``seq(a, c, b).where(b.x > a.x)`` is checked while matches are enumerated, with a's runs
ordered by ``a.x`` (tests/test_key_pruning.py). A c whose a's all fail used to cost a walk
into a's index for every b; where each c's snapshot of a's runs contains the snapshots
before it, one look at the lowest in-window a of a c decides that c and every c made
before it. Results are checked against the reference evaluator and against the same
queries without probes; the work is counted (nodes visited), not timed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from test_key_pruning import A, B, C, Tick, _agree, _counted, a, b, c, gap, plus, seq

import pycel
from pycel import Pattern
from pycel.plan.probes import prefix_probes
from pycel.runtime.runners.sequential import SequentialRunner


@contextmanager
def _probes_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The engine as it ran before the probes (the order pruning only), inside the block."""
    with monkeypatch.context() as patch:
        patch.setattr(SequentialRunner, "_probing", lambda self, res, t: res)
        yield


def _counted_without_probes(
    monkeypatch: pytest.MonkeyPatch, pattern: Pattern, events: list[Tick]
) -> tuple[int, int]:
    """:func:`_counted` with the probes off."""
    with _probes_off(monkeypatch):
        return _counted(pattern, events)


def _probed(pattern: Pattern, events: list[Tick]) -> list[str]:
    """Per residual conjunct, the variables whose runs the enumerator probes."""
    stream = pycel.compile(pattern).stream()
    stream.push(events)
    runner = stream.runner
    assert isinstance(runner, SequentialRunner)
    pruning = stream.__dict__["pruning"]
    names = stream.plan.nfa.variables
    key_var = [-1 if k is None or k[0].var is None else names.index(k[0].var) for k in pruning.keyed]
    masks = [sum(1 << names.index(v) for v in vs) for vs in pruning.post.variables]
    probes = prefix_probes(runner.dfa.tables(), np.array(key_var), np.array(masks, dtype=np.int64))
    return ["".join(v for i, v in enumerate(names) if int(p) >> i & 1) for p in probes]


def _sparse_stream(n: int, window: int) -> list[Tick]:
    """a's rising, a c after each a, and b's below every a in a window of ``window``
    events except every 97th b, which is above the window's first two a's: most c's have
    no valid a."""
    events: list[Tick] = []
    for k in range(n):
        if k % 4 == 0:
            events.append(A(x=1000 + k, time=k))
        elif k % 4 == 1:
            events.append(C(x=0, time=k))
        else:
            events.append(B(x=1000 + k - window + 8 if k % 97 == 0 else 5, time=k))
    return events


def test_which_middle_runs_are_probed() -> None:
    """c is probed where its runs are snapshots of one growing index of a's runs only."""
    events = [A(x=1, time=0), C(x=3, time=1), B(x=2, time=2), C(x=0, time=3), B(x=5, time=4)]
    assert _probed(seq(a, c, b).where(b.x > a.x), events) == ["c"]
    assert _probed(seq(a, c, b).where(b.x * 2 <= 1 - a.x).within(events=3), events) == ["c"]
    assert _probed(seq(plus(a), c, b).where(b.x > a.x), events) == ["c"]
    assert _probed(seq(a, plus(c), b).where(b.x > a.x), events) == ["c"]
    # An absence removes a's runs, the comparison reads c, an edge condition splits a's
    # runs, c also starts elsewhere: not probed.
    assert _probed(seq(a, pycel.absent(gap.where(gap.x == 3)), c, b).where(b.x > a.x), events) == [""]
    assert _probed(seq(a, c, b).where(b.x + c.x > a.x, post_filter=True), events) == [""]
    assert _probed(seq(a, c, b).where((b.x > a.x) & (c.x > a.x)), events) == [""]
    assert _probed((seq(a, c, b) | seq(gap, c, b)).where(b.x > a.x, post_filter=True), events) == [""]
    # Two middle occurrences: the one right after a.
    assert _probed(seq(a, c, gap, b).where(b.x > a.x), events) == ["c"]


def test_a_middle_event_without_valid_a_is_skipped_with_those_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most b's see a window of c's none of which has a valid a: without probes each c
    costs a walk into a's index; with them one look decides it and the c's before it."""
    beyond = {}  # nodes visited beyond three per match (b, c, a)
    for window in (200, 1600):
        events = _sparse_stream(4000, window)
        pattern = seq(a, c, b).where(b.x > a.x).within(events=window)
        if window == 200:  # (the reference is for small streams)
            assert _agree(pattern, events[:400]) > 0
        n, visits = _counted(pattern, events)
        beyond[window] = visits - 3 * n
        n_before, visits_before = _counted_without_probes(monkeypatch, pattern, events)
        assert n == n_before > 0
        with _probes_off(monkeypatch):
            before = pycel.compile(pattern).run(events).keys()
        assert pycel.compile(pattern).run(events).keys() == before
        assert visits * 3 < visits_before, (window, visits, visits_before)
    # Eight times the window: the walks into c's without a valid a grew as much (the
    # count without probes grew 8.4-fold), the work beyond the matches with probes about
    # as log² of the window: the search for the first c with a valid a, each step a
    # descent (1.7-fold measured: 107,996 and 180,741 nodes for 2,000 b's).
    assert beyond[1600] < 3 * beyond[200], beyond


def test_probed_patterns_match_the_reference() -> None:
    """Hand-written cases where a wrong skip would lose matches: c's whose a's are NaN or
    null between c's with valid a's (they fail, but the c's before them may not), an a
    far above the b right before a c with a valid earlier a, a's repeated, windows that
    drop the valid a's, a partition, and an absence between a and c (not probed: it
    removes a's runs, so a later c's snapshot may lack an earlier c's valid a)."""
    fs: list[float | None] = [1.0, math.nan, None, 9.0, 0.5, math.nan, 4.0, None, 2.0, 7.0]
    events: list[Tick] = []
    for k, f in enumerate(fs):
        s = "pq"[k % 2]
        x = None if f is None or math.isnan(f) else int(f)
        events.append(A(f=f, x=x, time=4 * k, s=s))
        events.append(C(f=0.0, x=3 if k % 3 == 0 else 0, time=4 * k + 1, s=s))
        events.append(B(f=[3.0, 0.5, 8.0][k % 3], x=[3, 1, 8][k % 3], time=4 * k + 2, s=s))
        events.append(C(f=1.0, x=0, time=4 * k + 3, s="pq"[k % 3 % 2]))
    patterns: list[Pattern] = [
        seq(a, c, b).where(b.f > a.f),
        seq(a, c, b).where(b.f <= a.f - 1),
        seq(a, c, b).where(b.f > 2 * a.f).within(events=9),
        seq(a, c, b).where(b.x >= a.x).within(13, on=Tick.time),
        seq(plus(a), c, b).where(b.f > a.f),
        seq(a, c, b).where(b.f > a.f).partition_by("s"),
        seq(a, c, gap, b).where(b.x > a.x),
        seq(a, pycel.absent(gap.where(gap.x == 3)), c, b).where(b.x > a.x),
    ]
    for pattern in patterns:
        assert _agree(pattern, events) > 0, pattern
    # The absence case, small: the c at 4 holds only the a at 3, which fails; the c at 1
    # (before the blocking c at 2) holds the a at 0, which passes.
    blocked = [A(x=0, time=0), C(x=0, time=1), C(x=3, time=2), A(x=100, time=3), C(x=0, time=4)]
    blocked.append(B(x=50, time=5))
    assert _agree(seq(a, pycel.absent(gap.where(gap.x == 3)), c, b).where(b.x > a.x), blocked) == 2


def test_a_repeated_middle_without_valid_a_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``seq(a, plus(c), b)``: a b below every a used to walk every chain of c's (2^n
    paths for n c's) to find no match; a c run that takes a's runs and fails the probe
    bounds every c run made before it, at every depth of the walk."""
    pattern = seq(a, plus(c), b).where(b.x > a.x)
    visits = {}
    for n in (8, 12):
        events: list[Tick] = [A(x=100, time=0), *(C(x=0, time=k + 1) for k in range(n)), B(x=0, time=n + 1)]
        assert _agree(pattern, events) == 0
        _, visits[n] = _counted(pattern, events)
        _, before = _counted_without_probes(monkeypatch, pattern, events)
        assert before >= 2**n > 5 * visits[n], (n, before, visits[n])
    assert visits[12] < 2 * visits[8], visits
    # With valid a's among invalid ones, and c's between them.
    xs = [100, 0, 100, 2, 100, 100, 1]
    events = []
    for k, x in enumerate(xs):
        events += [A(x=x, time=3 * k), C(x=0, time=3 * k + 1), B(x=[1, 3, 0][k % 3], time=3 * k + 2)]
    for p in (pattern, pattern.within(events=7), seq(a, plus(c), b).where(b.x >= a.x * 2)):
        assert _agree(p, events) > 0, p
    # The later side repeated: a b deeper in the path fails where the last one alone would
    # not, so what fails there bounds that path only.
    ends = [A(x=5, time=0), C(x=0, time=1), B(x=9, time=2), A(x=1, time=3), C(x=0, time=4), B(x=0, time=5)]
    ends += [A(x=7, time=6), C(x=0, time=7), B(x=3, time=8), B(x=8, time=9)]
    for p in (seq(a, c, plus(b)).where(b.x > a.x), seq(a, plus(c), plus(b)).where(b.x > a.x)):
        assert _agree(p, ends) > 0, p


def test_probes_cost_little_where_every_middle_event_has_a_valid_a(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every c has valid a's: a probe that passes spares probing the c's made after it (they
    have that a too), so the walk visits hardly more nodes than without probes: about one
    probe per level of c's index, where a probe per c would add a descent each."""
    events: list[Tick] = []
    for k in range(1200):
        kind = k % 6
        events.append(A(x=k % 7, time=k) if kind < 3 else C(x=0, time=k) if kind < 5 else B(x=9, time=k))
    pattern = seq(a, c, b).where(b.x > a.x).within(events=120)
    assert _agree(pattern, events[:60]) > 0
    n, visits = _counted(pattern, events)
    n_before, visits_before = _counted_without_probes(monkeypatch, pattern, events)
    assert n == n_before > 0
    # Measured: 257,723 nodes against 243,860 without probes; 334,270 with a probe per c.
    assert visits < 1.15 * visits_before, (visits, visits_before)
