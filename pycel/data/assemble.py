"""Columns → :class:`EventBatch`: what every input kind shares once its rows are columns.

A reader (``frames`` for pandas and Arrow, ``rows`` for dicts and Event instances) resolves
the event type of each row and hands over its attribute columns as :class:`RawColumn`s.
Here the policy on extra data is applied to every column (a column no event type declares,
a value in a row whose type does not declare the attribute: both errors), the columns the
query reads are checked and encoded, and the others are deferred: kept as given and
decoded only when a match's events are shown.

Example::

    batch = assemble(schema, trial, 0, type_ids, {"price": RawColumn(lambda: df["price"])},
                     read={"price"}, defer=lambda attr, dtype, raw: DeferredFrameColumn(raw, dtype, attr))
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.errors import DataError

from .batch import DeferredColumn, EventBatch, Schema, declared_attributes
from .columns import TARGET, RawColumn, encode_column, first, refuse_stray

#: How a reader keeps a column the query does not read: (attribute, dtype, column) → deferred.
Defer = Callable[[str, str, RawColumn], DeferredColumn]


def _refuse_unknown(trial: Schema, type_ids: npt.NDArray[np.int32], inputs: Mapping[str, RawColumn]) -> None:
    """Columns of attributes that no event type of this input declares: an error when no
    event type at all declares it, else every cell must be null."""
    declared_anywhere: set[str] | None = None
    for attr, raw in inputs.items():
        if attr in trial.fields:
            continue
        if declared_anywhere is None:
            declared_anywhere = declared_attributes()
        filled = raw.filled()
        if attr not in declared_anywhere:
            raise DataError(
                f"unknown attribute {attr!r}: no event type declares it",
                row=first(filled) if filled.any() else None,
                column=attr,
            )
        refuse_stray(filled, None, trial, type_ids, attr)  # declared, but by none of this data's types


def assemble(
    schema: Schema,
    trial: Schema,
    offset: int,
    type_ids: npt.NDArray[np.int32],
    inputs: Mapping[str, RawColumn],
    *,
    read: Collection[str] | None,
    defer: Defer,
    input_columns: frozenset[str] | None = None,
) -> EventBatch:
    """The batch of rows whose event types are ``type_ids`` (ids of ``trial``, a copy of
    ``schema`` extended with this input's types) and whose attribute columns are ``inputs``.

    ``read``: the attributes to check and encode now (None: all); the others are checked
    only for the policy on extra data and kept as ``defer`` makes them. ``schema`` takes
    over ``trial`` (new types, new strings) only once everything is valid.
    """
    _refuse_unknown(trial, type_ids, inputs)
    n = len(type_ids)
    # (bincount, not np.unique: no sort of every row's type id)
    seen_types = np.flatnonzero(np.bincount(type_ids, minlength=len(trial.type_names))).tolist()
    columns: dict[str, np.ndarray[Any, Any]] = {}
    valid: dict[str, npt.NDArray[np.bool_]] = {}
    deferred: dict[str, DeferredColumn] = {}
    for attr, dtype in trial.fields.items():
        reading = read is None or attr in read
        raw = inputs.get(attr)
        if raw is None:
            if reading:  # not in the input: null everywhere
                zero: np.ndarray[Any, Any] = np.zeros(n, dtype=TARGET[dtype])
                columns[attr] = zero - 1 if dtype == "str" else zero
                valid[attr] = np.zeros(n, dtype=np.bool_)
            continue
        # A string column is factorized first: its nulls come from the same pass.
        codes = raw.string_codes() if reading and dtype == "str" else None
        declaring = np.array([attr in f for f in trial.type_fields], dtype=np.bool_)
        if not declaring[seen_types].all():  # some row's type lacks it: those cells must be null
            refuse_stray(raw.filled(), declaring[type_ids], trial, type_ids, attr)
        if reading:
            columns[attr], valid[attr] = encode_column(raw.series(), dtype, raw.filled(), trial, attr, codes)
        else:
            deferred[attr] = defer(attr, dtype, raw)
    schema.adopt(trial)
    return EventBatch(schema, offset, type_ids, columns, valid, input_columns, deferred)
