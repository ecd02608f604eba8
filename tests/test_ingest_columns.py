"""Ingestion of only the columns a query reads (``to_batch(columns=...)``), the vectorized
checks of object columns, and rows (dicts, Event instances) ingested as DataFrames are.

What is read is asserted on the batch (which attributes are encoded, which are deferred)
and on what the Arrow reader converts, never on time. Deferred attributes decode to what a
full ingestion gives; the policy on extra data (unknown columns, values of attributes the
row's type does not declare) still applies to the columns that are not read.
"""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pycel
from pycel.data import frames, rows
from pycel.data.ingest import Schema, to_batch
from pycel.errors import DataError
from pycel.language.events import Event, Field
from pycel.reference import evaluate
from pycel.runtime.predicates import columns_read_by


class Quote(Event):
    sym: Field[str]
    qty: Field[int]
    px: Field[float]
    ok: Field[bool]
    at: Field[int]


class Halt(Event):
    sym: Field[str]
    why: Field[str]


q = pycel.alias(Quote, "q")
TYPES = [Quote, Halt]
KINDS = ["pandas", "arrow", "dicts"]


def _as(kind: str, df: pd.DataFrame) -> Any:
    if kind == "arrow":
        return pa.Table.from_pandas(df, preserve_index=False)
    if kind == "dicts":
        return [{k: v for k, v in r.items() if v is not None} for r in df.to_dict("records")]
    return df


def quotes(n: int = 6) -> pd.DataFrame:
    """Quote and Halt events; a Halt row leaves Quote's attributes null and vice versa."""
    rows: list[dict[str, Any]] = []
    for k in range(n):
        if k % 3 == 2:
            rows.append({"event_type": "Halt", "sym": f"S{k}", "qty": None, "px": None, "ok": None,
                         "at": None, "why": "news"})
        else:
            rows.append({"event_type": "Quote", "sym": f"S{k % 2}", "qty": 10 * k, "px": 1.5 * k,
                         "ok": k % 2 == 0, "at": k, "why": None})
    return pd.DataFrame(rows).astype({"qty": "Int64", "at": "Int64", "ok": "boolean"})


def rows_of(batch: Any) -> list[tuple[str, dict[str, Any]]]:
    return [batch.row(k) for k in range(len(batch))]


@pytest.mark.parametrize("kind", KINDS)
def test_only_the_read_columns_are_encoded_the_others_decode_on_demand(kind: str) -> None:
    df = quotes()
    full = to_batch(_as(kind, df), Schema.for_types(TYPES))
    some = to_batch(_as(kind, df), Schema.for_types(TYPES), columns={"qty"})
    assert set(some.columns) == {"qty"} and set(full.columns) == {"sym", "qty", "px", "ok", "at", "why"}
    assert set(some.deferred) == {"sym", "px", "ok", "at", "why"}
    assert rows_of(some) == rows_of(full)  # Match.events shows the same attributes
    assert np.array_equal(some.columns["qty"], full.columns["qty"])
    assert np.array_equal(some.valid["qty"], full.valid["qty"])
    assert some.schema.strings == []  # no string of an unread column was encoded


def test_arrow_converts_only_the_type_column_and_the_read_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[str] = []
    real = frames._arrow_series

    def spy(cells: Any) -> pd.Series:
        series = real(cells)
        converted.append(str(cells.type))
        return series

    monkeypatch.setattr(frames, "_arrow_series", spy)
    table = pa.Table.from_pandas(quotes(), preserve_index=False)
    batch = to_batch(table, Schema.for_types(TYPES), columns={"px"})
    assert converted == ["string", "double"]  # event_type, px
    assert batch.row(0) == ("Quote", {"sym": "S0", "qty": 0, "px": 0.0, "ok": True, "at": 0})
    assert len(converted) == 6  # showing a row converted the others once, on demand


@pytest.mark.parametrize("kind", KINDS)
def test_policy_on_extra_data_applies_to_unread_columns(kind: str) -> None:
    stray = quotes()
    stray.loc[2, "qty"] = 7  # a Halt has no qty
    with pytest.raises(DataError, match="event type Halt has no attribute 'qty'") as err:
        to_batch(_as(kind, stray), Schema.for_types(TYPES), columns={"sym"})
    assert (err.value.row, err.value.column) == (2, "qty")
    unknown = quotes().assign(colour="red")  # (a dict's key: "event type Quote has no attribute")
    with pytest.raises(DataError, match="attribute 'colour'") as err:
        to_batch(_as(kind, unknown), Schema.for_types(TYPES), columns={"sym"})
    assert err.value.column == "colour"


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_value_in_an_unread_column_is_an_error_when_shown(kind: str) -> None:
    """An unread column is checked whole when one of its values is first shown."""
    df = quotes().astype({"qty": object})
    df.loc[4, "qty"] = 1.5
    batch = to_batch(_as(kind, df), Schema.for_types(TYPES), columns={"sym"})
    assert batch.row(2) == ("Halt", {"sym": "S2", "why": "news"})
    for row in (0, 4):
        with pytest.raises(DataError, match="expected int, got 1.5") as err:
            batch.row(row)
        assert (err.value.row, err.value.column) == (4, "qty")
    with pytest.raises(DataError, match="expected int, got 1.5"):  # read: refused at ingestion
        to_batch(_as(kind, df), Schema.for_types(TYPES), columns={"qty"})


def test_matches_of_a_query_reading_some_columns_show_every_attribute() -> None:
    pattern = pycel.seq(q.where(q.qty > 5), pycel.alias(Halt, "h"))
    query = pycel.compile(pattern)
    df = quotes(9)
    batch = to_batch(df, Schema.for_types(TYPES), columns=columns_read_by(query))
    assert set(batch.columns) == {"qty"}
    matches = query.stream().push(batch)
    expected = evaluate(pattern, df)
    assert matches.keys() == expected.keys() and len(expected)
    for got, want in zip(sorted(matches), sorted(expected), strict=True):
        assert got.events("q") == want.events("q") and got.events("h") == want.events("h")


# -- object columns: checked by numpy, the bad cell named --------------------------------------


@pytest.mark.parametrize(
    ("dtype", "cells", "bad_row", "words"),
    [
        ("qty", [1, 2.0, 2.5], 2, "expected int, got 2.5"),
        ("qty", [1, 2**63, 3], 1, "64-bit range"),
        ("qty", [1, float("inf"), 3], 1, "expected int, got inf"),
        ("qty", [1, True, 3], 1, "expected int, got True"),
        ("qty", [1, "2", 3], 1, "expected int, got '2'"),
        ("px", [1.5, 10**400, 2], 1, "too large for a 64-bit float"),
        ("px", [1.5, "x", 2], 1, "expected float, got 'x'"),
        ("ok", [True, 1, False], 1, "expected bool, got 1"),
        ("sym", ["a", 3, "b"], 1, "expected str, got 3"),
    ],
)
def test_object_columns_name_the_first_bad_cell(
    dtype: str, cells: list[Any], bad_row: int, words: str
) -> None:
    df = pd.DataFrame({"event_type": "Quote", dtype: pd.Series(cells, dtype=object)})
    for data in (df, [{"event_type": "Quote", dtype: c} for c in cells]):
        with pytest.raises(DataError, match=words) as err:
            to_batch(data, Schema.for_types(TYPES))
        assert (err.value.row, err.value.column) == (bad_row, dtype)


def test_object_columns_of_valid_mixes_convert_exactly() -> None:
    cells = {"qty": [2**62 + 1, 4.0, np.int32(-3)], "px": [1, 2.5, np.float32(0.5)], "at": [1, 2, 3]}
    df = pd.DataFrame({"event_type": "Quote", **{k: pd.Series(v, dtype=object) for k, v in cells.items()}})
    batch = to_batch(df, Schema.for_types(TYPES))
    assert batch.columns["qty"].tolist() == [2**62 + 1, 4, -3]  # exact, not through float64
    assert batch.columns["px"].tolist() == [1.0, 2.5, 0.5]


@pytest.mark.parametrize("kind", KINDS)
def test_an_infinite_float_stays_infinite(kind: str) -> None:
    """(A DataFrame's inf became 1.8e308: NaN cells were cleared with nan_to_num, which also
    replaces infinities.)"""
    df = pd.DataFrame({"event_type": "Quote", "px": [math.inf, -math.inf, 1.0]})
    batch = to_batch(_as(kind, df), Schema.for_types(TYPES))
    assert batch.columns["px"].tolist() == [math.inf, -math.inf, 1.0]


# -- rows ingest as DataFrames do ----------------------------------------------------------------

ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(st.none(), st.floats(allow_nan=False))


@given(
    st.lists(st.tuples(st.booleans(), ints, floats, st.text(max_size=3)), max_size=30),
    st.sampled_from([None, {"qty"}, {"sym", "px"}]),
)
def test_lists_of_dicts_and_events_ingest_as_a_dataframe(raw: list[Any], read: set[str] | None) -> None:
    dicts: list[dict[str, Any]] = []
    events: list[Event] = []
    for halt, qty, px, sym in raw:
        if halt:
            dicts.append({"event_type": "Halt", "sym": sym, "why": None})
            events.append(Halt(sym=sym, why=None))
        else:
            dicts.append({"event_type": "Quote", "sym": sym, "qty": qty, "px": px})
            events.append(Quote(sym=sym, qty=qty, px=px, ok=None, at=None))
    # (each column as the objects given: pd.DataFrame(dicts) makes [None, 2**53 + 1] floats)
    names = ["event_type", "sym", "qty", "px", "why"]
    frame = pd.DataFrame({c: pd.Series([d.get(c) for d in dicts], dtype=object) for c in names})
    expected = to_batch(frame, Schema.for_types(TYPES), columns=read)
    for data in (dicts, events):
        got = to_batch(data, Schema.for_types(TYPES), columns=read)
        assert got.type_ids.tolist() == expected.type_ids.tolist()
        assert set(got.columns) >= set(expected.columns)
        for attr in expected.columns:
            assert got.valid[attr].tolist() == expected.valid[attr].tolist()
            shown = [got.value(attr, k) for k in range(len(got))]
            assert shown == [expected.value(attr, k) for k in range(len(got))]
        assert rows_of(got) == rows_of(expected)


# -- rows are gathered chunk by chunk: any chunk size gives what the DataFrame gives ------------

# an int attribute's cells: ints, nulls, and values numpy would take but the rules refuse
qty_cells = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**63, -(2**63) - 1, True, 2.5, 3.0, "x", math.nan]),
)


def _outcome(work: Any) -> Any:
    """What ``work()`` gives, or the DataError it raises (message, row, column)."""
    try:
        return work()
    except DataError as err:
        return ("DataError", str(err), err.row, err.column)


def _ingested(data: Any, read: set[str] | None) -> Any:
    batch = to_batch(data, Schema.for_types(TYPES), columns=read)
    encoded = {a: [batch.value(a, k) for k in range(len(batch))] for a in sorted(batch.columns)}
    valid = {a: batch.valid[a].tolist() for a in sorted(batch.columns)}
    return batch.type_ids.tolist(), encoded, valid, _outcome(lambda: rows_of(batch))


@given(
    st.lists(st.tuples(st.booleans(), qty_cells, floats, st.text(max_size=2)), max_size=25),
    st.integers(1, 4),
    st.sampled_from([None, {"qty"}, {"sym", "px"}]),
)
def test_rows_in_chunks_ingest_as_the_dataframe_of_their_values(
    raw: list[Any], chunk: int, read: set[str] | None
) -> None:
    """Rows are gathered ``rows.CHUNK`` at a time, and a number column is converted chunk
    by chunk while every chunk converts as it is; a chunk that does not (a null, a bool, a
    float, a value out of range, a string) leaves the whole column as Python objects. The
    batch, and any error (message, row, column), are the DataFrame's of the same values."""
    dicts: list[dict[str, Any]] = []
    events: list[Event] = []
    for halt, qty, px, sym in raw:
        if halt:
            dicts.append({"event_type": "Halt", "sym": sym})
            events.append(Halt(sym=sym))
        else:
            dicts.append({"event_type": "Quote", "sym": sym, "qty": qty, "px": px})
            events.append(Quote(sym=sym, qty=qty, px=px))
    names = ["event_type", "sym", "qty", "px"]
    frame = pd.DataFrame({c: pd.Series([d.get(c) for d in dicts], dtype=object) for c in names})
    expected = _outcome(lambda: _ingested(frame, read))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows, "CHUNK", chunk)
        for data in (dicts, events):
            assert _outcome(lambda data=data: _ingested(data, read)) == expected


ODD = [None, math.nan, True, 1, 2.5, 3.0, 2**63, 10**400, "x", np.int32(4)]
ODD_IDS = ["None", "nan", "True", "1", "2.5", "3.0", "2**63", "10**400", "x", "i32"]


@pytest.mark.parametrize("special", ODD, ids=ODD_IDS)
@pytest.mark.parametrize(("attr", "cells"), [("qty", [5, -7, 2**62]), ("px", [0.5, -1e300, 2.0]),
                                             ("ok", [True, False, True]), ("at", [3, 4, 5])])
def test_one_odd_cell_in_any_chunk_of_a_number_column_is_taken_as_a_dataframe_takes_it(
    special: Any, attr: str, cells: list[Any]
) -> None:
    """Number and bool columns of rows are converted chunk by chunk by numpy; a cell it
    would misread (a bool as 1, 2.5 as 2, 1 as True) or cannot convert sends the column
    through the checks of a column of objects, in whichever chunk it is."""
    for where in range(7):
        values: list[Any] = [cells[k % 3] for k in range(7)]
        values[where] = special
        dicts = [{"event_type": "Quote", attr: v} for v in values]
        frame = pd.DataFrame({"event_type": "Quote", attr: pd.Series(values, dtype=object)})
        expected = _outcome(lambda frame=frame: _ingested(frame, {attr}))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rows, "CHUNK", 3)
            assert _outcome(lambda dicts=dicts: _ingested(dicts, {attr})) == expected


@pytest.mark.parametrize("name", [None, math.nan, "Halt", np.str_("Quote"), 7, ["Quote"], "left out"])
def test_another_event_type_cell_in_any_chunk_is_taken_as_a_dataframe_takes_it(name: Any) -> None:
    """A list whose rows all name one event type is checked with a count per chunk, not
    hashed; a row naming another (or none, or something else) in any chunk gives the
    DataFrame's batch or error."""
    for where in range(7):
        dicts: list[dict[str, Any]] = [{"event_type": "Quote", "sym": f"S{k}"} for k in range(7)]
        dicts[where]["event_type"] = name
        if name == "left out":
            del dicts[where]["event_type"]
        cells = {c: pd.Series([d.get(c) for d in dicts], dtype=object) for c in ("event_type", "sym")}
        frame = pd.DataFrame(cells)
        expected = _outcome(lambda frame=frame: _ingested(frame, {"sym"}))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rows, "CHUNK", 3)
            got = _outcome(lambda dicts=dicts: _ingested(dicts, {"sym"}))
        if name == "left out":  # (a DataFrame cannot leave a cell out: there it is a null)
            assert got[:3] == ("DataError", f"missing the event type field 'event_type' (row {where})", where)
            assert expected[2:] == (where, "event_type")
        else:
            assert got == expected


def test_an_event_type_that_is_none_or_nan_in_a_dict_is_named() -> None:
    """(A None or NaN event type took the last event type of the data, silently.)"""
    for null in (None, math.nan):
        for first in ({"event_type": "Quote", "qty": 1}, Quote(qty=1)):
            data = [first, {"event_type": "Halt"}, {"event_type": null}]
            with pytest.raises(DataError, match="missing event type") as err:
                to_batch(data, Schema.for_types(TYPES))
            assert (err.value.row, err.value.column) == (2, "event_type")


def test_rows_that_start_as_dicts_may_hold_events_and_other_mappings_further_on() -> None:
    """A list is first taken as all dicts; another row (an Event, a read-only mapping)
    further on, in a later chunk, gives the batch of the same events as dicts."""
    dicts: list[Any] = [{"event_type": "Quote", "sym": f"S{k}", "qty": k} for k in range(7)]
    as_dicts = _ingested(dicts, {"qty"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows, "CHUNK", 2)
        for other in (Quote(sym="S5", qty=5), types.MappingProxyType(dicts[5])):
            mixed = dicts[:5] + [other] + dicts[6:]
            assert _ingested(mixed, {"qty"}) == as_dicts
        with pytest.raises(DataError, match="expected an Event or a dict, got int") as err:
            to_batch(dicts[:5] + [5] + dicts[6:], Schema.for_types(TYPES))
        assert err.value.row == 5

@pytest.mark.parametrize("read", [None, {"qty"}, {"sym", "px"}])
def test_a_row_of_another_layout_in_a_later_chunk_is_checked_key_by_key(read: set[str] | None) -> None:
    """Every key of every dict is checked, not only those of the first rows or of the
    usual layout: one row in a later chunk with its keys in another order, a key that no
    event type declares, or a value for an attribute its type lacks is named there."""
    def quote(k: int) -> dict[str, Any]:
        return {"event_type": "Quote", "sym": f"S{k}", "qty": k, "px": k / 2}

    for where in range(7):
        reordered = [quote(k) for k in range(7)]
        reordered[where] = dict(reversed(list(reordered[where].items())))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rows, "CHUNK", 3)
            assert _ingested(reordered, read) == _ingested([quote(k) for k in range(7)], read)
            for extra, value, message in (
                ("shade", "x", "event type Quote has no attribute 'shade'"),
                ("shade", None, "unknown attribute 'shade': no event type declares it"),
                ("why", "x", "event type Quote has no attribute 'why'"),
            ):
                odd = [quote(k) for k in range(7)]
                odd[where] = {extra: value, **dict(reversed(list(odd[where].items())))}
                with pytest.raises(DataError, match=message) as err:
                    to_batch(odd, Schema.for_types(TYPES), columns=read)
                assert (err.value.row, err.value.column) == (where, extra)


def test_rows_of_dict_subclasses_are_read_as_they_hold_their_keys() -> None:
    """A dict subclass is read as the dict it is: a left-out key is a null (a defaultdict
    neither gives its default nor gains the key), an OrderedDict is a dict."""
    import collections

    plain: list[dict[str, Any]] = [{"event_type": "Quote", "sym": f"S{k}", "qty": k} for k in range(5)]
    plain[3] = {"event_type": "Quote", "sym": "S3"}  # qty left out: a null
    expected = _ingested(plain, {"qty", "px"})
    assert expected[2]["qty"][3] is False
    for make in (lambda d: collections.defaultdict(lambda: 7, d), collections.OrderedDict):
        given = [make(d) for d in plain]
        for first in (given, [plain[0], *given[1:]]):  # (all subclasses, or after a plain dict)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(rows, "CHUNK", 2)
                assert _ingested(first, {"qty", "px"}) == expected
        assert [sorted(d) for d in given] == [sorted(d) for d in plain]  # no key was added



# -- string columns: one factorize pass gives both the nulls and the codes -----------------------

NULLS = [None, float("nan"), pd.NA, pd.NaT, np.nan]


@pytest.mark.parametrize("read", [None, {"sym"}])
def test_a_string_column_with_every_kind_of_null_encodes_as_its_values(read: set[str] | None) -> None:
    cells: list[Any] = ["b", None, "a", float("nan"), "b", pd.NA, pd.NaT, "", np.nan, "a"]
    df = pd.DataFrame({"event_type": "Halt", "sym": pd.Series(cells, dtype=object), "why": "x"})
    dicts = [{"event_type": "Halt", "sym": c, "why": "x"} for c in cells]
    for data in (df, dicts):
        schema = Schema.for_types(TYPES)
        batch = to_batch(data, schema, columns=read)
        present = [isinstance(c, str) for c in cells]
        assert batch.valid["sym"].tolist() == present
        assert [batch.value("sym", k) for k in range(len(cells))] == [
            c if ok else None for c, ok in zip(cells, present, strict=True)
        ]
        codes = batch.columns["sym"]
        assert (codes[~np.array(present)] == -1).all()
        # one dictionary entry per distinct string, the same code for the same string
        assert len({int(c) for c in codes[np.array(present)]}) == 3


@pytest.mark.parametrize("bad", [["a"], {"a": 1}, b"a", 3.5])
def test_a_non_string_cell_in_a_string_column_is_named_hashable_or_not(bad: Any) -> None:
    cells: list[Any] = ["a", None, "b", bad, "a"]
    df = pd.DataFrame({"event_type": "Halt", "sym": pd.Series(cells, dtype=object)})
    for data in (df, [{"event_type": "Halt", "sym": c} for c in cells]):
        with pytest.raises(DataError, match="expected str") as err:
            to_batch(data, Schema.for_types(TYPES), columns={"sym"})
        assert (err.value.row, err.value.column) == (3, "sym")


@pytest.mark.parametrize("name", [None, float("nan"), ["Quote"], 7])
def test_a_missing_or_unknown_event_type_cell_is_named(name: Any) -> None:
    names: list[Any] = ["Quote", "Halt", name, "Quote"]
    df = pd.DataFrame({"event_type": pd.Series(names, dtype=object), "sym": "s"})
    with pytest.raises(DataError) as err:
        to_batch(df, Schema.for_types(TYPES))
    assert (err.value.row, err.value.column) == (2, "event_type")


@pytest.mark.parametrize("null", NULLS)
@pytest.mark.parametrize(("attr", "values"), [("qty", [3, -1, 2**62]), ("px", [1.5, -0.0, 2.0]),
                                              ("ok", [True, False, True]), ("sym", ["x", "", "y"])])
def test_nulls_in_object_columns_are_found_whatever_their_kind(
    attr: str, values: list[Any], null: Any
) -> None:
    """Object columns all of one kind are taken as null-free without a test per cell; a
    null of any kind among them is still a null (and only it)."""
    cells = [values[0], null, values[1], values[2], null]
    df = pd.DataFrame({"event_type": "Quote", attr: pd.Series(cells, dtype=object)})
    for data in (df, [{"event_type": "Quote", attr: c} for c in cells]):
        for read in (None, {attr}):
            batch = to_batch(data, Schema.for_types(TYPES), columns=read)
            assert batch.valid[attr].tolist() == [True, False, True, True, False]
            assert [batch.value(attr, k) for k in range(5)] == [values[0], None, values[1], values[2], None]


@given(st.lists(st.one_of(st.none(), st.sampled_from(["Quote", "Halt", "Nope", "x"])), max_size=40))
def test_first_rows_of_factorized_codes_are_where_each_value_first_appears(names: list[Any]) -> None:
    codes, uniq = pd.factorize(pd.Series(names, dtype=object))
    expected = [names.index(u) for u in uniq]
    assert frames.first_rows(codes) == expected


def test_an_unknown_event_type_is_named_at_its_first_row_after_known_ones() -> None:
    names = ["Quote", "Halt", "Quote", "Nope", "Halt", "Nope"]
    for data in (pd.DataFrame({"event_type": names}), [{"event_type": n} for n in names]):
        with pytest.raises(DataError, match="Nope") as err:
            to_batch(data, Schema.for_types(TYPES))
        assert (err.value.row, err.value.column) == (3, "event_type")
