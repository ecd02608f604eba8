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

from pycel.errors import UnsupportedError
from pycel.jit.dedupe import unique_matches
from pycel.jit.windowed import STRATEGY_CODES, strategy_mask
from pycel.limits import MAX_WINDOWED_CHOICES
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
        self.refused: str | None = None  # set once an end had too many matches to compare

    def advance(self, batch: PreparedBatch) -> RawMatches:
        if self.refused is not None:
            raise UnsupportedError(self.refused)
        every = (1 << len(self.plan.variables)) - 1
        # Enumerate at most one match more than the choice may compare per end, a slice of
        # the batch at a time: the work before a refusal stays bounded, and an end that
        # reaches the bound is refused, never cut short.
        bounded = attrs.evolve(batch, projection_mask=every, limit=MAX_WINDOWED_CHOICES + 1)
        pieces = []
        for lo in range(0, max(len(batch.bits), 1), _SLICE):
            raw = self.inner.advance(_slice(bounded, lo, lo + _SLICE))
            if len(raw.ends):
                per_end = np.unique(raw.ends, return_counts=True)
                over = per_end[0][per_end[1] > MAX_WINDOWED_CHOICES]
                if len(over):
                    self.refused = _too_many(self.plan.strategy, int(over[0]))
                    raise UnsupportedError(self.refused)
            pieces.append(raw)
        raw = pieces[0] if len(pieces) == 1 else _concat(pieces)
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
        if self.refused is not None:
            raise UnsupportedError(self.refused)
        return self.inner.save(w)

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> WindowedRunner:
        """The runner :meth:`save` wrote, checked (DataError if not intact)."""
        runner = cls.__new__(cls)
        runner.plan = plan
        runner.inner = SequentialRunner.load(plan, r, x)
        runner.refused = None
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return self.inner.stats(window_start)


#: Events per call of the loop: bounds the work done before an end is refused.
_SLICE = 1 << 12


def _slice(batch: PreparedBatch, lo: int, hi: int) -> PreparedBatch:
    """Events ``lo:hi`` of a batch as a batch of their own (for the sequential loop,
    which does not read the events themselves)."""
    if lo == 0 and hi >= len(batch.bits):
        return batch
    return attrs.evolve(
        batch,
        offset=batch.offset + lo,
        bits=batch.bits[lo:hi],
        keys=batch.keys[lo:hi],
        key_valid=batch.key_valid[lo:hi],
        window_starts=batch.window_starts[lo:hi],
    )


def _concat(pieces: list[RawMatches]) -> RawMatches:
    """The matches of consecutive slices, in order."""
    shifts = np.cumsum([0] + [int(p.offsets[-1]) for p in pieces[:-1]])
    offsets = [p.offsets[1:] + s for p, s in zip(pieces, shifts, strict=True)]
    return RawMatches(
        np.concatenate([p.starts for p in pieces]),
        np.concatenate([p.ends for p in pieces]),
        np.concatenate([pieces[0].offsets[:1], *offsets]),
        np.concatenate([p.var_ids for p in pieces]),
        np.concatenate([p.positions for p in pieces]),
    )


def _too_many(strategy: str, end: int) -> str:
    return (
        f"strategy({strategy!r}) with a window compares every match that fits the window at "
        f"an end position, and the end at position {end} has more than "
        f"{MAX_WINDOWED_CHOICES:,}: the engine refuses to continue this stream (the matches "
        "of earlier pushes stand). Narrow the window, add filters, or use LIMIT with the "
        "default strategy (docs/strategies.md)"
    )


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
