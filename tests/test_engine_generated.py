"""Generated patterns and streams: the engine returns exactly the reference's matches.

Patterns nest up to depth 4 over 4 event types with filters, OR, Kleene, AS, negated
atoms, both kinds of windows, partition_by, projection and consumption (every feature
the engine runs); streams have up to 60 events (14 when the pattern iterates, so the
brute-force oracle stays fast).
"""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Features, assert_limited, cases, event_types, restored_at, without_limit

import pycel
from pycel.dsl import Pattern

TYPES = event_types(4)
ENGINE = Features(negation=True, consume=True, select=True)


def _compile(pattern: Pattern) -> pycel.CompiledQuery:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pycel.compile(pattern)


@settings(max_examples=200)
@given(cases(TYPES, ENGINE))
def test_engine_equals_reference_on_generated_patterns(case: tuple[Pattern, list[object]]) -> None:
    pattern, stream = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(pattern, stream).keys()
    got = _compile(pattern).run(stream)
    assert len(got.keys()) == len(got), "duplicate match"
    assert got.keys() == expected


@settings(max_examples=60)
@given(cases(TYPES, ENGINE), st.data())
def test_pushing_in_pieces_equals_one_run(case: tuple[Pattern, list[object]], data: st.DataObject) -> None:
    pattern, stream = case
    query = _compile(pattern)
    whole = query.run(stream).keys()
    assert restored_at(query, stream, data.draw(st.integers(0, len(stream)))) == whole


@settings(max_examples=60)
@given(cases(TYPES, Features(negation=True, consume=True, limit=True)))
def test_limit_keeps_a_subset_of_at_most_n_per_end(case: tuple[Pattern, list[object]]) -> None:
    pattern, stream = case
    unlimited, limit = without_limit(pattern)
    got = _compile(pattern).run(stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(unlimited, stream)
    assert len(got.keys()) == len(got)  # no duplicates
    assert_limited(got.keys(), expected.keys(), limit)
