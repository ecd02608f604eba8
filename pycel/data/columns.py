"""One attribute column against its declared type, checked and encoded whole with numpy.

Every input kind ends here: pandas and Arrow columns as they are, rows (dicts, Event
instances) as columns of Python objects. A column of Python objects is classified at C
speed (pandas' ``infer_dtype``) and converted by numpy when all its cells are of one
accepted kind; only an unusual mix (say datetimes and ints in one time column) or a bad
cell is looked at cell by cell, and the bad cell's row is named in the error. The rules
(nulls, numbers, time) are in docs/data.md.

Example::

    codes, valid = encode_column(pd.Series(["a", None]), "str", np.array([True, False]), schema, "name")
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.errors import DataError

from .batch import Schema, decode
from .hashing import factorize
from .values import int_problem, scalar_problem

_KINDS = {"bool": "b", "int": "iuf", "float": "iuf", "time": "iuM", "str": "O"}
_NS_PER = {"W": 604_800 * 10**9, "D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9,
           "ms": 10**6, "us": 10**3}
#: ``pandas.factorize`` of a column of objects: (code per row, -1 at nulls; distinct values).
Factorized = tuple[npt.NDArray[np.intp], np.ndarray[Any, Any]]
TARGET = {"bool": np.bool_, "int": np.int64, "float": np.float64, "time": np.int64, "str": np.int32}
# What infer_dtype may call the present cells of an object column for numpy to convert them.
_NUMBERS = frozenset({"integer", "floating", "mixed-integer-float", "empty"})
_FAST = {
    "bool": frozenset({"boolean", "empty"}),
    "int": _NUMBERS,
    "float": _NUMBERS,
    "time": _NUMBERS | {"datetime", "datetime64"},
    "str": frozenset({"string", "empty"}),
}

#: How to fix a value in a column that the row's event type does not declare.
NULL_HINT = " (leave the cells of other event types' attributes null: None, NaN or <NA>)"


def first(mask: npt.NDArray[np.bool_]) -> int:
    """The first row where ``mask`` is True."""
    return int(np.flatnonzero(mask)[0])


def first_rows(codes: npt.NDArray[np.intp]) -> list[int]:
    """The first row of each code of ``pandas.factorize`` (-1: null), in one pass: it
    numbers values in order of first appearance, so a row starts a code exactly where
    it exceeds every code before it.

    Example: ``first_rows(np.array([0, -1, 0, 1, 2, 1]))`` is ``[0, 3, 4]``.
    """
    if not len(codes):
        return []
    seen = np.maximum.accumulate(codes)
    starts: list[int] = np.flatnonzero(codes > np.concatenate([[-1], seen[:-1]])).tolist()
    return starts


class RawColumn:
    """One column of the input as it was given, turned into a pandas Series only when it
    is needed (a column the query does not read may never be).

    ``load``: returns the Series; ``nulls``: a cheaper null mask than the Series' own
    (Arrow's validity), or None.
    """

    def __init__(
        self,
        load: Callable[[], pd.Series],
        nulls: Callable[[], npt.NDArray[np.bool_]] | None = None,
    ) -> None:
        self._load, self._nulls = load, nulls
        self._series: pd.Series | None = None
        self._filled: npt.NDArray[np.bool_] | None = None
        self._codes: Factorized | None = None

    def series(self) -> pd.Series:
        if self._series is None:
            self._series = self._load()
        return self._series

    def string_codes(self) -> Factorized | None:
        """For a column of Python objects read as strings: ``pandas.factorize``'s (codes,
        distinct values), code -1 at the nulls; computed once, so that the null mask
        (``filled``) and the encoding share one hashing pass over the cells. None for
        other dtypes, and where a cell cannot be hashed (checked cell by cell instead)."""
        if self._codes is None and self.series().dtype == object:
            try:
                codes, uniques = factorize(self.series().to_numpy())
            except TypeError:  # an unhashable cell (a list): not a string, found by encode_column
                return None
            self._codes = (np.asarray(codes, dtype=np.intp), np.asarray(uniques, dtype=object))
        return self._codes

    def filled(self) -> npt.NDArray[np.bool_]:
        """Per row, whether the cell holds a value (not None, NaN, NaT or <NA>)."""
        if self._filled is None:
            if self._nulls is not None:
                self._filled = ~self._nulls()
            elif self._codes is not None:  # factorize's nulls are isna's
                self._filled = self._codes[0] >= 0
            else:
                self._filled = _not_null(self.series())
        return self._filled


#: What pandas' ``infer_dtype(skipna=False)`` calls a column of Python objects none of
#: which is null (None, NaN, NaT or <NA> among them make it "mixed…" or "…-na").
_NO_NULLS = frozenset({"integer", "boolean", "string"})


def _not_null(series: pd.Series) -> npt.NDArray[np.bool_]:
    """``series.notna()`` as numpy, from the values where their kind says it (integers and
    booleans hold no null, floats NaN, date-times NaT; Python objects all of one kind:
    classified at C speed, no null test per cell)."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufmMO":
        values = series.to_numpy()
        kind = dtype.kind
        if kind == "O":
            inferred = pd.api.types.infer_dtype(values, skipna=False)
            kind = "b" if inferred in _NO_NULLS else "f" if inferred == "floating" else "O"
            if kind == "f":
                values = values.astype(np.float64)
        if kind in "biu":
            return np.ones(len(values), dtype=np.bool_)
        if kind in "fmM":
            present: npt.NDArray[np.bool_] = ~np.isnan(values) if kind == "f" else ~np.isnat(values)
            return present
    filled: npt.NDArray[np.bool_] = series.notna().to_numpy()
    return filled


class DeferredFrameColumn:
    """A column the query does not read: checked and decoded on the first value asked for
    (all of it at once, vectorized, so a bad cell anywhere in it is an error naming that
    cell), into a dictionary of its own."""

    def __init__(self, raw: RawColumn, dtype: str, column: str) -> None:
        self.raw, self.dtype, self.column = raw, dtype, column
        self._decoded: tuple[np.ndarray[Any, Any], npt.NDArray[np.bool_], list[str]] | None = None

    def value(self, k: int) -> Any:
        if self._decoded is None:
            strings = Schema()
            raw = self.raw
            codes = raw.string_codes() if self.dtype == "str" else None
            values, valid = encode_column(raw.series(), self.dtype, raw.filled(), strings, self.column, codes)
            self._decoded = values, valid, strings.strings
        values, valid, table = self._decoded
        return decode(values[k], self.dtype, table) if valid[k] else None


def numpy_values(series: pd.Series) -> np.ndarray[Any, Any]:
    """The cells as a numpy array; pandas' nullable numbers and booleans as plain numpy
    (nulls as 0: the caller knows them from ``isna``), timezones converted to UTC."""
    dtype = series.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        utc: np.ndarray[Any, Any] = series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
        return utc
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and numpy_dtype is not None:
        if numpy_dtype.kind in "biuf":
            fill = False if numpy_dtype.kind == "b" else 0
            plain: np.ndarray[Any, Any] = series.to_numpy(dtype=numpy_dtype, na_value=fill)
            return plain
    return series.to_numpy()


def _object_times(values: np.ndarray[Any, Any], present: npt.NDArray[np.bool_], column: str) -> Any:
    """Nanoseconds of a column of Python datetimes / ints (checked); each datetime without
    an offset is UTC, each with one converted, value by value."""
    try:
        stamps = pd.to_datetime(pd.Series(values).where(present), utc=True)
    except (ValueError, OverflowError, TypeError) as err:
        for row in np.flatnonzero(present).tolist():  # find the row (error path only)
            try:
                pd.to_datetime(pd.Series([values[row]]), utc=True)
            except (ValueError, OverflowError, TypeError):
                raise DataError(f"bad time {values[row]!r}: {err}", row=row, column=column) from None
        raise DataError(f"bad time values: {err}", column=column) from None
    return stamps.dt.tz_localize(None).to_numpy()


def _converted_objects(
    values: np.ndarray[Any, Any], present: npt.NDArray[np.bool_], dtype: str, column: str
) -> np.ndarray[Any, Any] | None:
    """An object column's cells converted by numpy (datetime64 for date-times, else the
    declared type's numbers; 0 where absent) when every present cell is of a kind the type
    accepts; None when some cell needs a look of its own (it may be bad)."""
    every = bool(present.all())
    cells = values if every else values[present]
    kind = pd.api.types.infer_dtype(cells, skipna=False)
    if kind not in _FAST[dtype]:
        return None
    if kind in ("datetime", "datetime64"):
        return _object_times(values, present, column)  # type: ignore[no-any-return]
    target = np.float64 if dtype == "float" else TARGET[dtype]
    try:
        # Python ints beyond the target raise OverflowError
        converted: np.ndarray[Any, Any] = cells.astype(target)
        if dtype in ("int", "time") and kind != "integer":
            fraction = cells.astype(np.float64) % 1 != 0  # astype(int64) truncated them
            if fraction.any():
                return None
    except (OverflowError, ValueError, TypeError):
        return None
    if every:
        return converted
    out: np.ndarray[Any, Any] = np.zeros(len(values), dtype=target)
    out[present] = converted
    return out


def _checked_objects(
    values: np.ndarray[Any, Any], present: npt.NDArray[np.bool_], dtype: str, column: str
) -> np.ndarray[Any, Any]:
    """An object column numpy could not convert at once: the first bad cell is an error;
    a valid mix (datetimes and ints in a time column, numpy scalars of several kinds) is
    converted cell by cell."""
    for cell in np.flatnonzero(present).tolist():
        problem = scalar_problem(values[cell], dtype)
        if problem is not None:
            raise DataError(problem, row=cell, column=column)
    stamps = (isinstance(values[r], (datetime, np.datetime64)) for r in np.flatnonzero(present))
    if dtype == "time" and any(stamps):
        return _object_times(values, present, column)  # type: ignore[no-any-return]
    fill = False if dtype == "bool" else 0
    cells = [v if ok else fill for v, ok in zip(values, present, strict=True)]
    return np.array(cells, dtype=np.float64 if dtype == "float" else TARGET[dtype])


def encode_column(
    series: pd.Series,
    dtype: str,
    present: npt.NDArray[np.bool_],
    schema: Schema,
    column: str,
    factorized: Factorized | None = None,
) -> tuple[np.ndarray[Any, Any], npt.NDArray[np.bool_]]:
    """(values, valid) of one attribute column, checked against ``dtype``; ``present``:
    its non-null cells. Strings become codes of ``schema``'s dictionary (one lookup per
    distinct string), times int64 nanoseconds. ``factorized``: the column's
    ``RawColumn.string_codes()`` when known (its nulls are ``~present``).

    Example: ``encode_column(pd.Series([1, 2]), "int", np.array([True, True]), schema, "x")``.
    """
    values = numpy_values(series)
    n = len(values)
    if values.dtype.kind == "O":
        if dtype == "str":
            return _string_codes(values, present, schema, column, factorized), present
        converted = _converted_objects(values, present, dtype, column)
        values = _checked_objects(values, present, dtype, column) if converted is None else converted
        if values.dtype == TARGET[dtype]:  # checked and converted, 0 where absent: done
            return values, present
    elif dtype == "str" and present.any():
        row = first(present)
        raise DataError(f"expected str, got {values[row]!r}", row=row, column=column)
    kind: str = values.dtype.kind
    if not present.any():  # empty or all null, of any dtype (datetime64 too): nothing to read
        return np.full(n, -1, dtype=np.int32) if dtype == "str" else np.zeros(n, TARGET[dtype]), present
    if kind not in _KINDS[dtype]:
        row = first(present)
        raise DataError(f"expected {dtype}, got {values[row]!r} ({series.dtype})", row=row, column=column)
    if dtype == "str":
        return np.full(n, -1, dtype=np.int32), present
    if kind == "M":
        values = _nanoseconds(values, present, column)
    elif dtype in ("int", "time") and kind in "uf":
        _check_int_range(values, present, kind, dtype, column)
    # (np.where, not nan_to_num: NaN cells are nulls, already masked; an infinity is a value)
    out: np.ndarray[Any, Any] = np.where(present, values, 0)
    return out.astype(TARGET[dtype]), present


def _string_codes(
    values: np.ndarray[Any, Any],
    present: npt.NDArray[np.bool_],
    schema: Schema,
    column: str,
    factorized: Factorized | None,
) -> npt.NDArray[np.int32]:
    """Dictionary codes of a column of Python strings (-1 where absent). The distinct
    values are classified, not every cell: a cell that is not a string hashes unlike
    every string, so it is a distinct value of its own."""
    if factorized is None:  # (classified whole first: an unhashable cell cannot be factorized)
        if pd.api.types.infer_dtype(values[present], skipna=False) not in _FAST["str"]:
            _checked_objects(values, present, "str", column)  # raises at the first non-string
        inverse, uniq = factorize(values[present])
        where = present
    else:
        inverse, uniq = factorized
        where = inverse >= 0
        if pd.api.types.infer_dtype(uniq, skipna=False) not in _FAST["str"]:
            _checked_objects(values, present, "str", column)
    table = np.array([schema.encode(str(u)) for u in uniq] or [0], dtype=np.int32)
    codes = np.full(len(values), -1, dtype=np.int32)
    codes[where] = table[inverse[where] if factorized is not None else inverse]
    return codes


def _nanoseconds(
    values: np.ndarray[Any, Any], present: npt.NDArray[np.bool_], column: str
) -> npt.NDArray[np.int64]:
    """datetime64 values (any unit) as int64 nanoseconds; a value outside the years
    1678-2261 that nanoseconds hold is an error (numpy's cast would wrap it)."""
    unit, count = np.datetime_data(values.dtype)
    per = _NS_PER.get(unit, 1) * count
    if per > 1:
        raw = values.view(np.int64)
        limit = (2**63 - 1) // per  # (not -(2**63 - 1) // per: it floors one unit too far)
        bad = present & ((raw > limit) | (raw < -limit))
        if bad.any():
            row = first(bad)
            raise DataError(
                f"time {values[row]} is outside what 64-bit nanoseconds hold (years 1678-2261)",
                row=row,
                column=column,
            )
    nanos: npt.NDArray[np.int64] = values.astype("datetime64[ns]").view(np.int64)
    return nanos


def _check_int_range(
    values: np.ndarray[Any, Any], present: npt.NDArray[np.bool_], kind: str, dtype: str, column: str
) -> None:
    """int attributes (and integer times) are int64: unsigned values above 2**63 - 1 and
    floats that are not integers in [-2**63, 2**63) are errors, never wrapped."""
    with np.errstate(invalid="ignore"):
        if kind == "u":
            bad = present & (values > np.uint64(2**63 - 1))
        else:
            fits = np.isfinite(values) & (values >= -(2.0**63)) & (values < 2.0**63)
            bad = present & ~(fits & (np.nan_to_num(values) % 1 == 0))
    if bad.any():
        row = first(bad)
        v = values[row].item()
        raise DataError(int_problem(v, dtype) or f"expected {dtype}, got {v!r}", row=row, column=column)


def refuse_stray(
    filled: npt.NDArray[np.bool_],
    declares: npt.NDArray[np.bool_] | None,
    schema: Schema,
    type_ids: npt.NDArray[np.int32],
    attr: str,
) -> None:
    """A non-null cell of ``attr`` in a row whose event type does not declare it is an
    error (``declares``: per row, whether its type declares ``attr``; None: no row's does)."""
    stray = filled if declares is None else filled & ~declares
    if stray.any():
        row = first(stray)
        message = f"event type {schema.type_names[type_ids[row]]} has no attribute {attr!r}{NULL_HINT}"
        raise DataError(message, row=row, column=attr)
