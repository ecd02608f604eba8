"""The planner (pycel/plan/planner.py): one immutable plan per query, its automaton family
chosen from the query's features, one runner per family (pycel/runtime/runners/).

The family choice is checked against its definition: the parallelized automaton runs an
AND of single events exactly when the sequential planning (joins as run keys over the OR
of interleavings) refuses it and the parallelized plan exists."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st
from strategies import Features, event_types, patterns
from test_hcq import Q0, Q1, Q2, Q3, hcq_cases

import pycel
from pycel.dsl import Pattern
from pycel.errors import UnsupportedError
from pycel.language.clauses import split_query
from pycel.plan.conjunction import expand_conjunctions
from pycel.plan.hcq import plan_hcq
from pycel.plan.joins import plan_joins
from pycel.plan.planner import Plan, plan_query
from pycel.plan.postfilter import split_post_filters
from pycel.reference import evaluate
from pycel.runtime.runners import RUNNERS

q0, q1, q2, q3, q4 = (pycel.alias(t, f"q{k}") for k, t in enumerate((Q0, Q1, Q2, Q3, Q0)))
NESTED = (q0 & q1 & q2).where((q0.x == q1.x) & (q1.x == q2.x) & (q1.y == q2.y))


@pytest.mark.parametrize(
    ("pattern", "family"),
    [
        (pycel.seq(q0, q1), "sequential"),
        (pycel.seq(q0, q1).strategy("strict"), "sequential"),
        (pycel.seq(q0, pycel.plus(q1)).strategy("any"), "sequential"),
        (pycel.seq(q0, q1).strategy("last"), "ranked"),
        (pycel.seq(q0, q1).strategy("next"), "ranked"),
        (pycel.seq(q0, q1).strategy("next").within(events=3), "windowed"),
        (pycel.seq(q0, q1).strategy("max").within(events=3), "windowed"),
        (pycel.seq(q0, pycel.plus(q1), q2).strategy("max"), "maximal"),
        (NESTED, "parallel"),
        (NESTED.within(events=5).limit(1), "parallel"),
        # One class over every event: a run key, so the sequential automaton runs it.
        ((q0 & q1 & q2).where((q0.x == q1.x) & (q1.x == q2.x)), "sequential"),
        # Four events interleave within the sequential automaton's atom limit; five do not.
        (q0 & q1 & q2 & q3, "sequential"),
        (q0 & q1 & q2 & q3 & q4, "parallel"),
    ],
)
def test_the_family_follows_the_query(pattern: Pattern, family: str) -> None:
    query = pycel.compile(pattern)
    assert query.family == family
    assert isinstance(query.stream().runner, RUNNERS[query.family])
    events = [Q0(x=0, y=0), Q1(x=0, y=0), Q2(x=0, y=0), Q3(x=0, y=0), Q1(x=0, y=1), Q2(x=0, y=0)]
    assert query.run(events).keys() == evaluate(pattern, events).keys()


def test_a_plan_is_immutable_and_pickles() -> None:
    import pickle

    query = pycel.compile(NESTED.within(events=5))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        query.limit = 3  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(query))
    assert isinstance(again, pycel.CompiledQuery) and isinstance(again, Plan)
    assert again.family == "parallel" and again.hcq == query.hcq
    events = [Q0(x=1, y=0), Q2(x=1, y=2), Q1(x=1, y=2)]
    assert again.run(events).keys() == query.run(events).keys() == evaluate(NESTED, events).keys()


def test_a_query_no_family_runs_gets_one_error_with_the_way_out() -> None:
    # The join leaves q1 unconstrained and the body is no conjunction: no family runs it.
    pattern = pycel.seq(q0, q1, q2).where(q0.x == q2.x)
    with pytest.raises(UnsupportedError, match=r"does not constrain .*post_filter=True"):
        pycel.compile(pattern)
    # ... and the way out runs.
    fixed = pycel.seq(q0, q1, q2).where(q0.x == q2.x, post_filter=True)
    events = [Q0(x=1), Q1(x=0), Q2(x=1), Q2(x=2)]
    assert pycel.compile(fixed).run(events).keys() == evaluate(fixed, events).keys()


def _by_refusal(pattern: Pattern) -> str:
    """The family by its definition: try the sequential planning, and on refusal the
    parallelized plan (ALL/ANY without consumption only); re-raise if neither. (Later
    checks of the clauses may still refuse a sequential plan.)"""
    spec = split_query(pattern)
    body, _ = split_post_filters(spec.body)
    try:
        plan_joins(expand_conjunctions(body), spec.partition)
    except UnsupportedError:
        if spec.strategy in ("all", "any") and spec.consume == "none" and plan_hcq(body, spec.partition):
            return "parallel"
        raise
    if spec.strategy in ("last", "next", "max") and spec.window is not None:
        return "windowed"  # the strategy chooses among the matches that fit the window
    return {"max": "maximal", "last": "ranked", "next": "ranked"}.get(spec.strategy, "sequential")


def _family_or_error(pattern: Pattern) -> str:
    try:
        return plan_query(split_query(pattern)).family
    except UnsupportedError:
        return "refused"


def _refusal_or_family(pattern: Pattern) -> str:
    try:
        return _by_refusal(pattern)
    except UnsupportedError:
        return "refused"


def _same_choice(pattern: Pattern) -> None:
    chosen, defined = _family_or_error(pattern), _refusal_or_family(pattern)
    assert (chosen == "parallel") == (defined == "parallel"), (chosen, defined)
    assert chosen in (defined, "refused")  # the clause checks after planning may refuse
    if defined == "refused":
        assert chosen == "refused"


@given(hcq_cases())
def test_the_family_choice_equals_its_definition_on_conjunctions(case: tuple[Pattern, Any]) -> None:
    pattern, _ = case
    _same_choice(pattern)


@given(
    st.data(),
    st.sampled_from(["all", "any", "strict", "last", "next", "max"]),
)
def test_the_family_choice_equals_its_definition_on_generated_patterns(
    data: st.DataObject, strategy: str
) -> None:
    features = Features(conjunction=True, correlation=True, negation=True, contiguous=True, consume=True)
    try:
        pattern = data.draw(patterns(event_types(3), 3, features))
    except pycel.PatternError:
        reject()  # the generator may draw a non-hierarchical correlation (refused early)
    pattern = pattern.strategy(strategy) if strategy != "all" else pattern  # type: ignore[arg-type]
    try:
        split_query(pattern)
    except pycel.PatternError:
        return  # e.g. a strategy given twice
    _same_choice(pattern)
