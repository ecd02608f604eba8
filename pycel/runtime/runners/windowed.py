"""The windowed runner: LAST, NEXT and MAX under a count or time window.

A strategy chooses among the outputs of an end position that fit the window
(docs/strategies.md). This runner runs the sequential automaton (the ALL family, with
consumption, joins and partitions as usual) over every variable and without a limit, so
its enumerator yields exactly the outputs that fit the window, then keeps the ones the
strategy selects (:func:`choose`: :func:`pycel.jit.windowed.strategy_mask`, the projection
and the limit). With post-filters the stream filters the outputs first and then calls
:func:`choose`: the strategy compares the outputs that pass them. Its state is the
sequential runner's: the node store and H follow the window, nothing is kept for runs
that left it. MAX over a pattern whose matches all have the same number of events keeps
every output that fits: the loop just enumerates them.

Example::

    runner = WindowedRunner(plan)          # strategy last/next/max with a window
    raw = runner.advance(prepared)
"""

from __future__ import annotations

import attrs
import numpy as np

from pycel.data.matches import Matches, take
from pycel.errors import UnsupportedError
from pycel.jit.dedupe import unique_matches
from pycel.jit.windowed import STRATEGY_CODES, strategy_mask
from pycel.limits import MAX_WINDOWED_CHOICES
from pycel.plan.planner import Plan
from pycel.runtime.postfilter import limit_per_end, project
from pycel.runtime.snapshot.plan import Json
from pycel.runtime.snapshot.tables import Reader, Writer

from .base import PreparedBatch, RawMatches
from .sequential import SequentialRunner


class WindowedRunner:
    """LAST/NEXT/MAX with a window: every output that fits, then the strategy's choice."""

    looks_before_window = False  # the choice is among runs inside the window

    @property
    def prunes_post_filters(self) -> bool:
        return self.inner.prunes_post_filters

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.inner = SequentialRunner(plan)
        self.inner.choose = _chosen_in_loop(plan)
        self.keeps_every_output = _keeps_every_output(plan)  # (once: it walks the automaton)
        self.refused: str | None = None  # set once an end had too many matches to compare

    def advance(self, batch: PreparedBatch) -> RawMatches:
        if self.refused is not None:
            raise UnsupportedError(self.refused)
        if self.keeps_every_output:
            return self.inner.advance(batch)
        variables = self.plan.variables
        every = (1 << len(variables)) - 1
        if self.inner.choose:  # the loop writes only the chosen outputs (pycel.jit.choose)
            raw = self.inner.advance(attrs.evolve(batch, projection_mask=every, limit=-1))
            m = Matches(raw.starts, raw.ends, raw.offsets, raw.var_ids, raw.positions, variables)
            m = choose(None, m, batch.projection_mask, batch.limit)
            return RawMatches(m.starts, m.ends, m.offsets, m.var_ids, m.positions)
        # Enumerate at most one match more than the choice may compare per end, a slice of
        # the batch at a time: the work before a refusal stays bounded, and an end that
        # reaches the bound is refused, never cut short.
        bounded = attrs.evolve(batch, projection_mask=every, limit=MAX_WINDOWED_CHOICES + 1)
        pieces: list[Matches] = []
        for lo in range(0, max(len(batch.bits), 1), _SLICE):
            raw = self.inner.advance(_slice(bounded, lo, lo + _SLICE))
            if len(raw.ends):
                per_end = np.unique(raw.ends, return_counts=True)
                over = per_end[0][per_end[1] > MAX_WINDOWED_CHOICES]
                if len(over):
                    self.refused = _too_many(self.plan, int(over[0]))
                    raise UnsupportedError(self.refused)
            pieces.append(Matches(raw.starts, raw.ends, raw.offsets, raw.var_ids, raw.positions, variables))
        m = pieces[0] if len(pieces) == 1 else Matches.concat(pieces)
        if not self.plan.outputs_filtered:
            m = choose(self.plan.strategy, m, batch.projection_mask, batch.limit)
        # else every output that fits: the stream filters them, then calls choose()
        return RawMatches(m.starts, m.ends, m.offsets, m.var_ids, m.positions)

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
        runner.inner.choose = _chosen_in_loop(plan)
        runner.keeps_every_output = _keeps_every_output(plan)
        runner.refused = None
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return self.inner.stats(window_start)


def _keeps_every_output(plan: Plan) -> bool:
    """Whether the strategy keeps every output that fits: MAX when every match has the
    same number of events (none can contain another), without post-filters (the stream
    filters first and then calls :func:`choose`)."""
    return plan.strategy == "max" and plan.nfa.match_size is not None and not plan.outputs_filtered


def _chosen_in_loop(plan: Plan) -> str:
    """The strategy the loop itself chooses by (:mod:`pycel.jit.choose`,
    :mod:`pycel.jit.choose_max`), or "": LAST, NEXT and MAX without post-filters (the
    strategy must compare the outputs that pass them)."""
    in_loop = plan.strategy in ("last", "next", "max") and not plan.outputs_filtered
    in_loop = in_loop and not _keeps_every_output(plan)
    return plan.strategy if in_loop else ""


def choose(strategy: str | None, m: Matches, projection_mask: int, limit: int) -> Matches:
    """The outputs of ``m`` (over every variable, by end) that ``strategy`` keeps among
    those with the same end (None: all of them, already chosen), projected onto
    ``projection_mask`` and limited per end.

    Example: ``choose("last", outputs, plan.projection_mask, plan.limit)``
    """
    # The loop writes an end's matches together, ends increasing: the choice reads one
    # end at a time.
    assert np.all(m.ends[1:] >= m.ends[:-1]), "the loop's matches are not by end"
    if strategy is not None:
        m = take(m, strategy_mask(m.ends, m.offsets, m.positions, STRATEGY_CODES[strategy]))
    if projection_mask != (1 << len(m.variables)) - 1:
        m = project(m, projection_mask)
        m = take(m, unique_matches(m.starts, m.ends, m.offsets, m.var_ids, m.positions))
    if limit >= 0:
        m = limit_per_end(m, limit)
    return m


#: Events per call of the loop: bounds the work done before an end is refused.
_SLICE = 1 << 12


def _slice(batch: PreparedBatch, lo: int, hi: int) -> PreparedBatch:
    """Events ``lo:hi`` of a batch as a batch of their own (for the sequential loop; the
    ordered loop reads the events' values, row j for the slice's event j)."""
    if lo == 0 and hi >= len(batch.bits):
        return batch
    events = batch.batch
    return attrs.evolve(
        batch,
        batch=attrs.evolve(
            events,
            offset=events.offset + lo,
            type_ids=events.type_ids[lo:hi],
            columns={name: values[lo:hi] for name, values in events.columns.items()},
            valid={name: ok[lo:hi] for name, ok in events.valid.items()},
            deferred={},  # (attributes the query does not read)
        ),
        offset=batch.offset + lo,
        bits=batch.bits[lo:hi],
        keys=batch.keys[lo:hi],
        key_valid=batch.key_valid[lo:hi],
        window_starts=batch.window_starts[lo:hi],
    )


def _too_many(plan: Plan, end: int) -> str:
    strategy = plan.strategy
    if plan.window_unit is not None:
        what, narrow = "with a window compares every match that fits the window", "Narrow the window"
    else:  # comparisons or post-filters: the strategy chooses among the matches that pass
        what, narrow = "compares every match that passes the conditions", "Add a window"
    return (
        f"strategy({strategy!r}) {what} at an end position, and the end at position {end} has "
        f"more than {MAX_WINDOWED_CHOICES:,}: the engine refuses to continue this stream (the "
        f"matches of earlier pushes stand). {narrow}, add filters, or use LIMIT with the "
        "default strategy (docs/strategies.md)"
    )
