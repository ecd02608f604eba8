"""Numbers: int attributes are 64-bit signed, integer arithmetic is exact or a DataError,
int/float comparisons are exact (docs/data.md). The engine and the reference implement
the same rules; generated cases at the edges of int64 and float64 check they agree,
including where both raise.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import N0, N1, Num, number_cases

import pycel
from pycel import DataError, Event, Field, PatternError
from pycel.reference import evaluate


class Stock(Event):
    volume: Field[int]
    price: Field[float]


b = pycel.alias(Stock, "b")


def outcome(run: Any) -> Any:
    """The matches' keys, or the DataError's row (both evaluators must agree on either)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return run().keys()
    except DataError as err:
        return ("DataError", err.row)


def both(pattern: Any, events: Any) -> tuple[Any, Any]:
    return outcome(lambda: pycel.compile(pattern).run(events)), outcome(lambda: evaluate(pattern, events))


# -- values outside int64 are errors, in every in-process input ---------------------------
TWO = ["Stock"] * 2
TOO_BIG = [
    ("dicts", [{"event_type": "Stock", "volume": 1}, {"event_type": "Stock", "volume": 2**63}]),
    ("events", [Stock(volume=1), Stock(volume=-(2**63) - 1)]),
    ("events, float", [Stock(volume=1), Stock(volume=1e19)]),
    ("events, inf", [Stock(volume=1), Stock(volume=float("-inf"))]),
    ("pandas uint64", pd.DataFrame({"event_type": TWO, "volume": np.array([1, 2**64 - 1], np.uint64)})),
    ("pandas object", pd.DataFrame({"event_type": TWO, "volume": pd.Series([1, 2**63], dtype=object)})),
    ("pandas float", pd.DataFrame({"event_type": TWO, "volume": [1.0, 1e19]})),
    ("pandas 2.0**63", pd.DataFrame({"event_type": TWO, "volume": [1.0, 2.0**63]})),
    ("pandas inf", pd.DataFrame({"event_type": TWO, "volume": [1.0, np.inf]})),
    ("pandas UInt64", pd.DataFrame({"event_type": TWO, "volume": pd.array([None, 2**63], "UInt64")})),
    ("arrow uint64", pa.table({"event_type": TWO, "volume": pa.array([1, 2**63], pa.uint64())})),
]


@pytest.mark.parametrize(("label", "data"), TOO_BIG, ids=[label for label, _ in TOO_BIG])
def test_an_int_outside_int64_is_a_data_error_naming_row_and_column(label: str, data: Any) -> None:
    for run in (pycel.compile(b.where(b.volume < 0)).run, lambda d: evaluate(b.where(b.volume < 0), d)):
        with pytest.raises(DataError) as err:
            run(data)
        assert (err.value.row, err.value.column) == (1, "volume")


def test_the_int64_extremes_and_nulls_are_exact() -> None:
    """-2**63 and 2**63 - 1 go in unchanged; NaN / None / pd.NA are nulls, and an Arrow
    int64 column with nulls is not rounded through float64."""
    extremes = [-(2**63), 2**63 - 1, 2**53 + 1]
    pattern = b.where(b.volume.isin(extremes))
    inputs = [
        [Stock(volume=v) for v in [*extremes, None]],
        pd.DataFrame({"event_type": ["Stock"] * 4, "volume": pd.array([*extremes, None], "Int64")}),
        pa.table({"event_type": ["Stock"] * 4, "volume": pa.array([*extremes, None], pa.int64())}),
        pd.DataFrame({"event_type": ["Stock"] * 4, "volume": pd.Series([*extremes, None], dtype=object)}),
    ]
    for data in inputs:
        got = pycel.compile(pattern).run(data)
        assert got.keys() == evaluate(pattern, data).keys()
        assert [m.end for m in got] == [0, 1, 2]


# -- arithmetic and comparisons -----------------------------------------------------------
@pytest.mark.parametrize(
    ("predicate", "volume"),
    [
        (b.volume * b.volume > 0, 2**32),
        (b.volume + 2**62 + 2**62 > 0, 1),
        (-b.volume > 0, -(2**63)),
        (b.volume - 1 < 0, -(2**63)),
        (b.volume * -1 > 0, -(2**63)),
    ],
)
def test_integer_overflow_is_a_data_error_in_both_evaluators(predicate: Any, volume: int) -> None:
    events = [Stock(volume=1), Stock(volume=volume)]
    if volume == 1:
        events = [Stock(volume=volume)]
    engine, reference = both(b.where(predicate), events)
    assert engine == reference == ("DataError", len(events) - 1)
    with pytest.raises(DataError, match="leaves the 64-bit range"):
        pycel.compile(b.where(predicate)).run(events)


def test_overflow_counts_only_on_events_of_the_filtered_type() -> None:
    class Other(Stock): ...

    class Third(Event):
        volume: Field[int]

    events = [Third(volume=2**40), Stock(volume=3)]  # Third is not a Stock: never evaluated
    engine, reference = both(b.where(b.volume * b.volume > 0), events)
    assert engine == reference == {(1, 1, (("b", (1,)),))}
    events = [Stock(volume=3), Other(volume=2**40)]  # a subtype is
    assert both(b.where(b.volume * b.volume > 0), events) == (("DataError", 1),) * 2


def test_int_float_comparisons_are_exact() -> None:
    events = [Stock(volume=2**53 + 1, price=2.0**53), Stock(volume=2**63 - 1, price=2.0**63)]
    for predicate, ends in [
        (b.volume > b.price, [0]),
        (b.volume == b.price, []),
        (b.volume < b.price, [1]),
        (b.volume != b.price, [0, 1]),
        (b.volume >= 2.0**53, [0, 1]),
        (b.volume.isin([2.0**53]), []),
        (b.price < b.volume, [0]),
    ]:
        got = pycel.compile(b.where(predicate)).run(events)
        assert got.keys() == evaluate(b.where(predicate), events).keys()
        assert [m.end for m in got] == ends, predicate


def test_nan_compares_false_except_not_equal() -> None:
    """A NaN in the data is a null; a NaN computed (inf * 0) or written is a NaN."""
    from pycel.language.expr import Compare

    events = [Stock(volume=1, price=float("inf"))]
    for op, expected in [("==", 0), ("!=", 1), ("<", 0), (">=", 0)]:
        pattern = b.where(Compare.build(op, b.volume, b.price * 0) & (b.volume != float("nan")))
        got = pycel.compile(pattern).run(events)
        assert got.keys() == evaluate(pattern, events).keys() and len(got) == expected


def test_division_converts_both_operands_to_float_first() -> None:
    # Python's exact int / int would give 3002399751580331.0; float64 division gives .5 less
    events = [Stock(volume=2**53 + 1)]
    pattern = b.where(b.volume / 3 == 3002399751580330.5)
    assert both(pattern, events) == ({(0, 0, (("b", (0,)),))},) * 2


def test_integer_constants_outside_int64_are_refused() -> None:
    with pytest.raises(PatternError, match="outside the 64-bit range"):
        b.where(b.volume < 2**63)
    with pytest.raises(PatternError, match="outside the 64-bit range"):
        b.volume.isin([-(2**63) - 1])


def test_post_filter_overflow_names_the_match_end() -> None:
    s = pycel.alias(Stock, "s")
    pattern = pycel.seq(s, b).where(s.volume * b.volume > 0, post_filter=True)
    events = [Stock(volume=2**40), Stock(volume=1), Stock(volume=2**40)]
    assert both(pattern, events) == (("DataError", 2),) * 2
    stream = pycel.compile(pattern).stream()
    assert len(stream.push(events[:2])) == 1  # (0, 1) holds: 2**40 * 1
    with pytest.raises(DataError, match="post-filter") as err:
        stream.push(events[2:])
    assert err.value.row == 0  # the row in the pushed data


@pytest.mark.parametrize("window", [None, 2])
def test_a_post_filter_overflow_changes_nothing(window: int | None) -> None:
    """The overflow is found after the automaton ran over the batch: the stream is put
    back, so pushing other rows instead continues as if the bad push never happened."""
    s = pycel.alias(Stock, "s")
    pattern = pycel.seq(s, b).where(s.volume * b.volume > 0, post_filter=True)
    if window is not None:
        pattern = pattern.within(events=window)
    first, bad = [Stock(volume=2**40), Stock(volume=1)], [Stock(volume=2**40)]
    instead = [Stock(volume=1), Stock(volume=5)]
    stream = pycel.compile(pattern).stream()
    got = stream.push(first).keys()
    with pytest.raises(DataError, match="post-filter"):
        stream.push(bad)
    got |= stream.push(instead).keys()
    assert got == evaluate(pattern, first + instead).keys()


# -- generated: engine == reference at the edges ------------------------------------------
def _frame(events: list[Num]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "event_type": [type(e).__name__ for e in events],
            "n": pd.array([e.n for e in events], dtype="Int64"),
            "f": [np.nan if e.f is None else e.f for e in events],
            "time": [e.time for e in events],
        }
    )


@settings(max_examples=150, deadline=None)
@given(number_cases())
def test_generated_numbers_engine_equals_reference(case: tuple[Any, list[Num]]) -> None:
    pattern, events = case
    expected = outcome(lambda: evaluate(pattern, events))
    assert outcome(lambda: pycel.compile(pattern).run(events)) == expected
    assert outcome(lambda: pycel.compile(pattern).run(_frame(events))) == expected


@settings(max_examples=40, deadline=None)
@given(number_cases(), st.data())
def test_generated_numbers_in_pieces(case: tuple[Any, list[Num]], data: st.DataObject) -> None:
    """Pushed in two pieces, the matches before an error are returned by the pushes that
    come before it, and the error names the row within its push."""
    pattern, events = case
    expected = outcome(lambda: evaluate(pattern, events))
    cut = data.draw(st.integers(0, len(events)))
    stream = pycel.compile(pattern).stream()
    got: set[Any] = set()
    try:
        for offset, piece in ((0, events[:cut]), (cut, events[cut:])):
            at = offset
            got |= stream.push(piece).keys()
    except DataError as err:
        assert isinstance(expected, tuple) and err.row is not None and err.row + at == expected[1]
        return
    assert got == expected


def test_number_types_are_the_generated_ones() -> None:
    assert {N0.__name__, N1.__name__} == {"N0", "N1"} and Num.__fields__["n"] == "int"


def test_an_int_float_equality_join_is_exact_or_an_error() -> None:
    """An equality join of an int and a float attribute runs on float64 keys: exact up to
    2**53 (3 joins 3.0), a DataError for an int that float64 would round."""
    class Sold(Event):
        volume: Field[int]

    class Quote(Event):
        price: Field[float]

    s, q = pycel.alias(Sold, "s"), pycel.alias(Quote, "q")
    pattern = pycel.seq(s, q).where(s.volume == q.price)
    events: list[Event] = [Sold(volume=3), Quote(price=0.5), Quote(price=3.0)]
    engine, reference = both(pattern, events)
    assert engine == reference == {(0, 2, (("q", (2,)), ("s", (0,))))}
    events = [Quote(price=0.5), Sold(volume=3), Sold(volume=2**53 + 1), Quote(price=2.0**53)]
    assert both(pattern, events) == (("DataError", 2),) * 2
    s = pycel.alias(Stock, "s")
    # a post-filter compares exactly instead
    exact = pycel.seq(s, b).where(s.volume == b.price, post_filter=True)
    events = [Stock(volume=2**53 + 1), Stock(price=2.0**53), Stock(volume=2**53), Stock(price=2.0**53)]
    engine, reference = both(exact, events)
    assert engine == reference and {(m[0], m[1]) for m in engine} == {(2, 3)}
