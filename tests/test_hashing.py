"""pycel.data.hashing.factorize equals pandas.factorize: small arrays of str or int64
(coded with a dict) and everything else (pandas itself), with nulls, mixed objects and
values that compare equal across types."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from pycel.data.hashing import SMALL, factorize

CELLS = st.one_of(
    st.sampled_from(["a", "b", "", "é", "a "]),
    st.integers(-3, 3),
    st.sampled_from([None, float("nan"), 1.0, True, pd.NA]),
)


def same_as_pandas(values: np.ndarray[Any, Any]) -> None:
    codes, uniques = factorize(values)
    want_codes, want_uniques = pd.factorize(values)
    assert codes.dtype == np.intp and codes.tolist() == list(want_codes)
    assert list(uniques) == list(want_uniques) and uniques.dtype == np.asarray(want_uniques).dtype


@given(st.lists(st.sampled_from(["x", "y", "z", "xx", ""]), max_size=2 * SMALL))
def test_strings(cells: list[str]) -> None:
    same_as_pandas(np.array(cells, dtype=object))


@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-2, 2), max_size=2 * SMALL))
def test_int64(cells: list[int]) -> None:
    same_as_pandas(np.array(cells, dtype=np.int64))


@given(st.lists(CELLS, max_size=2 * SMALL))
def test_mixed_objects_with_nulls(cells: list[Any]) -> None:
    same_as_pandas(np.array(cells, dtype=object))


def test_the_dict_path_is_taken_only_for_small_arrays_of_str_or_int64() -> None:
    small = np.array(["b", "a", "b"], dtype=object)
    codes, uniques = factorize(small)
    assert codes.tolist() == [0, 1, 0] and uniques.tolist() == ["b", "a"] and uniques.dtype == object
    floats = np.array([1.0, np.nan, 1.0])
    assert factorize(floats)[0].tolist() == [0, -1, 0]  # (pandas: NaN is a null)
