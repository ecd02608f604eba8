"""Residual comparisons pruned by the order of the runs (pycel.plan.conditions.RunOrder,
pycel.jit.residual.residual_key_sides).

``seq(a, c, b).where(b.x > a.y)``: a and b are not adjacent, so the automaton cannot test
the comparison on an edge and the enumerator checks it (residual). The runs waiting after
a are kept ordered by ``a.y`` in the ordered run index; where the comparison fails on one
of them, it fails on every run ordered above it too, and the enumerator skips that whole
subtree. Every result is checked against the reference evaluator (hand-written cases with
NaN, -0.0 and nulls, whose runs wait apart, and generated patterns); the work saved is
counted (nodes the enumerator visits), not timed.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import assert_limited, restored_at, without_limit

import pycel
from pycel import Event, Field, Pattern
from pycel.ceql import parse_query, to_declaration
from pycel.cli import main as cli_main
from pycel.plan.conditions import RunOrder, key_pruning


class Tick(Event):
    x: Field[int]
    f: Field[float]
    s: Field[str]
    time: Field[int]


class A(Tick): ...


class B(Tick): ...


class C(Tick): ...


TYPES = (A, B, C)
a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")
gap = pycel.alias(C, "gap")
seq, plus = pycel.seq, pycel.plus


def _agree(pattern: Pattern, events: list[Tick]) -> int:
    """Engine == reference on ``events``; the number of matches."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(pattern, events).keys()
        got = pycel.compile(pattern).run(events)
    assert len(got.keys()) == len(got)
    assert got.keys() == expected, (
        pattern,
        sorted(expected - got.keys())[:3],
        sorted(got.keys() - expected)[:3],
    )
    return len(expected)


def test_a_non_adjacent_comparison_orders_the_earlier_runs() -> None:
    query = pycel.compile(seq(a, c, b).where(b.x > a.x))
    assert repr(query.plan.nfa.orderings) == repr((RunOrder(0, a.x, "int"),))
    assert query.post_filters is not None
    (part,) = query.post_filters.conjuncts
    assert repr(key_pruning(part, query.plan.nfa)) == "(a.x, 'above')"  # b.x > a.x fails above too
    restored = pycel.Stream.restore(query.stream().snapshot())
    assert repr(restored.plan.nfa.orderings) == repr(query.plan.nfa.orderings)
    flipped = pycel.compile(seq(a, c, b).where(b.f <= a.f)).plan.nfa
    assert repr(key_pruning(flipped.orderings[0].register < b.f, flipped)) == "(a.f, 'above')"
    assert repr(key_pruning(b.f < a.f, flipped)) == "(a.f, 'below')"
    # A modulo on a's side, or a later side only: no order prunes (still residual).
    for pattern in (seq(a, c, b).where(b.x > a.x % 3), seq(a, c, b).where(a.x > a.f)):
        assert pycel.compile(pattern).plan.nfa.orderings == ()
    # LAST with a window enumerates the outputs that pass the residual check, then chooses.
    last = seq(a, c, b).where(b.x > a.x).within(events=5).strategy("last")
    assert pycel.compile(last).plan.nfa.orderings


def test_explain_says_which_comparisons_the_order_prunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "SELECT * WHERE A AS a ; C AS c ; B AS b FILTER b[x > a.x] AND b[f != a.f] WITHIN 8 EVENTS"
    decl, query = tmp_path / "ticks.ceql", tmp_path / "q.ceql"
    decl.write_text(to_declaration(TYPES))
    query.write_text(text)
    xs, kinds = [1, 5, 2, 7], [A, C, B, B]
    events: list[Tick] = [cls(x=xs[k], f=float(xs[k]), time=k) for k, cls in enumerate(kinds)]
    assert _agree(parse_query(text, TYPES), events) == 2
    assert cli_main(["explain", str(query), "-d", str(decl)]) == 0
    out = capsys.readouterr().out
    assert "post-filter b.x > a.x (residual: checked while enumerating; the runs waiting after a" in out
    assert "are ordered by a.x: where it fails on one, those above it are skipped)" in out
    assert "post-filter b.f != a.f (residual: checked while enumerating; as soon as its variables" in out


def test_an_edge_conditions_register_prunes_a_residual_comparison() -> None:
    """``b.x > a.x`` stands on the edge a → b and orders a's runs by a.x; ``c.x < a.x`` is
    residual and pruned by that order (no second ordering)."""
    pattern = seq(a, b, c).where((b.x > a.x) & (c.x < a.x))
    query = pycel.compile(pattern)
    assert query.plan.nfa.orderings == () and len(query.plan.nfa.conditions) == 1
    assert query.post_filters is not None
    assert repr(key_pruning(query.post_filters.conjuncts[0], query.plan.nfa)) == "(a.x, 'below')"
    xs = [3, 5, 7, 1, 2, 6, 8, 4, 1, 3, 9, 0]
    events: list[Tick] = [
        cls(x=x, time=k) for k, (x, cls) in enumerate(zip(xs, [A, A, B, C] * 3, strict=False))
    ]
    assert _agree(pattern, events) > 0


def test_constants_on_the_earlier_side_keep_the_order() -> None:
    """a's side may move a.x by finite constants: the runs stay ordered by a.x, and the side
    to skip turns with the sign (``1 - a.x`` falls as a.x grows). ``%``, ``* 0``, ``2 / a.x``
    and infinite constants are not monotone (or not strictly): checked node by node. Every
    form agrees with the reference."""
    inf = math.inf
    skipped: list[tuple[Any, str | None]] = [
        (b.x > a.x + 1, "above"),
        (b.x > 1 - a.x, "below"),
        (b.x > -a.x, "below"),
        (b.f <= a.x * -2, "above"),
        (b.f < (a.x + 1) * 0.5, "below"),
        (b.f >= a.x / 4 - 1, "above"),
        (a.f / -4 > b.x, "above"),
        (b.x > a.x % 5, None),
        (b.x > a.x * 0, None),
        (b.f > 2 / a.x, None),
        (b.f > a.f * inf, None),
        (b.f > a.f + math.nan, None),
    ]
    xs = [3, 5, -7, 1, 2, 6, -8, 4, 1, 3, 9, 0, -2, 5, 7]
    events: list[Tick] = [
        cls(x=x, f=x / 2, time=k) for k, (x, cls) in enumerate(zip(xs, [A, A, C, B, B] * 3, strict=False))
    ]
    for cmp, side in skipped:
        pattern = seq(a, c, b).where(cmp)
        query = pycel.compile(pattern)
        assert query.post_filters is not None
        pruned = key_pruning(query.post_filters.conjuncts[0], query.plan.nfa)
        assert (pruned[1] if pruned else None) == side, cmp
        _agree(pattern, events)


def _counted(pattern: Pattern, events: list[Tick]) -> tuple[int, int]:
    """(matches, nodes the enumerator visited)."""
    stream = pycel.compile(pattern).stream()
    got = stream.push(events)
    return len(got), int(stream.__dict__["pruning"].visits)


def test_key_pruning_skips_the_runs_beyond_a_failing_one() -> None:
    """Many a's wait, few are below the b that ends a match: the walk visits the a's below
    it and one path of the index, not every a. Counted against the same comparison with
    ``% 1,000,000`` on a's side (residual too, the same values, but not monotone: no order
    prunes it), matches equal; both equal the reference on a prefix."""
    events: list[Tick] = []
    for k in range(3000):
        if k % 50 == 25:
            events.append(C(x=0, time=k))
        elif k % 10 == 9:
            events.append(B(x=(k * 7) % 40, time=k))
        else:
            events.append(A(x=(k * 7919) % 1000, time=k))
    keyed = seq(a, c, b).where(b.x > a.x).within(events=400)
    plain = seq(a, c, b).where(b.x > a.x % 1_000_000).within(events=400)
    assert _agree(keyed, events[:160]) == _agree(plain, events[:160]) > 0
    (n, visits), (n_plain, visits_plain) = _counted(keyed, events), _counted(plain, events)
    print(n, visits, visits_plain)
    assert n == n_plain > 0
    assert pycel.compile(keyed).run(events).keys() == pycel.compile(plain).run(events).keys()
    assert visits * 5 < visits_plain


def test_nan_null_and_signed_zero_registers() -> None:
    """Runs whose register is NaN or null wait apart (by creation): they fail every order
    comparison but are never used to skip others; -0.0 orders with 0.0."""
    fs: list[float | None] = [1.0, math.nan, None, -0.0, 0.0, 2.5, math.nan, -1.0, None, 0.0]
    events: list[Tick] = []
    for k, f in enumerate(fs):
        events.append(A(time=3 * k) if f is None else A(f=f, time=3 * k))
        events.append(C(f=0.0, time=3 * k + 1))
        events.append(B(f=[0.0, -0.0, 1.0, math.nan, 3.0][k % 5], time=3 * k + 2))
    for op in ("<", "<=", ">", ">=", "!="):
        cmp = {"<": b.f < a.f, "<=": b.f <= a.f, ">": b.f > a.f, ">=": b.f >= a.f, "!=": b.f != a.f}[op]
        _agree(seq(a, c, b).where(cmp), events)
        _agree(seq(a, c, b).where(cmp).within(events=9), events)


def test_registers_at_the_ends_of_the_int64_range() -> None:
    """The enumerator's "no bound yet" is the largest (smallest) key: a run whose a.x is
    -2**63 or 2**63 - 1 was skipped as if beyond a bound (found by a probe)."""
    ends = [-(2**63), 2**63 - 1, 0]
    events: list[Tick] = []
    for k, x in enumerate(ends * 2):
        later = ends[k % 3 - 1]
        events += [A(x=x, f=0.0, time=3 * k), C(x=0, time=3 * k + 1), B(x=later, f=0.5, time=3 * k + 2)]
    for cmp in (b.x > a.x, b.x < a.x, b.x >= a.x, b.x <= a.x, b.f > a.x, b.f < a.x):
        assert _agree(seq(a, c, b).where(cmp), events) > 0, cmp


def test_repeated_and_mixed_kinds() -> None:
    """a repeated (each a of the plus checked), an int register against a float side, and
    arithmetic on the other side; with a partition and a time window."""
    xs = [4, 1, 7, 2, 9, 0, 5, 3, 8, 6, 2, 7]
    events: list[Tick] = [
        cls(x=x, f=x / 2 + 0.25, s="pq"[k % 2], time=k)
        for k, (x, cls) in enumerate(zip(xs, [A, A, C, B, A, C, B, B, A, C, B, B], strict=False))
    ]
    patterns: list[Pattern] = [
        seq(plus(a), c, b).where(b.f > a.x),
        seq(a, plus(c), b).where(b.f * 2 - 1 <= a.x),
        seq(a, c, b).where(b.x >= a.x).partition_by("s"),
        seq(a, c, b).where((b.x < a.x) & (c.x > a.x)).within(5, on=Tick.time),
    ]
    for pattern in patterns:
        query = pycel.compile(pattern)
        assert query.post_filters is not None
        assert all(key_pruning(part, query.plan.nfa) for part in query.post_filters.conjuncts), pattern
        assert _agree(pattern, events) > 0


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Pattern, list[Tick]]:
    shape = draw(st.integers(0, 6))
    middle: Pattern = c if shape not in (1, 5) else plus(c)
    body = (
        seq(plus(a), middle, b)
        if shape == 2
        else seq(a, pycel.absent(gap.where(gap.x == 3)), middle, b)
        if shape == 3
        else seq(a, middle, gap, b)
        if shape == 5
        else seq(a, middle, plus(b))
        if shape == 6
        else seq(a, middle, b)
    )
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        attr = draw(st.sampled_from(["x", "f"]))
        other = getattr(draw(st.sampled_from([b, b, c])), draw(st.sampled_from(["x", "f"])))
        if draw(st.booleans()):
            other = other + draw(st.integers(-1, 1)) if draw(st.booleans()) else other * 2
        earlier = getattr(a, attr)
        moved = draw(st.integers(0, 3))  # a's side moved by constants (monotone either way)
        if moved == 1:
            earlier = earlier + draw(st.integers(-1, 1)) if draw(st.booleans()) else 1 - earlier
        elif moved == 2:
            earlier = earlier * draw(st.sampled_from([2, -2, 0.5])) if draw(st.booleans()) else -earlier
        elif moved == 3:
            earlier = earlier / draw(st.sampled_from([2, -4]))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "!="]))
        pair = (other, earlier) if draw(st.booleans()) else (earlier, other)
        parts.append({"<": pair[0] < pair[1], "<=": pair[0] <= pair[1], ">": pair[0] > pair[1],
                      ">=": pair[0] >= pair[1], "!=": pair[0] != pair[1]}[op])  # fmt: skip
    pred = parts[0] if len(parts) == 1 else parts[0] & parts[1]
    pattern = body.where(pred, post_filter=draw(st.booleans()))
    window = draw(st.sampled_from([None, ("events", 8), ("time", 10)]))
    if window is not None:
        pattern = pattern.within(events=8) if window[0] == "events" else pattern.within(10, on=Tick.time)
    if draw(st.integers(0, 3)) == 0:
        pattern = pattern.partition_by("s")
    if draw(st.integers(0, 4)) == 0:
        pattern = pattern.select("a", "b")
    if draw(st.integers(0, 4)) == 0:
        pattern = pattern.limit(1)
    if draw(st.integers(0, 3)) == 0:  # (without a window: among all of an end's outputs)
        pattern = pattern.strategy(draw(st.sampled_from(["any", "last", "next", "max"])))  # type: ignore[arg-type]
    # Types as a shuffle of an interleaving (which already has matches when unshuffled:
    # hypothesis shrinks towards it).
    types = draw(st.permutations([A, A, C, B, A, B, B, C, A, B] * 2))
    xs = draw(st.permutations([2, 0, -3, 1, None, -1, 3, 0, 2, 1] * 2))
    events: list[Tick] = []
    for k in range(draw(st.integers(8, 20))):
        fields: dict[str, Any] = {"time": k, "s": draw(st.sampled_from(["p", "q"]))}
        x = xs[k]
        if x is not None:
            fields["x"] = x
            fields["f"] = draw(
                st.sampled_from([float(x), x + 0.5, -0.0, math.nan] if x == 0 else [float(x), x - 0.5])
            )
        events.append(types[k](**fields))
    return pattern, events


@settings(max_examples=500, deadline=None)
@given(_cases(), st.data())
def test_generated_key_pruned_patterns_match_the_reference(
    case: tuple[Pattern, list[Tick]], data: st.DataObject
) -> None:
    """Generated comparisons with an earlier a (int and float, NaN, -0.0, nulls,
    arithmetic on the other side) after a plus, across an absence, before a second middle
    occurrence or a repeated end, with windows, partitions, projections, LIMIT and
    strategies; and pushed in two parts with a snapshot between."""
    pattern, events = case
    unlimited, limit = without_limit(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = pycel.reference.evaluate(unlimited, events).keys()
        query = pycel.compile(pattern)
        got = query.run(events)
        assert len(got) == len(got.keys())  # no duplicates
        assert_limited(got.keys(), want, limit)
        if limit is None:
            assert restored_at(query, events, data.draw(st.integers(0, len(events)))) == want
