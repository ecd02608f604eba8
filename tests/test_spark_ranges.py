"""Range-parallel evaluation (pycel.spark._ranges) without Spark: generated windowed
patterns, the stream cut into ranges at every kind of point, each range run as Spark
would run its group (its events plus the halo, keeping the matches that end at its own
events). The union must equal the single-group run, ``query.run`` and
``pycel.reference.evaluate``. tests/test_spark.py checks that the Spark expressions put
each event in the same ranges as :meth:`RangePlan.members` does here.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import Base, Features, cases, event_types
from test_absence_window import window_cases

import pycel
from examples.stock_data import Buy, Sell, Stock, stock_events
from pycel import UnsupportedError
from pycel.dsl import Pattern

pytest.importorskip("pyspark")

from pycel.spark._plan import output_variables  # noqa: E402
from pycel.spark._ranges import (  # noqa: E402
    BUCKET_BITS,
    MIN_RANGE_EVENTS,
    RANGE,
    PositionBuckets,
    RangePlan,
    ahead_thresholds,
    auto_range_count,
    plan_ranges,
    range_refusal,
    time_thresholds,
    window_span,
    with_time_halos,
)
from pycel.spark._runner import RunnerSpec, run_group  # noqa: E402
from pycel.spark._tasks import partition_slots, spark_long_hash  # noqa: E402

TYPES = event_types(3)
S, B = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
#: What range-parallel evaluation accepts: every strategy, SELECT, any pattern shape.
RANGED = Features(
    contiguous=True,
    correlation=True,  # not conjunction: with correlation the generator can draw a rejected one
    strategies=True,
    select=True,
)
MatchKey = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def compiled(pattern: Pattern) -> pycel.CompiledQuery:
    """The compiled pattern; generated shapes the engine does not run yet are skipped."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pycel.compile(pattern)
    except UnsupportedError:
        assume(False)
        raise


def frame_of(stream: list[Any], positions: np.ndarray) -> pd.DataFrame:
    """The events as the columns a Spark group holds: type, attributes, position."""
    return pd.DataFrame(
        {
            "event_type": [type(e).__name__ for e in stream],
            "x": pd.array([e.x for e in stream], dtype="Int64"),
            "s": [e.s for e in stream],
            "time": np.array([e.time for e in stream], dtype=np.int64),
            "pos": positions,
        }
    )


def spec_for(query: pycel.CompiledQuery, plan: RangePlan | None) -> RunnerSpec:
    """What an executor runs: one group per key, or (with ``plan``) one per range."""
    return RunnerSpec(
        query=query,
        type_column="event_type",
        attributes=("x", "s", "time"),
        position_column="pos",
        key_columns=tuple(query.partition),
        id_column=None,
        event_columns=(),
        variables=output_variables(query),
        chunk_rows=7,  # several pushes per group
        range_column=RANGE if plan is not None else None,
        range_cut=(plan.first, plan.length) if plan is not None else None,
    )


def keys_of(rows: pd.DataFrame) -> set[MatchKey]:
    return {
        (int(start), int(end), tuple(sorted((v, tuple(p)) for v, p in cell.items() if len(p))))
        for start, end, cell in zip(rows["match_start"], rows["match_end"], rows["positions"], strict=True)
    }


def run_groups(spec: RunnerSpec, frame: pd.DataFrame, by: list[str]) -> set[MatchKey]:
    """Every group's matches, as ``groupBy(by).applyInPandas`` would find them (each
    match by one group only)."""
    got: set[MatchKey] = set()
    if not by:
        return keys_of(run_group(spec, frame))
    for _, group in frame.groupby(by, dropna=True):
        found = keys_of(run_group(spec, group.reset_index(drop=True)))
        assert not found & got, "a match found by two groups"
        got |= found
    return got


def plan_for(query: pycel.CompiledQuery, frame: pd.DataFrame, length: int) -> RangePlan:
    """The cut :func:`pycel.spark._ranges.plan_ranges` makes, with ranges of ``length``."""
    positions = frame["pos"].to_numpy()
    first, span = int(positions.min()), int(positions.max() - positions.min() + 1)
    count = -(-span // length)
    ahead = bool(query.nfa.end_atoms)  # an absence at the end: halos after the ranges too
    if query.window_unit == "events":
        n = int(query.window_size)
        reach = max(1, min(count - 1, -(-n // length)))
        plan = RangePlan(first, length, count, halo_events=n, reach=reach)
        return attrs.evolve(plan, ahead_events=n, ahead_reach=reach) if ahead else plan
    homes = (positions - first) // length
    times = frame["time"]
    lows = [int(times[homes == r].min()) if (homes == r).any() else None for r in range(count)]
    highs = [int(times[homes == r].max()) if (homes == r).any() else None for r in range(count)]
    return with_time_halos(RangePlan(first, length, count), lows, highs, window_span(query, "integer"), ahead)


def in_ranges(
    query: pycel.CompiledQuery, frame: pd.DataFrame, plan: RangePlan, hot: frozenset[int] | None = None
) -> set[MatchKey]:
    """The matches of the range-parallel run: each event copied into its ranges. Under
    partition_by, only the ``hot`` values of x are cut (all when None); the other keys'
    events stay in one group per key (range -1), as pycel.spark runs them."""
    rows, ranges = plan.members(frame["pos"].to_numpy(), frame["time"].to_numpy())
    copies = frame.iloc[rows].reset_index(drop=True)
    copies[RANGE] = ranges.astype(np.int32)  # as Spark ships it; the own range is not shipped
    if hot is not None and query.partition:
        home = plan.homes(copies["pos"].to_numpy())
        cold = ~copies["x"].isin(list(hot)).to_numpy(dtype=bool)
        copies = copies[~cold | (copies[RANGE] == home).to_numpy()].reset_index(drop=True)
        cold = ~copies["x"].isin(list(hot)).to_numpy(dtype=bool)
        copies.loc[cold, RANGE] = -1
    return run_groups(spec_for(query, plan), copies, [*query.partition, RANGE])


@settings(max_examples=150)
@given(cases(TYPES, RANGED, max_len=40, max_len_with_plus=12), st.data())
def test_ranges_equal_one_group_the_engine_and_the_reference(
    case: tuple[Pattern, list[Base]], data: st.DataObject
) -> None:
    """Ranges of every length (1 event: a cut between every two events, through
    matches and between equal times), over dense or sparse positions; under
    partition_by, some keys cut (hot) and the others not."""
    pattern, stream = case
    query = compiled(pattern)
    assume(query.window_unit is not None and len(stream) > 0)
    assert range_refusal(query) is None
    step, offset = data.draw(st.sampled_from([(1, 0), (1, 5), (3, 0)]), label="positions")
    frame = frame_of(stream, np.arange(len(stream), dtype=np.int64) * step + offset)
    length = data.draw(st.integers(1, max(1, len(stream) * step)), label="range length")
    hot = frozenset(data.draw(st.sets(st.sampled_from([0, 1, 2, 3])), label="hot keys"))
    got = in_ranges(query, frame, plan_for(query, frame, length), hot)
    assert got == run_groups(spec_for(query, None), frame, list(query.partition))
    if (step, offset) == (1, 0):
        assert got == query.run(stream).keys()
        assert got == pycel.reference.evaluate(pattern, stream).keys()


@settings(max_examples=40)
@given(cases(TYPES, Features(strategies=True, consume=True, limit=True), max_len=30, max_len_with_plus=10))
def test_refused_clauses_are_those_that_look_before_the_window(case: tuple[Pattern, list[Base]]) -> None:
    """CONSUME BY and LIMIT (and patterns without a window) are not cut; every strategy
    is (they choose among the outputs that fit the window)."""
    pattern, _ = case
    query = compiled(pattern)
    refused = query.window_unit is None or query.consume != 0 or query.limit >= 0
    assert (range_refusal(query) is not None) == refused


def test_limit_is_refused_because_its_choice_depends_on_older_events() -> None:
    """LIMIT n keeps n of an end's matches in the engine's enumeration order: here, run
    from the halo's start, the engine keeps other matches ending at the same position
    than run over the whole stream, so LIMIT patterns are not cut."""
    ticks = stock_events(2000, names=5, seed=11)
    pattern = (S >> pycel.plus(B)).within(events=8).limit(2).select("b").partition_by(Stock.name)
    query = pycel.compile(pattern)
    whole = query.run(ticks.drop(columns=["id"])).keys()
    # As the range starting at 758 would run it: its halo starts 8 positions before.
    frame = ticks.drop(columns=["id"]).iloc[750:].reset_index(drop=True)
    late = query.stream().push(frame, positions=np.arange(750, len(ticks))).keys()
    whole_late, range_late = {m for m in whole if m[1] >= 758}, {m for m in late if m[1] >= 758}
    assert len(whole_late) == len(range_late) and whole_late != range_late  # other members
    assert range_refusal(query) is not None and "LIMIT" in str(range_refusal(query))


def test_empty_ranges_and_a_halo_reaching_several_ranges() -> None:
    """Sparse positions leave ranges empty; a count window longer than a range makes
    halos reach several ranges back."""
    t0, t1, _ = TYPES
    a, b = pycel.alias(t0, "a"), pycel.alias(t1, "b")
    pattern = (a >> pycel.plus(b)).within(events=9)
    stream = [t0(x=1, time=0), t1(x=1, time=1), t0(x=2, time=1), t1(x=2, time=2), t1(x=0, time=9)]
    query = pycel.compile(pattern)
    frame = frame_of(stream, np.array([0, 1, 2, 7, 9], dtype=np.int64))
    plan = plan_for(query, frame, 2)
    assert plan.count == 5 and plan.reach == 4  # every later range
    _, ranges = plan.members(frame["pos"].to_numpy(), frame["time"].to_numpy())
    assert 2 not in set(ranges[:5].tolist())  # no event is at home in [4, 6)
    assert in_ranges(query, frame, plan) == run_groups(spec_for(query, None), frame, [])
    assert len(in_ranges(query, frame, plan)) > 0


@settings(max_examples=150)
@given(window_cases(), st.data())
def test_absences_at_the_ends_in_ranges_equal_one_group_and_the_reference(
    case: tuple[Pattern, list[Base]], data: st.DataObject
) -> None:
    """An absence at the start reads the halo before a range; one at the end the halo
    after it (its matches wait for the events after them, up to their window's end):
    ranges of every length give one group's matches and the reference's."""
    pattern, stream = case
    query = compiled(pattern)
    assume(query.limit < 0)  # LIMIT is not cut (above)
    assert range_refusal(query) is None
    frame = frame_of(stream, np.arange(len(stream), dtype=np.int64))
    length = data.draw(st.integers(1, len(stream)), label="range length")
    plan = plan_for(query, frame, length)
    assert (plan.ahead_reach > 0) == bool(query.nfa.end_atoms)
    got = in_ranges(query, frame, plan, frozenset(data.draw(st.sets(st.sampled_from([0, 1, 2, 3])))))
    assert got == run_groups(spec_for(query, None), frame, list(query.partition))
    assert got == pycel.reference.evaluate(pattern, stream).keys()


def test_the_halo_ahead_reaches_as_far_as_the_window() -> None:
    """Orders not shipped within 3 time units, cut into ranges of 2 events: an order's
    shipment 3 units later is read by the order's range (two ranges ahead); one 5 units
    later is not (the span is rounded up by one unit, never down)."""
    t0, t1, _ = TYPES
    o, d = pycel.alias(t0, "o"), pycel.alias(t1, "d")
    pattern = pycel.seq(o, pycel.absent(d.where(d.x == o.x))).within(3, on=Base.time)
    stream = [t0(x=1, time=0), t0(x=2, time=1), t1(x=9, time=2), t1(x=2, time=3), t1(x=1, time=3),
              t0(x=3, time=5), t1(x=3, time=10)]  # fmt: skip
    query = pycel.compile(pattern)
    frame = frame_of(stream, np.arange(len(stream), dtype=np.int64))
    plan = plan_for(query, frame, 2)
    assert plan.ahead_reach >= 2
    rows, ranges = plan.members(frame["pos"].to_numpy(), frame["time"].to_numpy())
    assert (4, 0) in set(zip(rows.tolist(), ranges.tolist(), strict=True))  # x=1 shipped at 3
    assert (6, 2) not in set(zip(rows.tolist(), ranges.tolist(), strict=True))  # 10 > 5 + 3 (+1)
    got = in_ranges(query, frame, plan)
    assert got == pycel.reference.evaluate(pattern, stream).keys() == {(5, 5, (("o", (5,)),))}


@pytest.mark.parametrize("gap", [2, 3])
@pytest.mark.parametrize("length", [1, 2, 3])
def test_the_halo_ahead_holds_the_last_event_of_a_count_window(gap: int, length: int) -> None:
    """``within(events=2)``: a blocking event 2 positions after a match's start is inside
    its window (no match), 3 after is not (a match), also when the match is the last
    event of its range and the blocking one two ranges ahead."""
    t0, t1, t2 = TYPES
    o, d = pycel.alias(t0, "o"), pycel.alias(t1, "d")
    pattern = pycel.seq(o, pycel.absent(d)).within(events=2)
    stream = [t2(x=0, time=0)] * (length - 1) + [t0(x=0, time=0)] + [t2(x=0, time=0)] * (gap - 1)
    stream += [t1(x=0, time=0)]
    query = pycel.compile(pattern)
    frame = frame_of(stream, np.arange(len(stream), dtype=np.int64))
    want = pycel.reference.evaluate(pattern, stream).keys()
    assert len(want) == (gap > 2)
    assert in_ranges(query, frame, plan_for(query, frame, length)) == want


class _PlanningRan(Exception):
    """A planning step used the DataFrame."""


class _NoJobs:
    """A stand-in DataFrame that fails on any use: planning must run no Spark job."""

    def __getattr__(self, name: str) -> Any:
        raise _PlanningRan(f"DataFrame.{name}")


def test_one_core_runs_one_range_without_planning() -> None:
    """On one core (defaultParallelism 1) a cut only adds work: automatic ranges are 1
    and no planning job runs; two cores get ranges."""
    events = 50 * MIN_RANGE_EVENTS
    assert auto_range_count(events, events, None, cores=1) == 1
    assert auto_range_count(events, events, 100, cores=1) == 1
    assert auto_range_count(events, events, None, cores=2) > 1
    query = pycel.compile((S >> B).within(events=10))
    assert plan_ranges(_NoJobs(), query, "pos", None, cores=1) is None  # type: ignore[arg-type]


@settings(max_examples=60)
@given(
    st.integers(-(10**7), 10**7),
    st.lists(st.integers(0, 9000), min_size=1, max_size=60),
    st.integers(1, 6),
    st.integers(0, 5),
)
def test_a_cut_from_position_buckets_equals_the_cut_from_the_events(
    start: int, gaps: list[int], count: int, span: int
) -> None:
    """PositionBuckets.plan (one query: per bucket of 4096 positions, their smallest and
    largest position and time) gives ranges of whole buckets, and for them the halo
    thresholds and reach the ranges' own events give (what _time_plan computes)."""
    size = 1 << BUCKET_BITS
    positions = start + np.cumsum(np.array(gaps, dtype=np.int64))
    times = np.cumsum(np.array(gaps, dtype=np.int64) % 7)  # non-decreasing, with ties
    index, inverse = np.unique(positions >> BUCKET_BITS, return_inverse=True)
    per = [np.flatnonzero(inverse == k) for k in range(len(index))]
    buckets = PositionBuckets(
        index=index,
        first=np.array([positions[i].min() for i in per]),
        last=np.array([positions[i].max() for i in per]),
        events=np.array([len(i) for i in per]),
        lows=tuple(int(times[i].min()) for i in per),
        highs=tuple(int(times[i].max()) for i in per),
    )
    assert buckets.summary() == (positions.min(), positions.max(), len(positions), 0)
    length = max(1, -(-int(positions.max() - positions.min() + 1) // count))
    plan = buckets.plan(length, span, ahead=True)
    assert plan.first % size == 0 and plan.length % size == 0 and plan.length >= length
    assert plan.first <= positions.min() and plan.first + plan.count * plan.length > positions.max()
    homes = plan.homes(positions)
    lows = [int(times[homes == r].min()) if (homes == r).any() else None for r in range(plan.count)]
    highs = [int(times[homes == r].max()) if (homes == r).any() else None for r in range(plan.count)]
    assert (plan.thresholds, plan.reach) == time_thresholds(lows, highs, span)
    assert (plan.ahead_thresholds, plan.ahead_reach) == ahead_thresholds(lows, highs, span)


def test_partition_slots_put_each_range_in_its_own_hash_partition() -> None:
    """Spark partitions rows by pmod(murmur3(value, 42), n): the slot values land in the
    n partitions one each (tests/test_spark.py checks the hash against Spark's)."""
    for count in (1, 2, 3, 8, 37, 200):
        slots = partition_slots(count)
        assert len(set(slots)) == count
        assert [spark_long_hash(v) % count for v in slots] == list(range(count))
    assert len({spark_long_hash(v) % 8 for v in range(8)}) < 8  # the range numbers collide


def test_a_window_longer_than_the_keys_range_gives_thresholds_spark_can_hold() -> None:
    """within(seconds=1e300) on timestamps: the span is infinite as a float; it is cut to
    2**64 (no two integer keys are further apart) and the thresholds to Spark's long
    (a literal beyond it failed the job in Py4J), still reaching every key."""
    o, c = pycel.alias(TYPES[0], "o"), pycel.alias(TYPES[1], "c")
    query = pycel.compile(pycel.seq(o, c).within(seconds=1e300, on=Base.time))
    span = window_span(query, "integer")
    assert span == 2**64 + 1
    assert window_span(query, "micros") == 2**64 + 1
    lows, highs = [-(2**62), 0, 2**62], [-1, 2**62 - 1, 2**63 - 1]
    back, reach = time_thresholds(lows, highs, span)
    assert back == (-(2**63),) * 3 and reach == 2  # every earlier range is in every halo
    ahead, forward = ahead_thresholds(lows, highs, span)
    assert ahead == (2**63 - 1,) * 3 and forward == 2
