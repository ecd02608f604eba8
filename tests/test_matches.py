"""Matches as tables: the long and wide forms of to_pandas and to_arrow, checked against
the reference evaluator's matches and against the events themselves (attributes).

Each table is read back into match identities ``(start, end, valuation)`` by code that
knows nothing of the implementation (one row at a time), then compared with
``pycel.reference.evaluate``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Features, assert_limited, cases, event_types, without_limit

import pycel
from pycel import Event, Field
from pycel.reference import evaluate

TYPES = event_types(3)
Key = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


# -- reading tables back (row by row: independent of how they were built) -----------------
def _valuation(items: dict[str, list[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple(sorted((v, tuple(sorted(ps))) for v, ps in items.items() if ps))


def keys_of_long(rows: list[dict[str, Any]], n: int) -> set[Key]:
    """Match identities of a long table given as rows (dicts), of ``n`` matches (a match
    that binds no position, all projected away, has no row)."""
    by_match: dict[int, tuple[int, int, dict[str, list[int]]]] = {}
    for r in rows:
        _, _, vals = by_match.setdefault(r["match"], (r["start"], r["end"], {}))
        vals.setdefault(r["variable"], []).append(r["position"])
    assert set(by_match) <= set(range(n))  # match numbers 0..n-1
    return {(s, e, _valuation(v)) for s, e, v in by_match.values()}


def _positions(cell: Any) -> list[int]:
    if cell is None or cell is pd.NA:
        return []
    if isinstance(cell, list | np.ndarray):
        assert list(cell) == sorted(cell)  # lists are sorted
        return [int(p) for p in cell]
    return [int(cell)]


def keys_of_wide(rows: list[dict[str, Any]], variables: Sequence[str]) -> set[Key]:
    """Match identities of a wide table given as rows (dicts)."""
    assert [r["match"] for r in rows] == list(range(len(rows)))
    return {(r["start"], r["end"], _valuation({v: _positions(r[v]) for v in variables})) for r in rows}


def long_rows(m: pycel.Matches) -> list[dict[str, Any]]:
    return m.to_pandas().astype({"variable": object}).to_dict("records")


def wide_rows(m: pycel.Matches, **kw: Any) -> list[dict[str, Any]]:
    return m.to_pandas("wide", **kw).astype(object).to_dict("records")


def assert_tables_match(m: pycel.Matches, expected: set[Key]) -> None:
    """Every form of ``m`` (pandas and Arrow, long and wide) lists exactly ``expected``."""
    bound = {k for k in expected if k[2]}  # a row per (match, variable, position)
    assert keys_of_long(long_rows(m), len(m)) == bound
    assert keys_of_long(m.to_arrow().to_pylist(), len(m)) == bound
    assert keys_of_wide(wide_rows(m), m.variables) == expected
    assert keys_of_wide(m.to_arrow("wide").to_pylist(), m.variables) == expected
    # Forcing every variable into lists changes the layout, not the content.
    lists = {"lists": m.variables}
    assert keys_of_wide(wide_rows(m, **lists), m.variables) == expected
    assert keys_of_wide(m.to_arrow("wide", **lists).to_pylist(), m.variables) == expected


def event_value(event: Event, attr: str) -> Any:
    """An attribute of one input event as the tables show it (None for null)."""
    if attr == "event_type":
        return type(event).__name__
    value = getattr(event, attr, None)
    if isinstance(value, dt.datetime):
        return pd.Timestamp(value).tz_convert("UTC") if value.tzinfo else pd.Timestamp(value, tz="UTC")
    return value


def _plain(cell: Any) -> Any:
    if cell is pd.NA or cell is pd.NaT or (isinstance(cell, float) and np.isnan(cell)):
        return None
    return cell


def assert_attributes_joined(m: pycel.Matches, events: Sequence[Event], attrs: Sequence[str]) -> None:
    """Every attribute cell of the wide and long forms is the input event's value."""
    for rows in (
        m.to_pandas("wide", attributes=list(attrs)).astype(object).to_dict("records"),
        m.to_arrow("wide", attributes=list(attrs)).to_pylist(),
    ):
        for r in rows:
            for v in m.variables:
                for a in attrs:
                    cell = r[f"{v}.{a}"]
                    if isinstance(r[v], list | np.ndarray):
                        assert [_plain(c) for c in cell] == [event_value(events[p], a) for p in r[v]]
                    elif _plain(r[v]) is None:
                        assert _plain(cell) is None
                    else:
                        assert _plain(cell) == event_value(events[int(r[v])], a)
    for rows in (
        m.to_pandas(attributes=list(attrs)).astype(object).to_dict("records"),
        m.to_arrow(attributes=list(attrs)).to_pylist(),
    ):
        for r in rows:
            for a in attrs:
                assert _plain(r[a]) == event_value(events[r["position"]], a)


# -- generated patterns and streams -----------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(cases(TYPES, Features(negation=True, consume=True, limit=True, select=True), nulls=True))
def test_every_form_lists_the_reference_matches(case: Any) -> None:
    pattern, events = case
    m = pycel.compile(pattern).run(events)
    unlimited, limit = without_limit(pattern)
    assert_limited(m.keys(), evaluate(unlimited, events).keys(), limit)
    assert_tables_match(m, m.keys())
    assert_attributes_joined(m, events, ["event_type", "x", "s", "time"])


# -- hand-written cases -----------------------------------------------------------------------
class Stock(Event):
    name: Field[str]
    price: Field[float]
    volume: Field[int]
    urgent: Field[bool]
    at: Field[pycel.Timestamp]


class Buy(Stock): ...


class Sell(Stock): ...


T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def stocks() -> list[Stock]:
    rows = [
        (Sell, "INTC", 20.0, 100, True),
        (Buy, "RIMM", 12.5, 300, False),
        (Buy, "RIMM", 13.0, None, None),
        (Sell, "INTC", 19.5, 200, False),
        (Buy, None, 11.0, 80, True),
        (Buy, "RIMM", None, 90, False),
    ]
    return [
        cls(name=n, price=p, volume=v, urgent=u, at=T0 + dt.timedelta(seconds=k))
        for k, (cls, n, p, v, u) in enumerate(rows)
    ]


S, B = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
ATTRS = ["event_type", "name", "price", "volume", "urgent", "at"]


def check(pattern: Any, events: list[Stock]) -> pycel.Matches:
    m = pycel.compile(pattern).run(events)
    expected = evaluate(pattern, events).keys()
    assert m.keys() == expected
    assert_tables_match(m, expected)
    assert_attributes_joined(m, events, ATTRS)
    return m


def test_kleene_variable_is_a_sorted_list_of_positions_with_lists_of_attributes() -> None:
    m = check(pycel.seq(S, pycel.plus(B)), stocks())
    wide = m.to_pandas("wide", attributes=["price"])
    assert wide["s"].dtype == "Int64"
    assert wide["b"].dtype == object  # some match binds b to several events
    many = wide[wide["b"].map(len) > 1]
    assert len(many) > 0
    assert all(isinstance(x, list) for x in wide["b"])
    arrow = m.to_arrow("wide", attributes=["price"])
    assert pa.types.is_large_list(arrow.schema.field("b").type)
    assert pa.types.is_large_list(arrow.schema.field("b.price").type)


def test_an_as_group_binds_many_events() -> None:
    check(pycel.seq(S, B).as_("g"), stocks())


def test_or_leaves_a_variable_unbound_as_null() -> None:
    m = check(pycel.seq(S, B | pycel.alias(Sell, "t")), stocks())
    wide = m.to_pandas("wide")
    assert wide["b"].isna().any() and wide["t"].isna().any()
    assert m.to_arrow("wide").column("t").null_count > 0


def test_projection_lists_only_the_selected_variables() -> None:
    m = check(pycel.seq(S, B).select("b"), stocks())
    assert m.to_pandas("wide")["s"].isna().all()  # projected away: a column of nulls
    only_b = m.to_pandas("wide", variables=["b"])
    assert list(only_b.columns) == ["match", "start", "end", "b"]


def test_post_filter() -> None:
    pattern = pycel.seq(S, B).where(S.price > B.price, post_filter=True)
    m = check(pattern, stocks())
    assert len(m) > 0


def test_empty_result_has_every_column() -> None:
    m = check(pycel.seq(B, S).where(B.price > 100), stocks())
    assert len(m) == 0
    assert list(m.to_pandas().columns) == ["match", "start", "end", "variable", "position"]
    wide = m.to_pandas("wide", attributes=["price"])
    assert list(wide.columns) == ["match", "start", "end", "b", "b.price", "s", "s.price"]
    assert m.to_arrow("wide").num_rows == 0
    assert len(pycel.Matches.empty().to_pandas("wide")) == 0


def test_long_form_keeps_its_rows_and_types() -> None:
    """The long form lists the entries as the engine wrote them; the variable is
    categorical (no object arrays)."""
    m = pycel.compile(pycel.seq(S, pycel.plus(B))).run(stocks())
    frame = m.to_pandas()
    owner = np.repeat(np.arange(len(m)), np.diff(m.offsets))
    assert frame["match"].tolist() == owner.tolist()
    assert frame["start"].tolist() == m.starts[owner].tolist()
    assert frame["end"].tolist() == m.ends[owner].tolist()
    assert frame["variable"].tolist() == [m.variables[v] for v in m.var_ids]
    assert frame["position"].tolist() == m.positions.tolist()
    assert isinstance(frame["variable"].dtype, pd.CategoricalDtype)
    assert not any(frame[c].dtype == object for c in frame.columns)
    assert m.to_arrow().schema.field("variable").type == pa.dictionary(pa.int32(), pa.string())


def test_attribute_types() -> None:
    m = pycel.compile(pycel.seq(S, B)).run(stocks())
    wide = m.to_pandas("wide", attributes=True)
    assert isinstance(wide["b.name"].dtype, pd.CategoricalDtype)
    assert isinstance(wide["b.event_type"].dtype, pd.CategoricalDtype)
    assert str(wide["b.volume"].dtype) == "Int64"
    assert str(wide["b.price"].dtype) == "Float64"
    assert str(wide["b.urgent"].dtype) == "boolean"
    assert str(wide["b.at"].dtype) == "datetime64[ns, UTC]"
    arrow = m.to_arrow("wide", attributes=True)
    assert arrow.schema.field("b.at").type == pa.timestamp("ns", tz="UTC")


def test_stream_pushes_join_attributes_of_their_own_batch() -> None:
    events = stocks()
    stream = pycel.compile(pycel.seq(S, B)).stream()
    first = stream.push(events[:2])
    assert_attributes_joined(first, events, ATTRS)
    later = stream.push(events[2:])
    assert later.to_pandas("wide")["s"].min() == 0  # reaches into the first push
    with pytest.raises(ValueError, match="position 0 is not in the batch"):
        later.to_pandas("wide", attributes=["price"])


def test_sub_stream_positions_join_attributes() -> None:
    events = stocks()
    stream = pycel.compile(pycel.seq(S, B)).stream()
    picked = [0, 2, 3, 5]
    gpos = [10, 12, 13, 15]
    m = stream.push([events[k] for k in picked], positions=gpos)
    by_global = {g: events[k] for g, k in zip(gpos, picked, strict=True)}
    rows = m.to_pandas("wide", attributes=["price"]).astype(object).to_dict("records")
    assert rows
    for r in rows:
        assert r["s.price"] == by_global[r["s"]].price
        assert _plain(r["b.price"]) == by_global[r["b"]].price


def test_bad_arguments_are_clear_errors() -> None:
    m = pycel.compile(pycel.seq(S, B)).run(stocks())
    with pytest.raises(ValueError, match="form must be one of"):
        m.to_pandas("tall")
    with pytest.raises(ValueError, match="unknown variable 'x'"):
        m.to_pandas("wide", variables=["x"])
    with pytest.raises(ValueError, match="unknown attribute 'colour'"):
        m.to_arrow("wide", attributes=["colour"])
    with pytest.raises(ValueError, match="wide form"):
        m.to_pandas(variables=["s"])
    no_events = pycel.Matches.from_list(list(m))  # Match objects packed without events
    assert len(no_events.to_pandas("wide")) == len(m)
    with pytest.raises(ValueError, match="have no events to read"):
        no_events.to_pandas(attributes=True)


def test_a_variable_named_like_a_match_column_is_refused_in_the_wide_form() -> None:
    m = pycel.compile(pycel.seq(pycel.alias(Sell, "start"), B)).run(stocks())
    assert len(m.to_pandas()) > 0
    with pytest.raises(ValueError, match="variable 'start' would share its column"):
        m.to_pandas("wide")


class _LazyColumn:
    """A column ingestion kept undecoded (pycel.data.batch.DeferredColumn): decodes one
    row at a time, as the events give it."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def value(self, k: int) -> Any:
        return self.values[k]


class _BatchWithDeferred:
    """An event batch whose ``deferred`` columns were not encoded at ingestion."""

    def __init__(self, batch: Any, events: Sequence[Stock], deferred: Sequence[str]) -> None:
        self.schema, self.offset, self.type_ids = batch.schema, batch.offset, batch.type_ids
        self.columns = {a: c for a, c in batch.columns.items() if a not in deferred}
        self.valid = {a: v for a, v in batch.valid.items() if a not in deferred}
        self.deferred = {a: _LazyColumn([getattr(e, a) for e in events]) for a in deferred}

    def __len__(self) -> int:
        return len(self.type_ids)


def test_attributes_that_ingestion_left_undecoded() -> None:
    events = stocks()
    m = pycel.compile(pycel.seq(S, pycel.plus(B))).run(events)
    lazy = pycel.Matches(m.starts, m.ends, m.offsets, m.var_ids, m.positions, m.variables)
    lazy.source = _BatchWithDeferred(m.source, events, ["name", "price", "volume", "urgent"])
    assert_attributes_joined(lazy, events, ["name", "price", "volume", "urgent"])
    for form in ("long", "wide"):
        direct = m.to_pandas(form, attributes=["name", "price"])
        decoded = lazy.to_pandas(form, attributes=["name", "price"])
        pd.testing.assert_frame_equal(decoded.astype(object), direct.astype(object))


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # start
            st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5)), max_size=5),  # (variable, position)
        ),
        max_size=6,
    ),
    st.permutations(["b", "a", "zz", "c"]),
)
def test_keys_are_the_matches_identities(
    rows: list[tuple[int, list[tuple[int, int]]]], names: list[str]
) -> None:
    """``Matches.keys()`` (sorted with numpy) is the set of each match's ``key()``: entries
    in any order, repeated, of variables whose names do not sort like their ids, matches
    that bind nothing."""
    offsets = np.cumsum([0] + [len(entries) for _, entries in rows]).astype(np.int64)
    entries = [e for _, es in rows for e in es]
    matches = pycel.Matches(
        np.array([s for s, _ in rows], dtype=np.int64),
        np.array([s + 9 for s, _ in rows], dtype=np.int64),
        offsets,
        np.array([v for v, _ in entries], dtype=np.int32),
        np.array([p for _, p in entries], dtype=np.int64),
        tuple(names),
    )
    expected = set()
    for start, es in rows:  # read the rows directly, as Match.of normalizes them
        valuation: dict[str, set[int]] = {}
        for v, p in es:
            valuation.setdefault(names[v], set()).add(p)
        expected.add((start, start + 9, tuple(sorted((n, tuple(sorted(ps))) for n, ps in valuation.items()))))
    assert matches.keys() == expected == {m.key() for m in matches}


class Trip(Event):
    start: Field[int]
    end: Field[int]
    position: Field[str]


def test_attributes_named_like_long_form_columns_keep_their_data() -> None:
    """The long form dropped attributes named start, end, position (its own columns) even
    when asked for by name (found by a probe); they are event_<attribute> now."""
    t, s = pycel.alias(Trip, "t"), pycel.alias(Sell, "s")
    events = [Trip(start=10, end=20, position="gate 4"), Sell(name="X", price=1.0, volume=3)]
    matches = pycel.compile(pycel.seq(t, s)).run(events)
    for frame in (matches.to_pandas(attributes=True), matches.to_arrow(attributes=True).to_pandas()):
        row = frame[frame["variable"] == "t"].iloc[0]
        assert (row["start"], row["end"], row["position"]) == (0, 1, 0)  # the match's own columns
        assert (row["event_start"], row["event_end"], row["event_position"]) == (10, 20, "gate 4")
    picked = matches.to_pandas(attributes=["start", "volume"])
    assert list(picked.columns) == ["match", "start", "end", "variable", "position", "event_start", "volume"]
    wide = matches.to_pandas("wide", attributes=True)
    assert wide[["t.start", "t.end", "t.position"]].values.tolist() == [[10, 20, "gate 4"]]


def test_equality_repr_and_concat() -> None:
    """Matches == Matches raised numpy's "truth value of an array is ambiguous"; repr
    built every Match to show three; concat of two runs read the first run's attributes
    from the second run's events (each found by a probe)."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    query = pycel.compile(pycel.seq(s, b))
    first = query.run([Sell(name="A", price=1.0, volume=1), Buy(name="B", price=2.0, volume=2)] * 3)
    again = query.run([Sell(name="X", price=9.0, volume=9), Buy(name="Y", price=8.0, volume=8)] * 3)
    assert len(first) == 6 and first == again and not first != again  # same positions
    assert first != first[:5] and first[1:] != first[:-1] and first != list(first)
    assert first == pycel.Matches.from_list(list(first), first.variables)
    assert repr(first) == f"Matches([{first[0]!r}, {first[1]!r}, {first[2]!r}, … (6 in all)])"
    assert repr(first[:2]) == f"Matches([{first[0]!r}, {first[1]!r}])"
    one_run = pycel.Matches.concat([first[:2], first[2:]])
    names = first.to_pandas(attributes=["name"])
    assert one_run == first and one_run.to_pandas(attributes=["name"]).equals(names)
    mixed = pycel.Matches.concat([first, again])
    assert len(mixed) == 12 and mixed[:6] == first
    with pytest.raises(ValueError, match="joined from different runs by Matches.concat"):
        mixed.to_pandas(attributes=["name"])


def test_reference_matches_know_the_query_variables() -> None:
    """m["zz"] was a KeyError on the engine's matches and () on the reference's."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    pattern = pycel.seq(s, b | pycel.alias(Buy, "c"))
    events = [Sell(name="A", price=1.0, volume=1), Buy(name="B", price=2.0, volume=2)]
    for matches in (pycel.compile(pattern).run(events), evaluate(pattern, events)):
        assert matches.variables == ("b", "c", "s") and len(matches) == 2
        assert {m["c"] for m in matches} == {(), (1,)}  # a variable of the query, unbound here
        with pytest.raises(KeyError, match="'zz' is not a variable of the query"):
            matches[0]["zz"]
