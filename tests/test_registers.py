"""The values edge conditions compare, as the ordered loop reads them
(pycel.runtime.registers.ordered_keys): int64 keys that order as the values do, a kind
for NaN and null, each distinct row of values computed once, and integer overflow
reported on the events that read the expression only."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import pycel
from pycel import DataError
from pycel.data.ingest import Schema, to_batch
from pycel.jit.ordered import NAN, NULL, NUMBER
from pycel.runtime import registers
from pycel.runtime.registers import ordered_keys


class Q(pycel.Event):
    f: pycel.Field[float]
    i: pycel.Field[int]


class QA(Q): ...


class QB(Q): ...


class QC(Q): ...


a, b = pycel.alias(QA, "a"), pycel.alias(QB, "b")
FLOATS = [-math.inf, -2.5, -1e-300, -0.0, 0.0, 5e-324, 1e-300, 2.5, 1e300, math.inf, math.nan, None]


def _batch(events: list[pycel.Event]) -> Any:
    return to_batch(events, Schema.for_types([QA, QB, QC]))


def test_float_keys_order_as_the_floats_and_nan_and_null_are_kinds() -> None:
    batch = _batch([QA(f=v, i=k) for k, v in enumerate(FLOATS)])
    keys, kinds = ordered_keys([(a.f, "float", "QA")], batch)
    for k, v in enumerate(FLOATS):
        expected = NULL if v is None or math.isnan(v) else NUMBER  # a NaN in data is a null
        assert kinds[0, k] == expected, (v, kinds[0, k])
    numbers = [(k, v) for k, v in enumerate(FLOATS) if v is not None and not math.isnan(v)]
    for k, v in numbers:
        for k2, v2 in numbers:
            assert (keys[0, k] < keys[0, k2]) == (v < v2), (v, v2)
            assert (keys[0, k] == keys[0, k2]) == (v == v2), (v, v2)  # -0.0 is 0.0
    # A NaN that arithmetic computes (inf - inf) is a NaN.
    _, kinds = ordered_keys([(a.f - a.f, "float", "QA")], batch)
    assert [k for k, v in enumerate(FLOATS) if kinds[0, k] == NAN] == [0, 9]


def test_int_keys_are_the_ints_and_null_a_kind() -> None:
    ints = [-(2**63), -5, 0, 7, 2**63 - 1]
    batch = _batch([QA(f=0.0, i=v) for v in ints] + [QA(f=0.0, i=None)])
    keys, kinds = ordered_keys([(a.i, "int", "QA")], batch)
    assert keys[0, : len(ints)].tolist() == ints
    assert kinds[0].tolist() == [NUMBER] * len(ints) + [NULL]


def test_each_distinct_row_of_values_is_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trend's register ``prev(a).f``, its threshold ``a.f`` and another condition's
    ``b.f`` are one column: computed once, copied to each row."""
    calls: list[object] = []
    real = registers.expression_values

    def counted(e: Any, batch: Any, log: Any) -> Any:
        calls.append(e)
        return real(e, batch, log)

    monkeypatch.setattr(registers, "expression_values", counted)
    batch = _batch([QA(f=1.5, i=1), QB(f=-2.0, i=2), QA(f=None, i=3), QC(f=-0.0, i=None)])
    exprs = [(pycel.prev(a).f, "float", "QA"), (a.f, "float", "QA"), (b.f, "float", "QB"), (a.i, "int", "QA")]
    keys, kinds = ordered_keys(exprs, batch)
    assert len(calls) == 2  # f as a float, i as an int
    for row in (1, 2):
        assert np.array_equal(keys[row], keys[0]) and np.array_equal(kinds[row], kinds[0])
    assert kinds[0].tolist() == [NUMBER, NUMBER, NULL, NUMBER]
    assert keys[0, 3] == keys[0, 2] == 0  # -0.0 is 0.0; a null's key is 0 (never read)
    assert kinds[3].tolist() == [NUMBER, NUMBER, NUMBER, NULL]


def test_overflow_counts_on_the_events_that_read_the_expression() -> None:
    """``a.i * 2**40`` read on QA and ``b.i * 2**40`` on QB are computed once; an event of
    QC (read by neither) may overflow, one of QB may not."""
    exprs = [(a.i * 2**40, "int", "QA"), (b.i * 2**40, "int", "QB")]
    big = 2**40
    quiet = _batch([QA(f=0.0, i=3), QC(f=0.0, i=big), QB(f=0.0, i=-4)])
    keys, _ = ordered_keys(exprs, quiet)
    assert keys[0, 0] == 3 * 2**40 and keys[1, 2] == -4 * 2**40
    loud = _batch([QA(f=0.0, i=3), QC(f=0.0, i=big), QB(f=0.0, i=big)])
    with pytest.raises(DataError, match="row 2"):
        ordered_keys(exprs, loud)
