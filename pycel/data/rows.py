"""Row-oriented inputs (lists of Event instances or dicts) → columns, in linear time.

The rows are turned into one column of Python objects per attribute that is read (or
that needs checking), with C-level loops (``map``, ``set.update``, one list comprehension
per column), and from there they take the same checks and encoding as a DataFrame
(``pycel.data.assemble``). A left-out key is a null. Columns the query does not read are
built only if the policy on extra data needs to look at them, or when a match's events
are shown (then checked whole, as a DataFrame's).

Example::

    batch = rows_to_batch([{"event_type": "Buy", "price": 3.0}], schema, type_column="event_type",
                          offset=0, columns={"price"})
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.errors import DataError
from pycel.language.events import Event, event_name

from .assemble import assemble
from .batch import EventBatch, Schema, declared_attributes
from .columns import DeferredFrameColumn, RawColumn, first_rows
from .values import null_or_value


def _refuse_input(data: Any) -> None:
    if data is None or isinstance(data, (str, bytes, Mapping, Event)) or not isinstance(data, Iterable):
        raise DataError(
            f"expected events: a list (or any iterable) of Event instances or dicts, a pandas "
            f"DataFrame or an Arrow table; got {type(data).__name__}"
            + (" (wrap a single event in a list)" if isinstance(data, (Mapping, Event)) else "")
        )


def _type_ids(
    items: list[Any], trial: Schema, type_column: str
) -> tuple[Any, list[Mapping[str, Any]], bool, bool]:
    """(type id per row, attribute mapping per row, whether some row is a mapping, whether
    every mapping is a ``dict``): an Event's ``__dict__``, a mapping as it is (its
    ``type_column`` key is not an attribute)."""
    distinct = list(dict.fromkeys(map(type, items)))  # in order of first appearance
    classes = list(map(type, items)) if len(distinct) > 1 else []  # (only needed for several)
    kinds: dict[type, int] = {}  # class -> type id, or -1 for a mapping class
    for cls in distinct:
        if issubclass(cls, Event):
            tid = trial.add_type(cls)
            if trial.type_fields[tid] != cls.__fields__:
                raise DataError(
                    f"two different event types are named {event_name(cls)!r} in this stream",
                    row=_first_of(items, cls),
                    column=type_column,
                )
            kinds[cls] = tid
        elif issubclass(cls, Mapping):
            kinds[cls] = -1
        else:
            raise DataError(f"expected an Event or a dict, got {cls.__name__}", row=_first_of(items, cls))
    n = len(items)
    if classes:
        ids = np.fromiter(map(kinds.__getitem__, classes), dtype=np.int32, count=n)
    else:
        ids = np.full(n, kinds[distinct[0]] if n else 0, dtype=np.int32)
    if all(k >= 0 for k in kinds.values()):
        return ids, list(map(vars, items)), False, True
    maps = np.flatnonzero(ids < 0)
    dicts = items if len(maps) == n else [items[k] for k in maps.tolist()]
    try:
        names = _objects(map(operator.itemgetter(type_column), dicts), len(dicts))
    except KeyError:
        row = next(int(k) for k, d in zip(maps, dicts, strict=True) if type_column not in d)
        raise DataError(f"missing the event type field {type_column!r}", row=row) from None
    try:
        codes, uniq = pd.factorize(names)
    except TypeError:  # an unhashable name: it is looked up (and refused) as its text
        codes, uniq = pd.factorize(_objects(map(str, names), len(names)))
    table = np.empty(len(uniq), dtype=np.int32)
    for k, (name, row) in enumerate(zip(uniq, first_rows(codes), strict=True)):
        table[k] = trial.type_id(str(name), row=int(maps[row]), column=type_column)
    ids[maps] = table[codes]
    plain = all(issubclass(cls, (dict, Event)) for cls in kinds)
    if len(maps) == n:
        return ids, items, True, plain
    return ids, [i if isinstance(i, Mapping) else vars(i) for i in items], True, plain


def _first_of(items: list[Any], cls: type) -> int:
    return next(k for k, item in enumerate(items) if type(item) is cls)


def _objects(cells: Iterable[Any], n: int) -> npt.NDArray[np.object_]:
    """The ``n`` cells as a 1-d array of Python objects, each cell as it is (also a list or
    a tuple, which ``np.array`` would take apart)."""
    return np.fromiter(cells, dtype=object, count=n)


def _column(rows: list[Mapping[str, Any]], plain: bool, attr: str) -> pd.Series:
    """The values of ``attr`` (None where a row leaves it out) as a column of objects;
    ``plain``: every row is a ``dict`` (its ``get`` is then called without Python code)."""
    get: Any = dict.get  # (typeshed's overloads do not fit map's two iterables)
    cells = map(get, rows, itertools.repeat(attr)) if plain else (r.get(attr) for r in rows)
    return pd.Series(_objects(cells, len(rows)), dtype=object, copy=False)


def _refuse_unknown_key(rows: list[Mapping[str, Any]], attr: str, trial: Schema, type_ids: Any) -> None:
    """A key that no event type declares: an error at the first row holding it (a value
    there, or a null, of a key nobody declares)."""
    k = next(k for k, r in enumerate(rows) if attr in r)
    if null_or_value(rows[k][attr]) is not None:
        name = trial.type_names[int(type_ids[k])]
        raise DataError(f"event type {name} has no attribute {attr!r}", row=k, column=attr)
    raise DataError(f"unknown attribute {attr!r}: no event type declares it", row=k, column=attr)


def rows_to_batch(
    data: Any,
    schema: Schema,
    *,
    type_column: str,
    offset: int,
    columns: Collection[str] | None = None,
) -> EventBatch:
    """Validate a list of Event instances and/or dicts and encode it as an :class:`EventBatch`.

    ``columns``: the attributes to check and encode now (None: all); the others are
    checked for unknown keys and stray values, and decoded when shown. The schema is only
    changed when the whole input is valid.
    """
    _refuse_input(data)
    items = list(data)
    trial = schema.copy()
    type_ids, rows, dicts, plain = _type_ids(items, trial, type_column)
    if dicts:  # their keys, wherever they are (a C-level loop)
        keys = set().union(*rows) - {type_column}
    else:  # Event instances: their types' attributes
        keys = {a for tid in np.unique(type_ids).tolist() for a in trial.type_fields[tid]}
    unknown = keys - set(trial.fields)
    if unknown:
        declared = declared_attributes()
        for attr in sorted(unknown - declared):
            _refuse_unknown_key(rows, attr, trial, type_ids)
    inputs = {attr: RawColumn(functools.partial(_column, rows, plain, attr)) for attr in keys}
    return assemble(
        schema, trial, offset, type_ids, inputs,
        read=columns,
        defer=lambda attr, dtype, raw: DeferredFrameColumn(raw, dtype, attr),
    )
