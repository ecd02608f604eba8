"""Match results: one :class:`Match` per complex event, many in a columnar :class:`Matches`.

A match is ``(start, end, valuation)``; the valuation maps each variable to the sorted
tuple of positions bound to it. :class:`Matches` stores many matches in flat arrays (as
the engine writes them) and builds :class:`Match` objects only when iterated.

Example::

    for m in query.run(events):
        print(m.start, m.end, m["s"], m.events("s"))
    query.run(events).to_pandas()         # match, start, end, variable, position
    query.run(events).to_pandas("wide")   # match, start, end, one column per variable
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, overload

import attrs
import numpy as np
import numpy.typing as npt


@attrs.frozen(order=True)
class Match:
    """One complex event: ``start``/``end`` positions and the positions of each variable."""

    start: int
    end: int
    valuation: tuple[tuple[str, tuple[int, ...]], ...]
    source: Any = attrs.field(default=None, eq=False, order=False, repr=False)
    #: Every variable of the query, when known: another name is a KeyError (a typo).
    known: tuple[str, ...] | None = attrs.field(default=None, eq=False, order=False, repr=False)

    @classmethod
    def of(
        cls,
        start: int,
        end: int,
        valuation: Mapping[str, Sequence[int]],
        source: Any = None,
        known: tuple[str, ...] | None = None,
    ) -> Match:
        """Build a match, normalizing the valuation (sorted variables and positions)."""
        items = tuple(sorted((v, tuple(sorted(set(p)))) for v, p in valuation.items() if p))
        return cls(start, end, items, source, known)

    @property
    def variables(self) -> dict[str, tuple[int, ...]]:
        """The valuation as a dict ``variable -> positions``."""
        return dict(self.valuation)

    def __getitem__(self, var: str) -> tuple[int, ...]:
        """The positions bound to ``var`` (empty when the match does not bind it); a name
        that is not a variable of the query is a KeyError (for a match of ``query.run``)."""
        if self.known is not None and var not in self.known:
            raise KeyError(f"{var!r} is not a variable of the query; its variables are {list(self.known)}")
        return self.variables.get(var, ())

    def positions(self) -> tuple[int, ...]:
        """Every position of the match, sorted."""
        return tuple(sorted({p for _, ps in self.valuation for p in ps}))

    def events(self, var: str) -> list[tuple[str, dict[str, Any]]]:
        """The events bound to ``var`` as (event type, attributes), when the run kept them."""
        if self.source is None:
            raise ValueError("this match was built without its events; use query.run(data)")
        return [self.source.event(p) for p in self[var]]

    def key(self) -> tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]:
        """A hashable identity of the match, for comparing result sets."""
        return (self.start, self.end, self.valuation)


@attrs.define(eq=False)
class Matches(Sequence[Match]):
    """Many matches in flat arrays: match ``k`` owns entries ``offsets[k]:offsets[k+1]``
    of ``var_ids``/``positions``; ``variables[var_id]`` names the variable. Two are equal
    when they hold the same matches in the same order (see :meth:`__eq__`)."""

    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    var_ids: npt.NDArray[np.int32]
    positions: npt.NDArray[np.int64]
    variables: tuple[str, ...]
    source: Any = None
    #: Whether ``variables`` are all the query's (so ``match[name]`` can refuse others);
    #: False when they were gathered from the matches themselves (``from_list``).
    variables_complete: bool = True

    @classmethod
    def empty(cls, variables: tuple[str, ...] = ()) -> Matches:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), z, variables)

    @classmethod
    def from_list(cls, matches: Sequence[Match], variables: Sequence[str] = ()) -> Matches:
        """Pack Match objects into arrays."""
        names = list(variables)
        for m in matches:
            names.extend(v for v, _ in m.valuation if v not in names)
        index = {v: k for k, v in enumerate(names)}
        offsets = [0]
        var_ids: list[int] = []
        positions: list[int] = []
        for m in matches:
            for v, ps in m.valuation:
                var_ids.extend([index[v]] * len(ps))
                positions.extend(ps)
            offsets.append(len(positions))
        return cls(
            np.array([m.start for m in matches], dtype=np.int64),
            np.array([m.end for m in matches], dtype=np.int64),
            np.array(offsets, dtype=np.int64),
            np.array(var_ids, dtype=np.int32),
            np.array(positions, dtype=np.int64),
            tuple(names),
            variables_complete=False,
        )

    @classmethod
    def concat(cls, parts: Sequence[Matches]) -> Matches:
        """One Matches holding all of ``parts`` in order. Their events (the attributes of
        :meth:`to_pandas`, :meth:`Match.events`) are kept when every part has the same
        source; matches of different runs may share positions, so then they have none."""
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if not parts:
            return cls.empty()
        names: list[str] = []
        for p in parts:
            names.extend(v for v in p.variables if v not in names)
        remapped = []
        base = 0
        offsets = [np.zeros(1, dtype=np.int64)]
        for p in parts:
            table = np.array([names.index(v) for v in p.variables] or [0], dtype=np.int32)
            remapped.append(table[p.var_ids])
            offsets.append(p.offsets[1:] + base)
            base += int(p.offsets[-1])
        return cls(
            np.concatenate([p.starts for p in parts]),
            np.concatenate([p.ends for p in parts]),
            np.concatenate(offsets),
            np.concatenate(remapped).astype(np.int32),
            np.concatenate([p.positions for p in parts]),
            tuple(names),
            parts[0].source if all(p.source is parts[0].source for p in parts) else None,
            all(p.variables_complete for p in parts),
        )

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, k: SupportsIndex) -> Match: ...
    @overload
    def __getitem__(self, k: slice) -> Matches: ...
    def __getitem__(self, k: SupportsIndex | slice) -> Match | Matches:
        """Match ``k`` (negative counts from the end), or the matches of a slice as a
        :class:`Matches`, as a list would: ``matches[0]``, ``matches[-1]``, ``matches[:10]``."""
        if isinstance(k, slice):
            return gather(self, np.arange(len(self), dtype=np.int64)[k])
        try:
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"Matches indexes are integers or slices, not {type(k).__name__}") from None
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"match index {k} out of range ({n} matches)")
        if k < 0:
            k += n
        lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
        valuation: dict[str, list[int]] = {}
        for var, pos in zip(self.var_ids[lo:hi].tolist(), self.positions[lo:hi].tolist(), strict=True):
            valuation.setdefault(self.variables[var], []).append(pos)
        known = self.variables if self.variables_complete else None
        return Match.of(int(self.starts[k]), int(self.ends[k]), valuation, self.source, known)

    def __iter__(self) -> Iterator[Match]:
        return (self[k] for k in range(len(self)))

    def keys(self) -> set[tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]]:
        """The set of match identities (see :meth:`Match.key`): each match's start, end and
        valuation, its variables sorted by name and each one's positions sorted, once.

        The entries are sorted with numpy, so Python builds only the tuples (without a
        :class:`Match` per match, about twice as fast)."""
        n = len(self)
        if n == 0:
            return set()
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.offsets))
        # Variables in name order, as Match.of sorts them.
        rank = np.empty(max(len(self.variables), 1), dtype=np.int64)
        by_name = np.argsort(np.array(self.variables, dtype=object), kind="stable")
        rank[by_name] = np.arange(len(self.variables))
        var_rank = rank[self.var_ids]
        order = np.lexsort((self.positions, var_rank, owner))
        m, v, p = owner[order], var_rank[order], self.positions[order]
        fresh = np.ones(len(order), dtype=np.bool_)  # not a repeat of the entry before
        fresh[1:] = (m[1:] != m[:-1]) | (v[1:] != v[:-1]) | (p[1:] != p[:-1])
        m, v, p = m[fresh], v[fresh], p[fresh]
        # Runs of one (match, variable): their positions form one tuple.
        boundary = np.ones(len(m), dtype=np.bool_)
        boundary[1:] = (m[1:] != m[:-1]) | (v[1:] != v[:-1])
        cut = np.flatnonzero(boundary)
        names = [self.variables[i] for i in by_name]
        bounds = np.r_[cut, len(m)].tolist()
        group_match, group_var, positions = m[cut].tolist(), v[cut].tolist(), p.tolist()
        valuations: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(n)]
        for g, (k, var) in enumerate(zip(group_match, group_var, strict=True)):
            valuations[k].append((names[var], tuple(positions[bounds[g] : bounds[g + 1]])))
        starts, ends = self.starts.tolist(), self.ends.tolist()
        return {(starts[k], ends[k], tuple(valuations[k])) for k in range(n)}

    def to_pandas(
        self,
        form: str = "long",
        *,
        variables: Sequence[str] | None = None,
        lists: Sequence[str] = (),
        attributes: bool | Sequence[str] = False,
    ) -> Any:
        """The matches as a pandas DataFrame.

        ``form="long"`` (the default): one row per (match, variable, position), columns
        ``match``, ``start``, ``end``, ``variable`` (categorical) and ``position``.
        ``form="wide"``: one row per match, columns ``match``, ``start``, ``end`` and one
        per variable (``variables=``, default all): its position (nullable ``Int64``:
        ``<NA>`` where the match does not bind it), or a sorted list of positions when
        some match binds it to several events or it is named in ``lists=`` (name the
        variables under ``+`` there for the same columns whatever the data).
        ``attributes=True`` (or a list of names, ``"event_type"`` among them) joins in
        the matched events' attributes: columns ``"<variable>.<attribute>"`` in the wide
        form, ``<attribute>`` in the long form (``event_<attribute>`` for one named like a
        column of the form, e.g. ``event_start``). Column types: docs/architecture.md.

        Example (``query.run(events)``, README's first pattern)::

            matches.to_pandas()                      # match start end variable position
            matches.to_pandas("wide", attributes=["price"])   # match start end b b.price s s.price
        """
        from .match_frames import pandas_table

        return pandas_table(self, form, variables=variables, lists=lists, attributes=attributes)

    def to_arrow(
        self,
        form: str = "long",
        *,
        variables: Sequence[str] | None = None,
        lists: Sequence[str] = (),
        attributes: bool | Sequence[str] = False,
    ) -> Any:
        """The matches as a ``pyarrow.Table``: the same forms and columns as
        :meth:`to_pandas` (variables, event types and strings as dictionary arrays, lists
        as ``large_list``). ``pl.from_arrow(matches.to_arrow("wide"))`` gives Polars.

        Example: ``matches.to_arrow("wide").column("s")``
        """
        from .match_frames import arrow_table

        return arrow_table(self, form, variables=variables, lists=lists, attributes=attributes)

    def __eq__(self, other: object) -> bool:
        """The same matches in the same order (their events, ``source``, are not compared;
        ``keys()`` compares the sets of matches whatever their order)."""
        if not isinstance(other, Matches):
            return NotImplemented
        return (
            len(self) == len(other)
            and np.array_equal(self.starts, other.starts)
            and np.array_equal(self.ends, other.ends)
            and np.array_equal(self.offsets, other.offsets)
            and np.array_equal(self.positions, other.positions)
            and np.array_equal(_names(self), _names(other))
        )

    __hash__ = None  # type: ignore[assignment]  # (mutable arrays)

    def __repr__(self) -> str:
        shown = ", ".join(repr(m) for m in self[:3])
        more = f", … ({len(self)} in all)" if len(self) > 3 else ""
        return f"Matches([{shown}{more}])"


def _names(m: Matches) -> npt.NDArray[np.object_]:
    """The variable of each entry of ``m``, by name."""
    names: npt.NDArray[np.object_] = np.array([*m.variables, ""], dtype=object)[m.var_ids]
    return names


def gather(m: Matches, picked: npt.NDArray[np.int64]) -> Matches:
    """The matches at indexes ``picked``, in that order (vectorized)."""
    counts = np.diff(m.offsets)[picked]
    offsets = np.zeros(len(picked) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # Entry j of the result is entry j - offsets[i] of match picked[i]'s span.
    entries = np.repeat(m.offsets[:-1][picked] - offsets[:-1], counts) + np.arange(
        offsets[-1], dtype=np.int64
    )
    return Matches(
        m.starts[picked],
        m.ends[picked],
        offsets,
        m.var_ids[entries],
        m.positions[entries],
        m.variables,
        m.source,
        m.variables_complete,
    )


def by_end(m: Matches) -> Matches:
    """``m`` ordered by end position, keeping the order within an end."""
    if np.all(m.ends[1:] >= m.ends[:-1]):
        return m
    return gather(m, np.argsort(m.ends, kind="stable"))


def take(m: Matches, keep: npt.NDArray[np.bool_]) -> Matches:
    """The matches where ``keep`` is True, in order (vectorized)."""
    counts = np.diff(m.offsets)
    entries = np.repeat(keep, counts)
    return Matches(
        m.starts[keep],
        m.ends[keep],
        np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64),
        m.var_ids[entries],
        m.positions[entries],
        m.variables,
        m.source,
        m.variables_complete,
    )
