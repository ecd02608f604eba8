"""An absence that ends or starts the pattern, with the window as its horizon:
``seq(p, absent(C)).within(w)`` — the matches of ``p`` with no such C later inside their
window (FlinkCEP's ``notFollowedBy`` at the end, with ``within``; "an order not shipped
within 5 time units") — and ``seq(absent(C), p).within(w)``, none earlier inside it.

Hand-written cases (an order workflow, per key and per partition, count and time windows,
output that waits for the window, strategies), the refusals, CEQL text, and generated
patterns and streams checked against the reference evaluator, also pushed in pieces
through snapshot/restore and closed.
"""

from __future__ import annotations

import functools
import operator
import random
import unittest.mock
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Base, event_types, kleene_count, some_variables, streams, unary_predicates
from test_absence import Ordered, Shipped, same_as_reference, spans

import pycel
from pycel.ceql import parse_query, to_ceql, to_declaration
from pycel.cli import main as cli_main
from pycel.dsl import Pattern

o, d = pycel.alias(Ordered, "o"), pycel.alias(Shipped, "d")
#: Orders 1-4 at times 0, 1, 5, 20; order 1 ships at 2, order 2 at 9 (8 after its order).
ORDERS = [
    Ordered(oid=1, time=0),
    Ordered(oid=2, time=1),
    Shipped(oid=1, time=2),
    Ordered(oid=3, time=5),
    Shipped(oid=2, time=9),
    Ordered(oid=4, time=20),
]
UNSHIPPED = pycel.seq(o, pycel.absent(d.where(d.oid == o.oid))).within(5, on=Ordered.time)


def pushed_in_pieces(
    query: pycel.CompiledQuery,
    events: Sequence[object],
    cuts: Sequence[int],
    restore: bool = True,
    closing: list[pycel.Match] | None = None,
) -> list[Any]:
    """The match keys of ``events`` pushed in pieces (cut at ``cuts``), through a snapshot
    and restore after each piece (unless not ``restore``), then closed: every key once, in
    emission order. ``closing`` receives the matches the close emits."""
    stream = query.stream()
    got: list[Any] = []
    bounds = [0, *sorted(cuts), len(events)]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        got.extend(m.key() for m in stream.push(list(events[lo:hi])))
        if restore:
            stream = pycel.Stream.restore(stream.snapshot())
    last = list(stream.close())
    got.extend(m.key() for m in last)
    if closing is not None:
        closing.extend(last)
    return got


# -- hand-written cases ------------------------------------------------------------------------


def test_orders_not_shipped_within_the_window() -> None:
    # Order 1 ships 2 after it; order 2 ships 8 after (outside the 5); 3 and 4 never ship.
    assert spans(same_as_reference(UNSHIPPED, ORDERS)) == [(1, 1), (3, 3), (5, 5)]


def test_a_count_window_is_the_horizon_too() -> None:
    # Within 2 events: the shipment at position 2 is inside orders 0's and 1's windows,
    # the one at 4 inside order 3's.
    unshipped = pycel.seq(o, pycel.absent(Shipped)).within(events=2)
    assert spans(same_as_reference(unshipped, ORDERS)) == [(5, 5)]
    per_order = pycel.seq(o, pycel.absent(Shipped)).within(events=2).partition_by("oid")
    assert spans(same_as_reference(per_order, ORDERS)) == [(1, 1), (3, 3), (5, 5)]


def test_a_match_waits_until_its_window_has_passed() -> None:
    stream = pycel.compile(UNSHIPPED).stream()
    assert spans(stream.push(ORDERS[:4])) == []  # order 2 (time 1) waits until time > 6
    assert spans(stream.push(ORDERS[4:5])) == [(1, 1)]  # time 9: order 2's window passed
    assert spans(stream.push([])) == []
    assert spans(stream.close()) == [(3, 3)]  # order 3's window (to time 10) never passed
    with pytest.raises(pycel.DataError, match="closed"):
        stream.push(ORDERS[:1])


def test_a_match_leaves_with_the_last_event_of_its_window() -> None:
    stream = pycel.compile(pycel.seq(o, pycel.absent(Shipped)).within(events=2)).stream()
    emitted = [spans(stream.push([Ordered(oid=k, time=k)])) for k in range(4)]
    # Position k's window ends at k + 2: seen there, the order leaves at that push.
    assert emitted == [[], [], [(0, 0)], [(1, 1)]]
    assert spans(stream.close()) == [(2, 2), (3, 3)]


def test_a_blocking_event_drops_only_the_matches_whose_window_it_is_in() -> None:
    # Two orders of one id: the shipment at time 6 is inside the second order's window only.
    events = [Ordered(oid=1, time=0), Ordered(oid=1, time=3), Shipped(oid=1, time=6)]
    assert spans(same_as_reference(UNSHIPPED, events)) == [(0, 0)]


def test_absence_between_parts_and_at_the_end() -> None:
    # Shipped without a second order in between, then no further order within 4 events.
    pattern = pycel.seq(o, pycel.absent(Ordered), d, pycel.absent(Ordered)).within(events=4)
    got = same_as_reference(pattern, ORDERS + [Shipped(oid=4, time=21), Shipped(oid=4, time=22)])
    assert spans(got) == [(5, 6), (5, 7)]


@pytest.mark.parametrize("strategy", ["last", "next", "max", "strict"])
def test_strategies_choose_among_the_matches_whose_window_passed(strategy: str) -> None:
    later = pycel.alias(Ordered, "later")
    pattern = pycel.seq(o, pycel.plus(later), pycel.absent(Shipped)).within(events=3).strategy(strategy)  # type: ignore[arg-type]
    events = [Ordered(oid=k, time=k) for k in range(5)] + [Shipped(oid=0, time=9)]
    got = same_as_reference(pattern, events)
    assert set(pushed_in_pieces(pycel.compile(pattern), events, [2, 4])) == got.keys()


def test_orders_shipped_without_a_recent_order_of_the_same_id() -> None:
    # A shipment with no order of its id in the 5 time units before it: shipment 2 (order 1
    # at 0, shipped at 2) is preceded; shipment 4 (order 2 at 1, shipped at 9) is not.
    orphan = pycel.seq(pycel.absent(o.where(o.oid == d.oid)), d).within(5, on=Shipped.time)
    assert spans(same_as_reference(orphan, ORDERS)) == [(4, 4)]
    # By count: no order at all in the 3 events before it.
    assert spans(same_as_reference(pycel.seq(pycel.absent(Ordered), d).within(events=3), ORDERS)) == []
    both = pycel.seq(pycel.absent(Ordered), d, pycel.absent(Ordered)).within(events=1)
    assert spans(same_as_reference(both, ORDERS)) == []
    # Per order id, each shipment's own order is more than one event before it.
    assert spans(same_as_reference(both.partition_by("oid"), ORDERS)) == [(2, 2), (4, 4)]


def test_a_stream_remembers_the_absent_events_a_later_window_reaches() -> None:
    # Pushed one at a time: the order at 0 is still inside the window of the shipment at 2
    # (also when the stream forgets at every push).
    pattern = pycel.seq(pycel.absent(Ordered), d).within(events=2)
    events = [Ordered(oid=1, time=0), Shipped(oid=1, time=0), Shipped(oid=1, time=0), Shipped(oid=1, time=0)]
    with unittest.mock.patch("pycel.runtime.horizon.FORGET_SLACK", 0):
        assert pushed_in_pieces(pycel.compile(pattern), events, [1, 2, 3]) == [(3, 3, (("d", (3,)),))]
    assert spans(same_as_reference(pattern, events)) == [(3, 3)]


def test_a_restored_stream_finds_each_keys_remembered_events() -> None:
    # The remembered orders of ids 1-3, interleaved, go through a snapshot (written in
    # stream order) and are found by key again: the shipments of ids 3, 2 and 1 right after
    # them do not match; those of id 4 (its order 11 events back), 9 (never ordered) and
    # 2 again (8 events after its order) do.
    pattern = pycel.seq(pycel.absent(o.where(o.oid == d.oid)), d).within(events=6)
    events = [Ordered(oid=k, time=0) for k in (4, 1, 2, 3, 1, 2, 3, 1)]
    events += [Shipped(oid=k, time=0) for k in (3, 2, 1, 4, 9, 2)]
    got = pushed_in_pieces(pycel.compile(pattern), events, [8])
    assert got == [(p, p, (("d", (p,)),)) for p in (11, 12, 13)]
    assert set(got) == same_as_reference(pattern, events).keys()


def test_what_a_stream_holds_for_its_window_absences_follows_the_window() -> None:
    # 200,000 events of 1,000 order ids in pushes of 1,000 to 9,000: the waiting matches
    # stay within what one window of 500 events holds, the remembered orders within twice
    # that and 256 (they are forgotten once they doubled); the matches are one run's.
    rng = random.Random(7)
    pattern = pycel.seq(pycel.absent(Ordered), o, pycel.absent(Shipped)).within(events=500)
    query = pycel.compile(pattern.partition_by("oid"))
    kinds = [rng.choice(["Ordered", "Shipped"]) for _ in range(200_000)]
    events = pd.DataFrame({"event_type": kinds, "oid": [rng.randrange(1000) for _ in kinds], "time": 0})
    stream = query.stream()
    sizes, got, at = [], [], 0
    while at < len(events):
        step = rng.randrange(1000, 9000)
        got += [m.key() for m in stream.push(events.iloc[at : at + step])]
        at += step
        stats = stream.stats()
        sizes.append((stats["waiting_matches"], stats["recent_absent_events"]))
    assert all(0 < waiting <= 501 and 0 < recent <= 2 * 500 + 256 for waiting, recent in sizes)
    rest = stream.close()
    assert len(rest) == sizes[-1][0]  # the waiting ones leave at close
    got += [m.key() for m in rest]
    assert sorted(got) == sorted(m.key() for m in query.run(events))


def test_select_and_limit_act_on_the_matches_that_passed() -> None:
    pattern = pycel.seq(o, pycel.plus(Ordered), pycel.absent(Shipped)).within(events=3)
    events = [Ordered(oid=k, time=k) for k in range(6)]
    same_as_reference(pattern.select("o"), events)
    same_as_reference(pattern.limit(1), events)


def test_snapshot_keeps_the_waiting_matches() -> None:
    query = pycel.compile(UNSHIPPED)
    stream = query.stream()
    stream.push(ORDERS[:4])
    again = pycel.Stream.restore(stream.snapshot())
    assert spans(again.push(ORDERS[4:])) == [(1, 1), (3, 3)]
    assert spans(again.close()) == [(5, 5)]


def test_a_corrupted_waiting_match_is_refused() -> None:
    stream = pycel.compile(UNSHIPPED).stream()
    stream.push(ORDERS[:2])
    assert stream.horizon is not None
    stream.horizon.chunks[0].positions[0] = 99  # outside its match (the held arrays)
    with pytest.raises(pycel.DataError, match="pending positions"):
        pycel.Stream.restore(stream.snapshot())


@pytest.mark.parametrize(
    ("pattern", "error", "words"),
    [
        (pycel.seq(o, pycel.absent(Shipped)), pycel.PatternError, "needs a window as its horizon"),
        (pycel.seq(pycel.absent(Shipped), o) | d, pycel.UnsupportedError, "at the start of a sequence"),
        (pycel.seq(pycel.absent(Shipped), o), pycel.PatternError, "starts the pattern"),
        (
            pycel.seq(pycel.absent(Shipped), o, contiguous=True).within(events=3),
            pycel.PatternError,
            "contiguous",
        ),
        (pycel.seq(o, pycel.absent(Shipped)) | d, pycel.UnsupportedError, "at the end of a sequence"),
        (
            pycel.seq(o, pycel.absent(Shipped), contiguous=True).within(events=3),
            pycel.PatternError,
            "contiguous",
        ),
        (
            pycel.seq(o, pycel.absent(Shipped)).within(events=3).consume("any"),
            pycel.UnsupportedError,
            "CONSUME",
        ),
    ],
)
def test_what_is_refused_says_why(pattern: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        pycel.compile(pattern)


def test_ceql_prints_parses_and_runs_an_absence_at_the_end() -> None:
    text = to_ceql(UNSHIPPED)
    assert "ABSENT(" in text
    again = parse_query(text, [Ordered, Shipped])
    assert pycel.compile(again).run(ORDERS).keys() == pycel.compile(UNSHIPPED).run(ORDERS).keys()


def test_explain_marks_the_absences_at_the_start_and_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decl = tmp_path / "orders.ceql"
    decl.write_text(to_declaration([Ordered, Shipped]))
    query = tmp_path / "q.ceql"
    query.write_text(
        "SELECT * WHERE ABSENT(Shipped AS e FILTER e[oid = o.oid]) ; Ordered AS o ;"
        " ABSENT(Shipped AS d FILTER d[oid = o.oid]) WITHIN 5 [time]"
    )
    assert cli_main(["explain", str(query), "-d", str(decl)]) == 0
    out = capsys.readouterr().out
    assert "absence that starts the pattern" in out
    assert "absence that ends the pattern" in out
    assert "engine: supported" in out


def test_an_event_without_the_key_an_absence_is_correlated_on_matches_nothing() -> None:
    """An order without an id is in no partition of the correlation (docs/data.md, rule 1;
    as under partition_by): it is not reported unshipped, in the engine and the reference
    (which read the absence's filter as never true, so no shipment could block it)."""
    late = pycel.seq(o, pycel.absent(d.where(d.oid == o.oid))).within(5, on=Ordered.time)
    early = pycel.seq(pycel.absent(d.where(d.oid == o.oid)), o).within(5, on=Ordered.time)
    events = [Ordered(oid=None, time=0), Ordered(oid=1, time=1), Shipped(oid=None, time=2)]
    for pattern in (late, early):
        assert spans(pycel.compile(pattern).run(events)) == [(1, 1)]
        assert spans(pycel.reference.evaluate(pattern, events)) == [(1, 1)]


# -- generated cases ------------------------------------------------------------------------------

GEN_TYPES = event_types(3)


@st.composite
def window_cases(draw: st.DrawFn) -> tuple[Pattern, list[Base]]:
    """``seq([absent(Y),] p[, absent(M), q][, absent(Z)])`` (an absence at the start, the
    end or both) within a count or time window, with small generated parts (an event,
    maybe filtered, an OR, an iteration), maybe partitioned or correlated by a key, and a
    strategy, SELECT or LIMIT."""
    parts: list[Pattern] = []
    for var in ("p", "q")[: draw(st.integers(1, 2))]:
        atom = pycel.alias(draw(st.sampled_from(GEN_TYPES)), var)
        filtered = draw(st.booleans())
        part: Pattern = atom.where(draw(unary_predicates(var, Base, depth=0))) if filtered else atom
        kind = draw(st.sampled_from(["event", "event", "or", "plus"]))
        if kind == "or":
            part = part | pycel.alias(draw(st.sampled_from(GEN_TYPES)), var + "2")
        elif kind == "plus":
            part = pycel.plus(part)
        parts.append(part)
    keyed = draw(st.integers(0, 2))  # 0: none, 1: PARTITION BY, 2: y, z correlated with p by x
    if keyed == 2:  # a key every event shares: p alone, or p and q joined by x
        p = pycel.alias(draw(st.sampled_from(GEN_TYPES)), "p")
        q = pycel.alias(draw(st.sampled_from(GEN_TYPES)), "q")
        parts = [p] if draw(st.booleans()) else [p, q]

    def blocker(var: str) -> Pattern:
        z = pycel.alias(draw(st.sampled_from(GEN_TYPES)), var)
        conditions = [draw(unary_predicates(var, Base, depth=0))] if draw(st.booleans()) else []
        if keyed == 2:
            conditions.append(z.x == pycel.alias(Base, "p").x)
        return pycel.absent(z.where(functools.reduce(operator.and_, conditions)) if conditions else z)

    where = draw(st.sampled_from(["start", "end", "end", "both"]))
    first = parts[0]
    chain: list[Pattern] = [blocker("y")] if where != "end" else []
    chain.append(first)
    if len(parts) > 1:
        middle = pycel.alias(draw(st.sampled_from(GEN_TYPES)), "m")
        if keyed != 2 and draw(st.booleans()):  # (under a join an absence needs the key too)
            chain.append(pycel.absent(middle))
        chain.append(parts[1])
    if where != "start":
        chain.append(blocker("z"))
    pattern: Pattern = pycel.seq(*chain)
    if keyed == 2 and len(parts) > 1:
        pattern = pattern.where(pycel.alias(Base, "p").x == pycel.alias(Base, "q").x)
    if draw(st.booleans()):
        pattern = pattern.within(events=draw(st.integers(1, 8)))
    else:
        pattern = pattern.within(draw(st.integers(0, 8)), on=Base.time)
    if keyed == 1:
        pattern = pattern.partition_by(Base.x)
    clauses = ["none", "none", "select", "limit", "last", "next", "max"] + ([] if keyed == 2 else ["strict"])
    clause = draw(st.sampled_from(clauses))
    if clause == "select":
        pattern = some_variables(draw, pattern)
    elif clause == "limit":
        pattern = pattern.limit(draw(st.integers(1, 2)))
    elif clause != "none":
        pattern = pattern.strategy(clause)  # type: ignore[arg-type]
    # (nulls: an event without a key is in no partition, also when only an absence is
    # correlated with it)
    nulls = draw(st.booleans())
    return pattern, draw(streams(GEN_TYPES, 12 if kleene_count(pattern) else 30, min_len=4, nulls=nulls))


@settings(max_examples=300)
@given(window_cases(), st.data())
def test_generated_absences_at_the_start_and_end_equal_the_reference(
    case: tuple[Pattern, list[Base]], data: st.DataObject
) -> None:
    pattern, stream = case
    got = same_as_reference(pattern, stream)
    # (a lookback that forgets at every push, as a long stream's does now and then; a
    # horizon that compacts at every push that decided something)
    forgets = unittest.mock.patch("pycel.runtime.horizon.FORGET_SLACK", data.draw(st.sampled_from([0, 256])))
    compact_slack = data.draw(st.sampled_from([0, 1024]))
    compacts = unittest.mock.patch("pycel.runtime.horizon.COMPACT_SLACK", compact_slack)
    if data.draw(st.booleans(), label="one event per push"):
        cuts: list[int] = list(range(1, len(stream)))
    else:
        cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=3), label="cuts")
    restore = data.draw(st.booleans(), label="snapshot and restore at each cut")
    query, closing = pycel.compile(pattern), list[pycel.Match]()
    with forgets, compacts:
        pieces = pushed_in_pieces(query, stream, cuts, restore, closing)
    assert len(pieces) == len(set(pieces)), "a match emitted twice"
    assert set(pieces) == got.keys()
    # A match whose end lies a whole window before the last event has passed (so have its
    # end's others, which start no later): it left at a push, not at the close.
    plan, last = query.plan, len(stream) - 1
    for m in closing:
        if plan.window_unit == "events":
            assert last - m.end < plan.window_size, (m.key(), "waited past its window")
        else:
            waited = stream[last].time - stream[m.end].time
            assert waited <= plan.window_size, (m.key(), "waited past its window")
