"""Equality joins in the engine (run keys): identical to the reference, clear refusals.

Hand-written cases cover self-joins, joins on differently named attributes, multi-
attribute keys, chains, OR branches, AS groups, windows and clauses; generated cases draw
sequences of 2–4 occurrences (with + and OR) over three types that share a class of equal
attributes (1–2 classes), on streams with small value domains so joins hit.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import agree

import pycel
from pycel.data.ingest import EventBatch, Schema
from pycel.dsl import Limit, Pattern, as_pattern
from pycel.errors import PatternError, UnsupportedError


class Stock(pycel.Event):
    name: pycel.Field[str]
    price: pycel.Field[float]
    k: pycel.Field[int]
    time: pycel.Field[int]


class Buy(Stock): ...


class Sell(Stock): ...


class Order(pycel.Event):
    sym: pycel.Field[str]
    qty: pycel.Field[int]


class Fill(pycel.Event):
    ticker: pycel.Field[str]
    qty: pycel.Field[int]


s, b, b2, b3 = (pycel.alias(t, n) for t, n in ((Sell, "s"), (Buy, "b"), (Buy, "b2"), (Buy, "b3")))
o, f = pycel.alias(Order, "o"), pycel.alias(Fill, "f")


def _stock_stream() -> list[pycel.Event]:
    rng = np.random.default_rng(7)
    out: list[pycel.Event] = []
    for t in range(40):
        kind = Buy if rng.random() < 0.55 else Sell
        name = None if rng.random() < 0.08 else str(rng.choice(["INTC", "RIMM", "QQQ"]))
        out.append(
            kind(name=name, price=float(rng.integers(1, 4)), k=int(rng.integers(0, 3)), time=t // 2)
        )
    return out


STOCKS = _stock_stream()
HAND_WRITTEN = {
    "seq join": pycel.seq(s, b).where(s.name == b.name),
    "self-join": pycel.seq(b, b2).where(b.name == b2.name).within(events=6),
    "chain of four": pycel.seq(s, b, b2, b3)
    .where((s.name == b.name) & (b.name == b2.name) & (b3.name == b2.name))
    .within(events=12),
    "two attributes": pycel.seq(s, b, b2).where(
        (s.name == b.name) & (s.k == b.k) & (b2.name == s.name) & (b2.k == b.k)
    ),
    "int with float": pycel.seq(s, b).where(s.k == b.price),
    "kleene": pycel.seq(s, pycel.plus(b), b2).where((s.k == b.k) & (b2.k == s.k)).within(events=6),
    "or branches": pycel.seq(s | b, b2)
    .where((s.name == b2.name) & (b.name == b2.name))
    .within(events=5),
    "as group": pycel.seq(pycel.plus(b).as_("g"), s)
    .where(pycel.alias(Stock, "g").name == s.name)
    .within(events=5),
    "with unary filter": pycel.seq(s, b).where((s.name == b.name) & (b.price > 1) & (s.k > 0)),
    "time window": pycel.seq(s, b, b2).where((s.k == b.k) & (b.k == b2.k)).within(2, on=Stock.time),
    "partition and join": pycel.seq(s, b).where(s.k == b.k).partition_by(Stock.name),
    "last": pycel.seq(s, b, b2)
    .where((s.name == b.name) & (b.name == b2.name))
    .within(events=8)
    .strategy("last"),
    "consume any": pycel.seq(s, b).where(s.name == b.name).within(events=8).consume("any"),
    "consume partition, no partition_by": pycel.seq(s, b).where(s.k == b.k).consume("partition"),
    "select": pycel.seq(s, b, b2)
    .where((s.name == b.name) & (b2.name == s.name))
    .within(events=8)
    .select("s", "b2"),
}


ITERATED = {"kleene", "as group"}  # the reference is exponential in a +'s events: short stream


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_joins_equal_reference(name: str) -> None:
    assert agree(HAND_WRITTEN[name], STOCKS[:16] if name in ITERATED else STOCKS) > 0


def test_join_on_differently_named_attributes() -> None:
    events = [
        Order(sym="A", qty=1),
        Order(sym="B", qty=2),
        Fill(ticker="B", qty=2),
        Fill(ticker="A", qty=5),
        Fill(ticker=None, qty=1),
        Order(sym="A", qty=5),
        Fill(ticker="A", qty=5),
    ]
    pattern = pycel.seq(o, f).where(o.sym == f.ticker)
    assert agree(pattern, events) == 4
    assert agree(pycel.seq(o, f).where((o.sym == f.ticker) & (o.qty == f.qty)), events) == 2


def test_limit_keeps_at_most_n_per_end() -> None:
    pattern = pycel.seq(s, b).where(s.name == b.name)
    full = pycel.compile(pattern).run(STOCKS)
    limited = pycel.compile(pattern.limit(1)).run(STOCKS)
    assert set(limited.keys()) <= set(full.keys())
    ends = [m.end for m in full]
    assert sorted(m.end for m in limited) == sorted(set(ends))


def test_pushing_in_pieces_and_restoring_equal_one_run() -> None:
    query = pycel.compile(HAND_WRITTEN["chain of four"])
    whole = query.run(STOCKS).keys()
    for cut in (1, 13, 29):
        st = query.stream()
        first = st.push(STOCKS[:cut]).keys()
        st = pycel.Stream.restore(st.snapshot())
        assert first | st.push(STOCKS[cut:]).keys() == whole


REFUSED = {
    "occurrence left out": (pycel.seq(s, b, b2).where(s.name == b2.name), "does not constrain Buy"),
    "inside +": (pycel.plus(pycel.seq(s, b).where(s.k == b.k)), "inside an iteration"),
    "two attributes of one event": (
        pycel.seq(s, b).where((s.k == b.k) & (s.price == b.k)),
        "of the same event",
    ),
    "negated atom": (
        pycel.seq(s, pycel.not_(Sell, "n"), b).where((s.k == b.k) & (b.k == pycel.alias(Stock, "n").k)),
        "negated atom",
    ),
    "contiguity": (pycel.seq(s, b, contiguous=True).where(s.k == b.k), "contiguity"),
    "strict": (pycel.seq(s, b).where(s.k == b.k).strategy("strict"), "contiguity"),
    "consume by partition": (
        pycel.seq(s, b).where(s.k == b.k).partition_by(Stock.name).consume("partition"),
        "CONSUME BY PARTITION",
    ),
    "related only through an OR": (
        pycel.seq(s | b, b2).where((s.k == b.k) & (b.k == b2.k)),
        "leave unbound",
    ),
    "related types, other attributes": (
        pycel.seq(pycel.alias(Stock, "x"), b).where(pycel.alias(Stock, "x").k == b.price),
        "can be read as both",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_correlations_are_refused_with_the_way_out(name: str) -> None:
    pattern, message = REFUSED[name]
    with pytest.raises(UnsupportedError, match=message):
        pycel.compile(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pycel.reference.evaluate(pattern, STOCKS[:8])  # the oracle still runs them


def test_join_between_str_and_int_is_a_pattern_error() -> None:
    with pytest.raises(PatternError, match="cannot compare"):
        pycel.compile(pycel.seq(o, f).where(o.sym == f.qty))  # type: ignore[comparison-overlap]


# -- generated ----------------------------------------------------------------------------
class J(pycel.Event):
    x: pycel.Field[int]
    y: pycel.Field[int]
    s: pycel.Field[str]
    time: pycel.Field[int]


class J0(J): ...


class J1(J): ...


class J2(J): ...


JTYPES = (J0, J1, J2)


@st.composite
def join_cases(draw: st.DrawFn) -> tuple[Pattern, list[J]]:
    """A sequence of 2–4 occurrences (one may be iterated, one may be an OR of two) whose
    every occurrence is correlated on one class (per-type attribute x or y), maybe a
    second class on s; windows, partition, strategy and clauses sometimes."""
    n = draw(st.integers(2, 4))
    attr_of = {t: draw(st.sampled_from(["x", "y"])) for t in JTYPES}
    occurrences: list[tuple[Any, type[J]]] = []
    optional: set[int] = set()  # indices of the occurrences inside the OR
    items: list[Pattern] = []
    plus_at = draw(st.integers(-1, n - 1))
    or_at = draw(st.integers(-1, n - 1))
    for k in range(n):
        t = draw(st.sampled_from(JTYPES))
        v = pycel.alias(t, f"v{k}")
        occurrences.append((v, t))
        item: Pattern = as_pattern(v)
        if k == or_at:
            t2 = draw(st.sampled_from(JTYPES))
            w = pycel.alias(t2, f"w{k}")
            optional.update((len(occurrences) - 1, len(occurrences)))
            occurrences.append((w, t2))
            item = item | w
        if k == plus_at:
            item = pycel.plus(item)
        if draw(st.integers(0, 3)) == 0:
            item = item.where(v.x != draw(st.integers(0, 2)))
        items.append(item)
    pattern = pycel.seq(*items)
    # Join everything to an occurrence every match binds (not inside the OR): through an
    # optional one the conditions could hold vacuously, which the engine refuses.
    hubs = [k for k in range(len(occurrences)) if k not in optional]
    hub, hub_type = occurrences[draw(st.sampled_from(hubs))]
    key = getattr(hub, attr_of[hub_type])
    pred = None
    others = [(occ, t) for occ, t in occurrences if occ is not hub]
    for occ, t in others:
        eq = getattr(occ, attr_of[t]) == key
        pred = eq if pred is None else pred & eq
    if draw(st.booleans()):
        for occ, _ in others:
            pred = pred & (occ.s == hub.s)
    assert pred is not None
    pattern = pattern.where(pred)
    window = draw(st.sampled_from(["none", "events", "time"]))
    if window == "events":
        pattern = pattern.within(events=draw(st.integers(1, 8)))
    elif window == "time":
        pattern = pattern.within(draw(st.integers(0, 4)), on=J.time)
    if draw(st.integers(0, 4)) == 0:
        pattern = pattern.partition_by(J.s)
    clause = draw(st.sampled_from(["none", "none", "last", "max", "consume", "limit", "select"]))
    if clause in ("last", "max"):
        pattern = pattern.strategy(clause)  # type: ignore[arg-type]
    elif clause == "consume":
        pattern = pattern.consume("any")
    elif clause == "limit":
        pattern = pattern.limit(draw(st.integers(1, 2)))
    elif clause == "select":
        pattern = pattern.select("v0")
    length = draw(st.integers(0, 12 if plus_at >= 0 else 30))
    stream: list[J] = []
    time = 0
    for _ in range(length):
        time += draw(st.integers(0, 1))
        t = draw(st.sampled_from(JTYPES))
        null = draw(st.integers(0, 15)) == 0
        stream.append(
            t(
                x=None if null else draw(st.integers(0, 2)),
                y=draw(st.integers(0, 2)),
                s=draw(st.sampled_from(["a", "b"])),
                time=time,
            )
        )
    return pattern, stream


def _limited_subset(pattern: Pattern, stream: list[J]) -> None:
    """Under LIMIT n: a subset of the unlimited matches with min(n, count) per end."""
    assert isinstance(pattern, Limit)
    got = pycel.compile(pattern).run(stream)
    full = pycel.reference.evaluate(pattern.inner, stream)
    assert set(got.keys()) <= set(full.keys())
    per_end: dict[int, int] = {}
    for m in full:
        per_end[m.end] = per_end.get(m.end, 0) + 1
    got_end: dict[int, int] = {}
    for m in got:
        got_end[m.end] = got_end.get(m.end, 0) + 1
    assert got_end == {e: min(pattern.n, c) for e, c in per_end.items()}


@settings(max_examples=250, deadline=None)
@given(join_cases())
def test_generated_joins_equal_reference(case: tuple[Pattern, list[J]]) -> None:
    pattern, stream = case
    if isinstance(pattern, Limit):
        _limited_subset(pattern, stream)
    else:
        agree(pattern, stream)


# -- memory --------------------------------------------------------------------------------
def _keyed_batch(schema: Schema, offset: int, type_ids: np.ndarray, keys: np.ndarray) -> EventBatch:
    n = len(type_ids)
    cols = {f: np.zeros(n, dtype=np.int32 if t == "str" else np.int64) for f, t in schema.fields.items()}
    cols["x"] = keys.astype(np.int64)
    valid = {f: np.ones(n, dtype=np.bool_) for f in schema.fields}
    return EventBatch(schema, offset, type_ids.astype(np.int32), cols, valid)


def test_memory_follows_the_window_as_keys_churn() -> None:
    """4 million events whose join keys keep changing (each key lives for ~2,000 events;
    2 million distinct keys in all), window of 1,000: the store and H stay bounded."""
    a, c = pycel.alias(J0, "a"), pycel.alias(J2, "c")
    bb = pycel.alias(J1, "bb")
    query = pycel.compile(
        pycel.seq(a, pycel.plus(bb), c).where((a.x == bb.x) & (c.x == a.x)).within(events=1000)
    )
    st = query.stream()
    rng = np.random.default_rng(1)
    ids = np.array([st.schema.type_names.index(n) for n in ("J0", "J1", "J2")])
    peaks = []
    chunk = 500_000
    for k in range(8):
        pos = np.arange(k * chunk, (k + 1) * chunk)
        keys = pos // 2 + rng.integers(0, 1000, size=chunk)  # a sliding band of ~1,000 live keys
        types = ids[rng.choice(3, size=chunk, p=[0.3, 0.6, 0.1])]
        st.push(_keyed_batch(st.schema, k * chunk, types, keys))
        stats = st.stats()
        peaks.append((stats["extend_capacity"], stats["heap_capacity"], stats["h_capacity"]))
    assert st.offset == 8 * chunk
    assert peaks[-1] == peaks[2], peaks
    assert peaks[-1][2] <= 16 * 1024, peaks


def test_tuple_keys_are_forgotten_as_they_leave_the_window() -> None:
    """Two classes make a tuple key (a dictionary of tuples): it forgets the tuples that
    left every window, so it too follows the window while keys churn."""
    a, c, bb = pycel.alias(J0, "a"), pycel.alias(J2, "c"), pycel.alias(J1, "bb")
    joined = (a.x == bb.x) & (c.x == a.x) & (a.y == bb.y) & (c.y == a.y)
    query = pycel.compile(pycel.seq(a, bb, c).where(joined).within(events=1000))
    st = query.stream()
    rng = np.random.default_rng(2)
    ids = np.array([st.schema.type_names.index(n) for n in ("J0", "J1", "J2")])
    sizes, peaks = [], []
    chunk = 250_000
    for k in range(6):
        pos = np.arange(k * chunk, (k + 1) * chunk)
        batch = _keyed_batch(
            st.schema,
            k * chunk,
            ids[rng.choice(3, size=chunk)],
            pos // 2 + rng.integers(0, 1000, size=chunk),
        )
        batch.columns["y"] = rng.integers(0, 2, size=chunk)
        st.push(batch)
        sizes.append(len(st.key_tuples.ids))
        stats = st.stats()
        peaks.append((stats["extend_capacity"], stats["heap_capacity"], stats["h_capacity"]))
    # ~126k distinct tuples per chunk; after each push only those of the last window stay
    assert max(sizes) <= 1000, sizes
    assert peaks[-1] == peaks[2], peaks
    whole = pycel.seq(a, bb, c).where(joined).within(events=5)
    sample = [J0(x=1, y=0), J1(x=1, y=0), J1(x=1, y=1), J2(x=1, y=0), J2(x=1, y=1)]
    assert agree(whole, sample) == 1


@pytest.mark.parametrize(
    ("strategy", "kleene"), [("all", False), ("next", False), ("all", True), ("max", True)]
)
def test_tuple_keys_survive_forgetting_under_every_strategy(strategy: str, kleene: bool) -> None:
    """The key tuple of position 0 comes back after 5,000 other keys made the stream forget
    it: the pair {last - 1, last} (inside the window) is found under every strategy, since
    the strategies choose among the matches that fit the window; {0, last} does not fit."""
    a, bb = pycel.alias(J0, "a"), pycel.alias(J1, "bb")
    first = pycel.plus(a) if kleene else a
    pattern = pycel.seq(first, bb).where((a.x == bb.x) & (a.y == bb.y)).within(events=2).strategy(strategy)  # type: ignore[arg-type]
    events = [J0(x=-1, y=0), *(J0(x=k, y=1) for k in range(5000)), J0(x=-1, y=0), J1(x=-1, y=0)]
    st = pycel.compile(pattern).stream()
    got = [m.positions() for k in range(0, len(events), 500) for m in st.push(events[k : k + 500])]
    assert got == [(5001, 5002)]
    if not kleene:  # the reference does not prune by window: a + over 5,000 events is too much
        assert [m.positions() for m in pycel.reference.evaluate(pattern, events)] == got


def test_the_correlation_example_equals_reference() -> None:
    from examples.correlation import Cancelled, Filled, Placed, generate

    events = generate(300)
    o, f, c = pycel.alias(Placed, "o"), pycel.alias(Filled, "f"), pycel.alias(Cancelled, "c")
    filled = pycel.seq(o, f).where(o.sym == f.ticker)
    for pattern in (
        filled.within(seconds=60, on=Placed.time),
        filled.where(f.qty < o.qty, post_filter=True).within(seconds=60, on=Placed.time),
        (o & c).where(o.sym == c.sym).within(seconds=30, on=Placed.time),
    ):
        got = pycel.compile(pattern).run(events)
        assert got.keys() == pycel.reference.evaluate(pattern, events).keys()
        assert len(got) > 0


@st.composite
def implied_join_cases(draw: st.DrawFn) -> tuple[Pattern, list[J]]:
    """``seq(v0, [absent(w)], v1, [v2])`` partitioned by s, joined on s (which the partition
    implies) and maybe on x, the absence uncorrelated, correlated on s, or on x."""
    types = [draw(st.sampled_from(JTYPES)) for _ in range(draw(st.integers(2, 3)))]
    occ = [pycel.alias(t, f"v{k}") for k, t in enumerate(types)]
    pred = occ[1].s == occ[0].s
    by_x = draw(st.booleans())
    for v in occ[1:]:
        pred = pred & (v.s == occ[0].s)
        if by_x:
            pred = pred & (v.x == occ[0].x)
    w = pycel.alias(draw(st.sampled_from(JTYPES)), "w")
    # (beside the key x, the absence must be of that key too: refused otherwise)
    blocks = "x" if by_x else draw(st.sampled_from(["any", "s", "filtered"]))
    absence = pycel.absent(
        w if blocks == "any"
        else w.where(w.s == occ[0].s) if blocks == "s"
        else w.where((w.x == occ[0].x) & (w.y == 0)) if blocks == "x"
        else w.where(w.y == 0)
    )  # fmt: skip
    parts: list[Any] = [occ[0], absence, *occ[1:]] if draw(st.booleans()) else occ
    pattern = pycel.seq(*parts).where(pred).partition_by(J.s)
    if draw(st.booleans()):
        pattern = pattern.within(events=draw(st.integers(1, 8)))
    stream = [
        draw(st.sampled_from(JTYPES))(
            x=draw(st.integers(0, 1)),
            y=draw(st.integers(0, 1)),
            s=draw(st.sampled_from(["a", "b", None])),
            time=0,
        )
        for _ in range(draw(st.integers(0, 14)))
    ]
    return pattern, stream


@settings(max_examples=120, deadline=None)
@given(implied_join_cases())
def test_joins_the_partition_implies_need_no_key(case: tuple[Pattern, list[J]]) -> None:
    """``a.s == b.s`` under ``partition_by(s)`` holds for every match already: the planner
    drops it instead of making a key, so an absence beside it runs (it was refused: the
    key did not constrain the absent event)."""
    pattern, stream = case
    query = pycel.compile(pattern)
    assert all("s" not in dict(key.attributes).values() for key in query.join_keys)
    agree(pattern, stream)
