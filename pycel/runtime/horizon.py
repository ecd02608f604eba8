"""The horizon of an absence that ends the pattern: ``seq(p, absent(C)).within(w)``.

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

Example::

    horizon = Horizon.of(plan)
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


@attrs.frozen
class Blocking:
    """A batch's events that block (of an absent type, passing its filter, with a key):
    global positions, keys and window times (empty for a count window), in stream order;
    and the last position and time of the batch (None for an empty batch)."""

    positions: Ints
    keys: Ints
    times: npt.NDArray[Any]
    last_position: int | None
    last_time: int | float | None


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
        killed = self._blocked(block)
        passed = ~killed & self._passed()
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

    def _inside(self, position: Ints, time: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Whether an event at ``position``/``time`` lies inside each pending match's window."""
        m = self.pending
        if self.unit == "events":
            inside: npt.NDArray[np.bool_] = position - m.starts <= np.int64(self.reach)
            return inside
        if time.dtype.kind in "iu":
            # Exact integers: time − start ≤ floor(d), without leaving int64.
            reach = min(math.floor(self.reach), _I64_MAX)
            starts = self.start_times.astype(np.int64)
            top = np.where(starts > _I64_MAX - reach, _I64_MAX, starts + np.int64(reach))
            return np.asarray(time.astype(np.int64) <= top)
        return np.asarray(time.astype(np.float64) - self.start_times.astype(np.float64) <= self.reach)

    def _passed(self) -> npt.NDArray[np.bool_]:
        """Whether the stream has seen every event that may lie in each match's window."""
        m = self.pending
        if self.unit == "events":
            return np.asarray(self.last_position - m.starts >= np.int64(self.reach))
        if self.last_time is None:
            return np.zeros(len(m), dtype=np.bool_)
        last = np.full(len(m), self.last_time, dtype=self.start_times.dtype)
        return ~self._inside(np.zeros(0, dtype=np.int64), last)

    def _blocked(self, block: Blocking) -> npt.NDArray[np.bool_]:
        """Whether the first blocking event of each pending match's key after its end lies
        inside its window (a later one lies later: it cannot be inside if that one is not)."""
        m = self.pending
        b = len(block.positions)
        if not b:
            return np.zeros(len(m), dtype=np.bool_)
        # Blocking events ordered by (key rank, batch order): one sorted int64 to search.
        uniq = np.unique(block.keys)
        rank = np.searchsorted(uniq, block.keys)
        code = rank * np.int64(b + 1) + np.arange(b, dtype=np.int64)
        order = np.argsort(code, kind="stable")
        code = code[order]
        mine = np.minimum(np.searchsorted(uniq, self.keys), len(uniq) - 1)
        has_key = uniq[mine] == self.keys
        after = np.searchsorted(block.positions, m.ends, side="right")  # first batch index after the end
        at = np.searchsorted(code, mine * np.int64(b + 1) + after)
        found = has_key & (at < b)
        at = np.minimum(at, b - 1)
        found &= code[at] // np.int64(b + 1) == mine
        first = order[at]
        time = block.times[first] if len(block.times) else block.times
        blocked: npt.NDArray[np.bool_] = found & self._inside(block.positions[first], time)
        return blocked


__all__ = ["Blocking", "Horizon"]
