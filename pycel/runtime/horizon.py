"""Absences at a pattern's ends, with its window as their horizon.

:class:`Horizon`, an absence that ends the pattern: ``seq(p, absent(C)).within(w)``.

A match M of ``p`` is found at its last event, but it is a match of the pattern only if
no C of M's key (partition, correlation) comes later inside M's window: at a position with
position − start(M) ≤ n, or a time with time − time(start(M)) ≤ d. So the stream holds M
*pending*: a C of its key inside that window drops it; an event past the window (the
window has passed: nothing can drop it any more) or :meth:`Stream.close` emits it.

Pending matches leave by end position, a whole end at once (once every match of that end
is decided), so a strategy (LAST/NEXT/MAX with a window), SELECT's duplicates and LIMIT
per end see all the matches of an end that passed, as without the absence.

Cost: each output of ``p`` that fits the window is enumerated once, at its end, and held
until its window has passed or a C drops it: work and memory are linear in ``p``'s outputs
inside the window (not output-linear in the pattern's own). Per push, the batch's blocking
events are sorted by key (O(b log b)) and each pending match finds the first one of its
key after it by binary search.

:class:`Lookback`, an absence that starts it: ``seq(absent(C), p).within(w)``, decided
when a match is found, from the absent events a later window can still reach (sorted by
key per push that finds a match: O(r log r) for r of them, so push batches, not single
events, on a large window).

Example::

    horizon = Horizon.of(plan, reach)
    emitted = horizon.advance(candidates, keys, start_times, block)   # by end
    rest = horizon.close()
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.matches import Matches, by_end, take
from pycel.plan.planner import Plan

Ints = npt.NDArray[np.int64]
_I64_MAX = 2**63 - 1
#: A lookback forgets once it holds this many more events than twice what it kept.
FORGET_SLACK = 256


@attrs.frozen
class Blocking:
    """A batch's events that block (of an absent type, passing its filter, with a key):
    global positions, keys and window times (empty for a count window), in stream order;
    and the last position and time of the batch (None for an empty batch)."""

    positions: Ints
    keys: Ints
    times: npt.NDArray[Any]
    last_position: int | None = None
    last_time: int | float | None = None

    def nearest(self, keys: Ints, positions: Ints, *, after: bool) -> tuple[npt.NDArray[np.bool_], Ints]:
        """For each (key, position): whether a blocking event of that key lies after it
        (``after``; else before it), and the index of the nearest such one."""
        b = len(self.positions)
        if not b:
            return np.zeros(len(keys), dtype=np.bool_), np.zeros(len(keys), dtype=np.int64)
        # Blocking events ordered by (key rank, stream order): one sorted int64 to search.
        uniq = np.unique(self.keys)
        code = np.searchsorted(uniq, self.keys) * np.int64(b + 1) + np.arange(b, dtype=np.int64)
        order = np.argsort(code, kind="stable")
        code = code[order]
        mine = np.minimum(np.searchsorted(uniq, keys), len(uniq) - 1)
        found = uniq[mine] == keys
        # How many blocking events come before the position (at it too, looking after).
        passed = np.searchsorted(self.positions, positions, side="right" if after else "left")
        at = np.searchsorted(code, mine * np.int64(b + 1) + passed) - (0 if after else 1)
        found &= (at >= 0) & (at < b)
        at = np.clip(at, 0, b - 1)
        found &= code[at] // np.int64(b + 1) == mine
        return found, order[at]

    def take(self, keep: npt.NDArray[np.bool_]) -> Blocking:
        """The blocking events where ``keep`` is True."""
        times = self.times[keep] if len(self.times) else self.times
        return attrs.evolve(self, positions=self.positions[keep], keys=self.keys[keep], times=times)

    def then(self, later: Blocking) -> Blocking:
        """These events followed by ``later``'s (with ``later``'s last position and time)."""
        if not len(later.positions):  # (most pushes: no copy of the events held)
            return attrs.evolve(
                self,
                last_position=later.last_position if later.last_position is not None else self.last_position,
                last_time=later.last_time if later.last_time is not None else self.last_time,
            )
        times = np.concatenate([self.times.astype(later.times.dtype), later.times])
        return Blocking(
            np.concatenate([self.positions, later.positions]),
            np.concatenate([self.keys, later.keys]),
            times,
            later.last_position if later.last_position is not None else self.last_position,
            later.last_time if later.last_time is not None else self.last_time,
        )


def within_reach(
    unit: str,
    reach: float,
    earlier: Ints,
    earlier_time: npt.NDArray[Any],
    later: Ints,
    later_time: npt.NDArray[Any],
) -> npt.NDArray[np.bool_]:
    """Whether ``later`` − ``earlier`` ≤ ``reach``: positions for a count window, else times
    (integers exactly: later ≤ earlier + floor(reach) without leaving int64)."""
    if unit == "events":
        return np.asarray(later - earlier <= np.int64(reach))
    if later_time.dtype.kind in "iu" and earlier_time.dtype.kind in "iu":
        step = min(math.floor(reach), _I64_MAX)
        start = earlier_time.astype(np.int64)
        top = np.where(start > _I64_MAX - step, _I64_MAX, start + np.int64(step))
        return np.asarray(later_time.astype(np.int64) <= top)
    return np.asarray(later_time.astype(np.float64) - earlier_time.astype(np.float64) <= reach)


@attrs.define
class Horizon:
    """The pending matches of one stream (full matches, global positions, by arrival),
    with each one's run key and its start's window time."""

    unit: str  # "events", or "time" (seconds and units alike: times are numbers here)
    reach: float  # the window: n events, or d in the time column's units
    pending: Matches
    keys: Ints
    start_times: npt.NDArray[Any]
    last_position: int = -1
    last_time: int | float | None = None

    @classmethod
    def of(cls, plan: Plan, reach: float) -> Horizon:
        """An empty horizon for ``plan`` (which ends in an absence and has a window);
        ``reach``: the window in the time column's units (nanoseconds for timestamps)."""
        z = np.zeros(0, dtype=np.int64)
        unit = "events" if plan.window_unit == "events" else "time"
        return cls(unit, reach, Matches.empty(plan.variables), z, z)

    def advance(self, found: Matches, keys: Ints, start_times: npt.NDArray[Any], block: Blocking) -> Matches:
        """Take the batch's new outputs ``found`` (full matches, global positions, each
        with its run key and its start's time) and its ``block``ing events; return the
        matches whose window has passed with no blocking event of their key in it, by
        end (the pending ones whose end still has an undecided match wait)."""
        if block.last_position is not None:
            self.last_position = block.last_position
        if block.last_time is not None:
            self.last_time = block.last_time
        if len(found):
            self.pending = Matches.concat([self.pending, found]) if len(self.pending) else found
            self.keys = np.concatenate([self.keys, keys])
            self.start_times = np.concatenate([self.start_times.astype(start_times.dtype), start_times])
        m = self.pending
        if not len(m):
            return m
        killed = self._blocked(block) if len(block.positions) else np.zeros(len(m), dtype=np.bool_)
        passed = ~killed & self._passed()
        if not killed.any() and not passed.any():  # nothing leaves (most small pushes)
            return Matches.empty(m.variables)
        waiting_ends = np.unique(m.ends[~killed & ~passed])
        out = passed & ~np.isin(m.ends, waiting_ends)
        self._keep(~killed & ~out)
        return by_end(take(m, out))

    def close(self) -> Matches:
        """The stream ends: every pending match holds (no later event can drop it)."""
        m = self.pending
        self._keep(np.zeros(len(m), dtype=np.bool_))
        return by_end(m)

    def _keep(self, keep: npt.NDArray[np.bool_]) -> None:
        self.pending = take(self.pending, keep)
        self.keys, self.start_times = self.keys[keep], self.start_times[keep]

    def _passed(self) -> npt.NDArray[np.bool_]:
        """Whether the stream has seen every event that may lie in each match's window."""
        m = self.pending
        if self.unit == "events":
            return np.asarray(self.last_position - m.starts >= np.int64(self.reach))
        if self.last_time is None:
            return np.zeros(len(m), dtype=np.bool_)
        last = np.full(len(m), self.last_time, dtype=self.start_times.dtype)
        return ~within_reach(self.unit, self.reach, m.starts, self.start_times, m.starts, last)

    def _blocked(self, block: Blocking) -> npt.NDArray[np.bool_]:
        """Whether the first blocking event of each pending match's key after its end lies
        inside its window (a later one lies later: it cannot be inside if that one is not)."""
        m = self.pending
        found, first = block.nearest(self.keys, m.ends, after=True)
        if not found.any():
            return found
        time = block.times[first] if len(block.times) else block.times
        inside = within_reach(self.unit, self.reach, m.starts, self.start_times, block.positions[first], time)
        blocked: npt.NDArray[np.bool_] = found & inside
        return blocked


@attrs.define
class Lookback:
    """The recent events of an absence that starts the pattern (``seq(absent(C), p)``),
    as far back as a window reaches: a match of ``p`` holds if no C of its key lies
    before its first event inside its window (end − position ≤ n, or time(end) − time ≤
    d). Decided when the match is found: nothing waits."""

    unit: str
    reach: float
    recent: Blocking
    kept: int = 0  # events left by the last forgetting pass

    @classmethod
    def of(cls, plan: Plan, reach: float) -> Lookback:
        z = np.zeros(0, dtype=np.int64)
        return cls("events" if plan.window_unit == "events" else "time", reach, Blocking(z, z, z))

    def admits(
        self, found: Matches, keys: Ints, end_times: npt.NDArray[Any], block: Blocking
    ) -> npt.NDArray[np.bool_]:
        """Take the batch's ``block``ing events; whether each new output ``found`` (global
        positions, each with its run key and its end's time) has none of its key before
        its start inside its window. Forgets the events no later window reaches."""
        self.recent = self.recent.then(block)
        admitted = np.ones(len(found), dtype=np.bool_)
        near, last = self.recent.nearest(keys, found.starts, after=False)
        if near.any():
            times = self.recent.times[last] if len(self.recent.times) else self.recent.times
            before = self.recent.positions[last]
            admitted = ~(near & within_reach(self.unit, self.reach, before, times, found.ends, end_times))
        self._forget()
        return admitted

    def _forget(self) -> None:
        """Keep the events a window ending at a later event may still reach: once they
        doubled since the last pass (an older event never changes an answer, as only the
        nearest one before a match is read; so a pass per push is not needed)."""
        r = self.recent
        if len(r.positions) <= 2 * self.kept + FORGET_SLACK:
            return
        if self.unit == "events":
            assert r.last_position is not None
            self.recent = r.take(r.last_position - r.positions < np.int64(self.reach))
        elif r.last_time is not None:
            last = np.full(len(r.positions), r.last_time, dtype=r.times.dtype)
            self.recent = r.take(within_reach(self.unit, self.reach, r.positions, r.times, r.positions, last))
        self.kept = len(self.recent.positions)


__all__ = ["Blocking", "Horizon", "Lookback", "within_reach"]
