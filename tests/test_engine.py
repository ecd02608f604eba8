"""The engine against the reference evaluator: hand-written cases, snapshots, memory."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import pytest

import pycel
from pycel.data.ingest import EventBatch, Schema
from pycel.dsl import Pattern

warnings.simplefilter("ignore", UserWarning)


class Ev(pycel.Event):
    x: pycel.Field[int]
    s: pycel.Field[str]
    time: pycel.Field[int]


class A(Ev): ...


class B(Ev): ...


class C(Ev): ...


class D(Ev): ...


a, b, c, d = (pycel.alias(t, n) for t, n in ((A, "a"), (B, "b"), (C, "c"), (D, "d")))


def stream(n: int, seed: int) -> list[Ev]:
    rng = np.random.default_rng(seed)
    kinds = (A, B, C, D)
    return [
        kinds[int(rng.integers(0, 4))](x=int(rng.integers(0, 3)), s=str(rng.choice(["u", "v"])), time=k // 3)
        for k in range(n)
    ]


def agree(pattern: Pattern, events: list[Any]) -> int:
    """Assert engine == reference with no duplicate match; return the number of matches.
    (Shared by the engine test modules; pattern warnings are not the point here.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pycel.reference.evaluate(pattern, events).keys()
        got = pycel.compile(pattern).run(events)
    assert len(got.keys()) == len(got), f"{pattern!r}: the engine returned a duplicate match"
    missing, extra = sorted(expected - got.keys())[:3], sorted(got.keys() - expected)[:3]
    assert got.keys() == expected, f"{pattern!r}: missing {missing}, extra {extra}"
    return len(expected)


CASES: list[Pattern] = [
    pycel.seq(a, b, c),
    pycel.seq(a, b, c).within(events=4),
    pycel.seq(a, pycel.plus(b), c).within(events=6),
    pycel.seq(a, pycel.plus(pycel.seq(b, pycel.plus(c))), d).within(events=7),
    pycel.seq(a | b, c | d).within(events=3),
    pycel.seq(a.where(a.x > 0), b.where(b.s == "u"), c.where(c.x.isin([0, 2]))).within(events=8),
    pycel.seq(a, (pycel.seq(b, c)).as_("bc"), d).within(events=6),
    pycel.seq(a, b).within(2, on=Ev.time),
    pycel.seq(a, pycel.plus(b)).within(1, on=Ev.time),
    pycel.seq(a, b, c).partition_by(Ev.x).within(events=9),
    pycel.seq(a, pycel.plus(b), c).partition_by(Ev.x, Ev.s),
    pycel.seq(a, b, c).within(events=6).select("a", "c"),
    pycel.seq(a, pycel.plus(b), c).within(events=6).select("c"),
    pycel.seq(a, b).consume("any"),
    pycel.seq(a, b).partition_by(Ev.x).consume("partition"),
    pycel.seq(a, pycel.not_(B.where(B.x == 1)), c).within(events=3),
    pycel.seq(A, B).where(A.x < 2),
    pycel.plus(a).within(events=3),
    (pycel.seq(a, b) | pycel.seq(b, a)).within(events=3),
]


@pytest.mark.parametrize("pattern", CASES, ids=[repr(p)[:60] for p in CASES])
def test_engine_equals_reference(pattern: Pattern) -> None:
    for seed in range(3):
        agree(pattern, stream(22, seed))


def test_limit_keeps_at_most_n_per_end() -> None:
    events = stream(30, 7)
    full = pycel.reference.evaluate(pycel.seq(a, b, c).within(events=8), events)
    got = pycel.compile(pycel.seq(a, b, c).within(events=8).limit(2)).run(events)
    per_end: dict[int, int] = {}
    for m in got:
        per_end[m.end] = per_end.get(m.end, 0) + 1
    expected_ends = {m.end for m in full}
    assert set(per_end) == expected_ends
    assert all(k <= 2 for k in per_end.values())
    assert got.keys() <= full.keys()


def test_snapshot_restore_at_every_cut() -> None:
    events = stream(26, 3)
    query = pycel.compile(pycel.seq(a, pycel.plus(b), c).within(events=9).partition_by(Ev.s))
    whole = query.run(events).keys()
    assert whole
    for cut in range(len(events) + 1):
        first = query.stream()
        got = first.push(events[:cut]).keys()
        resumed = pycel.Stream.restore(first.snapshot())
        got |= resumed.push(events[cut:]).keys()
        assert got == whole, cut


def test_time_window_across_batches() -> None:
    events = stream(30, 11)
    query = pycel.compile(pycel.seq(a, b).within(2, on=Ev.time))
    st = query.stream()
    got = set()
    for k in range(0, 30, 7):
        got |= st.push(events[k : k + 7]).keys()
    assert got == pycel.reference.evaluate(pycel.seq(a, b).within(2, on=Ev.time), events).keys()


def test_bad_batch_changes_nothing() -> None:
    events = stream(20, 5)
    query = pycel.compile(pycel.seq(a, b).within(3, on=Ev.time))
    st = query.stream()
    st.push(events[:10])
    before = st.snapshot()
    with pytest.raises(pycel.DataError, match="time goes backwards"):
        st.push([A(x=1, s="u", time=0)])
    assert st.snapshot() == before
    rest = st.push(events[10:]).keys()
    assert rest == query.stream().push(events).keys() - query.stream().push(events[:10]).keys()


def test_compiled_query_pickles() -> None:
    query = pycel.compile(pycel.seq(a.where(a.s == "u"), b).within(events=5))
    clone = pickle.loads(pickle.dumps(query))
    events = stream(20, 1)
    assert clone.run(events).keys() == query.run(events).keys()


@pytest.mark.parametrize(
    "pattern, message",
    [
        (pycel.plus(a) & b, "AND between sequences of single events"),
        (pycel.seq(a, b, c).where(a.x == c.x), "correlation"),
    ],
)
def test_unsupported_is_a_clear_error(pattern: Pattern, message: str) -> None:
    with pytest.raises(pycel.UnsupportedError, match=message):
        pycel.compile(pattern)


def test_to_pandas_rows() -> None:
    events = stream(12, 2)
    df = pycel.compile(pycel.seq(a, b).within(events=3)).run(events).to_pandas()
    assert list(df.columns) == ["match", "start", "end", "variable", "position"]
    ref = pycel.reference.evaluate(pycel.seq(a, b).within(events=3), events)
    assert df["match"].nunique() == len(ref)
    assert len(df) == 2 * len(ref)


def _batch(schema: Schema, offset: int, type_ids: np.ndarray) -> EventBatch:
    n = len(type_ids)
    cols = {f: np.zeros(n, dtype=np.int32 if t == "str" else np.int64) for f, t in schema.fields.items()}
    valid = {f: np.ones(n, dtype=np.bool_) for f in schema.fields}
    return EventBatch(schema, offset, type_ids.astype(np.int32), cols, valid)


@pytest.mark.parametrize("strategy", ["all", "max"])
def test_memory_follows_the_window(strategy: Any) -> None:
    """10 million events, window of 1,000, no C (so no exponential output): the store stays
    bounded (counters, not time); under MAX the pair arena too."""
    query = pycel.compile(pycel.seq(a, pycel.plus(b), c).within(events=1000).strategy(strategy), types=[D])
    st = query.stream()
    rng = np.random.default_rng(0)
    ids = [st.schema.type_names.index(n) for n in ("A", "B", "C", "D")]
    peaks = []
    chunk = 1_000_000
    for k in range(10):
        types = np.array(ids)[rng.choice(4, size=chunk, p=[0.02, 0.2, 0.0, 0.78])]
        st.push(_batch(st.schema, k * chunk, types))
        stats = st.stats()
        peaks.append(
            (stats["extend_capacity"], stats["heap_capacity"], stats["h_capacity"], stats["pair_capacity"])
        )
    assert st.offset == 10 * chunk
    # Capacities settle after the first chunk and never grow again: memory follows the window.
    assert peaks[-1] == peaks[1], peaks
    assert peaks[-1][0] <= 16 * 1000 and peaks[-1][1] <= 64 * 1000, peaks
