"""Post-filters at run time: the matches of a push that satisfy ``where(..., post_filter=True)``.

The plan (:mod:`pycel.plan.postfilter`) strips the post-filters off the body; the stream
keeps the columns they read for the events a match may still include (a :class:`Tail`)
and evaluates each conjunct column-wise on one row per (match, combination of bound
events), see docs/postfilter.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch, Schema
from pycel.data.matches import Matches, take
from pycel.errors import DataError
from pycel.language.expr import Expr
from pycel.plan.postfilter import PostFilters, column_name
from pycel.runtime.predicates import Overflows, truth

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


@attrs.define
class Tail:
    """The attribute columns a post-filter reads, for the positions that a match of the
    current or a future push may include (plain arrays: pickled with the stream)."""

    positions: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    values: dict[str, np.ndarray[Any, Any]] = attrs.field(factory=dict)
    valid: dict[str, Mask] = attrs.field(factory=dict)

    def extended(self, batch: EventBatch, positions: Ints, names: tuple[str, ...]) -> Tail:
        """A new tail with ``batch``'s events (at ``positions``) appended."""
        n = len(batch)
        values, valid = {}, {}
        for name in names:
            if name in batch.columns:
                col, ok = batch.columns[name], batch.valid[name]
                # An attribute the event's type does not declare is null (as the
                # reference's decoded rows have it).
                declares = np.array(
                    [name in f for f in batch.schema.type_fields] + [False], dtype=np.bool_
                )
                ok = ok & declares[batch.type_ids]
            else:
                col, ok = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
            old = self.values.get(name)
            if old is None:
                old = np.zeros(len(self.positions), dtype=col.dtype)
                old_ok = np.zeros(len(self.positions), dtype=np.bool_)
            else:
                old_ok = self.valid[name]
            values[name] = np.concatenate([old, col])
            valid[name] = np.concatenate([old_ok, ok])
        return Tail(np.concatenate([self.positions, positions]), values, valid)

    def trimmed(self, keep_from: int) -> Tail:
        """Only the positions ≥ ``keep_from``."""
        k = int(np.searchsorted(self.positions, keep_from, side="left"))
        if k == 0:
            return self
        return Tail(
            self.positions[k:].copy(),
            {a: v[k:].copy() for a, v in self.values.items()},
            {a: v[k:].copy() for a, v in self.valid.items()},
        )

    def rows(self, positions: Ints) -> Ints:
        """The tail rows holding ``positions`` (every one must be in the tail)."""
        rows = np.searchsorted(self.positions, positions).astype(np.int64)
        if len(rows) and (
            rows.max() >= len(self.positions) or not np.array_equal(self.positions[rows], positions)
        ):
            raise RuntimeError("post-filter: a match reads an event the stream no longer keeps")
        return rows


def keep(
    post: PostFilters, m: Matches, tail: Tail, schema: Schema, row_of: Callable[[int], int] | None = None
) -> Mask:
    """Which matches satisfy every conjunct ("for all" bound combinations).

    Integer arithmetic leaving int64 on a combination of a match raises a
    :class:`DataError` at the first such match's end (``row_of``: end position → the
    row to name, by default the position itself).
    """
    n = len(m.starts)
    keep = np.ones(n, dtype=np.bool_)
    if n == 0:
        return keep
    overflowed = np.zeros(n, dtype=np.bool_)
    culprit: dict[int, Expr[bool]] = {}
    counts = np.diff(m.offsets)
    match_of_entry = np.repeat(np.arange(n, dtype=np.int64), counts)
    var_index = {v: k for k, v in enumerate(m.variables)}
    for original, renamed, variables, columns in zip(
        post.conjuncts, post.renamed, post.variables, post.columns, strict=True
    ):
        if any(v not in var_index for v in variables):
            continue  # a variable no match binds: the conjunct holds vacuously
        # Per variable: its entries (grouped by match), count and first entry per match.
        entries, cnt, first = [], [], []
        for v in variables:
            own = np.flatnonzero(m.var_ids == var_index[v])
            c = np.bincount(match_of_entry[own], minlength=n).astype(np.int64)
            entries.append(own)
            cnt.append(c)
            first.append(np.cumsum(c) - c)
        combos = np.ones(n, dtype=np.int64)
        for c in cnt:
            combos *= c
        total = int(combos.sum())
        combo_match = np.repeat(np.arange(n, dtype=np.int64), combos)
        rank = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(combos) - combos, combos)
        # Mixed-radix decomposition of each combination's rank: one entry per variable.
        position: dict[str, Ints] = {}
        stride = np.ones(total, dtype=np.int64)
        for v, own, c, f in reversed(list(zip(variables, entries, cnt, first, strict=True))):
            cm = c[combo_match]
            pick = (rank // stride) % np.maximum(cm, 1)
            position[v] = m.positions[own[f[combo_match] + pick]]
            stride = stride * cm
        rows = {v: tail.rows(p) for v, p in position.items()}
        cols = {column_name(v, a): tail.values[a][rows[v]] for v, a in columns}
        valid = {column_name(v, a): tail.valid[a][rows[v]] for v, a in columns}
        fields = {**schema.fields, **{column_name(v, a): schema.fields.get(a, "int") for v, a in columns}}
        synthetic = Schema(fields=fields, strings=schema.strings, string_codes=schema.string_codes)
        batch = EventBatch(synthetic, 0, np.zeros(total, dtype=np.int32), cols, valid)
        log = Overflows()
        holds = truth(renamed, batch, log)[0]
        for bad, _ in log.found:
            for k in np.unique(combo_match[bad]).tolist():
                culprit.setdefault(k, original)
            overflowed[combo_match[bad]] = True
        failed = np.zeros(n, dtype=np.bool_)
        failed[combo_match[~holds]] = True
        keep &= ~failed
    if overflowed.any():
        earliest = int(np.flatnonzero(overflowed)[np.argmin(m.ends[overflowed])])
        end = int(m.ends[earliest])
        raise DataError(
            f"integer arithmetic leaves the 64-bit range in post-filter {culprit[earliest]!r} "
            "(match ending at this row)",
            row=row_of(end) if row_of is not None else end,
        )
    return keep




# -- match arrays -----------------------------------------------------------------------------
def project(m: Matches, mask: int) -> Matches:
    """Drop the entries of variables outside bit-mask ``mask`` (starts and ends kept)."""
    entries = ((np.int64(mask) >> m.var_ids.astype(np.int64)) & 1).astype(np.bool_)
    if entries.all():
        return m
    match_of_entry = np.repeat(np.arange(len(m.starts), dtype=np.int64), np.diff(m.offsets))
    counts = np.bincount(match_of_entry[entries], minlength=len(m.starts))
    return Matches(
        m.starts,
        m.ends,
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        m.var_ids[entries],
        m.positions[entries],
        m.variables,
        m.source,
    )


def limit_per_end(m: Matches, limit: int) -> Matches:
    """The first ``limit`` matches of each end position, in the engine's order."""
    n = len(m.starts)
    if n == 0:
        return m
    order = np.argsort(m.ends, kind="stable")
    ends = m.ends[order]
    new_group = np.concatenate([[True], ends[1:] != ends[:-1]])
    group_first = np.flatnonzero(new_group)
    sizes = np.diff(np.concatenate([group_first, [n]]))
    rank = np.arange(n) - np.repeat(group_first, sizes)
    keep = np.zeros(n, dtype=np.bool_)
    keep[order[rank < limit]] = True
    return take(m, keep)


def apply(
    post: PostFilters,
    tail: Tail,
    batch: EventBatch,
    matches: Matches,
    schema: Schema,
    keep_from: int,
    projection_mask: int,
) -> tuple[Matches, Tail]:
    """The matches of a push that pass ``post``, projected onto ``projection_mask``; and
    the new tail (positions before ``keep_from`` dropped).

    ``tail``: the tail with ``batch``'s events appended (:meth:`Tail.extended`, with the
    positions ``matches`` use).
    """
    ok, trimmed = passing(post, tail, batch, matches, schema, keep_from)
    return project(take(matches, ok), projection_mask), trimmed


def passing(
    post: PostFilters, tail: Tail, batch: EventBatch, matches: Matches, schema: Schema, keep_from: int
) -> tuple[npt.NDArray[np.bool_], Tail]:
    """Which matches of a push pass ``post`` (see :func:`apply`), and the new tail."""
    batch_positions = tail.positions[len(tail.positions) - len(batch) :]

    def row_of(end: int) -> int:  # the end event is one of this batch's
        return int(np.searchsorted(batch_positions, end))

    return keep(post, matches, tail, schema, row_of), tail.trimmed(keep_from)
