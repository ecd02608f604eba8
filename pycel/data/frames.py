"""Vectorized ingestion of pandas DataFrames and Arrow tables (no Python work per row).

Columns are validated and encoded whole: the event-type column is factorized once, each
attribute column is checked against its declared type with numpy, strings are
dictionary-encoded through their distinct values. Errors name the first offending row.
The rules (nulls, numbers, time, missing and extra columns) are in docs/data.md.

Example::

    batch = frame_to_batch(df, schema, type_column="event_type", offset=0)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.errors import DataError, short_repr

from .ingest import EventBatch, Schema, declared_attributes, int_problem

_KINDS = {"bool": "b", "int": "iuf", "float": "iuf", "time": "iuM", "str": "O"}
_NS_PER = {"W": 604_800 * 10**9, "D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9,
           "ms": 10**6, "us": 10**3}
_TARGET = {"bool": np.bool_, "int": np.int64, "float": np.float64, "time": np.int64, "str": np.int32}


#: How to fix a value in a column that the row's event type does not declare.
_NULL_HINT = " (leave the cells of other event types' attributes null: None, NaN or <NA>)"

def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def _to_pandas(data: Any) -> pd.DataFrame:
    """A pandas view of a DataFrame or an Arrow table / record batch. Arrow integers and
    booleans become pandas' nullable types, so a null does not turn int64 into float64
    (which would round values above 2**53)."""
    if not hasattr(data, "to_pydict"):
        return data  # type: ignore[no-any-return]
    import pyarrow as pa  # type: ignore[import-untyped]

    _check_unique([str(c) for c in data.schema.names])

    def nullable(t: pa.DataType) -> Any:
        if pa.types.is_integer(t):
            return pd.api.types.pandas_dtype(str(t).replace("int", "Int").replace("uInt", "UInt"))
        return pd.BooleanDtype() if pa.types.is_boolean(t) else None

    try:
        return data.to_pandas(types_mapper=nullable)  # type: ignore[no-any-return]
    except (ValueError, OverflowError, TypeError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"cannot convert the Arrow data: {err}") from None


def _check_unique(columns: list[str]) -> None:
    seen: set[str] = set()
    for c in columns:
        if c in seen:
            raise DataError("duplicate column name: the data has two columns with this name", column=c)
        seen.add(c)


def _numpy_values(series: pd.Series) -> np.ndarray[Any, Any]:
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


def _encode_column(
    series: pd.Series, dtype: str, present: npt.NDArray[np.bool_], schema: Schema, column: str
) -> tuple[np.ndarray[Any, Any], npt.NDArray[np.bool_]]:
    """(values, valid) of one attribute column, checked against ``dtype``; ``present``:
    its non-null cells (of rows whose type declares the attribute)."""
    values = _numpy_values(series)
    n = len(values)
    if values.dtype.kind == "O":  # mixed Python objects: check each present cell
        for cell in np.flatnonzero(present).tolist():
            problem = _scalar_problem(values[cell], dtype)
            if problem is not None:
                raise DataError(problem, row=cell, column=column)
        if dtype == "str":
            codes = np.full(n, -1, dtype=np.int32)
            inverse, uniq = pd.factorize(values[present])
            codes[present] = np.array([schema.encode(str(u)) for u in uniq] or [0], dtype=np.int32)[inverse]
            return codes, present
        stamps = (isinstance(values[r], (datetime, np.datetime64)) for r in np.flatnonzero(present))
        if dtype == "time" and any(stamps):
            values = _object_times(values, present, column)
        else:
            fill = False if dtype == "bool" else 0
            cells = [v if ok else fill for v, ok in zip(values, present, strict=True)]
            values = np.array(cells, dtype=np.float64 if dtype == "float" else _TARGET[dtype])
    elif dtype == "str" and present.any():
        row = _first(present)
        raise DataError(f"expected str, got {values[row]!r}", row=row, column=column)
    kind: str = values.dtype.kind
    if not present.any():
        kind = _KINDS[dtype][0]
    elif kind not in _KINDS[dtype]:
        row = _first(present)
        raise DataError(f"expected {dtype}, got {values[row]!r} ({series.dtype})", row=row, column=column)
    if dtype == "str":
        return np.full(n, -1, dtype=np.int32), present
    if kind == "M":
        values = _nanoseconds(values, present, column)
    elif dtype in ("int", "time") and kind in "uf":
        _check_int_range(values, present, kind, dtype, column)
    out: np.ndarray[Any, Any] = np.where(present, np.nan_to_num(values) if kind == "f" else values, 0)
    return out.astype(_TARGET[dtype]), present


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
            row = _first(bad)
            raise DataError(
                f"time {values[row]} is outside what 64-bit nanoseconds hold (years 1678-2261)",
                row=row,
                column=column,
            )
    nanos: npt.NDArray[np.int64] = values.astype("datetime64[ns]").view(np.int64)
    return nanos


def _refuse_stray(
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
        row = _first(stray)
        message = f"event type {schema.type_names[type_ids[row]]} has no attribute {attr!r}{_NULL_HINT}"
        raise DataError(message, row=row, column=attr)


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
        row = _first(bad)
        v = values[row].item()
        raise DataError(int_problem(v, dtype) or f"expected {dtype}, got {v!r}", row=row, column=column)


def _scalar_problem(v: Any, dtype: str) -> str | None:
    """Why one Python cell does not fit ``dtype`` (None when it does; ints may be floats
    with no fraction, within the int64 range)."""
    if isinstance(v, np.generic):
        v = v.item()
    bad = f"expected {dtype}, got {v!r} ({type(v).__name__})"
    if dtype == "str":
        return None if isinstance(v, str) else bad
    if dtype == "bool":
        return None if isinstance(v, bool) else bad
    if isinstance(v, (bool, str)):
        return bad
    if dtype == "float":
        if isinstance(v, int):
            try:
                float(v)
            except OverflowError:
                return f"expected float, got {short_repr(v)}: too large for a 64-bit float"
            return None
        return None if isinstance(v, float) else bad
    if dtype == "time" and isinstance(v, (datetime, np.datetime64)):
        return None
    if isinstance(v, (int, float)) and (dtype == "int" or isinstance(v, int)):
        return int_problem(v, dtype)
    return bad


def frame_to_batch(data: Any, schema: Schema, *, type_column: str, offset: int) -> EventBatch:
    """Validate a pandas DataFrame or Arrow table and encode it as an :class:`EventBatch`.

    The schema is only changed (new types, new strings) when the whole input is valid.
    """
    frame = _to_pandas(data)
    _check_unique([str(c) for c in frame.columns])
    if type_column not in frame.columns:
        raise DataError(f"missing the event type column {type_column!r}; columns: {list(frame.columns)}")
    trial = schema.copy()
    names = frame[type_column]
    if names.isna().any():
        raise DataError("missing event type", row=_first(names.isna().to_numpy()), column=type_column)
    codes, uniq = pd.factorize(names.astype(str))
    table = np.empty(len(uniq), dtype=np.int32)
    for k, name in enumerate(uniq):
        table[k] = trial.type_id(str(name), row=_first(codes == k), column=type_column)
    type_ids = table[codes] if len(codes) else np.zeros(0, dtype=np.int32)
    attributes = [str(c) for c in frame.columns if c != type_column]
    declared_anywhere = declared_attributes()
    for c in attributes:
        if c in trial.fields:
            continue
        filled = frame[c].notna().to_numpy()
        if c not in declared_anywhere:
            raise DataError(
                f"unknown attribute {c!r}: no event type declares it",
                row=_first(filled) if filled.any() else None,
                column=c,
            )
        _refuse_stray(filled, None, trial, type_ids, c)  # declared, but by none of this data's types
    n = len(frame)
    columns: dict[str, np.ndarray[Any, Any]] = {}
    valid: dict[str, npt.NDArray[np.bool_]] = {}
    for attr, dtype in trial.fields.items():
        declares = np.array([attr in f for f in trial.type_fields], dtype=np.bool_)[type_ids]
        if attr in frame.columns:
            filled = frame[attr].notna().to_numpy()
            _refuse_stray(filled, declares, trial, type_ids, attr)
            columns[attr], valid[attr] = _encode_column(frame[attr], dtype, filled, trial, attr)
        else:
            zero: np.ndarray[Any, Any] = np.zeros(n, dtype=_TARGET[dtype])
            columns[attr], valid[attr] = (zero - 1 if dtype == "str" else zero), np.zeros(n, dtype=np.bool_)
    for name in ("type_names", "type_fields", "supertypes", "fields", "strings", "string_codes"):
        setattr(schema, name, getattr(trial, name))
    present = frozenset(attributes)
    return EventBatch(schema, offset, type_ids.astype(np.int32), columns, valid, present)
