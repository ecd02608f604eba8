"""Row-oriented inputs (lists of Event instances or dicts) → columns, in linear time.

The rows are read chunk by chunk (:data:`CHUNK` rows at a time, so that a chunk's dicts
are still in the CPU cache when the next key is fetched from them), with C-level loops
only: ``set.update`` collects every key (an unknown one is an error), ``map(dict.get,
...)`` fetches the event type and the attributes the query reads, and number and bool
attributes are converted by numpy chunk by chunk when all their values are of a kind it
converts as they are. From there the columns take the same checks and encoding as a
DataFrame's (``pycel.data.assemble``). A left-out key is a null. Columns the query does
not read are built only if the policy on extra data needs to look at them, or when a
match's events are shown (then checked whole, as a DataFrame's).

Example::

    batch = rows_to_batch([{"event_type": "Buy", "price": 3.0}], schema, type_column="event_type",
                          offset=0, columns={"price"})
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.errors import DataError
from pycel.language.events import Event, event_name

from .assemble import assemble
from .batch import EventBatch, Schema, declared_attributes
from .columns import DeferredFrameColumn, RawColumn, first, first_rows
from .values import null_or_value

#: Rows per chunk: small enough that a chunk's dicts stay in the CPU cache while its keys
#: are collected and each wanted key is fetched (a pass per column over the whole list
#: reloads every dict from memory: about 1.4x slower at 100k rows, 1.5x at 1M).
CHUNK = 1024

#: How a row's attributes are read: a ``dict`` (``dict.get`` without Python code), another
#: mapping (its own ``get``), or an Event instance (its ``__dict__``).
Kind = Literal["dicts", "mappings", "events"]

#: An Event's attributes (``vars`` looks ``__dict__`` up through the type: 2x slower).
_instance_dict = operator.attrgetter("__dict__")

#: Declared types whose gathered columns are converted chunk by chunk, while the chunk's
#: values are in the CPU cache: what pandas' ``infer_dtype`` must call a chunk (no null,
#: no other kind) for numpy to convert it as it is, and to what.
_NUMBERS: dict[str, tuple[frozenset[str], type[np.generic]]] = {
    "int": (frozenset({"integer"}), np.int64),
    "time": (frozenset({"integer"}), np.int64),
    "float": (frozenset({"integer", "floating", "mixed-integer-float"}), np.float64),
    "bool": (frozenset({"boolean"}), np.bool_),
}


def _refuse_input(data: Any) -> None:
    if data is None or isinstance(data, (str, bytes, Mapping, Event)) or not isinstance(data, Iterable):
        raise DataError(
            f"expected events: a list (or any iterable) of Event instances or dicts, a pandas "
            f"DataFrame or an Arrow table; got {type(data).__name__}"
            + (" (wrap a single event in a list)" if isinstance(data, (Mapping, Event)) else "")
        )


def _objects(cells: Iterable[Any], n: int) -> npt.NDArray[np.object_]:
    """The ``n`` cells as a 1-d array of Python objects, each cell as it is (also a list or
    a tuple, which ``np.array`` would take apart)."""
    return np.fromiter(cells, dtype=object, count=n)


def _values(rows: list[Any], kind: Kind, attr: str) -> Iterator[Any]:
    """The value of ``attr`` in each row, None where it is left out."""
    get: Any = dict.get  # (typeshed's overloads do not fit map's two iterables)
    if kind == "mappings":
        return (r.get(attr) for r in rows)
    found = map(_instance_dict, rows) if kind == "events" else rows
    return map(get, found, itertools.repeat(attr))


def _column(rows: list[Any], kind: Kind, attr: str) -> pd.Series:
    """The values of ``attr`` as a column of objects (a column not gathered with the others)."""
    return pd.Series(_objects(_values(rows, kind, attr), len(rows)), dtype=object, copy=False)


def _series(cells: np.ndarray[Any, Any]) -> pd.Series:
    series: pd.Series = pd.Series(cells, dtype=cells.dtype, copy=False)  # (objects stay objects)
    return series


def _converted(cells: npt.NDArray[np.object_], dtype: str) -> np.ndarray[Any, Any] | None:
    """``cells`` as numbers of ``dtype`` when all are of a kind it takes as they are (ints
    in range for an int); None otherwise (the column is then checked as objects)."""
    kinds, target = _NUMBERS[dtype]
    if pd.api.types.infer_dtype(cells, skipna=False) not in kinds:
        return None
    try:
        return cells.astype(target)
    except (OverflowError, ValueError, TypeError):  # beyond int64 / float64
        return None


def _all_are(values: Iterator[Any], value: str, n: int) -> bool:
    """Whether all ``n`` values equal ``value`` (a C-level count)."""
    try:
        return operator.countOf(values, value) == n
    except (TypeError, ValueError):  # a value that does not compare to a bool (an array)
        return False


def _gather(
    rows: list[Any],
    kind: Kind,
    attrs: Iterable[str],
    dtypes: Mapping[str, str],
    keys: set[str] | None = None,
    type_column: str | None = None,
) -> tuple[dict[str, np.ndarray[Any, Any]], np.ndarray[Any, Any] | str]:
    """(the values of each of ``attrs``, None where a row leaves it out, as a column; the
    values of ``type_column`` as a column of objects, or the one string every row holds
    there), and when ``keys`` is given every row's keys added to it, chunk by chunk: each
    chunk's values are copied into the columns while they are in the CPU cache. An
    attribute whose declared type (``dtypes``) is a number or bool, and whose every value
    numpy converts as it is, comes as numbers; any other column as Python objects.

    Example: ``_gather([{"x": 1}, {}], "dicts", ["x"], {})[0]`` is ``{"x": array([1, None])}``.
    """
    n = len(rows)
    columns = {
        attr: np.empty(n, dtype=_NUMBERS[dtypes[attr]][1] if dtypes.get(attr) in _NUMBERS else object)
        for attr in attrs
    }
    names: np.ndarray[Any, Any] | str = np.empty(n if type_column else 0, dtype=object)
    if type_column is not None and n:
        first_name = next(_values(rows[:1], kind, type_column))
        names = first_name if isinstance(first_name, str) else names  # (the usual list: one type)
    for start in range(0, n, CHUNK):
        part = rows[start : start + CHUNK]
        end = start + len(part)
        part_kind: Kind
        if kind == "events":  # (their __dict__ once per chunk, not once per column)
            part, part_kind = list(map(_instance_dict, part)), "dicts"
        else:
            part_kind = kind
        if keys is not None:
            keys.update(*part)
        if type_column is not None:
            given = _values(part, part_kind, type_column)
            if isinstance(names, str) and not _all_are(given, names, len(part)):
                names = np.full(n, names, dtype=object)  # (the rows before all hold it)
            if not isinstance(names, str):
                names[start:end] = _objects(_values(part, part_kind, type_column), len(part))
        for attr, column in columns.items():
            cells: np.ndarray[Any, Any] = _objects(_values(part, part_kind, attr), len(part))
            if column.dtype != object:
                numbers = _converted(cells, dtypes[attr])
                if numbers is None:  # objects from here on, and for the chunks before
                    column = columns[attr] = np.empty(n, dtype=object)
                    column[:start] = _objects(_values(rows[:start], kind, attr), start)
                else:
                    cells = numbers
            column[start:end] = cells
    return columns, names


#: What :func:`_mapping_columns` finds: (every key but the type column; the type column's
#: values, or the one string all rows hold there; the columns fetched).
Found = tuple[set[str], "np.ndarray[Any, Any] | str", dict[str, np.ndarray[Any, Any]]]


def _mapping_columns(
    rows: list[Any], kind: Kind, type_column: str, columns: Collection[str] | None, dtypes: Mapping[str, str]
) -> Found:
    """The keys of the rows, their event types and the keys in ``columns`` (all keys when
    None), as :func:`_gather` gives them."""
    keys: set[str] = set()
    if columns is None:
        keys.update(*(map(_instance_dict, rows) if kind == "events" else rows))
        fetched, names = _gather(rows, kind, keys - {type_column}, dtypes, type_column=type_column)
    else:
        fetched, names = _gather(rows, kind, set(columns), dtypes, keys, type_column)
    keys.discard(type_column)
    return keys, names, fetched


def _all_dicts(
    items: list[Any], type_column: str, columns: Collection[str] | None, dtypes: Mapping[str, str]
) -> Found | None:
    """:func:`_mapping_columns` of rows that are all dicts (the usual input: no look at
    each row's class first, ``dict.get`` refuses any other row); None when some row is not."""
    if not items or type(items[0]) is not dict:
        return None
    try:
        return _mapping_columns(items, "dicts", type_column, columns, dtypes)
    except TypeError:  # dict.get of a row that is not a dict
        return None


def _classify(items: list[Any], trial: Schema, type_column: str) -> tuple[Any, list[Any], Kind]:
    """(type id per row, -1 for a mapping, whose type its ``type_column`` names; the rows
    to read; how to read them): Event instances, dicts, or other mappings (a mix of Event
    instances and mappings is read as the instances' ``__dict__`` and the mappings)."""
    n = len(items)
    classes = map(type, items)
    if n and operator.countOf(classes, type(items[0])) == n:  # (one class: the usual list)
        distinct: list[type] = [type(items[0])]
    else:
        distinct = list(dict.fromkeys(map(type, items)))  # in order of first appearance
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
    if len(distinct) > 1:
        ids = np.fromiter(map(kinds.__getitem__, map(type, items)), dtype=np.int32, count=n)
    else:
        ids = np.full(n, kinds[distinct[0]] if n else 0, dtype=np.int32)
    if all(k >= 0 for k in kinds.values()):
        return ids, items, "events"
    if any(k >= 0 for k in kinds.values()):
        items = [i if isinstance(i, Mapping) else _instance_dict(i) for i in items]
    return ids, items, "dicts" if all(issubclass(c, (dict, Event)) for c in kinds) else "mappings"


def _first_of(items: list[Any], cls: type) -> int:
    return next(k for k, item in enumerate(items) if type(item) is cls)


def _name_types(
    ids: npt.NDArray[np.int32],
    names: np.ndarray[Any, Any] | str,
    rows: list[Mapping[str, Any]],
    trial: Schema,
    type_column: str,
) -> None:
    """Set the ids of the mapping rows (-1 in ``ids``) from their ``type_column`` values
    (``names``, None where left out, or the one name of every row): one factorize pass,
    one look-up per distinct name."""
    maps = np.flatnonzero(ids < 0)
    if isinstance(names, str):  # one event type
        ids[maps] = trial.type_id(names, row=int(maps[0]) if len(maps) else None, column=type_column)
        return
    named = names if len(maps) == len(ids) else names[maps]
    try:
        codes, uniq = pd.factorize(named)
    except TypeError:  # an unhashable name: it is looked up (and refused) as its text
        texts = _objects(map(str, named), len(named))
        texts[pd.isna(named)] = None
        codes, uniq = pd.factorize(texts)
    if (codes < 0).any():  # left out, or None / NaN: no type
        row = int(maps[first(codes < 0)])
        if type_column not in rows[row]:
            raise DataError(f"missing the event type field {type_column!r}", row=row)
        raise DataError("missing event type", row=row, column=type_column)
    table = np.empty(len(uniq), dtype=np.int32)
    for k, (name, row) in enumerate(zip(uniq, first_rows(codes), strict=True)):
        table[k] = trial.type_id(str(name), row=int(maps[row]), column=type_column)
    ids[maps] = table[codes]


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
    found = _all_dicts(items, type_column, columns, trial.fields)
    kind: Kind = "dicts"
    if found is None:  # Event instances, other mappings, or something else
        type_ids, items, kind = _classify(items, trial, type_column)
        if kind == "events":  # their types' attributes
            present = np.flatnonzero(np.bincount(type_ids)).tolist()  # (no sort, as np.unique)
            keys = {a for tid in present for a in trial.type_fields[tid]}
            # also those some type lacks: assemble checks that its rows hold no value there
            common = keys.intersection(*(trial.type_fields[tid] for tid in present))
            wanted = keys if columns is None else keys.intersection(columns) | (keys - common)
            fetched = _gather(items, kind, wanted, trial.fields)[0]
        else:
            found = _mapping_columns(items, kind, type_column, columns, trial.fields)
    else:
        type_ids = np.full(len(items), -1, dtype=np.int32)
    if found is not None:
        keys, names, fetched = found
        _name_types(type_ids, names, items, trial, type_column)
        unknown = keys - set(trial.fields)
        if unknown:
            declared = declared_attributes()
            for attr in sorted(unknown - declared, key=repr):  # (keys need not be strings)
                _refuse_unknown_key(items, attr, trial, type_ids)
    inputs = {
        attr: RawColumn(functools.partial(_series, fetched[attr]))
        if attr in fetched
        else RawColumn(functools.partial(_column, items, kind, attr))
        for attr in keys
    }
    return assemble(
        schema, trial, offset, type_ids, inputs,
        read=columns,
        defer=lambda attr, dtype, raw: DeferredFrameColumn(raw, dtype, attr),
    )
