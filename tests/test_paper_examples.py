"""The worked examples of the source papers (CEL, CORE, PCEA, RMA; cited in docs/semantics.md),
reproduced with the reference evaluator.

Positions: pycel numbers stream positions from 0. Every paper used here does the same (the
CEL paper's Figure 1 has an "index 0 1 2 ..." row, the CORE paper's Figure 3 stream is
labelled 0..6, the PCEA paper's S0 has its positions 0..7 under the tuples, the RMA paper's
Table 1 an "index 0..5" row), so the paper's numbers are used unchanged.

Where a paper and docs/semantics.md disagree, docs/semantics.md wins and the test says why.
"""

from __future__ import annotations

from typing import Any

import pytest

import pycel
from pycel import Event, Field
from pycel.reference import evaluate


def complex_events(matches: pycel.Matches) -> list[tuple[int, ...]]:
    """Each match's set of positions (the paper's complex event C), in output order."""
    return [m.positions() for m in matches]


def as_sets(matches: pycel.Matches) -> set[tuple[int, ...]]:
    return set(complex_events(matches))


# =========================================================================================
# CEL paper (cel-foundations-of-cep.txt), Section 2, Figure 1: temperature/humidity sensors
# =========================================================================================
class CelT(Event):
    """T(id, tmp): a temperature reading."""

    __event_name__ = "T"
    id: Field[int]
    tmp: Field[float]


class CelH(Event):
    """H(id, hum): a humidity reading."""

    __event_name__ = "H"
    id: Field[int]
    hum: Field[float]


#         type   H   T   H   H   T   T   T   H   H
#         id     2   0   0   1   1   0   1   1   0
#         value 25  45  20  25  40  42  25  70  18
#         index  0   1   2   3   4   5   6   7   8
FIGURE_1 = [
    CelH(id=2, hum=25),
    CelT(id=0, tmp=45),
    CelH(id=0, hum=20),
    CelH(id=1, hum=25),
    CelT(id=1, tmp=40),
    CelT(id=0, tmp=42),
    CelT(id=1, tmp=25),
    CelH(id=1, hum=70),
    CelH(id=0, hum=18),
]


def phi1() -> pycel.Pattern:
    """φ1 = (T AS x ; H AS y) FILTER (x.tmp > 40 ∧ y.hum <= 25 ∧ x.id = 0 ∧ y.id = 0)."""
    x, y = pycel.alias(CelT, "x"), pycel.alias(CelH, "y")
    return pycel.seq(x, y).where((x.tmp > 40) & (y.hum <= 25) & (x.id == 0) & (y.id == 0))


def phi2() -> pycel.Pattern:
    """φ2 = [(T AS x ; H AS y) OR (H AS y ; T AS x)] FILTER (same as φ1)."""
    x, y = pycel.alias(CelT, "x"), pycel.alias(CelH, "y")
    return ((x >> y) | (y >> x)).where((x.tmp > 40) & (y.hum <= 25) & (x.id == 0) & (y.id == 0))


def phi3() -> pycel.Pattern:
    """φ3 = [H AS x ; (T AS y FILTER y.id = 1)+ ; H AS z]
    FILTER (x.hum < 30 ∧ z.hum > 60 ∧ x.id = z.id = 1)."""
    x, y, z = pycel.alias(CelH, "x"), pycel.alias(CelT, "y"), pycel.alias(CelH, "z")
    return pycel.seq(x, pycel.plus(y.where(y.id == 1)), z).where(
        (x.hum < 30) & (z.hum > 60) & (x.id == 1) & (z.id == 1)
    )


def phi4() -> pycel.Pattern:
    """φ4 = [H AS x ; (T AS y FILTER y.id = x.id)+ ; H AS z]
    FILTER (x.hum < 30 ∧ z.hum > 60 ∧ x.id = z.id).

    The paper filters ``y.id = x.id`` *inside* the ``+``, where x is not bound; pycel
    rejects that (well-formedness, CEL paper §5). Because a filter holds "for all" events
    bound to its variables, the same condition written on the whole sequence means "every
    y has x's id", which is what the paper intends; the equalities are correlations.
    """
    x, y, z = pycel.alias(CelH, "x"), pycel.alias(CelT, "y"), pycel.alias(CelH, "z")
    return pycel.seq(x, pycel.plus(y), z).where(
        (x.hum < 30) & (z.hum > 60) & (x.id == z.id) & (y.id == x.id)
    )


def test_cel_phi1_fire_pairs() -> None:
    """§2: "the pairs satisfying these conditions are {1,2}, {1,8}, and {5,8}"."""
    matches = evaluate(phi1(), FIGURE_1)
    assert complex_events(matches) == [(1, 2), (1, 8), (5, 8)]
    assert [m.variables for m in matches] == [
        {"x": (1,), "y": (2,)},
        {"x": (1,), "y": (8,)},
        {"x": (5,), "y": (8,)},
    ]
    assert [(m.start, m.end) for m in matches] == [(1, 2), (1, 8), (5, 8)]


def test_cel_phi1_in_lp_normal_form_is_equivalent() -> None:
    """§5: φ1' (filters pushed onto the atoms, LP normal form) is equivalent to φ1."""
    x, y = pycel.alias(CelT, "x"), pycel.alias(CelH, "y")
    phi1_lp = pycel.seq(x.where((x.tmp > 40) & (x.id == 0)), y.where((y.hum <= 25) & (y.id == 0)))
    assert evaluate(phi1_lp, FIGURE_1).keys() == evaluate(phi1(), FIGURE_1).keys()


def test_cel_phi2_adds_humidity_first() -> None:
    """§2: φ2's result is φ1's "plus the complex event {2,5}"."""
    matches = evaluate(phi2(), FIGURE_1)
    assert as_sets(matches) == {(1, 2), (1, 8), (5, 8), (2, 5)}
    assert [m.variables for m in matches if m.positions() == (2, 5)] == [{"x": (5,), "y": (2,)}]


def test_cel_phi3_kleene_plus_skips_events() -> None:
    """§2: φ3 outputs {3,4,6,7}, {3,6,7} and {3,4,7}; y collects every repetition."""
    matches = evaluate(phi3(), FIGURE_1)
    assert as_sets(matches) == {(3, 4, 6, 7), (3, 6, 7), (3, 4, 7)}
    assert len(matches) == 3
    assert {m["y"] for m in matches} == {(4,), (6,), (4, 6)}
    assert all(m["x"] == (3,) and m["z"] == (7,) for m in matches)


def test_cel_phi4_correlated_kleene() -> None:
    """φ4 (binary filter y.id = x.id) has the same output as φ3 on Figure 1, and §4 says
    {3,4,6,7} is its only NXT output ("{3,4,7} and {3,6,7} do not")."""
    assert as_sets(evaluate(phi4(), FIGURE_1)) == {(3, 4, 6, 7), (3, 6, 7), (3, 4, 7)}
    assert complex_events(evaluate(phi4().strategy("next"), FIGURE_1)) == [(3, 4, 6, 7)]


# §4 selection strategies. docs/semantics.md: the printed definitions are inverted and compare
# per valuation; the paper's own examples (reproduced here) mean "keep the maximum among
# all complex events with the same end". NEXT prefers {1,8} over {5,8} ("{5,8} ≤next
# {1,8}"), LAST prefers {5,8} ("{1,8} ≤last {5,8}").
@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("all", [(1, 2), (1, 8), (5, 8)]),
        ("next", [(1, 2), (1, 8)]),
        ("last", [(1, 2), (5, 8)]),
        ("max", [(1, 2), (1, 8), (5, 8)]),  # {1,8} and {5,8} are both maximal
        ("strict", [(1, 2)]),  # "STRICT(φ1) would only produce {1,2}"
    ],
)
def test_cel_selection_strategies_on_phi1(strategy: Any, expected: list[tuple[int, ...]]) -> None:
    assert complex_events(evaluate(phi1().strategy(strategy), FIGURE_1)) == expected


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("all", {(3, 4, 7), (3, 6, 7), (3, 4, 6, 7)}),
        # "MAX(φ3) ... only {3,4,6,7}"; "both NXT(φ3) and LAST(φ3) ... {3,4,6,7} as the
        # only output"
        ("next", {(3, 4, 6, 7)}),
        ("last", {(3, 4, 6, 7)}),
        ("max", {(3, 4, 6, 7)}),
        # No output of φ3 is an interval of the stream (5 lies between 4 and 6 but is
        # never part of a match), so STRICT(φ3) is empty.
        ("strict", set()),
    ],
)
def test_cel_selection_strategies_on_phi3(strategy: Any, expected: set[tuple[int, ...]]) -> None:
    assert as_sets(evaluate(phi3().strategy(strategy), FIGURE_1)) == expected


# =========================================================================================
# CORE paper (core-engine.txt), Figure 3: query Q1 of Figure 1 on the example stream
# =========================================================================================
class CoreStock(Event):
    name: Field[str]
    price: Field[float]


class CoreSell(CoreStock):
    __event_name__ = "SELL"


class CoreBuy(CoreStock):
    __event_name__ = "BUY"


FIGURE_3 = [
    CoreSell(name="MSFT", price=101),  # 0
    CoreSell(name="MSFT", price=102),  # 1
    CoreSell(name="INTL", price=80),  # 2
    CoreBuy(name="INTL", price=80),  # 3
    CoreSell(name="AMZN", price=1900),  # 4
    CoreSell(name="INTL", price=81),  # 5
    CoreSell(name="AMZN", price=1920),  # 6
]


def core_q1() -> pycel.Pattern:
    """Q1: SELECT * FROM Stock WHERE SELL as msft; SELL as intel; SELL as amzn
    FILTER msft[name="MSFT"] AND msft[price > 100] AND intel[name=...]
    AND amzn[name="AMZN"] AND amzn[price < 2000].

    Figure 1 writes intel[name="INTC"], but the CEA of Figure 3 tests "INTL" and its stream
    only has INTL events; Example 4 lists runs through positions 2 and 5 (INTL), so the
    intended name is INTL.
    """
    msft, intel, amzn = (pycel.alias(CoreSell, v) for v in ("msft", "intel", "amzn"))
    return pycel.seq(msft, intel, amzn).where(
        (msft.name == "MSFT")
        & (msft.price > 100)
        & (intel.name == "INTL")
        & (amzn.name == "AMZN")
        & (amzn.price < 2000)
    )


def test_core_figure3_window_6() -> None:
    """Example 4 (tECS of Figure 4): enumerating ⟦4⟧^6(4) and ⟦6⟧^6(6) gives every output:
    at 4: (0,{0,2,4}), (1,{1,2,4}); at 6: (0,{0,2,6}), (0,{0,5,6}), (1,{1,2,6}), (1,{1,5,6})."""
    matches = evaluate(core_q1().within(events=6), FIGURE_3)
    by_end = {end: {m.positions() for m in matches if m.end == end} for end in (4, 6)}
    assert by_end == {
        4: {(0, 2, 4), (1, 2, 4)},
        6: {(0, 2, 6), (0, 5, 6), (1, 2, 6), (1, 5, 6)},
    }
    assert len(matches) == 6
    # The first run of Figure 3: C1 = ([0,4], {0,2,4}); run 2: C2 = ([0,6], {0,2,6}).
    first = matches[0]
    assert (first.start, first.end, first.variables) == (
        0,
        4,
        {"msft": (0,), "intel": (2,), "amzn": (4,)},
    )
    # The stream is 7 events long, so a window of 6 keeps everything.
    assert evaluate(core_q1(), FIGURE_3).keys() == matches.keys()


def test_core_figure3_window_5() -> None:
    """With ε = 5 the runs starting at 0 and ending at 6 fall out (6 − 0 > 5)."""
    matches = evaluate(core_q1().within(events=5), FIGURE_3)
    assert [(m.start, m.end, m.positions()) for m in matches] == [
        (0, 4, (0, 2, 4)),
        (1, 4, (1, 2, 4)),
        (1, 6, (1, 2, 6)),
        (1, 6, (1, 5, 6)),
    ]


def test_core_figure3_buy_is_not_a_sell() -> None:
    """Position 3 is a BUY of INTL at 80: it matches no SELL atom, but a Stock atom."""
    stock = pycel.alias(CoreStock, "s")
    assert [m.positions() for m in evaluate(stock.where(stock.name == "INTL"), FIGURE_3)] == [
        (2,),
        (3,),
        (5,),
    ]


# -- docs/semantics.md, checked against the CORE engine: count windows and PARTITION BY --------
class A(Event):
    k: Field[int]


class B(Event):
    k: Field[int]


class C(Event):
    k: Field[int]


def test_core_count_window_is_inclusive() -> None:
    """WITHIN 3 EVENTS on A A B C keeps [0,3] and [1,3]; WITHIN 2 EVENTS only [1,3]."""
    stream = [A(k=0), A(k=0), B(k=0), C(k=0)]
    p = pycel.seq(A, B, C)
    assert [(m.start, m.end) for m in evaluate(p.within(events=3), stream)] == [(0, 3), (1, 3)]
    assert [(m.start, m.end) for m in evaluate(p.within(events=2), stream)] == [(1, 3)]


def test_core_partition_positions_and_count_windows_are_global() -> None:
    """Under PARTITION BY, matches report global positions and the count window measures
    global distance: partition k=1 is {0, 2, 5}, partition k=2 is {1, 3, 4}."""
    stream = [A(k=1), A(k=2), B(k=1), B(k=2), C(k=2), C(k=1)]
    p = pycel.seq(A, B, C).partition_by(A.k)
    assert [(m.start, m.end, m.positions()) for m in evaluate(p, stream)] == [
        (1, 4, (1, 3, 4)),
        (0, 5, (0, 2, 5)),
    ]
    # [0,5] spans 5 global positions (3 events of its own partition): outside WITHIN 3.
    windowed = pycel.seq(A, B, C).within(events=3).partition_by(A.k)
    assert [(m.start, m.end) for m in evaluate(windowed, stream)] == [(1, 4)]


# =========================================================================================
# PCEA paper (pcea-hierarchical-cq.txt), Section 2: schema σ0 = {R/2, S/2, T/1}, stream S0
# =========================================================================================
class PceaT(Event):
    """T(a)."""

    __event_name__ = "T"
    a: Field[int]


class PceaS(Event):
    """S(a, b)."""

    __event_name__ = "S"
    a: Field[int]
    b: Field[int]


class PceaR(Event):
    """R(a, b)."""

    __event_name__ = "R"
    a: Field[int]
    b: Field[int]


# S0 := S(2,11) T(2) R(1,10) S(2,11) T(1) R(2,11) S(4,13) T(1)
#        0      1    2       3       4    5       6       7
S0 = [
    PceaS(a=2, b=11),
    PceaT(a=2),
    PceaR(a=1, b=10),
    PceaS(a=2, b=11),
    PceaT(a=1),
    PceaR(a=2, b=11),
    PceaS(a=4, b=13),
    PceaT(a=1),
]


def q0() -> pycel.Pattern:
    """Q0(x, y) ← T(x), S(x, y), R(x, y): a conjunction (no order) with equality joins.

    The variables are named after the atoms' relations; the paper numbers the atoms
    0 (T), 1 (S), 2 (R) and a t-homomorphism maps each atom to a position.
    """
    t, s, r = pycel.alias(PceaT, "T"), pycel.alias(PceaS, "S"), pycel.alias(PceaR, "R")
    return (t & s & r).where((t.a == s.a) & (s.a == r.a) & (s.b == r.b))


def test_pcea_q0_t_homomorphisms() -> None:
    """Section 4: over D5[S0] the t-homomorphisms are η0 = {0↦1, 1↦3, 2↦5} and
    η1 = {0↦1, 1↦0, 2↦5}. Both complete at position 5 (the R(2,11) tuple)."""
    matches = evaluate(q0(), S0)
    assert [m.variables for m in matches] == [
        {"T": (1,), "S": (0,), "R": (5,)},  # η1
        {"T": (1,), "S": (3,), "R": (5,)},  # η0
    ]
    assert {m.end for m in matches} == {5}


@pytest.mark.parametrize("n", [5, 6, 7])
def test_pcea_q0_cumulative_outputs(n: int) -> None:
    """The paper's ⟦Q⟧n(S) is cumulative: the t-homomorphisms into D_n[S] = t0..tn, so
    η0 and η1 are outputs at position 5 *and again* at 6 (S(4,13) adds nothing).
    docs/semantics.md adopts the new-at-n reading: pycel reports each match once, at its end (5). The
    cumulative output at n is the set of matches with end ≤ n."""
    matches = evaluate(q0(), S0)
    cumulative = {m.positions() for m in matches if m.end <= n}
    assert cumulative == {(1, 3, 5), (0, 1, 5)}
    assert [m for m in matches if m.end == 6] == []  # nothing *new* at 6


def test_pcea_example_2_1_chain_automaton() -> None:
    """Example 2.1: CCEA C0 reads T(a), S(a,b), R(a,b) *in this order* (each transition
    joins with the previous tuple); its run (q0,1),(q1,3),(q2,5) gives {1,3,5}."""
    t, s, r = pycel.alias(PceaT, "t"), pycel.alias(PceaS, "s"), pycel.alias(PceaR, "r")
    c0 = pycel.seq(t, s, r).where((t.a == s.a) & (s.a == r.a) & (s.b == r.b))
    assert complex_events(evaluate(c0, S0)) == [(1, 3, 5)]


def test_pcea_example_3_3_parallelized_runs() -> None:
    """Example 3.3: PCEA P0 reads a T and an S in any order, then an R that joins with both
    ((Tx, Rxy) and (Sxy, Rxy)); all positions get the single label •. At position 5 its run
    trees τ0 and τ1 give ν_τ0 = {• ↦ {1,3,5}} and ν_τ1 = {• ↦ {0,1,5}}; the latter is no
    output of the chain automaton C0."""
    t, s, r = pycel.alias(PceaT, "t"), pycel.alias(PceaS, "s"), pycel.alias(PceaR, "r")
    p0 = (
        pycel.seq(t & s, r)
        .where((t.a == r.a) & (s.a == r.a) & (s.b == r.b))
        .as_("bullet")
        .select("bullet")
    )
    matches = evaluate(p0, S0)
    assert [m.variables for m in matches] == [{"bullet": (0, 1, 5)}, {"bullet": (1, 3, 5)}]
    assert [(m.start, m.end) for m in matches] == [(0, 5), (1, 5)]


def _engine(pattern: pycel.Pattern, events: list[Any]) -> pycel.Matches:
    """The engine's matches, checked equal to the reference's."""
    got = pycel.compile(pattern).run(events)
    assert got.keys() == evaluate(pattern, events).keys()
    return got


# Q0's classes are nested (x over T, S, R; y over S, R): the engine runs it on the
# parallelized automaton (pycel/plan/hcq.py), with the delay guarantee.
def test_engine_pcea_q0_on_the_parallelized_automaton() -> None:
    query = pycel.compile(q0())
    assert query.hcq is not None
    matches = _engine(q0(), S0)
    assert sorted(m.positions() for m in matches) == [(0, 1, 5), (1, 3, 5)]  # η1, η0
    assert {m.end for m in matches} == {5}  # nothing new at 6
    stream = query.stream()
    assert [len(stream.push(S0[k : k + 1])) for k in range(len(S0))] == [0, 0, 0, 0, 0, 2, 0, 0]


def test_engine_pcea_example_3_3_p0() -> None:
    """P0: a T and an S in any order, then the R that joins both: τ0 and τ1 at 5."""
    t, s, r = pycel.alias(PceaT, "t"), pycel.alias(PceaS, "s"), pycel.alias(PceaR, "r")
    p0 = pycel.seq(t & s, r).where((t.a == r.a) & (s.a == r.a) & (s.b == r.b))
    assert pycel.compile(p0).hcq is not None
    assert sorted(m.positions() for m in _engine(p0, S0)) == [(0, 1, 5), (1, 3, 5)]  # τ1, τ0


def test_engine_pcea_example_2_1_with_y_as_post_filter() -> None:
    """C0 reads T, S, R in this order; a sequence with a nested class is not a
    conjunction, so the engine runs x as the key and y as an explicit post-filter."""
    t, s, r = pycel.alias(PceaT, "t"), pycel.alias(PceaS, "s"), pycel.alias(PceaR, "r")
    with pytest.raises(pycel.UnsupportedError, match="does not constrain"):
        pycel.compile(pycel.seq(t, s, r).where((t.a == s.a) & (s.a == r.a) & (s.b == r.b)))
    c0 = pycel.seq(t, s, r).where((t.a == s.a) & (s.a == r.a)).where(s.b == r.b, post_filter=True)
    assert complex_events(_engine(c0, S0)) == [(1, 3, 5)]


# =========================================================================================
# RMA paper (rma-symbolic-automata-with-memory.txt), Section 3, Table 1 and Expression (1)
# =========================================================================================
class RmaT(Event):
    __event_name__ = "T"
    id: Field[int]
    value: Field[float]


class RmaH(Event):
    __event_name__ = "H"
    id: Field[int]
    value: Field[float]


# type  T  T  T  H  H  T
# id    1  1  2  1  1  2
# value 22 24 32 70 68 33
# index 0  1  2  3  4  5
TABLE_1 = [
    RmaT(id=1, value=22),
    RmaT(id=1, value=24),
    RmaT(id=2, value=32),
    RmaH(id=1, value=70),
    RmaH(id=1, value=68),
    RmaT(id=2, value=33),
]


def test_rma_unfiltered_sequence_matches_all_pairs() -> None:
    """(T AS x);(H AS y): "{0,3}, {0,4}, {1,3}, {1,4}, {2,3}, {2,4} would all be matches"."""
    x, y = pycel.alias(RmaT, "x"), pycel.alias(RmaH, "y")
    assert as_sets(evaluate(pycel.seq(x, y), TABLE_1)) == {
        (0, 3), (0, 4), (1, 3), (1, 4), (2, 3), (2, 4)
    }


def test_rma_expression_1() -> None:
    """Expression (1): (T AS x);(H AS y) FILTER (x.id = y.id).

    The paper says the matches are those of the unfiltered expression "except for {2,3}".
    That is a paper error (docs/architecture.md): t2 has id 2 and t4 has id 1, so {2,4} fails
    the filter as well. The correct result is {0,3}, {0,4}, {1,3}, {1,4}.
    """
    x, y = pycel.alias(RmaT, "x"), pycel.alias(RmaH, "y")
    matches = evaluate(pycel.seq(x, y).where(x.id == y.id), TABLE_1)
    assert complex_events(matches) == [(0, 3), (1, 3), (0, 4), (1, 4)]
    assert (2, 4) not in as_sets(matches)


def test_rma_windowed_expression() -> None:
    """ϕ4 := ϕ1 WINDOW w (Section 6): the window keeps matches whose last and first
    indexes differ by no more than w."""
    x, y = pycel.alias(RmaT, "x"), pycel.alias(RmaH, "y")
    phi1 = pycel.seq(x, y).where(x.id == y.id)
    assert as_sets(evaluate(phi1.within(events=2), TABLE_1)) == {(1, 3)}
    assert as_sets(evaluate(phi1.within(events=3), TABLE_1)) == {(0, 3), (1, 3), (1, 4)}
