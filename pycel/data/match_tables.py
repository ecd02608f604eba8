"""Matches as tables: the long and wide forms of :meth:`Matches.to_pandas` and
:meth:`Matches.to_arrow`, built from the flat match arrays with numpy (no Python call per
match, except to build the Python lists of a pandas list column).

* **long**: one row per (match, variable, position), in the order the engine wrote them.
* **wide**: one row per match; one column per variable holding its position (a variable
  that some match binds to several events, or one named in ``lists=``, holds a sorted
  list of positions in every row).

Either form can join in the matched events' attributes (``attributes=True`` or a list
of names): in the wide form as columns ``"<variable>.<attribute>"``, in the long form as
one column per attribute.

Example::

    columns = wide_columns(matches, variables=None, lists=())
    columns.scalars["s"]        # (positions, bound) arrays, one entry per match
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from .batch import not_held

if TYPE_CHECKING:
    from .matches import Matches

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

#: The column that names a matched event's type when attributes are joined in.
TYPE_ATTRIBUTE = "event_type"
#: Columns of every form; a wide form's variable may not take one of these names.
MATCH_COLUMNS = ("match", "start", "end")


def match_numbers(m: Matches) -> Ints:
    """The match each entry (variable, position) belongs to."""
    return np.repeat(np.arange(len(m), dtype=np.int64), np.diff(m.offsets))


# -- wide form ----------------------------------------------------------------------------
@attrs.frozen
class ListColumn:
    """One list per match: match k holds ``values[offsets[k]:offsets[k + 1]]``."""

    offsets: Ints
    values: Ints


@attrs.frozen
class WideColumns:
    """The wide form as arrays: ``scalars[v]`` is (position, bound) per match for a
    variable bound to at most one event by every match, ``lists[v]`` the sorted positions
    of every other one. ``order`` lists the variables in column order."""

    order: tuple[str, ...]
    scalars: dict[str, tuple[Ints, Bools]]
    lists: dict[str, ListColumn]


def wide_columns(
    m: Matches,
    variables: Sequence[str] | None,
    lists: Sequence[str],
    *,
    reserved: Sequence[str] = MATCH_COLUMNS,
) -> WideColumns:
    """The wide form of ``m`` for ``variables`` (default: all of ``m.variables``).

    ``reserved``: names a variable may not have (the table's own columns; the Spark
    adapter, whose rows nest the variables in a struct, passes none)."""
    order = tuple(m.variables if variables is None else variables)
    unknown = [v for v in (*order, *lists) if v not in m.variables]
    if unknown:
        raise ValueError(f"unknown variable {unknown[0]!r}; the matches have {list(m.variables)}")
    clash = [v for v in order if v in reserved]
    if clash:
        raise ValueError(
            f"variable {clash[0]!r} would share its column with the match's own {clash[0]!r}: "
            "rename it (as_ / alias), or use the long form"
        )
    n, nv = len(m), max(len(m.variables), 1)
    owner = match_numbers(m)
    cell = owner * nv + m.var_ids  # (match, variable) of each entry, row-major
    # How many events each match binds to each variable, and the (last) position of each
    # cell: one pass over the entries for all the variables.
    counts = np.bincount(cell, minlength=n * nv).reshape(n, nv)
    flat = np.full(n * nv, -1, dtype=np.int64)
    flat[cell] = m.positions
    grid = flat.reshape(n, nv)
    scalars: dict[str, tuple[Ints, Bools]] = {}
    list_columns: dict[str, ListColumn] = {}
    for name in order:
        v = m.variables.index(name)
        if name not in lists and (n == 0 or int(counts[:, v].max()) <= 1):
            scalars[name] = (np.ascontiguousarray(grid[:, v]), counts[:, v] > 0)
            continue
        # Sorted within each match (the entries are grouped by match already).
        mine = m.var_ids == v
        sort = np.lexsort((m.positions[mine], owner[mine]))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts[:, v], out=offsets[1:])
        list_columns[name] = ListColumn(offsets, m.positions[mine][sort])
    return WideColumns(order, scalars, list_columns)


# -- the matched events' attributes -------------------------------------------------------
@attrs.frozen
class AttributeColumn:
    """Values of one attribute at some positions: ``raw`` as the batch encodes them
    (string codes, int64 nanoseconds for times), null where ``valid`` is False;
    ``dtype`` is the schema's type name (``str``, ``int``, ``float``, ``bool``, ``time``)
    or ``type`` for the event type (codes into ``labels``)."""

    dtype: str
    raw: npt.NDArray[Any]
    valid: Bools
    labels: Sequence[str] = ()


def attribute_names(m: Matches, attributes: bool | Sequence[str]) -> list[str]:
    """The attributes to join in: all the stream's for ``True``, none for ``False``."""
    if attributes is False:
        return []
    schema = _batch(m.source).schema
    if attributes is True:  # the event type first, unless an attribute has its name
        return (
            [TYPE_ATTRIBUTE, *schema.fields] if TYPE_ATTRIBUTE not in schema.fields else list(schema.fields)
        )
    names = [attributes] if isinstance(attributes, str) else list(attributes)
    unknown = [a for a in names if a != TYPE_ATTRIBUTE and a not in schema.fields]
    if unknown:
        raise ValueError(f"unknown attribute {unknown[0]!r}; the events have {list(schema.fields)}")
    return names


def event_attributes(
    m: Matches, positions: Ints, present: Bools, names: Sequence[str]
) -> dict[str, AttributeColumn]:
    """The attributes ``names`` of the events at ``positions`` (where ``present``)."""
    if not names:
        return {}
    batch = _batch(m.source)
    rows = _rows(m.source, positions, present)
    schema = batch.schema
    out: dict[str, AttributeColumn] = {}
    for name in names:
        if name == TYPE_ATTRIBUTE and name not in schema.fields:
            out[name] = AttributeColumn(
                "type", batch.type_ids[rows], present.copy(), tuple(schema.type_names)
            )
            continue
        dtype = schema.fields[name]
        deferred = getattr(batch, "deferred", {})
        if name in deferred:  # not encoded at ingestion (the query does not read it)
            out[name] = _decode_deferred(deferred[name], dtype, rows, present, schema.strings)
        elif name in batch.columns:
            valid = batch.valid[name][rows] & present
            labels = tuple(schema.strings) if dtype == "str" else ()
            out[name] = AttributeColumn(dtype, batch.columns[name][rows], valid, labels)
        else:  # no event of the batch has it
            out[name] = AttributeColumn(
                dtype, np.zeros(len(rows), dtype=np.int64), np.zeros(len(rows), dtype=np.bool_)
            )
    return out


def _batch(source: Any) -> Any:
    """The event batch a Matches came from (``source``), or a clear error without one."""
    if source is None:
        raise ValueError(
            "these matches have no events to read: they were built by hand, or joined from "
            "different runs by Matches.concat; use the matches of query.run(data) or stream.push(data)"
        )
    return getattr(source, "batch", source)


def _rows(source: Any, positions: Ints, present: Bools) -> Ints:
    """Rows of the source batch holding the events at global ``positions`` (row 0 where
    not ``present``); an error naming a position whose event the batch does not hold
    (a match of ``stream.push`` may reach into earlier pushes)."""
    batch = _batch(source)
    held = getattr(source, "positions", None)
    if held is None:  # a whole batch: positions offset, offset + 1, ...
        rows = positions - np.int64(batch.offset)
        found = (rows >= 0) & (rows < len(batch))
    else:  # a sub-stream's batch (push(..., positions=)): its global positions, sorted
        rows = np.searchsorted(held, positions).astype(np.int64)
        inside = rows < len(held)
        found = inside & (held[np.where(inside, rows, 0)] == positions)
    missing = np.flatnonzero(present & ~found)
    if len(missing):
        raise not_held(int(positions[missing[0]]))
    return np.where(present, rows, 0)


def _decode_deferred(
    column: Any, dtype: str, rows: Ints, present: Bools, strings: list[str]
) -> AttributeColumn:
    """A column ingestion left undecoded: decoded once per distinct row (the per-value
    decoder is the ingester's; only columns a query does not read take this path)."""
    wanted, inverse = np.unique(rows[present], return_inverse=True)
    values = [column.value(int(k)) for k in wanted]
    valid = np.zeros(len(rows), dtype=np.bool_)
    valid[present] = np.array([x is not None for x in values], dtype=np.bool_)[inverse]
    if dtype == "str":
        codes = {s: k for k, s in enumerate(strings)}
        labels = list(strings)
        encoded = []
        for x in values:
            if x is not None and x not in codes:
                codes[x] = len(labels)
                labels.append(x)
            encoded.append(codes.get(x, 0) if x is not None else 0)
        raw: npt.NDArray[Any] = np.zeros(len(rows), dtype=np.int64)
        raw[present] = np.array(encoded, dtype=np.int64)[inverse]
        return AttributeColumn(dtype, raw, valid, tuple(labels))
    target = {"int": np.int64, "float": np.float64, "bool": np.bool_, "time": np.int64}[dtype]
    raw = np.zeros(len(rows), dtype=target)
    raw[present] = np.array([0 if x is None else x for x in values], dtype=target)[inverse]
    return AttributeColumn(dtype, raw, valid)
