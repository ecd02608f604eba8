"""Post-filters: ``where(predicate, post_filter=True)`` checked on complete matches.

A post-filter is how a user runs a predicate the automaton cannot (``a.price < b.price``,
a non-hierarchical equality join). The engine compiles the pattern *without* it,
enumerates every match of the stripped pattern, and keeps those where the predicate holds.
That is exact — the same matches as the reference evaluator — but the enumeration delay is
linear in the *unfiltered* output, not in the output: the output-linear delay guarantee is
lost (docs/postfilter.md).

Semantics, as in CEL's FILTER and :func:`pycel.reference._holds`: each conjunct of the
predicate must be True for every combination of events bound to the variables it reads
(a null makes a comparison unknown, so the match is dropped; a variable the match does
not bind makes the conjunct hold vacuously). The filter is evaluated column-wise: one row
per (match, combination), the conjunct evaluated by :func:`pycel.runtime.predicates.truth` on a
synthetic batch whose columns are named ``var.attr``, then reduced per match.

Example::

    body, post = split_post_filters(seq(a, b).where(a.price < b.price, post_filter=True))
    body, post        # (A AS a ; B AS b), (a.price < b.price,)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch, Schema
from pycel.data.matches import Matches, take
from pycel.dsl import As, Atom, Filter, NotAtom, Pattern, Plus
from pycel.errors import DataError, UnsupportedError
from pycel.language.expr import Expr, attributes_in, conjuncts
from pycel.runtime.predicates import Overflows, truth

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


# -- normalize: strip the post-filters off the body ------------------------------------------
def _bindings(node: Pattern) -> Counter[str]:
    """How many binding occurrences (atoms, negated atoms, ``as_``) of each variable."""
    if isinstance(node, (Atom, NotAtom)):
        return Counter([node.var])
    out: Counter[str] = Counter()
    for child in node.children():
        out.update(_bindings(child))
    if isinstance(node, As):
        out[node.var] += 1
    return out


def _rebuild(node: Pattern, children: list[Pattern]) -> Pattern:
    """``node`` with new children (every body node has ``inner`` or ``left``/``right``)."""
    if hasattr(node, "inner"):
        return attrs.evolve(node, inner=children[0])  # type: ignore[misc]
    return attrs.evolve(node, left=children[0], right=children[1])  # type: ignore[misc]


def split_post_filters(body: Pattern) -> tuple[Pattern, tuple[Expr[bool], ...]]:
    """``body`` without its post-filter nodes (their inner patterns kept), and the
    conjuncts of their predicates, to check on complete matches.

    Raises :class:`UnsupportedError` where checking on the complete match would differ
    from the per-subpattern semantics: a post-filter under ``plus()`` (the reference
    checks it on each repetition), or one reading a variable that the pattern also binds
    outside the filtered part (the complete match would add those positions).
    """
    total = _bindings(body)
    found: list[Expr[bool]] = []

    def strip(node: Pattern, under_plus: bool) -> Pattern:
        if isinstance(node, Filter) and node.post_filter:
            if under_plus:
                raise UnsupportedError(
                    f"where(..., post_filter=True) inside plus() is not supported by the engine: "
                    f"{node!r} must hold on each repetition separately, but the engine checks "
                    "post-filters once, on complete matches. Move the condition out of plus() "
                    "(it then holds for all repetitions together), or make it a unary filter "
                    "without post_filter=True"
                )
            inner = _bindings(node.inner)
            for var in sorted(v for v in node.predicate.variables() if v is not None):
                if total[var] > inner[var]:
                    raise UnsupportedError(
                        f"where(..., post_filter=True) reads variable {var!r}, which the "
                        f"pattern also binds outside the filtered part {node.inner!r}; the "
                        "engine checks post-filters on complete matches, where "
                        f"{var!r} would also hold those other positions. Give the other "
                        "occurrence a different name (pycel.alias or .as_())"
                    )
            found.extend(conjuncts(node.predicate))
            return strip(node.inner, under_plus)
        children = node.children()
        if not children:
            return node
        below = under_plus or isinstance(node, Plus)
        new = [strip(c, below) for c in children]
        if all(n is c for n, c in zip(new, children, strict=True)):
            return node
        return _rebuild(node, new)

    stripped = strip(body, False)
    return stripped, tuple(found)


def check_clauses(strategy: str, consume: str) -> None:
    """Reject the query clauses that would act on matches the post-filter removes."""
    if consume != "none":
        raise UnsupportedError(
            f"consume({consume!r}) with where(..., post_filter=True) is not supported: the "
            "engine would consume on matches that the post-filter then removes. Drop one "
            "of them (or express the condition as unary filters/equality joins)"
        )
    if strategy in ("last", "next", "max"):
        raise UnsupportedError(
            f"strategy({strategy!r}) with where(..., post_filter=True) is not supported: the "
            f"engine selects the {strategy.upper()} matches among the unfiltered matches, "
            "before the post-filter could remove them. Use strategy 'all' or 'strict'"
        )


# -- evaluation ---------------------------------------------------------------------------------
def _column(var: str, name: str) -> str:
    return f"{var}.{name}"


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


@attrs.frozen
class PostFilters:
    """The conjuncts of a query's post-filters, ready for column-wise evaluation."""

    conjuncts: tuple[Expr[bool], ...]
    #: Each conjunct with its attributes renamed ``var.attr`` (the synthetic columns).
    renamed: tuple[Expr[bool], ...]
    #: Per conjunct: the variables it reads (sorted), and its (var, attr) columns.
    variables: tuple[tuple[str, ...], ...]
    columns: tuple[tuple[tuple[str, str], ...], ...]
    #: The attributes the tail keeps.
    attributes: tuple[str, ...]

    @classmethod
    def of(cls, parts: tuple[Expr[bool], ...]) -> PostFilters:
        renamed = tuple(
            p._map(lambda a: attrs.evolve(a, name=_column(a.var, a.name))) for p in parts
        )
        variables = tuple(tuple(sorted(v for v in p.variables() if v is not None)) for p in parts)
        columns = tuple(
            tuple(sorted({(a.var, a.name) for a in attributes_in(p) if a.var is not None})) for p in parts
        )
        names = tuple(sorted({name for cols in columns for _, name in cols}))
        return cls(parts, renamed, variables, columns, names)

    def keep(
        self, m: Matches, tail: Tail, schema: Schema, row_of: Callable[[int], int] | None = None
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
            self.conjuncts, self.renamed, self.variables, self.columns, strict=True
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
            cols = {_column(v, a): tail.values[a][rows[v]] for v, a in columns}
            valid = {_column(v, a): tail.valid[a][rows[v]] for v, a in columns}
            fields = {**schema.fields, **{_column(v, a): schema.fields.get(a, "int") for v, a in columns}}
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
    batch_positions: Ints,
    matches: Matches,
    schema: Schema,
    keep_from: int,
    projection_mask: int,
) -> tuple[Matches, Tail]:
    """The matches of a push that pass ``post``, projected onto ``projection_mask``; and
    the new tail (``batch`` appended, positions before ``keep_from`` dropped).

    ``batch_positions``: the (global) positions of ``batch``'s events; ``matches`` use
    the same positions.
    """
    tail = tail.extended(batch, batch_positions, post.attributes)
    def row_of(end: int) -> int:  # the end event is one of this batch's
        return int(np.searchsorted(batch_positions, end))

    kept = take(matches, post.keep(matches, tail, schema, row_of))
    return project(kept, projection_mask), tail.trimmed(keep_from)
