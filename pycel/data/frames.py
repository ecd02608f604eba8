"""Vectorized ingestion of pandas DataFrames and Arrow tables (no Python work per row).

The event-type column is factorized once; each attribute column is checked and encoded
whole (``pycel.data.columns``). Of an Arrow table only the event-type column and the
columns the query reads are converted to pandas; the others are checked for the policy on
extra data through Arrow's null masks and converted only if a match's events are shown.
Errors name the first offending row. The rules (nulls, numbers, time, missing and extra
columns) are in docs/data.md.

Example::

    batch = frame_to_batch(df, schema, type_column="event_type", offset=0, columns={"price"})
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.errors import DataError

from .assemble import assemble
from .batch import EventBatch, Schema
from .columns import DeferredFrameColumn, RawColumn, first, first_rows
from .hashing import factorize


def _check_unique(columns: list[str]) -> None:
    seen: set[str] = set()
    for c in columns:
        if c in seen:
            raise DataError("duplicate column name: the data has two columns with this name", column=c)
        seen.add(c)


def nullable_dtype(t: Any) -> Any:
    """The pandas dtype for Arrow type ``t`` (a ``types_mapper``): integers and booleans as
    pandas' nullable types, so a null does not turn int64 into float64 (which would round
    values above 2**53); None (pyarrow's default) for the others.

    Example: ``table.to_pandas(types_mapper=nullable_dtype)``.
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    if pa.types.is_integer(t):
        return pd.api.types.pandas_dtype(str(t).replace("int", "Int").replace("uInt", "UInt"))
    return pd.BooleanDtype() if pa.types.is_boolean(t) else None


def _arrow_series(cells: Any) -> pd.Series:
    try:
        return cells.to_pandas(types_mapper=nullable_dtype)  # type: ignore[no-any-return]
    except (ValueError, OverflowError, TypeError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"cannot convert the Arrow data: {err}") from None


def _arrow_nulls(cells: Any) -> npt.NDArray[np.bool_]:
    """Nulls of an Arrow column from its validity bitmap (and NaN, a null too)."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    nulls = pc.is_null(cells, nan_is_null=pa.types.is_floating(cells.type))
    return np.asarray(nulls.to_numpy(zero_copy_only=False), dtype=np.bool_)


def _columns(data: Any) -> dict[str, RawColumn]:
    """Every column of a DataFrame or Arrow table / record batch, not converted yet."""
    if hasattr(data, "to_pydict"):  # Arrow
        names = [str(c) for c in data.schema.names]
        _check_unique(names)
        return {
            name: RawColumn(functools.partial(_arrow_series, cells), functools.partial(_arrow_nulls, cells))
            for name, cells in zip(names, data.columns, strict=True)
        }
    names = [str(c) for c in data.columns]
    _check_unique(names)
    return {
        name: RawColumn(functools.partial(_frame_column, data, label, k))
        for k, (name, label) in enumerate(zip(names, data.columns, strict=True))
    }


def _frame_column(frame: pd.DataFrame, label: Any, k: int) -> pd.Series:
    """Column ``k`` (labelled ``label``): by label, pandas' cached lookup (``iloc`` builds
    a new Series each time), by position where a label does not name one column."""
    try:
        column = frame[label]
    except (KeyError, TypeError, ValueError):  # an unusual label (pandas reads it as a key set)
        column = None
    return column if isinstance(column, pd.Series) else frame.iloc[:, k]


def _type_names(names: pd.Series) -> tuple[npt.NDArray[np.intp], Any]:
    """(code per row, -1 where null; distinct names) of the event-type column: one
    factorize pass, the names made text afterwards (1 and "1" both name type "1")."""
    try:  # (a column of objects as numpy: pandas would wrap the names in an Index)
        codes, uniq = factorize(names.to_numpy()) if names.dtype == object else pd.factorize(names)
    except TypeError:  # an unhashable name (a list): looked up (and refused) as its text
        codes, uniq = pd.factorize(names.where(names.isna(), names.astype(str)))
    return np.asarray(codes, dtype=np.intp), uniq


def frame_to_batch(
    data: Any,
    schema: Schema,
    *,
    type_column: str,
    offset: int,
    columns: Collection[str] | None = None,
) -> EventBatch:
    """Validate a pandas DataFrame or Arrow table and encode it as an :class:`EventBatch`.

    ``columns``: the attributes to check and encode now (None: all); the others are checked
    for unknown attributes and stray values, and decoded when shown. The schema is only
    changed (new types, new strings) when the whole input is valid.
    """
    inputs = _columns(data)
    if type_column not in inputs:
        raise DataError(f"missing the event type column {type_column!r}; columns: {list(inputs)}")
    trial = schema.copy()
    codes, uniq = _type_names(inputs.pop(type_column).series())
    missing = codes < 0
    if missing.any():
        raise DataError("missing event type", row=first(missing), column=type_column)
    table = np.empty(len(uniq), dtype=np.int32)
    for k, (name, row) in enumerate(zip(uniq, first_rows(codes), strict=True)):
        table[k] = trial.type_id(str(name), row=row, column=type_column)
    type_ids = table[codes] if len(codes) else np.zeros(0, dtype=np.int32)
    return assemble(
        schema, trial, offset, type_ids.astype(np.int32), inputs,
        read=columns,
        defer=lambda attr, dtype, raw: DeferredFrameColumn(raw, dtype, attr),
        input_columns=frozenset(inputs),
    )
