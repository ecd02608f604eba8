"""The reference evaluator, operator by operator, on tiny hand-computed cases (docs/semantics.md).

Each expected output below was worked out by hand from §1; the streams stay a few events
long because the oracle enumerates valuations explicitly. ``rows`` shows matches as
``(start, end, {variable: positions})`` in the evaluator's output order (by end, then
start, then valuation).
"""

from __future__ import annotations

import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from strategies import Features, cases, event_types

import pycel
from pycel import DataError, Event, Field, PatternError, not_, plus, seq
from pycel.language.checks import PatternWarning
from pycel.language.clauses import split_query
from pycel.reference import evaluate


class Ev(Event):
    x: Field[int]
    s: Field[str]
    t: Field[int]
    f: Field[float]
    ts: Field[pycel.Timestamp]
    k: Field[int]


class A(Ev): ...


class B(Ev): ...


class C(Ev): ...


class D(Ev): ...


class Other(Event):
    """An event type unrelated to Ev (it has none of Ev's attributes)."""

    y: Field[int]


Row = tuple[int, int, dict[str, tuple[int, ...]]]


def rows(pattern: Any, stream: list[Event]) -> list[Row]:
    return [(m.start, m.end, m.variables) for m in evaluate(pattern, stream)]


def spans(pattern: Any, stream: list[Event]) -> list[tuple[int, int]]:
    return [(m.start, m.end) for m in evaluate(pattern, stream)]


def positions(pattern: Any, stream: list[Event]) -> list[tuple[int, ...]]:
    return [m.positions() for m in evaluate(pattern, stream)]


# -- atoms --------------------------------------------------------------------------------
def test_atom_matches_each_event_of_its_type() -> None:
    assert rows(A, [A(), B(), A()]) == [(0, 0, {"A": (0,)}), (2, 2, {"A": (2,)})]


def test_atom_matches_subclasses_and_binds_its_own_name() -> None:
    assert rows(Ev, [A(), Other(y=1), B()]) == [(0, 0, {"Ev": (0,)}), (2, 2, {"Ev": (2,)})]


def test_atom_as_renames_the_occurrence() -> None:
    assert rows(A.as_("a"), [B(), A()]) == [(1, 1, {"a": (1,)})]
    assert rows(pycel.alias(A, "first"), [A()]) == [(0, 0, {"first": (0,)})]


def test_empty_stream_has_no_matches() -> None:
    assert len(evaluate(seq(A, B), [])) == 0


# -- sequencing ---------------------------------------------------------------------------
def test_seq_skips_any_events() -> None:
    assert rows(seq(A, B), [A(), C(), A(), B(), B()]) == [
        (0, 3, {"A": (0,), "B": (3,)}),
        (2, 3, {"A": (2,), "B": (3,)}),
        (0, 4, {"A": (0,), "B": (4,)}),
        (2, 4, {"A": (2,), "B": (4,)}),
    ]


def test_seq_needs_strict_order() -> None:
    assert rows(seq(A, B), [B(), A()]) == []
    assert rows(A >> B, [A(), B()]) == [(0, 1, {"A": (0,), "B": (1,)})]


def test_contiguous_seq() -> None:
    stream = [A(), C(), A(), B(), B()]
    assert rows(seq(A, B, contiguous=True), stream) == [(2, 3, {"A": (2,), "B": (3,)})]
    # The right side starts right after the left side *ends*.
    b2 = pycel.alias(B, "b2")
    assert positions(seq(seq(A, B), b2, contiguous=True), stream) == [(0, 3, 4), (2, 3, 4)]


def test_seq_of_three_with_repeated_type_needs_aliases() -> None:
    a1, a2 = pycel.alias(A, "a1"), pycel.alias(A, "a2")
    assert rows(seq(a1, a2), [A(), A(), A()]) == [
        (0, 1, {"a1": (0,), "a2": (1,)}),
        (0, 2, {"a1": (0,), "a2": (2,)}),
        (1, 2, {"a1": (1,), "a2": (2,)}),
    ]


def test_repeated_variable_collects_both_positions_and_warns() -> None:
    """``A ; A`` binds A on both sides: normal (no warning), A gets both positions. Naming
    the same variable twice (``A AS x ; A AS x``) is allowed too, with a PatternWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PatternWarning)
        assert rows(seq(A, A), [A(), A()]) == [(0, 1, {"A": (0, 1)})]
    with pytest.warns(PatternWarning, match="bound on both sides"):
        result = rows(seq(A.as_("x"), A.as_("x")), [A(), A()])
    assert result == [(0, 1, {"x": (0, 1)})]


# -- disjunction and conjunction ----------------------------------------------------------
def test_or() -> None:
    assert rows(A | B, [A(), C(), B()]) == [(0, 0, {"A": (0,)}), (2, 2, {"B": (2,)})]
    assert positions(seq(A | B, C), [A(), B(), C()]) == [(0, 2), (1, 2)]


def test_or_of_the_same_valuation_is_not_duplicated() -> None:
    assert rows(A | A, [A()]) == [(0, 0, {"A": (0,)})]


def test_and_unites_valuations_in_any_order() -> None:
    assert rows(A & B, [B(), A()]) == [(0, 1, {"A": (1,), "B": (0,)})]
    assert rows(seq(A, B) & C, [A(), C(), B()]) == [(0, 2, {"A": (0,), "B": (2,), "C": (1,)})]


def test_and_both_sides_may_share_a_position() -> None:
    """PCEA conjunction (CQ t-homomorphisms): two atoms may map to the same tuple."""
    assert rows(A & A.as_("a"), [A()]) == [(0, 0, {"A": (0,), "a": (0,)})]


# -- iteration ----------------------------------------------------------------------------
def test_plus_every_nonempty_subsequence() -> None:
    assert positions(plus(A), [A(), B(), A(), A()]) == [
        (0,),
        (0, 2),
        (2,),
        (0, 2, 3),
        (0, 3),
        (2, 3),
        (3,),
    ]


def test_contiguous_plus_only_runs() -> None:
    assert positions(plus(A, contiguous=True), [A(), A(), B(), A()]) == [
        (0,),
        (0, 1),
        (1,),
        (3,),
    ]


def test_plus_of_a_sequence_rebinds_inner_variables_per_repetition() -> None:
    stream = [A(), B(), A(), B()]
    assert rows(plus(seq(A, B)), stream) == [
        (0, 1, {"A": (0,), "B": (1,)}),
        (0, 3, {"A": (0,), "B": (3,)}),
        (0, 3, {"A": (0, 2), "B": (1, 3)}),
        (2, 3, {"A": (2,), "B": (3,)}),
    ]


def test_contiguous_plus_of_a_sequence() -> None:
    """Each repetition starts right after the previous one ends (inside, ; still skips)."""
    stream = [A(), B(), C(), A(), B()]
    assert positions(plus(seq(A, B), contiguous=True), stream) == [(0, 1), (0, 4), (3, 4)]
    assert positions(plus(seq(A, B), contiguous=True), [A(), B(), A(), B()]) == [
        (0, 1),
        (0, 3),
        (0, 1, 2, 3),
        (2, 3),
    ]


def test_cel_kleene_between_delimiters() -> None:
    assert positions(seq(A, plus(B), C), [A(), B(), B(), C()]) == [(0, 1, 3), (0, 1, 2, 3), (0, 2, 3)]


# -- AS on patterns -----------------------------------------------------------------------
def test_as_binds_every_position_of_the_match() -> None:
    assert rows(seq(A, B).as_("ab"), [A(), B()]) == [(0, 1, {"A": (0,), "B": (1,), "ab": (0, 1)})]
    assert rows(plus(A).as_("run"), [A(), A()])[1] == (0, 1, {"A": (0, 1), "run": (0, 1)})


# -- filters ------------------------------------------------------------------------------
def test_unary_filter_on_atom() -> None:
    stream = [A(x=1), A(x=3), A(x=5)]
    assert positions(A.where(A.x > 2), stream) == [(1,), (2,)]
    assert positions(A.where(A.x.between(1, 3)), stream) == [(0,), (1,)]
    assert positions(A.where(A.x.isin([1, 5])), stream) == [(0,), (2,)]
    assert positions(A.where(A.x.not_in([1, 5])), stream) == [(1,)]
    assert positions(A.where(~(A.x == 3)), stream) == [(0,), (2,)]
    assert positions(A.where((A.x == 1) | (A.x == 5)), stream) == [(0,), (2,)]
    assert positions(A.where((A.x > 1) & (A.x < 5)), stream) == [(1,)]
    assert positions(A.where(A.x + 1 == 4), stream) == [(1,)]
    assert positions(A.where(A.x * 2 > A.x + 4), stream) == [(2,)]


def test_string_filters() -> None:
    stream = [A(s="INTC"), A(s="MSFT"), A(s="IBM")]
    assert positions(A.where(A.s == "MSFT"), stream) == [(1,)]
    assert positions(A.where(A.s.like("I%")), stream) == [(0,), (2,)]
    assert positions(A.where(A.s.like("I_M")), stream) == [(2,)]
    assert positions(A.where(A.s.matches("[A-Z]{4}")), stream) == [(0,), (1,)]
    assert positions(A.where(A.s < "J"), stream) == [(0,), (2,)]


def test_timestamp_filters_against_datetime_constants() -> None:
    stream = [A(ts=T0), A(ts=T0 + timedelta(seconds=1)), A()]
    assert positions(A.where(A.ts > T0), stream) == [(1,)]
    assert positions(A.where(A.ts == T0.replace(tzinfo=UTC)), stream) == [(0,)]  # naive = UTC
    assert positions(A.where(A.ts.isin([T0 + timedelta(seconds=1)])), stream) == [(1,)]
    assert positions(A.where(A.ts.between(T0, T0 + timedelta(hours=1))), stream) == [(0,), (1,)]


def test_filter_on_a_class_attribute_of_the_base_type_binds_to_the_atom() -> None:
    assert positions(A.where(Ev.x > 0), [A(x=0), A(x=1)]) == [(1,)]


def test_filter_on_a_sequence_is_for_all_bound_events() -> None:
    """The filter of a pattern holds for every event bound to the variables it reads."""
    stream = [A(x=1), B(x=1), B(x=2), C()]
    p = seq(A, plus(B), C).where(B.x == 1)
    assert positions(p, stream) == [(0, 1, 3)]
    # A correlation over the + holds for every repetition (CEL φ4).
    corr = seq(A, plus(B), C).where(A.x == B.x)
    assert positions(corr, stream) == [(0, 1, 3)]


def test_filter_on_a_variable_the_match_does_not_bind_holds_vacuously() -> None:
    """"for all events bound to x" is vacuously true when a branch of an OR binds no x
    (CORE semantics: A[...] constrains the A events only)."""
    assert positions((A | B).where(A.x > 1), [A(x=0), B(x=0), A(x=2)]) == [(1,), (2,)]
    # Each conjunct on its own: an unbound B does not make the A conjunct vacuous.
    both = (A | B).where((A.x > 1) & (B.x > 1))
    assert positions(both, [A(x=0), B(x=0), A(x=2), B(x=2)]) == [(2,), (3,)]


def test_equality_correlation() -> None:
    a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
    stream = [A(x=1, s="p"), A(x=2, s="q"), B(x=2, s="p"), B(x=1, s="p")]
    assert rows(seq(a, b).where(a.x == b.x), stream) == [
        (1, 2, {"a": (1,), "b": (2,)}),
        (0, 3, {"a": (0,), "b": (3,)}),
    ]
    assert rows(seq(a, b).where(a.s == b.s), stream) == [
        (0, 2, {"a": (0,), "b": (2,)}),
        (0, 3, {"a": (0,), "b": (3,)}),
    ]
    both = seq(a, b).where((a.x == b.x) & (a.s == b.s))
    assert rows(both, stream) == [(0, 3, {"a": (0,), "b": (3,)})]


def test_post_filter_general_predicate() -> None:
    a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
    p = seq(a, b).where(a.x < b.x, post_filter=True)
    assert positions(p, [A(x=1), A(x=3), B(x=2)]) == [(0, 2)]


class TestNulls:
    """A predicate over a null attribute is false (three-valued logic: unknown is not true)."""

    stream = [A(x=None, s="a"), A(x=1, s=None), A(x=2, s="b")]

    def test_comparisons(self) -> None:
        assert positions(A.where(A.x > 0), self.stream) == [(1,), (2,)]
        assert positions(A.where(A.x != 1), self.stream) == [(2,)]
        assert positions(A.where(A.s == "a"), self.stream) == [(0,)]

    def test_negation_of_unknown_is_unknown(self) -> None:
        assert positions(A.where(~(A.x > 1)), self.stream) == [(1,)]
        assert positions(A.where(A.x.not_in([2])), self.stream) == [(1,)]
        assert positions(A.where(A.s.not_in(["a"])), self.stream) == [(2,)]

    def test_or_and(self) -> None:
        # unknown OR true = true; unknown AND false = false; unknown AND true = unknown
        assert positions(A.where((A.x > 0) | (A.s == "a")), self.stream) == [(0,), (1,), (2,)]
        assert positions(A.where((A.x > 0) & (A.s == "b")), self.stream) == [(2,)]

    def test_missing_attribute_is_null(self) -> None:
        assert positions(A.where(A.x.isin([1])), [A(), A(x=1)]) == [(1,)]
        assert positions(A.where(A.x.not_in([1])), [A(), A(x=1)]) == []

    def test_arithmetic_with_null_or_division_by_zero(self) -> None:
        assert positions(A.where(A.x + 1 > 0), self.stream) == [(1,), (2,)]
        assert positions(A.where(A.x / (A.x - 1) > 0), self.stream) == [(2,)]

    def test_correlation_with_null_is_false(self) -> None:
        a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
        assert positions(seq(a, b).where(a.x == b.x), [A(), B()]) == []


# -- negated atoms ------------------------------------------------------------------------
def test_not_atom_is_one_event_of_another_type() -> None:
    p = seq(A, not_(B), C)
    assert rows(p, [A(), B(), C()]) == []
    assert rows(p, [A(), D(), C()]) == [(0, 2, {"A": (0,), "not_B": (1,), "C": (2,)})]
    # Any event that is not a B qualifies, including an A or a C.
    assert positions(p, [A(), A(), C()]) == [(0, 1, 2)]
    assert positions(p, [A(), Other(y=0), C()]) == [(0, 1, 2)]


def test_not_atom_with_filter_excludes_only_matching_events() -> None:
    p = seq(A, not_(B.where(B.x > 3), "nb"), C)
    assert rows(p, [A(), B(x=5), C()]) == []
    assert rows(p, [A(), B(x=1), C()]) == [(0, 2, {"A": (0,), "nb": (1,), "C": (2,)})]
    # A B with a null x is not "a B with x > 3" (the predicate is false on null).
    assert positions(p, [A(), B(), C()]) == [(0, 1, 2)]


# -- windows ------------------------------------------------------------------------------
def test_count_window_inclusive() -> None:
    stream = [A(), A(), B(), C()]
    assert spans(seq(A, B, C).within(events=3), stream) == [(0, 3), (1, 3)]
    assert spans(seq(A, B, C).within(events=2), stream) == [(1, 3)]
    assert spans(A.pattern().within(events=0), stream) == [(0, 0), (1, 1)]


T0 = datetime(2024, 1, 1, 12, 0, 0)


def timed() -> list[Event]:
    return [
        A(t=0, f=0.0, ts=T0),
        A(t=5, f=0.5, ts=T0 + timedelta(seconds=5)),
        B(t=10, f=1.0, ts=T0 + timedelta(seconds=10)),
    ]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        # on a Timestamp attribute: seconds= or a timedelta
        ({"seconds": 5, "on": Ev.ts}, [(1, 2)]),
        ({"seconds": 10, "on": Ev.ts}, [(0, 2), (1, 2)]),  # inclusive bound
        ({"seconds": 9.999, "on": Ev.ts}, [(1, 2)]),
        ({"size": timedelta(seconds=10), "on": Ev.ts}, [(0, 2), (1, 2)]),
        ({"seconds": timedelta(milliseconds=4999), "on": Ev.ts}, []),
        # on a numeric attribute: a size in its own units, or seconds counted in it
        ({"size": 5, "on": Ev.t}, [(1, 2)]),
        ({"size": 10, "on": Ev.t}, [(0, 2), (1, 2)]),
        ({"seconds": 5, "on": Ev.t}, [(1, 2)]),
        ({"size": timedelta(seconds=4), "on": Ev.t}, []),
        ({"size": 0.5, "on": Ev.f}, [(1, 2)]),
    ],
)
def test_time_windows(window: dict[str, Any], expected: list[tuple[int, int]]) -> None:
    size = window.pop("size", None)
    assert spans(seq(A, B).within(size, **window), timed()) == expected


def test_time_window_with_aware_datetimes() -> None:
    plus2 = timezone(timedelta(hours=2))
    stream = [
        A(ts=datetime(2024, 1, 1, 12, 0, 0, tzinfo=plus2)),  # 10:00:00 UTC
        B(ts=datetime(2024, 1, 1, 10, 0, 4, tzinfo=UTC)),
    ]
    assert spans(seq(A, B).within(seconds=5, on=Ev.ts), stream) == [(0, 1)]
    assert spans(seq(A, B).within(seconds=3, on=Ev.ts), stream) == []


def test_time_window_rejects_time_going_backwards() -> None:
    with pytest.raises(DataError, match="time goes backwards") as err:
        evaluate(seq(A, B).within(5, on=Ev.t), [A(t=0), A(t=5), B(t=4)])
    assert (err.value.row, err.value.column) == (2, "t")


def test_time_window_rejects_a_missing_time() -> None:
    with pytest.raises(DataError, match="no value for the window's time attribute") as err:
        evaluate(seq(A, B).within(5, on=Ev.t), [A(t=0), A(), B(t=4)])
    assert (err.value.row, err.value.column) == (1, "t")


def test_time_window_on_datetime_needs_seconds() -> None:
    with pytest.raises(PatternError, match="timestamp"):
        seq(A, B).within(5, on=Ev.ts)


# -- PARTITION BY -------------------------------------------------------------------------
def test_partition_by_keeps_global_positions() -> None:
    stream = [A(x=1), A(x=2), B(x=2), B(x=1)]
    assert rows(seq(A, B).partition_by(Ev.x), stream) == [
        (1, 2, {"A": (1,), "B": (2,)}),
        (0, 3, {"A": (0,), "B": (3,)}),
    ]
    assert spans(seq(A, B), stream) == [(0, 2), (1, 2), (0, 3), (1, 3)]


def test_partition_by_null_key_belongs_to_no_partition() -> None:
    stream = [A(x=None), B(x=None), A(x=1), B(), B(x=1)]
    assert spans(seq(A, B).partition_by(Ev.x), stream) == [(2, 4)]


def test_partition_by_an_attribute_some_types_lack() -> None:
    """Events without the key attribute have a null key: they are in no partition."""
    stream = [A(x=1), Other(y=1), B(x=1)]
    assert positions(seq(A, not_(C), B).partition_by("x"), stream) == []
    assert positions(seq(A, not_(C), B), stream) == [(0, 1, 2)]


def test_partition_by_several_keys() -> None:
    stream = [A(x=1, s="a"), B(x=1, s="b"), B(x=1, s="a"), B(x=2, s="a")]
    assert spans(seq(A, B).partition_by(Ev.x, Ev.s), stream) == [(0, 2)]
    assert spans(seq(A, B).partition_by(Ev.x), stream) == [(0, 1), (0, 2)]


def test_contiguity_inside_a_partition() -> None:
    """``:`` means the next event *of the same partition*."""
    stream = [A(x=1), B(x=2), B(x=1)]
    assert spans(seq(A, B, contiguous=True).partition_by(Ev.x), stream) == [(0, 2)]
    assert spans(seq(A, B, contiguous=True), stream) == [(0, 1)]
    assert spans(plus(A, contiguous=True).partition_by(Ev.x), [A(x=1), A(x=2), A(x=1)]) == [
        (0, 0),
        (1, 1),
        (0, 2),
        (2, 2),
    ]


def test_partition_count_window_is_global() -> None:
    stream = [A(x=1), A(x=2), A(x=2), B(x=1)]
    assert spans(seq(A, B).within(events=2).partition_by(Ev.x), stream) == []
    assert spans(seq(A, B).within(events=3).partition_by(Ev.x), stream) == [(0, 3)]


# -- SELECT -------------------------------------------------------------------------------
def test_select_projects_variables_and_keeps_the_interval() -> None:
    stream = [A(), B(), C()]
    assert rows(seq(A, B, C).select("A", "C"), stream) == [(0, 2, {"A": (0,), "C": (2,)})]
    assert rows(seq(A, B, C).select(B), stream) == [(0, 2, {"B": (1,)})]
    assert rows(seq(A, B, C).select(pycel.alias(B, "B")), stream) == [(0, 2, {"B": (1,)})]


def test_select_merges_matches_that_become_equal() -> None:
    """Matches that differ only in dropped variables and have the same interval become the
    same (start, end, valuation): it is output once."""
    stream = [A(), B(), B(), C()]
    assert rows(seq(A, B, C).select("C"), stream) == [(0, 3, {"C": (3,)})]
    assert rows(seq(A, B, C).select("B"), stream) == [(0, 3, {"B": (1,)}), (0, 3, {"B": (2,)})]


# -- selection strategies -----------------------------------------------------------------
class TestStrategies:
    """docs/semantics.md (CEL paper §4, corrected): compare the complex events with the same end,
    across all valuations, among the outputs that fit the window."""

    stream = [A(), A(), B(), B()]  # seq(A, B+): ends 2 and 3

    def test_all_and_any_keep_everything(self) -> None:
        p = seq(A, plus(B))
        expected = [(0, 2), (1, 2), (0, 2, 3), (0, 3), (1, 2, 3), (1, 3)]
        assert positions(p, self.stream) == expected
        assert positions(p.strategy("all"), self.stream) == expected
        assert positions(p.strategy("any"), self.stream) == expected

    def test_next_prefers_the_earliest_events(self) -> None:
        assert positions(seq(A, plus(B)).strategy("next"), self.stream) == [(0, 2), (0, 2, 3)]

    def test_last_prefers_the_latest_events(self) -> None:
        assert positions(seq(A, plus(B)).strategy("last"), self.stream) == [(1, 2), (1, 2, 3)]

    def test_max_keeps_the_maximal_sets(self) -> None:
        assert positions(seq(A, plus(B)).strategy("max"), self.stream) == [
            (0, 2),
            (1, 2),
            (0, 2, 3),
            (1, 2, 3),
        ]

    def test_strict_keeps_intervals(self) -> None:
        assert positions(seq(A, plus(B)).strategy("strict"), self.stream) == [(1, 2), (1, 2, 3)]

    def test_strategy_compares_across_valuations(self) -> None:
        """{0,2} (binding x) and {1,2} (binding y) are compared although their valuations
        differ (the printed definition compares per valuation and would keep both)."""
        p = seq(A.as_("x"), D) | seq(C.as_("y"), D)
        stream = [A(), C(), D()]
        assert positions(p, stream) == [(0, 2), (1, 2)]
        assert rows(p.strategy("next"), stream) == [(0, 2, {"x": (0,), "D": (2,)})]
        assert rows(p.strategy("last"), stream) == [(1, 2, {"y": (1,), "D": (2,)})]

    def test_equal_complex_events_with_different_valuations_are_all_kept(self) -> None:
        """Two valuations with the same set of positions are the same complex event: a
        strategy keeps or drops them together."""
        p = (seq(A, B) | seq(A.as_("a"), B)).strategy("next")
        assert rows(p, [A(), A(), B()]) == [
            (0, 2, {"A": (0,), "B": (2,)}),
            (0, 2, {"B": (2,), "a": (0,)}),
        ]

    def test_window_applies_before_the_strategy(self) -> None:
        """At end 2 the window of 1 event keeps {1,2} only, and NEXT chooses it (the CORE
        paper's order, strategy first, picked {0,2} and the window then dropped it)."""
        p = seq(A, B).strategy("next").within(events=1)
        assert positions(p, [A(), A(), B()]) == [(1, 2)]
        assert positions(seq(A, B).within(events=1), [A(), A(), B()]) == [(1, 2)]

    def test_next_with_a_window_returns_the_earliest_run_that_fits(self) -> None:
        """DESIGN's example: A@0 A@5 B@6 under a window of 2 events gives {5,6}."""
        stream = [A(), C(), C(), C(), C(), A(), B()]
        assert positions(seq(A, B).strategy("next").within(events=2), stream) == [(5, 6)]
        assert positions(seq(A, B).strategy("next").within(events=6), stream) == [(0, 6)]
        assert positions(seq(A, B).strategy("next"), stream) == [(0, 6)]

    def test_last_with_a_window_returns_the_latest_run_that_fits(self) -> None:
        """Without a window LAST takes the superset {0,1,2,3} of every b since the first a;
        a window of 2 events keeps the runs from 1 on, and LAST picks {1,2,3}."""
        stream = [A(), A(), B(), B()]
        p = seq(A, plus(B)).strategy("last")
        assert positions(p, stream) == [(1, 2), (1, 2, 3)]
        assert positions(seq(plus(A), B).strategy("last"), stream) == [(0, 1, 2), (0, 1, 3)]
        assert positions(seq(plus(A), B).strategy("last").within(events=1), stream) == [(1, 2)]
        assert positions(seq(plus(A), B).strategy("last").within(events=2), stream) == [
            (0, 1, 2),
            (1, 3),
        ]

    def test_max_with_a_window_returns_the_maximal_runs_that_fit(self) -> None:
        """seq(a, plus(b)) under MAX keeps the run with every b since the first a; a window
        of 2 events drops it and MAX keeps the maximal runs that fit instead."""
        stream = [A(), A(), B(), B()]
        p = seq(A, plus(B)).strategy("max")
        assert positions(p.within(events=2), stream) == [(0, 2), (1, 2), (1, 2, 3)]
        assert positions(p.within(events=1), stream) == [(1, 2)]
        assert positions(p.within(events=3), stream) == [(0, 2), (1, 2), (0, 2, 3), (1, 2, 3)]

    def test_strict_is_unaffected_by_the_order(self) -> None:
        stream = [A(), A(), B(), B()]
        p = seq(A, plus(B)).strategy("strict")
        assert positions(p.within(events=1), stream) == [(1, 2)]
        assert positions(p.within(events=2), stream) == [(1, 2), (1, 2, 3)]

    def test_strategy_inside_partitions(self) -> None:
        stream = [A(x=1), A(x=2), B(x=1), B(x=2)]
        p = seq(A, B).strategy("strict").partition_by(Ev.x)
        # Intervals of the partition's own sub-stream: [0, 2] is {0, 2} in partition 1.
        assert positions(p, stream) == [(0, 2), (1, 3)]
        assert positions(seq(A, B).strategy("last").partition_by(Ev.x), stream + [B(x=1)]) == [
            (0, 2),
            (1, 3),
            (0, 4),
        ]


# -- consumption --------------------------------------------------------------------------
def test_consume_any() -> None:
    """After a position with output, runs started before it are dropped."""
    stream = [A(), A(), B(), A(), B(), B()]
    assert spans(seq(A, B), stream) == [(0, 2), (1, 2), (0, 4), (1, 4), (3, 4), (0, 5), (1, 5), (3, 5)]
    assert spans(seq(A, B).consume("any"), stream) == [(0, 2), (1, 2), (3, 4)]
    assert spans(seq(A, B).consume("none"), stream) == spans(seq(A, B), stream)


def test_consume_any_crosses_partitions() -> None:
    stream = [A(x=1), A(x=2), B(x=1), A(x=1), B(x=2), B(x=1)]
    assert spans(seq(A, B).consume("any").partition_by(Ev.x), stream) == [(0, 2), (3, 5)]


def test_consume_partition_only_within_the_partition() -> None:
    stream = [A(x=1), A(x=2), B(x=1), A(x=1), B(x=2), B(x=1)]
    assert spans(seq(A, B).consume("partition").partition_by(Ev.x), stream) == [
        (0, 2),
        (1, 4),
        (3, 5),
    ]


def test_consume_after_the_window() -> None:
    """Only a position that really produced output (after the window) consumes."""
    stream = [A(), A(), B(), A(), B()]
    assert spans(seq(A, B).within(events=1).consume("any"), stream) == [(1, 2), (3, 4)]


# -- LIMIT --------------------------------------------------------------------------------
def test_limit_per_end_position() -> None:
    stream = [A(), A(), B(), B()]
    assert spans(seq(A, B).limit(1), stream) == [(0, 2), (0, 3)]
    assert spans(seq(A, B).limit(5), stream) == [(0, 2), (1, 2), (0, 3), (1, 3)]


def test_consumed_runs_take_no_part_in_the_strategy() -> None:
    """After the output at 1 consumes, runs from 0 are gone: at 3 the strategy chooses among
    the runs that started after 1 (the consumed {0,2,3} must not hide {2,3} under MAX)."""
    stream = [A(), B(), A(), B()]
    assert positions(seq(plus(A), B).strategy("max").consume("any"), stream) == [(0, 1), (2, 3)]
    assert positions(seq(plus(A), B).strategy("max"), stream) == [(0, 1), (0, 2, 3)]
    stream = [A(), B(), A(), A(), B()]
    assert positions(seq(A, B).strategy("next").consume("any"), stream) == [(0, 1), (2, 4)]


def test_limit_with_consumption() -> None:
    """The position still consumes when LIMIT cuts its output short."""
    assert spans(seq(A, B).limit(1).consume("any"), [A(), A(), B(), B()]) == [(0, 2)]


# -- clauses combined ---------------------------------------------------------------------
def test_all_clauses_together() -> None:
    a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
    p = (
        seq(a.where(a.s == "buy"), plus(b))
        .within(events=3)
        .partition_by(Ev.x)
        .strategy("max")
        .select("b")
        .limit(2)
    )
    stream = [A(x=1, s="buy"), B(x=1), A(x=2, s="buy"), B(x=1), B(x=2), B(x=1)]
    assert rows(p, stream) == [
        (0, 1, {"b": (1,)}),
        (0, 3, {"b": (1, 3)}),
        (2, 4, {"b": (4,)}),
    ]


def test_query_clause_inside_a_pattern_is_rejected() -> None:
    with pytest.raises(PatternError, match="whole query"):
        evaluate(seq(A.pattern().within(events=2), B), [A(), B()])
    with pytest.raises(PatternError, match="twice"):
        evaluate(seq(A, B).limit(1).limit(2), [A(), B()])


def test_reference_takes_dicts_and_frames() -> None:
    import pandas as pd

    data = [{"event_type": "A", "x": 1}, {"event_type": "B", "x": 1}]
    assert spans(seq(A, B), data) == [(0, 1)]  # type: ignore[arg-type]
    assert spans(seq(A, B), pd.DataFrame(data)) == [(0, 1)]  # type: ignore[arg-type]


def test_matches_carry_their_events() -> None:
    matches = evaluate(seq(A, B), [A(x=1), B(x=2)])
    (m,) = list(matches)
    assert m.events("B") == [("B", {"x": 2, "s": None, "t": None, "f": None, "ts": None, "k": None})]
    df = matches.to_pandas()
    assert list(df.columns) == ["match", "start", "end", "variable", "position"]
    assert sorted(zip(df["variable"], df["position"], strict=True)) == [("A", 0), ("B", 1)]


def test_no_warning_for_distinct_variables() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evaluate(seq(A, B, A.as_("a2")), [A(), B(), A()])


# -- generated patterns (tests/strategies.py): the oracle runs and its output is sane -----
GEN_TYPES = event_types(3)


def _check_invariants(pattern: pycel.Pattern, stream: list[Event]) -> None:
    spec = split_query(pattern)
    matches = evaluate(pattern, stream)
    keys = [m.key() for m in matches]
    assert len(set(keys)) == len(keys), "duplicate matches"
    assert [m.end for m in matches] == sorted(m.end for m in matches), "not ordered by end"
    times = [getattr(e, "time", None) for e in stream]
    for m in matches:
        got = m.positions()
        assert all(0 <= p < len(stream) for p in got)
        if spec.select is None:
            assert got and (m.start, m.end) == (min(got), max(got))
        else:  # projection keeps the interval of the whole match
            assert not got or m.start <= min(got) <= max(got) <= m.end
        assert m.start <= m.end
        window = spec.window
        if window is not None and window.unit == "events":
            assert m.end - m.start <= window.size
        elif window is not None:
            assert times[m.end] - times[m.start] <= window.size  # type: ignore[operator]
        if spec.partition and got:
            keys_in = {getattr(stream[p], "x", None) for p in got}
            assert len(keys_in) == 1 and None not in keys_in
    if spec.limit is not None:
        per_end = Counter(m.end for m in matches)
        assert max(per_end.values(), default=0) <= spec.limit


@settings(max_examples=80)
@given(cases(GEN_TYPES, Features.everything(), nulls=True))
def test_generated_patterns_reference_invariants(case: tuple[pycel.Pattern, list[Event]]) -> None:
    pattern, stream = case
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the generated patterns are safe
        _check_invariants(pattern, stream)


@settings(max_examples=40)
@given(cases(GEN_TYPES, Features()))
def test_generated_core_patterns_clauses_only_remove_matches(case: tuple[pycel.Pattern, list[Event]]) -> None:
    """Selection strategies, consumption and LIMIT only ever drop matches of the pattern."""
    pattern, stream = case
    everything = evaluate(pattern, stream).keys()
    for clause in (
        *(pattern.strategy(name) for name in ("next", "last", "max", "strict")),  # type: ignore[arg-type]
        pattern.consume("any"),
        pattern.limit(1),
    ):
        assert evaluate(clause, stream).keys() <= everything
    if not split_query(pattern).partition:
        assert evaluate(pattern.consume("partition"), stream).keys() <= everything
