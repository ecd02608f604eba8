"""The windowed runner: LAST, NEXT and MAX under a count or time window.

A strategy chooses among the outputs of an end position that fit the window
(docs/strategies.md). This runner runs the sequential automaton (the ALL family, with
consumption, joins and partitions as usual) over every variable and without a limit, so
its enumerator yields exactly the outputs that fit the window, then keeps the ones the
strategy selects (:func:`pycel.jit.windowed.strategy_mask`) and applies the projection and
the limit. Its state is the sequential runner's: the node store and H follow the window,
nothing is kept for runs that left it.

Example::

    runner = WindowedRunner(plan)          # strategy last/next/max with a window
    raw = runner.advance(prepared)
"""

from __future__ import annotations

import attrs
import numpy as np

from pycel.jit.dedupe import unique_matches
from pycel.jit.windowed import STRATEGY_CODES, strategy_mask
from pycel.plan.planner import Plan
from pycel.runtime.snapshot.plan import Json
from pycel.runtime.snapshot.tables import Reader, Writer

from .base import Ints, Mask, PreparedBatch, RawMatches
from .sequential import SequentialRunner


class WindowedRunner:
    """LAST/NEXT/MAX with a window: every output that fits, then the strategy's choice."""

    looks_before_window = False  # the choice is among runs inside the window

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.inner = SequentialRunner(plan)

    def advance(self, batch: PreparedBatch) -> RawMatches:
        every = (1 << len(self.plan.variables)) - 1
        raw = self.inner.advance(attrs.evolve(batch, projection_mask=every, limit=-1))
        if not np.all(raw.ends[1:] >= raw.ends[:-1]):  # the mask reads one end at a time
            raw = _take(raw, np.argsort(raw.ends, kind="stable"))
        keep = strategy_mask(raw.ends, raw.offsets, raw.positions, STRATEGY_CODES[self.plan.strategy])
        raw = _take(raw, np.flatnonzero(keep))
        if batch.projection_mask != every:
            raw = _project(raw, batch.projection_mask)
            distinct = unique_matches(raw.starts, raw.ends, raw.offsets, raw.var_ids, raw.positions)
            raw = _take(raw, np.flatnonzero(distinct))
        if batch.limit >= 0 and len(raw.ends):
            raw = _take(raw, np.flatnonzero(_rank_in_end(raw.ends) < batch.limit))
        return raw

    def forget(self, window_start: int) -> None:
        self.inner.forget(window_start)

    def save(self, w: Writer) -> Json:
        return self.inner.save(w)

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> WindowedRunner:
        """The runner :meth:`save` wrote, checked (DataError if not intact)."""
        runner = cls.__new__(cls)
        runner.plan = plan
        runner.inner = SequentialRunner.load(plan, r, x)
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return self.inner.stats(window_start)


def _take(raw: RawMatches, which: Ints) -> RawMatches:
    """The matches ``which`` (indices, in that order)."""
    lengths = np.diff(raw.offsets)[which]
    offsets = np.zeros(len(which) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    entries = _entry_indices(raw.offsets[:-1][which], lengths, int(offsets[-1]))
    return RawMatches(
        raw.starts[which], raw.ends[which], offsets, raw.var_ids[entries], raw.positions[entries]
    )


def _entry_indices(firsts: Ints, lengths: Ints, total: int) -> Ints:
    """Indices of the entries of matches whose entries start at ``firsts`` (vectorized)."""
    group_starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(firsts, lengths) + (np.arange(total, dtype=np.int64) - group_starts)


def _project(raw: RawMatches, projection_mask: int) -> RawMatches:
    """Drop the entries of variables outside ``projection_mask`` (SELECT); the interval
    of each match stays."""
    kept: Mask = ((np.int64(projection_mask) >> raw.var_ids.astype(np.int64)) & 1).astype(np.bool_)
    before = np.concatenate([[0], np.cumsum(kept, dtype=np.int64)])  # kept entries before k
    offsets = before[raw.offsets]
    return RawMatches(raw.starts, raw.ends, offsets, raw.var_ids[kept], raw.positions[kept])


def _rank_in_end(ends: Ints) -> Ints:
    """Each match's rank among the matches of its end (ends adjacent)."""
    n = len(ends)
    first = np.flatnonzero(np.concatenate([[True], ends[1:] != ends[:-1]]))
    sizes = np.diff(np.concatenate([first, [n]]))
    return np.arange(n, dtype=np.int64) - np.repeat(first, sizes)
