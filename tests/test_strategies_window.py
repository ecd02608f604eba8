"""LAST, NEXT and MAX choose among the matches that fit the window (issue #17,
docs/strategies.md): generated differential tests against the reference evaluator for
every strategy under count and time windows, with PARTITION BY, equality joins, LIMIT,
SELECT, consumption and snapshot/restore cuts; time-window cases by hand; memory that
follows the window while keys churn; Spark streaming's state expiry."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import Base, Features, kleene_count, patterns, streams
from strategies import event_types as generated_types
from test_engine import A, B, D, Ev, a, agree, b, c

import pycel
from pycel.data.ingest import EventBatch, Schema
from pycel.dsl import Pattern
from pycel.jit.windowed import STRATEGY_CODES, strategy_mask
from pycel.language.checks import bound_variables
from pycel.reference import _strategy_filter
from pycel.runtime.snapshot.state import pack, unpack

TYPES = generated_types(3)
WINDOWED = ("last", "next", "max")


@st.composite
def windowed_queries(draw: st.DrawFn, correlation: bool = False) -> tuple[Pattern, int | None, list[Base]]:
    """A pattern with a count or time window, a strategy (mostly LAST/NEXT/MAX) and maybe
    PARTITION BY, SELECT, consumption; its LIMIT apart (None: none); a stream."""
    body_features = Features(
        windows=False, partition=False, negation=True, contiguous=not correlation, correlation=correlation
    )
    body = draw(patterns(TYPES, 3, body_features))
    size = draw(st.integers(0, 6))
    if draw(st.booleans()):
        pattern = body.within(events=size)
    else:
        pattern = body.within(size, on=Base.time)
    if draw(st.integers(0, 2)) == 0:
        pattern = pattern.partition_by(Base.x)
    pattern = pattern.strategy(draw(st.sampled_from([*WINDOWED, *WINDOWED, "strict", "all"])))
    if draw(st.integers(0, 3)) == 0:
        names = sorted(bound_variables(body))
        pattern = pattern.select(*draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    if draw(st.integers(0, 3)) == 0:
        pattern = pattern.consume(draw(st.sampled_from(["any", "partition"])))
    limit = draw(st.one_of(st.none(), st.integers(1, 3)))
    stream = draw(streams(TYPES, 12 if kleene_count(body) else 40))
    return pattern, limit, stream


def _compile(pattern: Pattern) -> pycel.CompiledQuery | None:
    """The compiled query, or None if the engine refuses it (joins with contiguity, joins
    that are not hierarchical: a PatternError...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return pycel.compile(pattern)
        except (pycel.UnsupportedError, pycel.PatternError):
            return None


def _check(pattern: Pattern, limit: int | None, stream: list[Base], cut: int) -> None:
    """The engine (in two pushes with a snapshot/restore between) against the reference:
    equal without LIMIT; with LIMIT n, min(n, available) distinct reference matches per end."""
    query = _compile(pattern if limit is None else pattern.limit(limit))
    assume(query is not None)
    assert query is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(pattern, stream)
    first = query.stream()
    got = list(first.push(stream[:cut]))
    got += list(pycel.Stream.restore(first.snapshot()).push(stream[cut:]))
    keys = [m.key() for m in got]
    assert len(set(keys)) == len(keys), "duplicate match"
    if limit is None:
        assert set(keys) == expected.keys()
        return
    assert set(keys) <= expected.keys()
    available: dict[int, int] = {}
    for m in expected:
        available[m.end] = available.get(m.end, 0) + 1
    per_end: dict[int, int] = {}
    for m in got:
        per_end[m.end] = per_end.get(m.end, 0) + 1
    assert per_end == {e: min(limit, k) for e, k in available.items()}


@settings(max_examples=150)
@given(windowed_queries(), st.data())
def test_generated_windowed_strategies_equal_the_reference(
    query: tuple[Pattern, int | None, list[Base]], data: st.DataObject
) -> None:
    pattern, limit, stream = query
    _check(pattern, limit, stream, data.draw(st.integers(0, len(stream))))


@settings(max_examples=80)
@given(windowed_queries(correlation=True), st.data())
def test_generated_windowed_strategies_with_joins_equal_the_reference(
    query: tuple[Pattern, int | None, list[Base]], data: st.DataObject
) -> None:
    pattern, limit, stream = query
    _check(pattern, limit, stream, data.draw(st.integers(0, len(stream))))


@st.composite
def wide_max_queries(draw: st.DrawFn) -> tuple[Pattern, list[Base]]:
    """MAX with a count window wide enough to hold most of a stream whose events are mostly
    the types of the pattern's ``+``: many outputs per end, most contained in others."""
    body = draw(patterns(TYPES, 3, Features(windows=False, partition=False, negation=True, contiguous=True)))
    assume(kleene_count(body) > 0)
    pattern = body.within(events=draw(st.integers(6, 14)))
    if draw(st.booleans()):
        pattern = pattern.partition_by(Base.x)
    return pattern.strategy("max"), draw(streams(TYPES, 14))


@settings(max_examples=150)
@given(wide_max_queries(), st.data())
def test_generated_max_with_wide_windows_equals_the_reference(
    query: tuple[Pattern, list[Base]], data: st.DataObject
) -> None:
    """MAX's search (pycel/jit/choose_max.py) drops a partial path once a larger one can
    follow it everywhere; with windows holding up to 14 events under ``+`` it keeps what
    the reference keeps among every output that fits."""
    pattern, stream = query
    _check(pattern, None, stream, data.draw(st.integers(0, len(stream))))


@settings(max_examples=300)
@given(
    st.lists(st.frozensets(st.integers(0, 8), max_size=5), min_size=1, max_size=8),
    st.lists(st.booleans(), min_size=9, max_size=9),
    st.sampled_from(WINDOWED),
)
def test_the_choice_loop_equals_the_reference_choice(
    sets: list[frozenset[int]], twice: list[bool], strategy: str
) -> None:
    """strategy_mask on one end position's matches (entries by position, descending; a
    position bound to two variables appears twice) keeps what the reference keeps."""
    valuations = [
        frozenset({("v", 9)} | {(v, p) for p in c for v in ("v", "w")[: 1 + twice[p]]}) for c in sets
    ]
    offsets, positions = [0], []
    for val in valuations:
        positions += sorted((p for _, p in val), reverse=True)
        offsets.append(len(positions))
    keep = strategy_mask(
        np.full(len(sets), 9, dtype=np.int64),
        np.array(offsets, dtype=np.int64),
        np.array(positions, dtype=np.int64),
        STRATEGY_CODES[strategy],
    )
    chosen = _strategy_filter(strategy, valuations, None)  # type: ignore[arg-type]
    assert [v for v, k in zip(valuations, keep, strict=True) if k] == chosen


# -- by hand -------------------------------------------------------------------------------
def test_next_under_a_time_window_returns_the_earliest_run_that_fits() -> None:
    """A@t0 A@t5 B@t6: within 2 time units only the A at t5 fits: NEXT returns {1, 2}
    (the CORE paper's order chose {0, 2} and the window dropped it)."""
    events = [A(x=0, time=0), A(x=0, time=5), B(x=0, time=6)]
    pattern = pycel.seq(a, b).strategy("next").within(2, on=Ev.time)
    assert [m.positions() for m in pycel.compile(pattern).run(events)] == [(1, 2)]
    assert agree(pattern, events) == 1


def test_last_and_max_under_a_time_window_choose_among_the_runs_that_fit() -> None:
    """seq(plus(a), b): without a window LAST and MAX take every a; within 1 time unit
    only the a's at time 4 and 5 fit."""
    events = [A(x=0, time=0), A(x=0, time=4), A(x=0, time=5), B(x=0, time=5)]
    for strategy in ("last", "max"):
        pattern = pycel.seq(pycel.plus(a), b).strategy(strategy)  # type: ignore[arg-type]
        assert [m.positions() for m in pycel.compile(pattern).run(events)] == [(0, 1, 2, 3)]
        windowed = pattern.within(1, on=Ev.time)
        assert [m.positions() for m in pycel.compile(windowed).run(events)] == [(1, 2, 3)]
        assert agree(windowed, events) == 1


def test_consumption_then_window_then_strategy() -> None:
    """At 2 NEXT chooses {0, 2} among the runs that fit; its output consumes the runs from
    0 and 1, so at 5 NEXT chooses among the runs that start after 2: {3, 5}."""
    events = [A(x=0), A(x=0), B(x=0), A(x=0), A(x=0), B(x=0)]
    pattern = pycel.seq(a, b).strategy("next").within(events=2).consume("any")
    assert [m.positions() for m in pycel.compile(pattern).run(events)] == [(0, 2), (3, 5)]
    assert agree(pattern, events) == 2


@pytest.mark.parametrize(
    ("strategy", "old_family"), [("next", "ranked"), ("last", "ranked"), ("max", "maximal")]
)
def test_a_snapshot_of_the_old_meaning_is_refused(strategy: Any, old_family: str) -> None:
    """A snapshot whose plan runs a windowed LAST/NEXT/MAX in the family of the old
    meaning (strategy before window) is an error, not a stream that mixes both."""
    pattern = pycel.seq(a, b).within(events=3).strategy(strategy)
    events = [A(x=0), B(x=0), A(x=0), B(x=0)]
    stream_ = pycel.compile(pattern).stream()
    stream_.push(events[:2])
    state, arrays = unpack(stream_.snapshot())
    assert state["plan"]["family"] == "windowed"
    later = pycel.Stream.restore(pack(state, arrays)).push(events[2:]).keys()
    assert later == {k for k in pycel.reference.evaluate(pattern, events).keys() if k[1] >= 2}
    state["plan"]["family"] = old_family
    with pytest.raises(pycel.DataError, match="older pycel"):
        pycel.Stream.restore(pack(state, arrays))


# -- memory ----------------------------------------------------------------------------------
def _keyed_batch(schema: Schema, offset: int, type_ids: np.ndarray, keys: np.ndarray) -> EventBatch:
    n = len(type_ids)
    cols = {f: np.zeros(n, dtype=np.int32 if t == "str" else np.int64) for f, t in schema.fields.items()}
    cols["x"] = keys.astype(np.int64)
    cols["time"] = (keys % 7).astype(np.int64)  # a second key column: keys are tuples
    valid = {f: np.ones(n, dtype=np.bool_) for f in schema.fields}
    return EventBatch(schema, offset, type_ids.astype(np.int32), cols, valid)


@pytest.mark.parametrize("strategy", WINDOWED)
def test_memory_follows_the_window_as_keys_churn(strategy: Any) -> None:
    """10 million events whose partition keys keep changing (each key lives ~5,000
    events; 100,000 distinct keys in all), window of 1,000 events: the node store, H and
    the key tuples stay bounded (counters, not time)."""
    pattern = pycel.seq(a, b, c).partition_by(Ev.x, Ev.time).within(events=1000).strategy(strategy)
    st_ = pycel.compile(pattern, types=[D]).stream()
    rng = np.random.default_rng(3)
    ids = np.array([st_.schema.type_names.index(n) for n in ("A", "B", "C", "D")])
    peaks, tuples, found = [], [], 0
    chunk = 1_000_000
    for k in range(10):
        pos = np.arange(k * chunk, (k + 1) * chunk)
        keys = pos // 100 + rng.integers(0, 50, size=chunk)  # a sliding band of ~50 live keys
        types = ids[rng.choice(4, size=chunk, p=[0.3, 0.3, 0.1, 0.3])]
        found += len(st_.push(_keyed_batch(st_.schema, k * chunk, types, keys)))
        stats = st_.stats()
        peaks.append((stats["extend_capacity"], stats["heap_capacity"], stats["h_capacity"]))
        tuples.append(len(st_.key_tuples.ids))
    assert st_.offset == 10 * chunk and found > 0
    assert peaks[-1] == peaks[2], peaks
    assert max(tuples) <= 2_000, tuples  # ~60 keys live in a window, not 100,000


# -- Spark streaming ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["all", "strict", *WINDOWED])
def test_spark_state_expires_after_a_time_window_under_every_strategy(strategy: Any) -> None:
    """A key idle for longer than the time window can output nothing more, whatever the
    strategy: its streaming state expires (it was kept forever under LAST/NEXT/MAX)."""
    pytest.importorskip("pyspark")
    from pycel.spark._streaming import expiry_ms

    pattern = pycel.seq(a, b).within(5, on=Ev.time).strategy(strategy)
    assert expiry_ms(pycel.compile(pattern), None) == 5000
    assert expiry_ms(pycel.compile(pattern), 7) == 7000
    assert expiry_ms(pycel.compile(pycel.seq(a, b).strategy(strategy)), None) is None
