"""A query's compiled tables are built once per process and shared by all its streams
(issue #13, item 4): the determinized automaton with its class numbering (sequential,
ranked, windowed), the MAX pair automaton (maximal) and the parallelized transitions
(parallel). Expansion on a new predicate class stays lazy: a class one stream brings is
in every stream's tables, numbered once, and streams running in several threads still
find exactly the reference evaluator's matches.
"""

from __future__ import annotations

import pickle
import threading
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from strategies import Base, Features, cases, event_types
from test_planner import NESTED

import pycel
import pycel.plan.determinize
from pycel.dsl import Pattern
from pycel.errors import UnsupportedError
from pycel.reference import evaluate
from pycel.runtime.runners.sequential import SharedAutomaton

T0, T1, T2 = event_types(3)
a, b, c = pycel.alias(T0, "a"), pycel.alias(T1, "b"), pycel.alias(T2, "c")

SEQ = pycel.seq(a.where(a.x > 0), b.where(b.s != "c"), c.where(c.x < 3))
#: One query per family (the threads test runs each).
FAMILIES: dict[str, Pattern] = {
    "sequential": SEQ.within(events=8).partition_by(Base.x),
    "ranked": SEQ.strategy("last").partition_by(Base.x),
    "windowed": SEQ.within(events=6).strategy("next"),
    "maximal": pycel.seq(a, pycel.plus(b.where(b.x > 1)), c).strategy("max").partition_by(Base.x),
}


def shared_of(stream: pycel.Stream) -> object:
    """The tables a stream's runner reads, as the object it shares with its query."""
    runner = stream.runner
    runner = getattr(runner, "inner", runner)  # the windowed runner's sequential automaton
    return getattr(runner, "shared", None) or runner.tables  # parallel: the loop's arrays


def class_bits(stream: pycel.Stream) -> list[int]:
    return list(shared_of(stream).classes.bits)  # type: ignore[attr-defined]


def events(n: int, seed: int, types: tuple[type[Any], ...] = (T0, T1, T2)) -> list[Any]:
    """``n`` events of ``types`` with x in 0..3, s in a/b/c and growing time."""
    rng = np.random.default_rng(seed)
    kinds, xs, ss = rng.integers(0, len(types), n), rng.integers(0, 4, n), rng.integers(0, 3, n)
    return [
        types[k](x=int(x), s="abc"[s], time=t // 2)
        for t, (k, x, s) in enumerate(zip(kinds.tolist(), xs.tolist(), ss.tolist(), strict=True))
    ]


def reference(pattern: Pattern, stream: list[Any]) -> set[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate(pattern, stream).keys()


@pytest.mark.parametrize("pattern", [*FAMILIES.values(), NESTED], ids=[*FAMILIES, "parallel"])
def test_streams_of_one_query_share_one_table_object(pattern: Pattern) -> None:
    query = pycel.compile(pattern)
    first, second = query.stream(), query.stream()
    assert shared_of(first) is shared_of(second) is shared_of(query.stream())
    # Per query: the same pattern compiled again has tables of its own.
    assert shared_of(pycel.compile(pattern).stream()) is not shared_of(first)


def test_a_class_one_stream_brings_is_in_the_other_streams_tables() -> None:
    pattern = SEQ.partition_by(Base.x)
    query = pycel.compile(pattern)
    only_a, others = events(30, 1, (T0,)), events(30, 2, (T1, T2))
    first, second = query.stream(), query.stream()
    got_first = first.push(only_a).keys()
    seen = class_bits(first)
    got_second = second.push(others).keys()
    # Appended, never renumbered: the first stream's classes keep their ids.
    assert class_bits(first) == class_bits(second) and class_bits(first)[: len(seen)] == seen
    assert len(class_bits(first)) > len(seen)
    # Both streams then read the tables the other expanded.
    got_first |= first.push(others).keys()
    got_second |= second.push(only_a).keys() | second.push(others).keys()
    assert got_first == reference(pattern, only_a + others) and got_first
    assert got_second == reference(pattern, others + only_a + others) and got_second


@settings(max_examples=40)
@given(
    case=cases(
        event_types(3),
        Features(contiguous=True, negation=True, strategies=True, consume=True, select=True),
        max_len=30,
    ),
    data=st.data(),
)
def test_streams_sharing_tables_each_equal_the_reference(case: tuple[Pattern, list[Any]], data: Any) -> None:
    """One stream expands the tables for the second half of the events first; another then
    runs all of them (its first classes are new, its later ones the first stream's)."""
    pattern, stream = case
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            query = pycel.compile(pattern)
    except UnsupportedError:
        reject()
    cut = data.draw(st.integers(0, len(stream)))
    early, late = query.stream(), query.stream()
    assert late.push(stream[cut:]).keys() == reference(pattern, stream[cut:])
    got = early.push(stream[:cut]).keys() | early.push(stream[cut:]).keys()
    assert got == reference(pattern, stream)
    assert shared_of(early) is shared_of(late)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_streams_of_one_query_in_two_threads_equal_the_reference(family: str) -> None:
    pattern = FAMILIES[family]
    query = pycel.compile(pattern)
    n = 24 if family == "maximal" else 80  # the reference enumerates every + valuation
    # Different data per thread: each brings classes the other has not seen yet.
    data = [events(n, 10, (T0, T1)) + events(n, 11), events(n, 12, (T1, T2)) + events(n, 13)]
    results: list[set[Any]] = [set(), set()]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run(k: int) -> None:
        try:
            stream = query.stream()
            start.wait()
            for lo in range(0, len(data[k]), 5):  # many small pushes: expansions interleave
                results[k] |= stream.push(data[k][lo : lo + 5]).keys()
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        assert results[k] == reference(pattern, data[k])
    assert any(results)


def test_pickling_a_query_ships_no_tables_and_the_copy_builds_its_own() -> None:
    pattern = FAMILIES["sequential"]
    query = pycel.compile(pattern)
    before = pickle.dumps(query)
    stream = events(60, 3)
    assert query.run(stream).keys() == reference(pattern, stream)
    assert pickle.dumps(query) == before  # the tables built meanwhile are not in it
    again = pickle.loads(before)
    assert shared_of(again.stream()) is not shared_of(query.stream())
    assert again.run(stream).keys() == reference(pattern, stream)


@pytest.mark.parametrize("family", ["sequential", "ranked", "maximal"])
def test_a_restored_stream_keeps_its_snapshots_tables(family: str) -> None:
    """A snapshot holds the tables as the query's streams expanded them (also classes this
    stream never saw); the restored stream reads its own copy, numbered as saved."""
    pattern = FAMILIES[family]
    query = pycel.compile(pattern)
    n = 20 if family == "maximal" else 60
    first, rest, elsewhere = events(n, 4, (T0, T1)), events(n, 5), events(n, 6, (T2,))
    stream, other = query.stream(), query.stream()
    got = stream.push(first).keys()
    other.push(elsewhere)  # classes the snapshotted stream never saw
    restored = pycel.Stream.restore(stream.snapshot())
    assert shared_of(restored) is not shared_of(stream)
    assert class_bits(restored) == class_bits(stream)
    got |= restored.push(rest).keys()
    want = reference(pattern, first + rest)
    assert got == want
    # The snapshotted stream itself goes on, on the query's tables.
    assert stream.push(rest).keys() == {m for m in want if m[1] >= n}


def test_an_expansion_that_failed_is_refused_to_every_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Too many deterministic states leave the tables half expanded: a second stream with
    the classes already numbered must not read them (it would miss matches silently)."""
    query = pycel.compile(pycel.seq(a, b, c))
    stream = events(30, 7)
    monkeypatch.setattr(pycel.plan.determinize, "MAX_STATES", 3)
    with pytest.raises(UnsupportedError, match="grew too large"):
        query.stream().push(stream)
    with pytest.raises(UnsupportedError, match="grew too large"):
        query.stream().push(stream)
    monkeypatch.undo()
    assert pycel.compile(pycel.seq(a, b, c)).run(stream).keys() == reference(pycel.seq(a, b, c), stream)


def test_a_copy_of_a_stream_shares_the_tables_and_a_pickled_one_has_its_own() -> None:
    """A failed push puts back a deep copy of the stream's state (Stream._state_copy): the
    copy reads the same shared tables; a stream's state pickled (an older snapshot form)
    still pickles, with a lock of its own."""
    import copy

    query = pycel.compile(FAMILIES["sequential"])
    stream = query.stream()
    stream.push(events(20, 8))
    shared = shared_of(stream)
    assert isinstance(shared, SharedAutomaton)
    assert shared_of(copy.deepcopy(stream)) is shared
    clone = pickle.loads(pickle.dumps(shared))
    assert clone is not shared and clone.classes.bits == shared.classes.bits
    assert clone.lock is not shared.lock and clone.lock.acquire(blocking=False)
    clone.lock.release()
