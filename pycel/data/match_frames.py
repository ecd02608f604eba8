"""pandas and Arrow tables of matches (:meth:`Matches.to_pandas`, :meth:`Matches.to_arrow`),
built from the arrays of :mod:`pycel.data.match_tables`.

Column types, the same in both libraries: positions, ``match``, ``start``, ``end`` are
int64 (a wide form's position column is nullable: pandas ``Int64``); variable names,
event types and string attributes are categorical (Arrow: dictionary); ``int``,
``float`` and ``bool`` attributes are nullable (pandas ``Int64``, ``Float64``,
``boolean``); times are UTC nanosecond timestamps. A wide form's list column holds
Python lists in pandas and ``large_list`` values in Arrow.

Example::

    frame = pandas_table(matches, "wide", variables=None, lists=(), attributes=["price"])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .match_tables import (
    AttributeColumn,
    Ints,
    attribute_names,
    event_attributes,
    match_numbers,
    wide_columns,
)

if TYPE_CHECKING:
    from .matches import Matches

FORMS = ("long", "wide")


def pandas_table(
    m: Matches,
    form: str,
    *,
    variables: Sequence[str] | None,
    lists: Sequence[str],
    attributes: bool | Sequence[str],
) -> Any:
    """``m`` as a pandas DataFrame in ``form`` (see :meth:`Matches.to_pandas`)."""
    import pandas as pd

    return pd.DataFrame(_columns(m, form, variables, lists, attributes, _PandasColumns()), copy=False)


def arrow_table(
    m: Matches,
    form: str,
    *,
    variables: Sequence[str] | None,
    lists: Sequence[str],
    attributes: bool | Sequence[str],
) -> Any:
    """``m`` as a pyarrow Table in ``form`` (see :meth:`Matches.to_arrow`)."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
    except ImportError as err:  # pragma: no cover - pyarrow is a dependency of pycel
        raise ImportError("Matches.to_arrow needs pyarrow: pip install pyarrow") from err
    return pa.table(_columns(m, form, variables, lists, attributes, _ArrowColumns()))


def _columns(
    m: Matches,
    form: str,
    variables: Sequence[str] | None,
    lists: Sequence[str],
    attributes: bool | Sequence[str],
    out: _PandasColumns | _ArrowColumns,
) -> dict[str, Any]:
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    names = attribute_names(m, attributes)
    if form == "long":
        if variables is not None or lists:
            raise ValueError("variables= and lists= choose the columns of the wide form (form='wide')")
        owner = match_numbers(m)
        cols: dict[str, Any] = {
            "match": owner,
            "start": m.starts[owner],
            "end": m.ends[owner],
            "variable": out.categorical(m.var_ids, np.ones(len(owner), dtype=np.bool_), m.variables),
            "position": m.positions,
        }
        present = np.ones(len(m.positions), dtype=np.bool_)
        for attr, column in event_attributes(m, m.positions, present, names).items():
            # An attribute named like a column of the form (start, end, ...) keeps its
            # data under "event_<attribute>" (named like the event_type column).
            name = f"event_{attr}" if attr in cols else attr
            if name in cols:
                raise ValueError(
                    f"attribute {attr!r}: the long form has columns {attr!r} and {name!r} already; "
                    "use form='wide' (columns '<variable>.<attribute>')"
                )
            cols[name] = out.values(column)
        return cols
    wide = wide_columns(m, variables, lists)
    cols = {"match": np.arange(len(m), dtype=np.int64), "start": m.starts, "end": m.ends}
    for var in wide.order:
        if var in wide.scalars:
            positions, bound = wide.scalars[var]
            cols[var] = out.positions(positions, bound)
            for attr, column in event_attributes(m, positions, bound, names).items():
                cols[f"{var}.{attr}"] = out.values(column)
        else:
            lc = wide.lists[var]
            cols[var] = out.lists(lc.offsets, out.positions(lc.values, None))
            every = np.ones(len(lc.values), dtype=np.bool_)
            for attr, column in event_attributes(m, lc.values, every, names).items():
                cols[f"{var}.{attr}"] = out.lists(lc.offsets, out.values(column))
    return cols


class _PandasColumns:
    """Column builders for pandas (nullable extension arrays, categoricals)."""

    def __init__(self) -> None:
        # One dtype per label list: every string attribute of every variable shares the
        # stream's string dictionary, which may be long.
        self.dtypes: dict[tuple[str, ...], Any] = {}

    def categorical(self, codes: Any, valid: Any, labels: Sequence[str]) -> Any:
        import pandas as pd

        codes = np.where(valid, codes, -1) if not valid.all() else codes
        key = tuple(labels)
        if key not in self.dtypes:
            self.dtypes[key] = pd.CategoricalDtype(list(key))
        return pd.Categorical.from_codes(codes, dtype=self.dtypes[key])

    def positions(self, values: Ints, bound: Any) -> Any:
        import pandas as pd

        if bound is None:
            return values
        return pd.arrays.IntegerArray(values, ~bound)

    def values(self, column: AttributeColumn) -> Any:
        import pandas as pd

        raw, valid = column.raw, column.valid
        if column.dtype in ("type", "str"):
            return self.categorical(raw, valid, column.labels)
        if column.dtype == "int":
            return pd.arrays.IntegerArray(raw.astype(np.int64), ~valid)
        if column.dtype == "float":
            return pd.arrays.FloatingArray(raw.astype(np.float64), ~valid)
        if column.dtype == "bool":
            return pd.arrays.BooleanArray(raw.astype(np.bool_), ~valid)
        ns = np.where(valid, raw.astype(np.int64), np.iinfo(np.int64).min)  # the minimum is NaT
        return pd.DatetimeIndex(ns.view("M8[ns]")).tz_localize("UTC").array

    def lists(self, offsets: Ints, values: Any) -> Any:
        """One Python list per match (pandas has no list type; nulls are None)."""
        import pandas as pd

        flat = (
            values.tolist()
            if isinstance(values, np.ndarray)
            else pd.array(values).to_numpy(object, na_value=None).tolist()
        )
        bounds = offsets.tolist()
        column = np.empty(len(offsets) - 1, dtype=object)
        column[:] = [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        return column


class _ArrowColumns:
    """Column builders for pyarrow (dictionary, nullable, large_list arrays)."""

    def categorical(self, codes: Any, valid: Any, labels: Sequence[str]) -> Any:
        import pyarrow as pa

        indices = pa.array(codes.astype(np.int32), mask=~valid)
        return pa.DictionaryArray.from_arrays(indices, pa.array(list(labels), type=pa.string()))

    def positions(self, values: Ints, bound: Any) -> Any:
        import pyarrow as pa

        return pa.array(values, type=pa.int64(), mask=None if bound is None else ~bound)

    def values(self, column: AttributeColumn) -> Any:
        import pyarrow as pa

        raw, null = column.raw, ~column.valid
        if column.dtype in ("type", "str"):
            return self.categorical(raw, column.valid, column.labels)
        types = {
            "int": pa.int64(),
            "float": pa.float64(),
            "bool": pa.bool_(),
            "time": pa.timestamp("ns", tz="UTC"),
        }
        target = {"int": np.int64, "float": np.float64, "bool": np.bool_, "time": np.int64}[column.dtype]
        return pa.array(raw.astype(target), type=types[column.dtype], mask=null)

    def lists(self, offsets: Ints, values: Any) -> Any:
        import pyarrow as pa

        return pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), values)
