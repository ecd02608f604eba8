"""Ingestion: event instances, dicts, pandas DataFrames and Arrow tables → columnar batches.

:func:`to_batch` validates a whole input before anything is accepted, so a bad row raises
a :class:`~pycel.errors.DataError` naming it and leaves the schema's state as it was. With
``columns=`` only the attributes a query reads are checked and encoded; the other columns
are checked for what the policy on extra data requires (docs/data.md) and decoded only
when a match's events are shown.

The modules below this one, each importing only those under it: ``batch`` (Schema,
EventBatch), ``values`` (one value), ``columns`` (one column), ``assemble`` (columns →
batch), ``frames`` (pandas, Arrow) and ``rows`` (dicts, Event instances).

Example::

    schema = Schema.for_types([Buy, Sell])
    batch = to_batch([Buy(name="X", price=1.0, time=0)], schema)
    batch.row(0)     # ("Buy", {"name": "X", "price": 1.0, "time": 0})
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pycel.errors import DataError

from .batch import DEFAULT_TYPE_COLUMN, EventBatch, Schema, all_event_types, declared_attributes
from .frames import frame_to_batch
from .rows import rows_to_batch
from .values import int_problem

__all__ = [
    "DEFAULT_TYPE_COLUMN",
    "EventBatch",
    "Schema",
    "all_event_types",
    "check_input_columns",
    "declared_attributes",
    "int_problem",
    "time_values",
    "to_batch",
]


def to_batch(
    data: Any,
    schema: Schema,
    *,
    type_column: str = DEFAULT_TYPE_COLUMN,
    offset: int = 0,
    columns: Collection[str] | None = None,
) -> EventBatch:
    """Validate ``data`` and encode it as an :class:`EventBatch` starting at ``offset``.

    ``data``: a list of Event instances, a list of dicts holding ``type_column``, a pandas
    DataFrame or an Arrow table with a ``type_column`` column. ``columns``: the attributes
    to check and encode (a query's ``columns_read_by``); None: all. The others are checked
    for unknown attributes and values their row's type does not declare, and kept to be
    decoded when shown (``batch.row``, ``Match.events``). The schema is only changed (new
    types, new strings) when the whole input is valid. Anything else is a
    :class:`DataError` saying what is accepted.

    Example: ``to_batch(df, schema, columns={"price"})`` encodes only ``price``.
    """
    if hasattr(data, "to_pydict") or hasattr(data, "columns") and hasattr(data, "iloc"):
        return frame_to_batch(data, schema, type_column=type_column, offset=offset, columns=columns)
    return rows_to_batch(data, schema, type_column=type_column, offset=offset, columns=columns)


def check_input_columns(given: Collection[str] | None, reads: Mapping[str, str]) -> None:
    """A columnar input (``given``: its column names; None for rows) must have a column for
    every attribute the query reads (a missing column is not a column of nulls: it is
    usually a typo or the wrong file)."""
    if given is None:
        return
    for name, where in reads.items():
        if name not in given:
            raise DataError(
                f"the data has no column {name!r}, which {where} reads; columns: {sorted(given)}",
                column=name,
            )


def _show_time(value: Any, dtype: str | None) -> str:
    if dtype == "time":
        return datetime.fromtimestamp(int(value) / 1e9, UTC).isoformat()
    return repr(value.item() if isinstance(value, np.generic) else value)


def time_values(batch: EventBatch, attr: str, previous: float | None = None) -> np.ndarray[Any, Any]:
    """The window's time column of ``batch``, checked: present on every event and
    non-decreasing (also with respect to ``previous``, the last time already accepted)."""
    if attr not in batch.columns:
        raise DataError(f"the window's time attribute {attr!r} is not in the data", column=attr)
    values, valid = batch.columns[attr], batch.valid[attr]
    missing = np.flatnonzero(~valid)
    if len(missing):
        k = int(missing[0])
        raise DataError(
            f"event of type {batch.type_name(k)} has no value for the window's time attribute",
            row=k,
            column=attr,
        )
    if values.dtype.kind == "f" and not np.isfinite(values).all():  # inf - inf is no duration
        k = int(np.flatnonzero(~np.isfinite(values))[0])
        raise DataError(f"the window's time must be a finite number, got {values[k]}", row=k, column=attr)
    if len(values):
        prev = np.concatenate([[values[0] if previous is None else previous], values[:-1]])
        back = np.flatnonzero(values < prev)
        if len(back):
            k = int(back[0])
            shown = [_show_time(v, batch.schema.fields.get(attr)) for v in (values[k], prev[k])]
            raise DataError(f"time goes backwards: {shown[0]} after {shown[1]}", row=k, column=attr)
    return values
