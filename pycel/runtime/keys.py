"""Run keys per event, the runtime's H index reads them: partition values, the value of
each join class (read per event type from its own attribute), and ids for tuples of
several values.

A tuple's id must stay the same while runs with that tuple can still be output, and
memory must follow the window while keys churn, so :class:`TupleIds` remembers when it
last saw each tuple and forgets those that left every window (a tuple seen again gets a
fresh id; ids are never reused, so a stale H entry can never be mistaken for it).

Example::

    tuples = TupleIds()
    keys = tuples.assign([names, regions], valid, offset=0)   # one int64 per event
    keys, valid = run_keys(plan, batch, tuples)               # partition and join keys
    tuples.forget(window_start)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.hashing import factorize
from pycel.data.ingest import EventBatch
from pycel.errors import DataError
from pycel.plan.joins import JoinKey
from pycel.plan.planner import Plan

#: Forgetting runs once the dictionary holds this many more tuples than it kept last time.
FORGET_SLACK = 4096


def key_values(
    values: npt.NDArray[Any],
    dtype: str,
    valid: npt.NDArray[np.bool_] | None = None,
    column: str | None = None,
) -> npt.NDArray[np.int64]:
    """Column values as int64 keys: equal values, equal keys (floats by their bits, with
    -0.0 and 0.0 the same key; strings are already dictionary codes).

    An int column keyed as float (an equality join of an int and a float attribute) must
    hold values float64 represents exactly: a ``valid`` value above 2**53 that it rounds
    is a :class:`DataError` (it would be equal to a float it is not equal to).
    """
    if dtype == "float":
        if valid is not None and values.dtype.kind in "iu":
            check_exact_floats(values, valid, column)
        return (values.astype(np.float64) + 0.0).view(np.int64)
    return values.astype(np.int64)


def check_exact_floats(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_], column: str | None) -> None:
    """Raise at the first valid int that float64 cannot represent exactly."""
    bad = valid & ~_exact_as_float(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise inexact_join_error(int(values[row]), row, column)


def inexact_join_error(value: int, row: int, column: str | None) -> DataError:
    """The error of an int that an int-float equality join would compare rounded."""
    return DataError(
        f"an equality join compares this int attribute with a float attribute as 64-bit floats, "
        f"and {value} has no exact 64-bit float",
        row=row,
        column=column,
    )


def _exact_as_float(values: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    as_float = values.astype(np.float64)
    inside = as_float < 2.0**63  # float(2**63 - 1) is 2**63, which int64 cannot hold
    back = np.where(inside, as_float, 0).astype(np.int64)
    exact: npt.NDArray[np.bool_] = inside & (back == values)
    return exact


def join_values(batch: EventBatch, join: JoinKey) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The value of one join class per event, read from the attribute its type uses; an
    event of a type the pattern does not read, or with a null value, has none."""
    n = len(batch)
    col = np.zeros(n, dtype=np.int64)
    present = np.zeros(n, dtype=np.bool_)
    inexact = np.zeros(n, dtype=np.bool_)  # int values a float join key would round
    inexact_column = np.full(n, "", dtype=object)
    for tid, supertypes in enumerate(batch.schema.supertypes):
        names = {a for t, a in join.attributes if t in supertypes}
        if not names:
            continue
        if len(names) > 1:
            raise DataError(
                f"event type {batch.schema.type_names[tid]!r} can be read through attributes "
                f"{sorted(names)} of one correlation; the engine needs one"
            )
        attr = names.pop()
        rows = np.flatnonzero(batch.type_ids == tid)
        if attr not in batch.columns or not len(rows):
            continue
        col[rows] = key_values(batch.columns[attr][rows], join.dtype)
        present[rows] = batch.valid[attr][rows]
        if join.dtype == "float" and batch.schema.fields.get(attr) == "int":
            inexact[rows] = present[rows] & ~_exact_as_float(batch.columns[attr][rows])
            inexact_column[rows] = attr
    if inexact.any():
        row = int(np.flatnonzero(inexact)[0])
        attr = str(inexact_column[row])
        raise inexact_join_error(int(batch.columns[attr][row]), row, attr)
    return col, present


class TupleIds:
    """Ids for tuples of key values, with the last position each tuple was seen at."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {}
        self.last: dict[tuple[int, ...], int] = {}
        self.next_id = 0
        self.kept = 0  # tuples left after the last forgetting pass

    def assign(
        self, cols: list[npt.NDArray[np.int64]], valid: npt.NDArray[np.bool_], offset: int
    ) -> npt.NDArray[np.int64]:
        """The id of every event's tuple (one Python step per distinct tuple of the batch,
        not per event); ``valid``: the events that have a key (only they count as seen)."""
        n = len(valid)
        # Dense codes of the distinct tuples by hashing column after column (np.unique
        # with axis=0 sorts rows as bytes: ~30x slower on a million events).
        inverse = np.zeros(n, dtype=np.int64)
        for col in cols:
            codes, uniques = factorize(col)
            inverse, _ = factorize(inverse * len(uniques) + codes)
        distinct = int(inverse.max()) + 1 if n else 0
        first = np.full(distinct, n, dtype=np.int64)
        np.minimum.at(first, inverse, np.arange(n))
        last = np.full(distinct, -1, dtype=np.int64)
        np.maximum.at(last, inverse[valid], np.flatnonzero(valid) + offset)
        rows = zip(*(col[first].tolist() for col in cols), strict=True)
        ids = np.empty(distinct, dtype=np.int64)
        for u, (row, seen) in enumerate(zip(rows, last.tolist(), strict=True)):
            tid = self.ids.get(row)
            if tid is None:
                tid = self.ids[row] = self.next_id
                self.next_id += 1
            ids[u] = tid
            self.last[row] = max(seen, self.last.get(row, -1))
        return ids[inverse]

    def forget(self, window_start: int) -> None:
        """Drop the tuples last seen before ``window_start`` (no later match can include
        their events), once enough have gathered to make the pass worth it."""
        if len(self.ids) < FORGET_SLACK + 2 * self.kept:
            return
        for row in [r for r, seen in self.last.items() if seen < window_start]:
            del self.ids[row], self.last[row]
        self.kept = len(self.ids)


def run_keys(
    plan: Plan, batch: EventBatch, tuples: TupleIds
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Run key per event (an int64: the partition's and the joins' values; several
    values get a tuple id from ``tuples``) and whether the event has one.

    Example: ``keys, valid = run_keys(plan, batch, TupleIds())``
    """
    n = len(batch)
    # The parallelized automaton reads its own key combos (the partition is one of them).
    if plan.family == "parallel" or (not plan.partition and not plan.join_keys):
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.bool_)
    cols = []
    valid = np.ones(n, dtype=np.bool_)
    for k in plan.partition:
        if k not in batch.columns:
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
        cols.append(key_values(batch.columns[k], batch.schema.fields[k]))
        valid &= batch.valid[k]
    for join in plan.join_keys:
        col, present = join_values(batch, join)
        cols.append(col)
        valid &= present
    if len(cols) == 1:
        return cols[0], valid
    return tuples.assign(cols, valid, batch.offset), valid
