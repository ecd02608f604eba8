"""Contiguity (``:``, ``:+``) and the STRICT, LAST, NEXT and MAX strategies in the engine,
against the reference evaluator: hand-written cases, the CEL paper's Figure 1, and
generated patterns and streams."""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Features, cases, event_types
from test_engine import A, B, C, D, Ev, a, agree, b, c, d, stream  # noqa: F401
from test_paper_examples import FIGURE_1, phi1, phi3

import pycel
from pycel.dsl import Pattern
from pycel.jit.maximal import UNION
from pycel.jit.order import order_size

warnings.simplefilter("ignore", UserWarning)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

seq, plus = pycel.seq, pycel.plus

CONTIGUOUS: list[Pattern] = [
    seq(a, b, contiguous=True),
    seq(a, b, c, contiguous=True).within(events=5),
    seq(a, plus(b, contiguous=True), c),
    seq(a, plus(b, contiguous=True), c, contiguous=True).within(events=6),
    plus(plus(a), contiguous=True).within(events=5),  # the skipping edge wins
    plus(seq(a, b, contiguous=True)).within(events=6),
    seq(a | b, plus(c | d, contiguous=True), contiguous=True).within(events=8),
    seq(a, seq(b, c, contiguous=True)).partition_by(Ev.x),
    seq(a, plus(b, contiguous=True)).partition_by(Ev.x, Ev.s).within(events=9),
    seq(a, b, contiguous=True).within(1, on=Ev.time),
    seq(a, plus(b, contiguous=True), c).select("a", "c"),
    seq(a, b, contiguous=True).consume("any"),
    seq(a, b, contiguous=True).partition_by(Ev.x).consume("partition"),
    seq(a, pycel.not_(B.where(B.x == 1)), c, contiguous=True),
    seq(a.where(a.x > 0), (seq(b, c, contiguous=True)).as_("bc")).within(events=6),
]


def _with_strategy(patterns: list[Pattern], name: Any) -> list[Pattern]:
    return [p.strategy(name) for p in patterns]


BODIES: list[Pattern] = [
    seq(a, b),
    seq(a, b, c).within(events=5),
    seq(a, plus(b), c),
    seq(a, plus(b), c).within(events=6),
    seq(a, plus(seq(b, plus(c))), d).within(events=7),
    seq(a | b, plus(c | d)).within(events=6),
    (seq(a, b) | seq(b, a) | b).within(events=3),
    seq(a, b, c).partition_by(Ev.x).within(events=9),
    seq(a, plus(b)).partition_by(Ev.s).within(2, on=Ev.time),
    seq(a, plus(b), c).within(events=6).select("c"),
    seq(a, b).consume("any"),
    seq(a, plus(b)).partition_by(Ev.x).consume("partition"),
    seq(a, plus(b, contiguous=True), c).partition_by(Ev.x),
    seq(a.where(a.x > 0), plus(b), c),
    plus(a).within(events=3),
]

CASES = (
    CONTIGUOUS
    + _with_strategy(BODIES, "strict")
    + _with_strategy(BODIES + CONTIGUOUS, "last")
    + _with_strategy(BODIES + CONTIGUOUS, "next")
    + _with_strategy(BODIES + CONTIGUOUS, "max")
)


@pytest.mark.parametrize("pattern", CASES, ids=[repr(p)[:70] for p in CASES])
def test_engine_equals_reference(pattern: Pattern) -> None:
    for seed in range(2):
        agree(pattern, stream(24, seed))


@pytest.mark.parametrize("strategy", ["all", "strict", "last", "next", "max"])
@pytest.mark.parametrize("select", [(), ("a", "d"), ("d",)])
def test_limit_keeps_n_distinct_matches_per_end(strategy: Any, select: tuple[str, ...]) -> None:
    """LIMIT n keeps min(n, available) matches per end; under a projection, n distinct
    ones (valuations that project to a match already listed do not count)."""
    pattern = seq(a, plus(b | c), d).within(events=8).strategy(strategy)
    if select:
        pattern = pattern.select(*select)
    found = 0
    for seed in range(3):
        events = stream(24, seed)  # the oracle is exponential in the b's and c's
        full = pycel.reference.evaluate(pattern, events)
        found += len(full)
        for n in (1, 2):
            got = pycel.compile(pattern.limit(n)).run(events)
            assert got.keys() <= full.keys()
            assert len(got.keys()) == len(got)
            ends = [m.end for m in full]
            expected = sorted(e for e in set(ends) for _ in range(min(n, ends.count(e))))
            assert sorted(m.end for m in got) == expected
    assert found > 0


# -- the CEL paper's Figure 1 (tests/test_paper_examples.py) -------------------------------
@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("all", [(1, 2), (1, 8), (5, 8)]),
        ("last", [(1, 2), (5, 8)]),
        ("next", [(1, 2), (1, 8)]),
        ("strict", [(1, 2)]),
        ("max", [(1, 2), (1, 8), (5, 8)]),
    ],
)
def test_figure1_phi1(strategy: Any, expected: list[tuple[int, ...]]) -> None:
    got = pycel.compile(phi1().strategy(strategy)).run(FIGURE_1)
    assert sorted(m.positions() for m in got) == expected


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("last", {(3, 4, 6, 7)}), ("next", {(3, 4, 6, 7)}), ("max", {(3, 4, 6, 7)}), ("strict", set())],
)
def test_figure1_phi3(strategy: Any, expected: set[tuple[int, ...]]) -> None:
    got = pycel.compile(phi3().strategy(strategy)).run(FIGURE_1)
    assert {m.positions() for m in got} == expected
    assert len(got) == len(expected)


def test_last_chooses_among_the_runs_that_fit_the_window() -> None:
    """Without a window LAST prefers {0, 3} at 3 and {0, 3, 4} at 4; a window of 2 events
    leaves {3} and {3, 4}, {4}, and LAST chooses {3} and {3, 4} (the CORE paper's order,
    strategy first, output nothing)."""
    pattern = seq(a, plus(b)) | plus(b)
    events = [A(x=0), D(x=0), D(x=0), B(x=0), B(x=0)]
    assert agree(pattern.within(events=2), events) == 3  # {3}, {3, 4}, {4}
    assert agree(pattern.within(events=2).strategy("last"), events) == 2
    got = pycel.compile(pattern.within(events=2).strategy("last")).run(events)
    assert [m.positions() for m in got] == [(3,), (3, 4)]
    assert agree(pattern.within(events=4).strategy("last"), events) == 2


def test_last_keeps_every_valuation_of_the_chosen_events() -> None:
    b1, b2 = pycel.alias(B, "b1"), pycel.alias(B, "b2")
    pattern = seq(b1 | b2, b).strategy("last")
    events = [B(x=0), B(x=0), B(x=0)]
    got = pycel.compile(pattern).run(events)
    # {0, 1} and, at end 2, {1, 2} (not {0, 2}), each as b1 and as b2.
    assert sorted(m.positions() for m in got) == [(0, 1), (0, 1), (1, 2), (1, 2)]
    assert agree(pattern, events) == 4


def test_partition_contiguity_is_per_partition() -> None:
    """Under PARTITION BY, ``:`` means the next event of the same partition."""
    pattern = seq(a, b, contiguous=True)
    events = [A(x=0), A(x=1), B(x=0), B(x=1), C(x=0), B(x=0)]
    assert [m.positions() for m in pycel.compile(pattern.partition_by(Ev.x)).run(events)] == [(0, 2), (1, 3)]
    assert [m.positions() for m in pycel.compile(pattern).run(events)] == [(1, 2)]
    assert agree(pattern.partition_by(Ev.x), events) == 2


def test_next_returns_the_earliest_run_that_fits_the_window() -> None:
    """NEXT prefers the earliest start: at 4, {0, 4} over {3, 4}; a window of 1 event
    leaves {3, 4} only, and NEXT returns it; a window of 4 keeps {0, 4}."""
    pattern = seq(a, b)
    events = [A(x=0), D(x=0), D(x=0), A(x=0), B(x=0)]
    assert agree(pattern.within(events=1).strategy("next"), events) == 1
    assert [m.positions() for m in pycel.compile(pattern.within(events=1).strategy("next")).run(events)] == [
        (3, 4)
    ]
    assert [m.positions() for m in pycel.compile(pattern.within(events=4).strategy("next")).run(events)] == [
        (0, 4)
    ]
    assert agree(pattern.within(events=4).strategy("next"), events) == 1


def test_max_returns_the_maximal_runs_that_fit_the_window() -> None:
    """Under MAX, seq(plus(a), b) keeps the run with every a before the b; a window of 1
    event drops it, and MAX returns the maximal run among those that fit, {1, 2}."""
    pattern = seq(plus(a), b).strategy("max")
    events = [A(x=0), A(x=0), B(x=0)]
    assert [m.positions() for m in pycel.compile(pattern).run(events)] == [(0, 1, 2)]
    assert [m.positions() for m in pycel.compile(pattern.within(events=1)).run(events)] == [(1, 2)]
    assert agree(pattern.within(events=1), events) == 1


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_family_follows_the_window(strategy: Any) -> None:
    """LAST/NEXT/MAX with a window run in the windowed family, without one in theirs."""
    without = pycel.compile(seq(a, b).strategy(strategy))
    assert without.family == ("maximal" if strategy == "max" else "ranked")
    assert pycel.compile(seq(a, b).strategy(strategy).within(events=3)).family == "windowed"
    assert pycel.compile(seq(a, b).strategy(strategy).within(2, on=Ev.time)).family == "windowed"


def test_next_order_list_follows_the_best_sets() -> None:
    """The order list holds the current best sets only (a few per key), not every run."""
    query = pycel.compile(seq(a, plus(b), c).partition_by(Ev.x).strategy("next"))
    st = query.stream()
    for seed in range(20):
        st.push(stream(200, seed))
    assert order_size(st.runner.order) <= 3 * 4  # three states, four keys
    assert 0 < order_size(st.runner.order)


def test_max_keeps_every_maximal_match_through_union_nodes() -> None:
    """At 3 the runs {0} and {2} (both skipping B3) reach the same pair of the MAX
    automaton and are united by a union node; at 4 both extend through it."""
    pattern = seq(a, b, c).strategy("max")
    events = [A(x=0), B(x=0), A(x=0), B(x=0), B(x=0), C(x=0)]
    stream_ = pycel.compile(pattern).stream()
    got = stream_.push(events)
    assert sorted(m.positions() for m in got) == [(0, 1, 5), (0, 3, 5), (0, 4, 5), (2, 3, 5), (2, 4, 5)]
    assert (stream_.runner.store.E[1, : stream_.runner.store.ctr[0]] == UNION).sum() == 1
    assert agree(pattern, events) == 5


def test_max_drops_contained_matches() -> None:
    """MAX keeps {0, 1, 2, 3} at 3 and drops everything it contains, also across
    valuations of other variables; a window of 2 events then drops it too."""
    pattern = seq(a, plus(b | c), d)
    events = [A(x=0), B(x=0), C(x=0), D(x=0)]
    got = pycel.compile(pattern.strategy("max")).run(events)
    assert [m.positions() for m in got] == [(0, 1, 2, 3)]
    assert agree(pattern.strategy("max"), events) == 1
    assert agree(pattern.within(events=2).strategy("max"), events) == 0
    assert agree(pattern.within(events=2), events) == 0


def test_max_pair_arena_follows_the_keys() -> None:
    """Every key keeps one block of live pairs; old blocks are compacted away."""
    query = pycel.compile(seq(a, plus(b), c).partition_by(Ev.x).strategy("max"))
    st_ = query.stream()
    for seed in range(40):
        st_.push(stream(200, seed))
    assert st_.stats()["pair_capacity"] <= 1024
    assert len(st_.runner.max_dfa.pairs) < 20


def test_snapshot_restore_contiguous_last_next_and_max() -> None:
    for pattern in (
        seq(a, plus(b, contiguous=True), c).within(events=9).partition_by(Ev.s),
        seq(a, plus(b), c).within(events=5).strategy("last"),
        seq(a | b, plus(b), c).within(events=7).strategy("next"),
        seq(a | b, plus(b | c), c).within(events=7).strategy("max").consume("any"),
    ):
        events = stream(26, 4)
        query = pycel.compile(pattern)
        whole = query.run(events).keys()
        for cut in range(0, len(events) + 1, 3):
            first = query.stream()
            got = first.push(events[:cut]).keys()
            got |= pycel.Stream.restore(first.snapshot()).push(events[cut:]).keys()
            assert got == whole, cut


# -- generated patterns and streams -----------------------------------------------------------
_LEAVES = [a, b, c, d, a.where(a.x > 0), b.where(b.s == "u")]


def _patterns() -> st.SearchStrategy[Pattern]:
    leaf = st.sampled_from(_LEAVES)

    def grow(inner: st.SearchStrategy[Pattern]) -> st.SearchStrategy[Pattern]:
        return st.one_of(
            st.tuples(inner, inner, st.booleans()).map(lambda t: seq(t[0], t[1], contiguous=t[2])),
            st.tuples(inner, inner).map(lambda t: t[0] | t[1]),
            st.tuples(inner, st.booleans()).map(lambda t: plus(t[0], contiguous=t[1])),
        )

    return st.recursive(leaf, grow, max_leaves=4)


@st.composite
def _queries(draw: st.DrawFn, strategy: str) -> Pattern:
    p = draw(_patterns())
    window = draw(st.sampled_from(["none", "events", "time"]))
    if window == "events":
        p = p.within(events=draw(st.integers(1, 6)))
    elif window == "time":
        p = p.within(draw(st.integers(0, 2)), on=Ev.time)
    if draw(st.booleans()):
        p = p.partition_by(Ev.x)
    p = p.strategy(strategy)  # type: ignore[arg-type]
    return p.consume(draw(st.sampled_from(["none", "any", "partition"])))  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["all", "strict", "last", "next", "max"])
@settings(max_examples=int(os.environ.get("PYCEL_EXAMPLES", "40")))
@given(data=st.data())
def test_generated(strategy: str, data: st.DataObject) -> None:
    pattern = data.draw(_queries(strategy))
    n = data.draw(st.integers(0, 14))
    seed = data.draw(st.integers(0, 10_000))
    agree(pattern, stream(n, seed))


@settings(max_examples=int(os.environ.get("PYCEL_EXAMPLES", "40")) * 3)
@given(data=st.data())
def test_generated_max_dense(data: st.DataObject) -> None:
    """MAX on streams of the patterns' own types (two keys), where matches contain each
    other often: the pair automaton's merges and drops are exercised."""
    pattern = data.draw(_queries("max"))
    if data.draw(st.booleans()):
        variables = sorted(pycel.compile(pattern).variables)
        pattern = pattern.select(*data.draw(st.lists(st.sampled_from(variables), min_size=1, unique=True)))
    kinds = data.draw(st.lists(st.sampled_from([A, B, C, D]), max_size=12))
    keys = data.draw(st.lists(st.integers(0, 1), min_size=len(kinds), max_size=len(kinds)))
    pairs = enumerate(zip(kinds, keys, strict=True))
    events = [kind(x=x, s="u", time=t // 3) for t, (kind, x) in pairs]
    agree(pattern, events)
    limit = data.draw(st.integers(1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = pycel.reference.evaluate(pattern, events)
        got = pycel.compile(pattern.limit(limit)).run(events)
    # Which n matches LIMIT keeps is not specified (the reference keeps the smallest).
    assert got.keys() <= full.keys()
    for end in {m.end for m in full}:
        n_got = sum(m.end == end for m in got)
        n_full = sum(m.end == end for m in full)
        assert n_got == min(limit, n_full)  # distinct matches, also under a projection


# -- the shared generators (tests/strategies.py): everything the engine supports now ------------
_TYPES = event_types(3)
_FEATURES = Features(
    contiguous=True,
    negation=True,
    strategies=True,
    strategy_names=("all", "strict", "last", "next", "max"),
    consume=True,
    select=True,
)


@settings(max_examples=int(os.environ.get("PYCEL_EXAMPLES", "40")))
@given(case=cases(_TYPES, _FEATURES, max_len=30, nulls=True))
def test_generated_shared(case: tuple[Pattern, list[Any]]) -> None:
    pattern, events = case
    agree(pattern, events)
