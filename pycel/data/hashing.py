"""``factorize``: pandas' dense codes of an array's values, without pandas' fixed cost on
the small arrays a small push makes.

``pandas.factorize`` hashes at C speed but costs 12-14 µs per call however short the
array, and a push calls it for its event types, its string columns, its atoms' bit
vectors and its keys: about a tenth of what a push of a few events costs. An array of
at most :data:`SMALL` values that are all ``str`` or int64 is coded with a dict instead
(the same codes: by first appearance; such values hold no null); any other array goes to
pandas.

Example::

    factorize(np.array(["b", "a", "b"], dtype=object))  # codes [0, 1, 0], values ["b", "a"]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

#: Arrays up to this long (and of str or int64 values) are coded without pandas.
SMALL = 64


def factorize(values: np.ndarray[Any, Any]) -> tuple[npt.NDArray[np.intp], np.ndarray[Any, Any]]:
    """(code per value, -1 at a null; the distinct values in order of first appearance),
    as ``pandas.factorize`` gives them for a numpy array."""
    if len(values) <= SMALL and (values.dtype == np.int64 or values.dtype == object):
        cells = values.tolist()
        if values.dtype == np.int64 or all(type(v) is str for v in cells):
            table: dict[Any, int] = {}
            coded = (table.setdefault(v, len(table)) for v in cells)
            codes = np.fromiter(coded, dtype=np.intp, count=len(cells))
            return codes, np.array(list(table), dtype=values.dtype)
    codes, uniques = pd.factorize(values)
    return np.asarray(codes, dtype=np.intp), np.asarray(uniques)
