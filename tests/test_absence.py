"""Absence: ``seq(p, absent(C), q)`` — matches of ``seq(p, q)`` with no such C between.

Hand-written cases in the style peer systems test them (an order workflow, absence
correlated by a key, Kleene closure before an absence, absences in OR branches), the
refusals, CEQL text, and generated patterns and streams checked against the reference
evaluator, also across snapshot/restore at every cut.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    Base,
    Features,
    assert_limited,
    cases,
    event_types,
    kleene_count,
    restored_at,
    some_variables,
    streams,
    unary_predicates,
    without_limit,
)

import pycel
from pycel.ceql import parse_query, to_ceql, to_declaration
from pycel.cli import main as cli_main
from pycel.dsl import Pattern


class Ordered(pycel.Event):
    oid: pycel.Field[int]
    time: pycel.Field[int]


class Revoked(pycel.Event):
    oid: pycel.Field[int]
    reason: pycel.Field[str]
    time: pycel.Field[int]


class Shipped(pycel.Event):
    oid: pycel.Field[int]
    time: pycel.Field[int]


o, c, d = pycel.alias(Ordered, "o"), pycel.alias(Revoked, "c"), pycel.alias(Shipped, "d")


def workflow(t: int = 0) -> list[pycel.Event]:
    """Two orders; order 1 is cancelled before its delivery, order 2 is not (times from t)."""
    return [
        Ordered(oid=1, time=t),
        Ordered(oid=2, time=t + 1),
        Revoked(oid=1, reason="customer", time=t + 2),
        Shipped(oid=1, time=t + 3),
        Shipped(oid=2, time=t + 4),
    ]


def spans(matches: pycel.Matches) -> list[tuple[int, int]]:
    return [(m.start, m.end) for m in matches]


def same_as_reference(pattern: Pattern, events: Sequence[object]) -> pycel.Matches:
    """The engine's matches, asserted equal to the reference's (and free of duplicates).
    Under LIMIT n, each end keeps min(n, its matches) of the reference's, maybe others."""
    unlimited, limit = without_limit(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(unlimited, list(events))
        got = pycel.compile(pattern).run(list(events))
    assert len(got.keys()) == len(got), "duplicate match"
    assert_limited(got.keys(), expected.keys(), limit)
    return got


# -- hand-written cases ------------------------------------------------------------------------
def test_absence_between_two_events_per_partition() -> None:
    pattern = pycel.seq(o, pycel.absent(c), d).partition_by("oid")
    assert spans(same_as_reference(pattern, workflow())) == [(1, 4)]


def test_absence_correlated_by_a_join_key() -> None:
    pattern = pycel.seq(o, pycel.absent(c.where(c.oid == o.oid)), d).where(o.oid == d.oid)
    assert spans(same_as_reference(pattern, workflow())) == [(1, 4)]


def test_uncorrelated_absence_blocks_every_pair_around_it() -> None:
    # Without a key, the cancellation of order 1 lies between both orders and both deliveries.
    pattern = pycel.seq(o, pycel.absent(c), d)
    assert spans(same_as_reference(pattern, workflow())) == []
    later = [*workflow(), Ordered(oid=3, time=5), Shipped(oid=3, time=6)]
    assert spans(same_as_reference(pattern, later)) == [(5, 6)]


def test_the_absent_events_filter_decides_what_blocks() -> None:
    pattern = pycel.seq(o, pycel.absent(c.where(c.reason == "fraud")), d).partition_by("oid")
    assert spans(same_as_reference(pattern, workflow())) == [(0, 3), (1, 4)]


def test_an_event_at_either_end_is_not_between() -> None:
    # The blocking event type is also the type of the ends: ends never block themselves.
    a, x, b = pycel.alias(Ordered, "a"), pycel.alias(Ordered, "x"), pycel.alias(Ordered, "b")
    events = [Ordered(oid=k, time=k) for k in range(4)]
    pattern = pycel.seq(a.where(a.oid == 0), pycel.absent(x.where(x.oid == 1)), b.where(b.oid >= 1))
    assert spans(same_as_reference(pattern, events)) == [(0, 1)]


def test_kleene_closure_before_an_absence_needs_an_iteration_after_the_blocker() -> None:
    pattern = pycel.seq(pycel.plus(o), pycel.absent(c), d)
    events = [
        Ordered(oid=1, time=0),
        Revoked(oid=1, reason="r", time=1),
        Ordered(oid=2, time=2),
        Shipped(oid=2, time=3),
    ]
    got = same_as_reference(pattern, events)
    assert sorted(m.variables["o"] for m in got) == [(0, 2), (2,)]


def test_absence_in_one_branch_of_an_or() -> None:
    pattern = pycel.seq(o, pycel.absent(c), d) | pycel.seq(o, c)
    same_as_reference(pattern, workflow())


def test_two_absences_guard_one_gap() -> None:
    x = pycel.alias(Ordered, "x")
    pattern = pycel.seq(o, pycel.absent(c), pycel.absent(x), d)
    events = [
        Ordered(oid=1, time=0),
        Shipped(oid=1, time=1),
        Ordered(oid=2, time=2),
        Ordered(oid=3, time=3),
        Shipped(oid=3, time=4),
    ]
    assert spans(same_as_reference(pattern, events)) == [(0, 1), (3, 4)]


def repeated_workflow(times: int) -> list[pycel.Event]:
    """``workflow()`` again and again, with growing times."""
    return [e for k in range(times) for e in workflow(5 * k)]


def test_absence_with_window_limit_select_and_consume() -> None:
    events = repeated_workflow(3)
    base = pycel.seq(o, pycel.absent(c.where(c.reason == "x")), d)
    for pattern in (
        base.within(events=3),
        base.within(2, on=Ordered.time).partition_by("oid"),
        base.limit(1),
        base.select("d"),
        base.consume("any"),
        base.consume("partition").partition_by("oid"),
    ):
        same_as_reference(pattern, events)


@pytest.mark.parametrize("strategy", ["last", "next", "max"])
def test_strategies_choose_among_the_matches_no_absent_event_blocked(strategy: str) -> None:
    """LAST, NEXT and MAX (with a window or without) compare the matches of seq(o, d)
    with no cancellation between them: the blocked order 1 is never chosen."""
    events = [
        Ordered(oid=1, time=0),
        Revoked(oid=1, reason="x", time=1),  # blocks order 1
        Ordered(oid=2, time=2),
        Ordered(oid=3, time=3),
        Shipped(oid=0, time=4),
    ]
    base = pycel.seq(o, pycel.absent(c.where(c.reason == "x")), d).strategy(strategy)  # type: ignore[arg-type]
    want = {"last": [(3, 4)], "next": [(2, 4)], "max": [(2, 4), (3, 4)]}[strategy]
    assert sorted(spans(same_as_reference(base.within(events=8), events))) == want
    # end - start <= 1: order 3 is the only one left to choose
    assert spans(same_as_reference(base.within(events=1), events)) == [(3, 4)]
    assert sorted(spans(same_as_reference(base, events))) == want


def test_absence_after_and_before_an_and() -> None:
    """An AND of single events runs as an OR of its interleavings: the absence guards the
    gap after whichever of them ends last (or before whichever starts first)."""
    s = pycel.alias(Shipped, "s")
    events = [Ordered(oid=1, time=0), Shipped(oid=1, time=1), Revoked(oid=1, reason="x", time=2)]
    events += [Ordered(oid=2, time=3), Shipped(oid=2, time=4), Ordered(oid=3, time=5), Shipped(oid=3, time=6)]
    after = pycel.seq(o & s, pycel.absent(c), d)
    found = sorted(m.positions() for m in same_as_reference(after, events))
    # (0, 1, 4) and (0, 1, 6) are blocked by the cancellation at 2
    assert found == [(0, 4, 6), (1, 3, 4), (1, 3, 6), (1, 5, 6), (3, 4, 6), (4, 5, 6)]
    before = pycel.seq(d, pycel.absent(c), o & s)
    assert [m.positions() for m in same_as_reference(before, events)] == [(4, 5, 6)]
    # per order id: order 4's shipment at 10 follows its cancellation at 9
    events += [Ordered(oid=4, time=7), Shipped(oid=4, time=8), Revoked(oid=4, reason="x", time=9)]
    events += [Shipped(oid=4, time=10), Shipped(oid=3, time=11)]
    keyed = pycel.seq(o & s, pycel.absent(c.where(c.oid == o.oid)), d)
    keyed = keyed.where((o.oid == s.oid) & (s.oid == d.oid))
    assert [m.positions() for m in same_as_reference(keyed, events)] == [(5, 6, 11)]


def test_strict_matches_have_no_gap_for_an_absent_event() -> None:
    """Under STRICT a match is an interval: nothing lies between its parts, so every
    absence holds and the matches are those of the pattern without it."""
    events = [Ordered(oid=1, time=0), Revoked(oid=1, reason="x", time=1), Shipped(oid=1, time=2)]
    events += [Ordered(oid=2, time=3), Shipped(oid=2, time=4)]
    pattern = pycel.seq(o, pycel.absent(c), d).strategy("strict")
    assert spans(same_as_reference(pattern, events)) == [(3, 4)]
    assert spans(same_as_reference(pattern.partition_by("oid"), events)) == [(3, 4)]


def test_strict_keeps_the_null_key_rule_of_a_correlated_absence() -> None:
    """Under STRICT the absence always holds, but an order whose key is null is in no
    partition of the correlation and matches nothing: dropping the absence dropped that
    rule too (found by a probe). A NaN in the data is a null too (docs/data.md)."""

    class Tick(pycel.Event):
        k: pycel.Field[float]
        time: pycel.Field[int]

    class Tock(pycel.Event):
        k: pycel.Field[float]
        time: pycel.Field[int]

    a, w, b = pycel.alias(Tick, "a"), pycel.alias(Tick, "w"), pycel.alias(Tock, "b")
    pattern = pycel.seq(a, pycel.absent(w.where(w.k == a.k)), b).strategy("strict")
    keys = [None, 1.0, math.nan, None, 2.0, None]
    events = [(Tick if t % 2 == 0 else Tock)(k=k, time=t) for t, k in enumerate(keys)]
    got = same_as_reference(pattern, events)
    assert spans(got) == [(4, 5)]  # the Tick at 4 (2.0); not those at 0 (None) and 2 (NaN)


@pytest.mark.parametrize("strategy", ["all", "last", "next", "max"])
def test_a_run_blocked_for_good_extends_nothing(strategy: str) -> None:
    """Order 1's run is blocked with no edge left: it is gone, and the order after the
    cancellation starts a run of its own (no match of one event, none across it)."""
    o2 = pycel.alias(Ordered, "o2")
    events = [Ordered(oid=1, time=0), Revoked(oid=1, reason="x", time=1), Ordered(oid=2, time=2)]
    pattern = pycel.seq(o, pycel.absent(c), o2).strategy(strategy)  # type: ignore[arg-type]
    assert spans(same_as_reference(pattern, events)) == []
    events.append(Ordered(oid=3, time=3))
    assert spans(same_as_reference(pattern, events)) == [(2, 3)]


# -- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "error", "words"),
    [
        (lambda: pycel.seq(pycel.absent(c), d), pycel.PatternError, "needs a window"),  # test_absence_window
        (lambda: pycel.seq(pycel.absent(c), d) | o, pycel.UnsupportedError, "start"),
        (lambda: pycel.seq(o, pycel.absent(c)), pycel.PatternError, "needs a window"),  # test_absence_window
        (lambda: pycel.seq(o, pycel.absent(c)) | d, pycel.UnsupportedError, "end"),
        (lambda: pycel.absent(c) | o, pycel.PatternError, "inside seq()"),
        (lambda: pycel.seq(o, pycel.absent(c), d, contiguous=True), pycel.PatternError, "contiguous"),
        (  # runs: contiguity elsewhere in the pattern
            lambda: pycel.seq(o, pycel.absent(c), pycel.seq(d, pycel.alias(Shipped, "d2"), contiguous=True)),
            None,
            "",
        ),
        (lambda: pycel.seq(o, pycel.absent(c), d) & pycel.alias(Ordered, "x"), pycel.UnsupportedError, "AND"),
        # a joined pattern whose absence is not correlated with the key
        (
            lambda: pycel.seq(o, pycel.absent(c), d).where(o.oid == d.oid),
            pycel.UnsupportedError,
            r"does not constrain the absent Revoked .* absence there must be of the match's key too, e\.g\. "
            r"absent\(c\.where\(c\.oid == d\.oid\)\)",
        ),
        (lambda: pycel.seq(o, pycel.absent(c.where(c.oid > o.oid)), d), pycel.UnsupportedError, "equalities"),
        (
            lambda: pycel.seq(o, pycel.absent(c.where(c.oid == 1)), pycel.plus(pycel.alias(Ordered, "o2"))),
            None,
            "",
        ),
    ],
)
def test_what_the_engine_refuses_it_says(pattern: object, error: type[Exception] | None, words: str) -> None:
    built = pattern()  # type: ignore[operator]
    if error is None:
        pycel.compile(built)
        return
    with pytest.raises(error, match=words):
        pycel.compile(built)


def test_an_absent_variable_must_not_shadow_a_pattern_variable() -> None:
    cancel = pycel.alias(Revoked, "o")
    with pytest.raises(pycel.PatternError, match="alias"):
        pycel.compile(pycel.seq(o, pycel.absent(cancel.where(cancel.reason == "x")), d))


def test_absent_takes_one_event_type() -> None:
    with pytest.raises(pycel.PatternError, match="one event type"):
        pycel.absent(pycel.seq(o, d))


# -- CEQL --------------------------------------------------------------------------------------
TYPES = [Ordered, Revoked, Shipped]


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * WHERE Ordered AS o ; ABSENT(Revoked AS c FILTER c[reason = 'x' AND oid = o.oid]) ; "
        "Shipped AS d FILTER d[oid = o.oid]",
        "SELECT * WHERE Ordered ; ABSENT(Revoked) ; Shipped PARTITION BY [oid]",
        "SELECT * WHERE (Ordered ; ABSENT(Revoked FILTER Revoked[reason = 'y'])) ; Shipped+",
    ],
)
def test_ceql_absence_parses_prints_and_runs_like_the_dsl(text: str) -> None:
    pattern = parse_query(text, TYPES)
    assert parse_query(to_ceql(pattern), TYPES) == pattern
    same_as_reference(pattern, repeated_workflow(2))


def test_ceql_keeps_the_nesting_of_sequences_around_a_filtered_absence() -> None:
    """A filtered ABSENT is read over its whole sequence, but the sequences keep their
    nesting (they were rebuilt left-nested, also in another OR branch: the text printed
    back to a different pattern; found by a probe)."""
    o2, d2 = pycel.alias(Ordered, "o2"), pycel.alias(Shipped, "d2")
    for pattern in (
        pycel.seq(o, pycel.seq(d, pycel.absent(c.where(c.oid > 1)), d2)),
        pycel.seq(o, pycel.seq(d, pycel.absent(c.where(c.oid == o.oid)), d2)),
        pycel.seq(o, pycel.seq(o2, d)) | pycel.seq(o, pycel.absent(c.where(c.oid == o.oid)), d),
    ):
        assert parse_query(to_ceql(pattern), TYPES) == pattern, to_ceql(pattern)


def test_ceql_absence_errors_have_line_and_column() -> None:
    with pytest.raises(pycel.CeqlSyntaxError, match="line 1, column"):
        parse_query("SELECT * WHERE Ordered ; ABSENT(Revoked ; Shipped", TYPES)
    with pytest.raises(pycel.PatternError, match="column"):
        parse_query("SELECT * WHERE Ordered ; ABSENT(Revoked FILTER q[oid = 1]) ; Shipped", TYPES)


# -- generated ---------------------------------------------------------------------------------
GEN_TYPES = event_types(3)
ABSENCE = Features(absence=True, negation=True, consume=True, select=True, limit=True)


@settings(max_examples=250)
@given(cases(GEN_TYPES, ABSENCE, max_len=30, max_len_with_plus=12))
def test_generated_absences_equal_the_reference(case: tuple[Pattern, list[object]]) -> None:
    pattern, stream = case
    same_as_reference(pattern, stream)


@settings(max_examples=80)
@given(cases(GEN_TYPES, ABSENCE, max_len=30, max_len_with_plus=12), st.data())
def test_generated_absences_survive_snapshot_and_restore(
    case: tuple[Pattern, list[object]], data: st.DataObject
) -> None:
    pattern, stream = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        query = pycel.compile(pattern)
    whole = query.run(stream).keys()
    assert restored_at(query, stream, data.draw(st.integers(0, len(stream)))) == whole


@settings(max_examples=150)
@given(cases(GEN_TYPES, Features(absence=True, select=True), max_len=30, max_len_with_plus=12), st.data())
def test_generated_absences_with_strategies_equal_the_reference(
    case: tuple[Pattern, list[object]], data: st.DataObject
) -> None:
    """LAST, NEXT and MAX choose among the outputs no absent event blocked (and that fit
    the window, if any); STRICT keeps the intervals."""
    pattern, stream = case
    strategy = data.draw(st.sampled_from(["last", "next", "max", "strict"]), label="strategy")
    pattern = pattern.strategy(strategy)
    got = same_as_reference(pattern, stream)
    cut = data.draw(st.integers(0, len(stream)), label="cut")
    assert restored_at(pycel.compile(pattern), stream, cut) == got.keys()


@settings(max_examples=100)
@given(cases(GEN_TYPES, Features(absence=True, conjunction=True, kleene=False), max_len=20))
def test_generated_absences_with_and_equal_the_reference(case: tuple[Pattern, list[object]]) -> None:
    """Absences next to ANDs (of sequences of single events, which the engine expands into
    their interleavings) run; one inside an AND's operand is refused with the reason."""
    pattern, stream = case
    try:
        same_as_reference(pattern, stream)
    except pycel.UnsupportedError as err:
        assert ("Absent" in str(err) and "AND" in str(err)) or "engine's limit" in str(err), err


@st.composite
def contiguous_gaps(draw: st.DrawFn) -> tuple[Pattern, list[Base]]:
    """A sequence with a contiguous part (``:`` or ``:+``) on one side of an absence, under
    any strategy, maybe partitioned and windowed, and a stream of 3 types."""
    x, y, z = (pycel.alias(draw(st.sampled_from(GEN_TYPES)), v) for v in "xyz")
    w = pycel.alias(draw(st.sampled_from(GEN_TYPES)), "w")
    gap = pycel.absent(w.where(w.x == draw(st.integers(0, 3)))) if draw(st.booleans()) else pycel.absent(w)
    shape = draw(st.integers(0, 3))
    if shape == 0:
        pattern = pycel.seq(pycel.seq(x, y, contiguous=True), gap, z)
    elif shape == 1:
        pattern = pycel.seq(x, gap, pycel.seq(y, z, contiguous=True))
    elif shape == 2:
        pattern = pycel.seq(pycel.plus(x, contiguous=True), gap, y)
    else:
        pattern = pycel.seq(x, gap, pycel.plus(y, contiguous=True))
    if draw(st.booleans()):
        pattern = pattern.partition_by("s")
    window = draw(st.sampled_from([None, 3, 6]))
    if window is not None:
        pattern = pattern.within(events=window)
    strategy = draw(st.sampled_from(["all", "any", "last", "next", "max", "strict"]))
    pattern = pattern.strategy(strategy)  # type: ignore[arg-type]
    return pattern, draw(streams(GEN_TYPES, 14))


@settings(max_examples=150)
@given(contiguous_gaps(), st.data())
def test_generated_absences_next_to_contiguous_parts(
    case: tuple[Pattern, list[Base]], data: st.DataObject
) -> None:
    """Contiguity elsewhere in the pattern: an absent event of a key also ends the
    adjacency of that key's runs, which then wait (blocked) among the older ones."""
    pattern, stream = case
    got = same_as_reference(pattern, stream)
    assert restored_at(pycel.compile(pattern), stream, data.draw(st.integers(0, len(stream)))) == got.keys()


@st.composite
def gap_part(draw: st.DrawFn, var: str) -> Pattern:
    """One side of a gap: an event (maybe filtered), an OR of two, or its iteration."""
    atom = pycel.alias(draw(st.sampled_from(GEN_TYPES)), var)
    filtered = draw(st.integers(0, 2)) == 0
    part: Pattern = atom.where(draw(unary_predicates(var, Base, depth=0))) if filtered else atom
    kind = draw(st.sampled_from(["event", "event", "or", "plus"]))
    if kind == "or":
        other = pycel.alias(draw(st.sampled_from(GEN_TYPES)), var + "2")
        part = part | other
    elif kind == "plus":
        part = pycel.plus(part)
    return part


@st.composite
def gap_cases(draw: st.DrawFn) -> tuple[Pattern, list[Base]]:
    """``seq(p, absent(Z…), q)`` with small generated sides and random clauses: every case
    has an absence where it decides many matches."""
    left, right = draw(gap_part("p")), draw(gap_part("q"))
    if draw(st.booleans()):  # a longer sequence: the gap sits between two others
        left = pycel.seq(draw(gap_part("r")), left)
    blocker = pycel.alias(draw(st.sampled_from(GEN_TYPES)), "z")
    if draw(st.booleans()):
        blocker = blocker.where(draw(unary_predicates("z", Base, depth=0)))
    pattern = pycel.seq(left, pycel.absent(blocker), right)
    window = draw(st.sampled_from(["none", "events", "time"]))
    if window == "events":
        pattern = pattern.within(events=draw(st.integers(2, 10)))
    elif window == "time":
        pattern = pattern.within(draw(st.integers(2, 10)), on=Base.time)
    if draw(st.integers(0, 2)) == 0:
        pattern = pattern.partition_by(Base.x)
    clause = draw(st.sampled_from(["none", "select", "limit", "any", "partition"]))
    if clause == "select":
        pattern = some_variables(draw, pattern)
    elif clause == "limit":
        pattern = pattern.limit(draw(st.integers(1, 2)))
    elif clause != "none":
        pattern = pattern.consume(clause)  # type: ignore[arg-type]
    return pattern, draw(streams(GEN_TYPES, 12 if kleene_count(pattern) else 30, min_len=6))


@settings(max_examples=300)
@given(gap_cases())
def test_generated_gaps_equal_the_reference(case: tuple[Pattern, list[Base]]) -> None:
    same_as_reference(*case)


@settings(max_examples=120)
@given(streams(GEN_TYPES, 30), st.data())
def test_generated_absences_correlated_by_a_join_key(stream: list[Base], data: st.DataObject) -> None:
    a, z, b = (pycel.alias(data.draw(st.sampled_from(GEN_TYPES)), v) for v in ("a", "z", "b"))
    blocker = z.where(z.x == a.x)
    if data.draw(st.booleans()):
        blocker = z.where((z.x == a.x) & (z.s == data.draw(st.sampled_from(["a", "b"]))))
    kleene = data.draw(st.booleans())
    pattern: Pattern = pycel.seq(pycel.plus(a) if kleene else a, pycel.absent(blocker), b).where(a.x == b.x)
    if data.draw(st.booleans()):
        pattern = pattern.within(events=data.draw(st.integers(1, 8)))
    same_as_reference(pattern, list(stream[:14] if kleene else stream))


def test_explain_shows_the_guarded_edge_and_the_absent_atom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decl = tmp_path / "orders.ceql"
    decl.write_text(to_declaration(TYPES))
    query = tmp_path / "q.ceql"
    query.write_text("SELECT * WHERE Ordered AS o ; ABSENT(Revoked AS c FILTER c[reason = 'x']) ; Shipped")
    assert cli_main(["explain", str(query), "-d", str(decl)]) == 0
    out = capsys.readouterr().out
    assert "2 unless 0" in out  # Ordered -> Shipped, unless absence 0 came in between
    assert "absence 0 (blocks, binds nothing)" in out
    assert "engine: supported" in out


def test_a_long_stream_equals_its_windows_evaluated_alone() -> None:
    """Blocking merges runs into non-empty heaps; over a long stream the node arenas wrap
    around many times. With a count window, the matches ending at e depend only on events
    e-w..e: each window evaluated alone (fresh arenas; checked against the reference) must
    give the long run's matches ending there."""
    rng = random.Random(5)
    kinds = [Ordered, Revoked, Shipped]
    events = [rng.choice(kinds)(oid=rng.randrange(2), time=t) for t in range(3000)]
    pattern = pycel.seq(pycel.plus(o), pycel.absent(c), d).within(events=8)
    query = pycel.compile(pattern)
    whole: dict[int, set[object]] = {}
    for key in query.run(events).keys():
        whole.setdefault(key[1], set()).add(key)
    for end in range(len(events)):
        lo = max(0, end - 8)
        alone = query.run(events[lo : end + 1]).keys()
        if end % 500 == 0:
            assert alone == pycel.reference.evaluate(pattern, events[lo : end + 1]).keys()
        shifted = {
            (s + lo, e + lo, tuple((v, tuple(p + lo for p in ps)) for v, ps in val)) for s, e, val in alone
        }
        assert {k for k in shifted if k[1] == end} == whole.get(end, set()), end


def test_more_absences_than_a_token_holds_are_refused() -> None:
    many = [pycel.absent(pycel.alias(Revoked, f"c{k}")) for k in range(58)]
    with pytest.raises(pycel.UnsupportedError, match="at most 57 absences"):
        pycel.compile(pycel.seq(o, *many, d))
