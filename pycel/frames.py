"""Vectorized ingestion of pandas DataFrames and Arrow tables (no Python work per row).

Columns are validated and encoded whole: the event-type column is factorized once, each
attribute column is checked against its declared type with numpy, strings are
dictionary-encoded through their distinct values. Errors name the first offending row.

Example::

    batch = frame_to_batch(df, schema, type_column="event_type", offset=0)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from .errors import DataError
from .ingest import EventBatch, Schema, all_event_types

_KINDS = {"bool": "b", "int": "iuf", "float": "iuf", "time": "iuM", "str": "O"}


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def _encode_column(
    series: pd.Series, dtype: str, declared: npt.NDArray[np.bool_], schema: Schema, column: str
) -> tuple[np.ndarray[Any, Any], npt.NDArray[np.bool_]]:
    """(values, valid) of one attribute column, checked against ``dtype``. Cells of rows
    whose event type does not declare the attribute are null."""
    present = ~(series.isna().to_numpy() | ~declared)
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    values = series.to_numpy()
    n = len(values)
    if values.dtype.kind == "O":  # mixed Python objects: check each present cell
        for cell in np.flatnonzero(present).tolist():
            if not _scalar_ok(values[cell], dtype):
                v = values[cell]
                raise DataError(f"expected {dtype}, got {v!r} ({type(v).__name__})", row=cell, column=column)
        if dtype == "str":
            codes = np.full(n, -1, dtype=np.int32)
            inverse, uniq = pd.factorize(values[present])
            codes[present] = np.array([schema.encode(str(u)) for u in uniq] or [0], dtype=np.int32)[inverse]
            return codes, present
        if dtype == "time" and any(isinstance(values[r], datetime) for r in np.flatnonzero(present)):
            stamps = pd.to_datetime(pd.Series(values).where(present), utc=True)
            values = stamps.dt.tz_localize(None).to_numpy()
        else:
            fill = False if dtype == "bool" else 0
            values = np.array([v if ok else fill for v, ok in zip(values, present, strict=True)])
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
        values = values.astype("datetime64[ns]").view(np.int64)
    elif dtype == "int" and kind == "f":
        fractional = present & (np.nan_to_num(values) % 1 != 0)
        if fractional.any():
            row = _first(fractional)
            raise DataError(f"expected int, got {values[row]!r}", row=row, column=column)
    target = {"bool": np.bool_, "int": np.int64, "float": np.float64, "time": np.int64}[dtype]
    out: np.ndarray[Any, Any] = np.where(present, np.nan_to_num(values) if kind == "f" else values, 0)
    out = out.astype(target)
    return out, present


def _scalar_ok(v: Any, dtype: str) -> bool:
    """Whether one Python cell fits ``dtype`` (ints may be floats with no fraction)."""
    if dtype == "str":
        return isinstance(v, str)
    if dtype == "bool":
        return isinstance(v, (bool, np.bool_))
    if isinstance(v, (bool, np.bool_, str)):
        return False
    if dtype == "int":
        return isinstance(v, (int, np.integer)) or isinstance(v, float) and v.is_integer()
    if dtype == "float":
        return isinstance(v, (int, float, np.integer, np.floating))
    return isinstance(v, (int, np.integer, datetime, np.datetime64))


def frame_to_batch(data: Any, schema: Schema, *, type_column: str, offset: int) -> EventBatch:
    """Validate a pandas DataFrame or Arrow table and encode it as an :class:`EventBatch`.

    The schema is only changed (new types, new strings) when the whole input is valid.
    """
    frame: pd.DataFrame = data.to_pandas() if hasattr(data, "to_pydict") else data
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
    declared_anywhere = {f for ts in all_event_types().values() for t in ts for f in t.__fields__}
    for c in attributes:
        if c not in trial.fields and c not in declared_anywhere:
            filled = frame[c].notna().to_numpy()
            raise DataError(
                f"unknown attribute {c!r}: no event type declares it",
                row=_first(filled) if filled.any() else None,
                column=c,
            )
    n = len(frame)
    columns: dict[str, np.ndarray[Any, Any]] = {}
    valid: dict[str, npt.NDArray[np.bool_]] = {}
    for attr, dtype in trial.fields.items():
        declares = np.array([attr in f for f in trial.type_fields], dtype=np.bool_)
        if attr in frame.columns:
            columns[attr], valid[attr] = _encode_column(frame[attr], dtype, declares[type_ids], trial, attr)
        else:
            numpy_type = {"str": np.int32, "float": np.float64, "bool": np.bool_}.get(dtype, np.int64)
            zero: np.ndarray[Any, Any] = np.zeros(n, dtype=numpy_type)
            columns[attr], valid[attr] = (zero - 1 if dtype == "str" else zero), np.zeros(n, dtype=np.bool_)
    for name in ("type_names", "type_fields", "supertypes", "fields", "strings", "string_codes"):
        setattr(schema, name, getattr(trial, name))
    return EventBatch(schema, offset, type_ids.astype(np.int32), columns, valid)
