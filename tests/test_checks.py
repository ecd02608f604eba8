"""Static checks (docs/semantics.md "Static rules"): ill-formed patterns are PatternErrors with
a message saying what is wrong; unsafe ones are PatternWarnings. ``evaluate`` (and every
engine) runs them before looking at data.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

import pycel
from pycel import Event, Field, PatternError, not_, plus, seq
from pycel.language.checks import PatternWarning, bound_variables, check, event_types, is_equality_join
from pycel.language.clauses import split_query
from pycel.reference import evaluate


class Ev(Event):
    x: Field[int]
    s: Field[str]
    t: Field[int]


class A(Ev): ...


class B(Ev): ...


class C(Ev): ...


class Door(Event):
    opened: Field[bool]


a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")


def run_check(pattern: Any) -> None:
    check(split_query(pattern))


def rejected(pattern: Any, message: str) -> None:
    """The pattern fails the checks, directly and when evaluated, with ``message``."""
    with pytest.raises(PatternError, match=re.escape(message)):
        run_check(pattern)
    with pytest.raises(PatternError, match=re.escape(message)):
        evaluate(pattern, [A(), B()])


# -- helpers ------------------------------------------------------------------------------
def test_bound_variables_and_event_types() -> None:
    p = seq(a, plus(B), not_(C, "nc")).as_("all")
    assert bound_variables(p) == {"a": {A}, "B": {B}, "nc": {None}, "all": {A, B, None}}
    assert event_types(p) == {A, B, C}
    assert bound_variables(a | b.as_("a")) == {"a": {A, B}}


def test_is_equality_join() -> None:
    assert is_equality_join(a.x == b.x)
    assert is_equality_join(a.x + 1 == b.x)  # key functions may compute
    assert not is_equality_join(a.x == a.t)  # one occurrence: a unary filter
    assert not is_equality_join(a.x < b.x)
    assert not is_equality_join(a.x != b.x)
    assert not is_equality_join(a.x + b.x == 3)


# -- well-formedness: a filter reads only variables bound below it (CEL paper §5) ---------
def test_filter_reads_an_unbound_variable() -> None:
    rejected(
        seq(A, B).where(Door.opened == True),  # noqa: E712
        "where() reads variable 'Door', which (A ; B) does not bind; it binds ['A', 'B']",
    )
    rejected(seq(a, b).where(c.x > 1), "where() reads variable 'c'")
    rejected(seq(a.where(b.x == 1), b), "reads variable 'b', which A AS a does not bind; it binds ['a']")


def test_filter_inside_plus_cannot_read_outside_variables() -> None:
    """CEL φ4 as printed: y.id = x.id inside the + reads x, which the + does not bind."""
    rejected(seq(a, plus(b.where(b.x == a.x))), "reads variable 'a', which B AS b does not bind")
    run_check(seq(a, plus(b)).where(b.x == a.x))  # the well-formed way to say it


def test_class_attributes_of_another_type_on_an_atom_are_not_taken_for_the_atom() -> None:
    """On an atom, ``Ev.x`` (a base of A) reads the atom; ``B.x`` (unrelated) reads the
    occurrence B, which the atom does not bind."""
    run_check(A.where(Ev.x > 1))
    rejected(A.where(B.x > 1), "where() reads variable 'B', which A does not bind")


def test_negated_atom_filter_reads_only_its_own_event() -> None:
    rejected(seq(a, not_(B.where(B.x == A.x)), C), "reads variable 'A', which B AS not_B does not bind")


def test_unknown_attribute_of_a_variable() -> None:
    x_as_door = pycel.alias(Door, "x")  # x is a Door here, but the pattern binds x to an A
    rejected(
        seq(A.as_("x"), B).where(x_as_door.opened == True),  # noqa: E712
        "unknown attribute 'opened' of 'x' (event types ['A'])",
    )


def test_attribute_of_one_alternative_is_enough() -> None:
    """A variable bound to several types (OR) may use any attribute one of them has."""
    door = pycel.alias(Door, "e")
    run_check((A.as_("e") | Door.as_("e")).where(door.opened == True))  # noqa: E712


def test_or_branch_without_the_variable_is_allowed() -> None:
    """CEL requires both OR branches to bind a filtered variable; pycel, like CORE, accepts
    it (the filter holds vacuously where the variable is unbound, see test_reference)."""
    run_check((A | B).where(A.x > 1))


# -- windows, projections, partitions -----------------------------------------------------
def test_window_on_a_type_without_the_time_attribute() -> None:
    rejected(
        seq(A, Door).within(5, on=Ev.t),
        "the window is on attribute 't', which event types ['Door'] do not have",
    )
    run_check(seq(A, B).within(5, on=Ev.t))
    run_check(seq(A, Door).within(events=5))  # a count window needs no attribute


def test_select_an_unknown_variable() -> None:
    rejected(seq(A, B).select("C"), "names 'C', which the pattern does not bind; it binds ['A', 'B']")
    rejected(seq(a, b).select(A), "select() names 'A'")
    run_check(seq(a, b).select(a, "b"))


def test_partition_key_no_type_has() -> None:
    rejected(seq(A, B).partition_by("colour"), "partition_by('colour'): no event type of the pattern has")
    rejected(seq(A, Door).partition_by(Door.opened, "colour"), "partition_by('colour')")
    run_check(seq(A, Door).partition_by(Ev.x))  # one type having it is enough (Door: null key)


# -- correlation: unary filters, equality joins and order comparisons, unless post_filter --
@pytest.mark.parametrize(
    "predicate",
    [
        a.x + b.x == 3,
        (a.x == b.x) | (a.s == "k"),
        ~(a.x == b.x),
        a.s.isin(["k"]) | (b.x > 1),
    ],
    ids=repr,
)
def test_non_equality_multi_variable_predicate_needs_post_filter(predicate: Any) -> None:
    p = seq(a, b).where(predicate)
    with pytest.raises(PatternError) as err:
        run_check(p)
    message = str(err.value)
    assert message.startswith(f"{predicate!r} relates several occurrences but is neither an equality")
    assert "post_filter=True" in message and "delay guarantee" in message
    run_check(seq(a, b).where(predicate, post_filter=True))


@pytest.mark.parametrize("predicate", [a.x < b.x, a.x != b.x, b.x * 2 >= a.x + 1], ids=repr)
def test_order_comparisons_between_occurrences_are_accepted(predicate: Any) -> None:
    run_check(seq(a, b).where(predicate))  # the planner puts them on the automaton's edges


def test_equality_joins_and_unary_conjuncts_are_accepted() -> None:
    run_check(seq(a, b, c).where((a.x == b.x) & (b.x == c.x) & (b.s == c.s) & (a.x > 1) & (c.s.like("k%"))))
    run_check(seq(a, b).where((a.x > 1) | (a.s == "k")))  # one variable: unary
    run_check(seq(a, b).where(a.x + 1 == b.x))


# -- unsafe formulas ----------------------------------------------------------------------
def test_unsafe_repeated_variable_warns() -> None:
    """CEL's ψ = T AS x ; T AS x binds x on both sides of ';' (unsafe). pycel accepts it with
    a PatternWarning: x then collects both positions."""
    message = "variables ['x'] are bound on both sides of (A AS x ; A AS x)"
    with pytest.warns(PatternWarning, match=re.escape(message)):
        run_check(seq(A.as_("x"), A.as_("x")))
    with pytest.warns(PatternWarning, match="bound on both sides"):
        run_check(a & a)
    with pytest.warns(PatternWarning, match=re.escape("variables ['y']")):
        run_check(seq(seq(A, B).as_("y"), C.as_("y")))


def test_safe_patterns_do_not_warn() -> None:
    """Reusing a variable across OR branches (CEL φ2) or inside + is safe, and so is a
    repeated bare type (``A ; A``: the implicit variable A collects both positions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_check(((a >> b) | (b >> a)).where(a.x == b.x))
        run_check(seq(A, A))
        run_check(A & A)
        run_check(plus(seq(a, b)))
        run_check(seq(a, b.as_("b2"), A.as_("a2")))


def test_warning_is_reported_by_evaluate() -> None:
    with pytest.warns(PatternWarning):
        evaluate(seq(A.as_("x"), A.as_("x")), [A(), A()])


# -- hierarchical correlation (PCEA paper Thm 4.1) ------------------------------------------
class _J(pycel.Event):
    x: pycel.Field[int]
    y: pycel.Field[int]


class _R(_J): ...


class _S(_J): ...


class _T(_J): ...


_r, _s, _t = pycel.alias(_R, "r"), pycel.alias(_S, "s"), pycel.alias(_T, "t")


def test_hierarchical_correlations_pass() -> None:
    # Q0-shaped: x relates all three, y only s and t (nested scopes).
    query = pycel.seq(_r, _s, _t).where((_r.x == _s.x) & (_s.x == _t.x) & (_s.y == _t.y))
    check(split_query(query))
    # Disjoint scopes are hierarchical too.
    u = pycel.alias(_R, "u")
    check(split_query(pycel.seq(_r, _s, _t, u).where((_r.x == _s.x) & (_t.y == u.y))))


def test_non_hierarchical_correlation_is_explained() -> None:
    query = pycel.seq(_r, _s, _t).where((_r.x == _s.x) & (_s.y == _t.y))
    with pytest.raises(PatternError, match=r"not hierarchical: r\.x = s\.x relates \['r', 's'\]") as err:
        check(split_query(query))
    assert "post_filter=True" in str(err.value)
    # As a post-filter it is accepted (and checked on complete matches).
    check(split_query(pycel.seq(_r, _s, _t).where((_r.x == _s.x) & (_s.y == _t.y), post_filter=True)))


# -- clear errors and warnings (issue 12 §7) ---------------------------------------------------
def _class_named_t(attribute: str) -> type[Event]:
    """A new event class named T with one int attribute."""
    return type("T", (Event,), {"__annotations__": {attribute: Field[int]}, "__module__": __name__})


def test_two_event_classes_with_the_same_name_are_refused_naming_both() -> None:
    t1, t2 = _class_named_t("v"), _class_named_t("w")
    message = (
        "two different event classes are named 'T' in this pattern: "
        f"{__name__}.T (attributes ['v']) and {__name__}.T (attributes ['w']); events name their "
        "type, so pycel cannot tell them apart"
    )
    pattern = seq(t1.where(t1.v > 0), t2)  # type: ignore[attr-defined]
    with pytest.raises(PatternError) as err:
        run_check(pattern)
    assert str(err.value).startswith(message)
    with pytest.raises(PatternError, match="two different event classes are named 'T'"):
        pycel.compile(pattern)
    with pytest.raises(PatternError, match="two different event classes are named 'T'"):
        evaluate(pattern, [{"event_type": "T", "v": 1}])
    run_check(seq(t1, t1))  # the same class twice is fine


def test_repeated_alias_warning_is_given_once_and_short() -> None:
    """A long pattern with one alias repeated 300 times warns once, without quoting it whole."""
    pattern = seq(*[A.as_("x") for _ in range(300)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_check(pattern)
    assert len(caught) == 1 and issubclass(caught[0].category, PatternWarning)
    text = str(caught[0].message)
    assert text.startswith("variables ['x'] are bound on both sides of ") and "(and 298 more places)" in text
    assert len(text) < 300


def test_generated_negation_variables_do_not_warn() -> None:
    """not_(T) binds a variable pycel names (not_T); repeating it is not the user's slip."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_check(seq(A, not_(B), A, not_(B), C))
        run_check(seq(A, not_(B.where(B.x > 1)), C) & seq(A, not_(B), C))
    with pytest.warns(PatternWarning, match=re.escape("variables ['n']")):
        run_check(seq(A, not_(B, "n"), A, not_(B, "n"), C))  # a name the user chose still warns
