"""Rough edges of :class:`pycel.Matches` as a sequence: indexes out of range, negative
indexes and slices behave as a list's (they returned a garbage match or a TypeError)."""

from __future__ import annotations

import numpy as np
import pytest

import pycel


class A(pycel.Event):
    v: pycel.Field[int]


class B(pycel.Event):
    v: pycel.Field[int]


a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
PATTERN = pycel.seq(pycel.plus(a), b).within(events=4)
EVENTS = [A(v=1), A(v=2), B(v=3), A(v=4), B(v=5), B(v=6)]


@pytest.fixture(scope="module")
def matches() -> pycel.Matches:
    found = pycel.compile(PATTERN).run(EVENTS)
    assert found.keys() == pycel.reference.evaluate(PATTERN, EVENTS).keys()
    assert len(found) > 4
    return found


def test_every_index_in_range_is_the_iterated_match(matches: pycel.Matches) -> None:
    listed = list(matches)
    n = len(matches)
    for k in range(-n, n):
        assert matches[k] == listed[k]
        assert matches[np.int64(k)] == listed[k]


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_an_index_out_of_range_is_an_index_error(matches: pycel.Matches, offset: int) -> None:
    """matches[-n - 1] used to return a made-up match (start and end of the last one,
    an empty valuation); matches[n] raised numpy's message about another array."""
    n = len(matches)
    for k in (n + offset, -n - 1 - offset):
        with pytest.raises(IndexError, match=rf"match index {k} out of range \({n} matches\)"):
            matches[k]
    with pytest.raises(IndexError):
        pycel.Matches.empty(("a",))[0]


@pytest.mark.parametrize(
    "part",
    [
        slice(None, 2),
        slice(1, None),
        slice(None, None, 2),
        slice(None, None, -1),
        slice(5, 1),
        slice(-3, None),
    ],
)
def test_a_slice_is_matches_of_the_same_matches(matches: pycel.Matches, part: slice) -> None:
    sliced = matches[part]
    assert isinstance(sliced, pycel.Matches)
    assert list(sliced) == list(matches)[part]
    assert sliced.variables == matches.variables
    long = sliced.to_pandas()
    assert sorted(set(long["match"])) == list(range(len(sliced)))


def test_other_indexes_are_a_type_error(matches: pycel.Matches) -> None:
    with pytest.raises(TypeError, match="Matches indexes are integers or slices"):
        matches["a"]  # type: ignore[call-overload]


def test_a_name_that_is_no_variable_of_the_query_is_a_key_error(matches: pycel.Matches) -> None:
    """match["A"] for match["a"] returned (), as for a variable the match leaves unbound."""
    match = matches[0]
    assert match["a"] and match["b"]
    for typo in ("A", "B", "x", "a "):
        with pytest.raises(
            KeyError, match=rf"'{typo}' is not a variable of the query; its variables are \['a', 'b'\]"
        ):
            match[typo]
        with pytest.raises(KeyError):
            match.events(typo)
    for part in (matches[1:], matches[::2]):
        with pytest.raises(KeyError):
            part[0]["A"]


def test_a_variable_the_match_leaves_unbound_is_empty() -> None:
    """OR binds one side per match; select() drops variables from the output: both are
    variables of the query, so they read as () where a match does not bind them."""
    a2 = pycel.alias(A, "a2")
    either = pycel.seq(a | a2, b).within(events=2)
    found = pycel.compile(either).run(EVENTS)
    assert found.keys() == pycel.reference.evaluate(either, EVENTS).keys()
    assert {len(m["a"]) + len(m["a2"]) for m in found} == {1}
    projected = pycel.seq(a, b).select("b")
    found = pycel.compile(projected).run(EVENTS)
    assert found.keys() == pycel.reference.evaluate(projected, EVENTS).keys()
    assert all(m["a"] == () and len(m["b"]) == 1 for m in found)


@pytest.mark.parametrize("sub_stream", [False, True])
def test_events_of_a_match_reaching_into_an_earlier_push_are_refused(sub_stream: bool) -> None:
    """A stream keeps only its last push's events: ``match.events`` of an event pushed
    before says so (it returned the batch's row at a negative index: another event)."""
    stream = pycel.compile(PATTERN).stream()
    first, second = EVENTS[:2], EVENTS[2:]
    cut = {"positions": np.arange(2)} if sub_stream else {}
    stream.push(first, **cut)
    later = {"positions": np.arange(2, len(EVENTS))} if sub_stream else {}
    found = stream.push(second, **later)
    spanning = [m for m in found if m.start < 2]
    assert spanning and all(m.events("b") == [("B", {"v": EVENTS[m["b"][0]].v})] for m in spanning)
    for m in spanning:
        with pytest.raises(ValueError, match=r"position [01] is not in the batch these matches"):
            m.events("a")
