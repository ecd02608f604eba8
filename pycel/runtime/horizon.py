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
when a match is found, from the absent events a later window can still reach, kept
ordered by (key, position): a push inserts its b absent events (O(b log b) and one copy of
the r kept, O(r)) and each new match finds the last one of its key before it by binary
search (O(log r)).

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
_SIGN = np.uint64(1 << 63)
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

    def first_after(self, keys: Ints, positions: Ints) -> tuple[npt.NDArray[np.bool_], Ints]:
        """For each (key, position): whether a blocking event of that key lies after it,
        and the index of the first such one."""
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
        # How many blocking events come at or before the position.
        passed = np.searchsorted(self.positions, positions, side="right")
        at = np.searchsorted(code, mine * np.int64(b + 1) + passed)
        found &= at < b
        at = np.minimum(at, b - 1)
        found &= code[at] // np.int64(b + 1) == mine
        return found, order[at]

    def take(self, keep: npt.NDArray[Any]) -> Blocking:
        """The blocking events where ``keep`` is True (or at the indices it lists)."""
        times = self.times[keep] if len(self.times) else self.times
        return attrs.evolve(self, positions=self.positions[keep], keys=self.keys[keep], times=times)


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
        found, first = block.first_after(self.keys, m.ends)
        if not found.any():
            return found
        time = block.times[first] if len(block.times) else block.times
        inside = within_reach(self.unit, self.reach, m.starts, self.start_times, block.positions[first], time)
        blocked: npt.NDArray[np.bool_] = found & inside
        return blocked


def key_order(keys: Ints, positions: Ints) -> npt.NDArray[np.void]:
    """Each (key, position) as 16 bytes whose byte order (numpy compares such values as
    ``memcmp`` does) is their order, key first: big-endian, the sign bit flipped. One
    sortable value per pair, which ``np.searchsorted`` finds."""
    both = np.empty((len(keys), 2), dtype=">u8")
    both[:, 0] = keys.astype(np.int64).view(np.uint64) ^ _SIGN
    both[:, 1] = positions.astype(np.int64).view(np.uint64) ^ _SIGN
    return both.view(np.dtype((np.void, 16))).ravel()


@attrs.define
class Lookback:
    """The recent events of an absence that starts the pattern (``seq(absent(C), p)``),
    as far back as a window reaches: a match of ``p`` holds if no C of its key lies
    before its first event inside its window (end − position ≤ n, or time(end) − time ≤
    d). Decided when the match is found: nothing waits.

    ``recent`` holds the events ordered by (key, position), ``codes`` their
    :func:`key_order` values (sorted), so that a push inserts its events rather than
    sorting all of them again."""

    unit: str
    reach: float
    recent: Blocking
    codes: npt.NDArray[np.void]
    kept: int = 0  # events left by the last forgetting pass

    @classmethod
    def of(cls, plan: Plan, reach: float) -> Lookback:
        z = np.zeros(0, dtype=np.int64)
        unit = "events" if plan.window_unit == "events" else "time"
        return cls(unit, reach, Blocking(z, z, z), key_order(z, z))

    def with_recent(self, recent: Blocking) -> Lookback:
        """This lookback holding ``recent`` (events in stream order, as a snapshot keeps
        them)."""
        ordered = recent.take(np.lexsort((recent.positions, recent.keys)))
        return attrs.evolve(self, recent=ordered, codes=key_order(ordered.keys, ordered.positions), kept=0)

    def in_stream_order(self) -> Blocking:
        """The recent events ordered by position (what a snapshot writes)."""
        return self.recent.take(np.argsort(self.recent.positions))

    def admits(
        self, found: Matches, keys: Ints, end_times: npt.NDArray[Any], block: Blocking
    ) -> npt.NDArray[np.bool_]:
        """Take the batch's ``block``ing events; whether each new output ``found`` (global
        positions, each with its run key and its end's time) has none of its key before
        its start inside its window. Forgets the events no later window reaches."""
        self._remember(block)
        admitted = np.ones(len(found), dtype=np.bool_)
        r = self.recent
        if len(found) and len(r.positions):
            # The last remembered event before each start, if it is of the match's key.
            last = np.searchsorted(self.codes, key_order(keys, found.starts)) - 1
            near = last >= 0
            last = np.maximum(last, 0)
            near &= r.keys[last] == keys
            if near.any():
                times = r.times[last] if len(r.times) else r.times
                inside = within_reach(self.unit, self.reach, r.positions[last], times, found.ends, end_times)
                admitted = ~(near & inside)
        self._forget()
        return admitted

    def _remember(self, block: Blocking) -> None:
        """Insert the batch's blocking events in (key, position) order."""
        r = self.recent
        if len(block.positions):
            order = np.lexsort((block.positions, block.keys))
            new = key_order(block.keys[order], block.positions[order])
            at = np.searchsorted(self.codes, new)
            self.codes = np.insert(self.codes, at, new)
            times = r.times
            if len(block.times):
                times = np.insert(r.times.astype(block.times.dtype), at, block.times[order])
            positions = np.insert(r.positions, at, block.positions[order])
            r = Blocking(positions, np.insert(r.keys, at, block.keys[order]), times)
        last_position = block.last_position if block.last_position is not None else self.recent.last_position
        last_time = block.last_time if block.last_time is not None else self.recent.last_time
        self.recent = attrs.evolve(r, last_position=last_position, last_time=last_time)

    def _forget(self) -> None:
        """Keep the events a window ending at a later event may still reach: once they
        doubled since the last pass (an older event never changes an answer, as only the
        nearest one before a match is read; so a pass per push is not needed)."""
        r = self.recent
        if len(r.positions) <= 2 * self.kept + FORGET_SLACK:
            return
        if self.unit == "events":
            assert r.last_position is not None
            keep = np.asarray(r.last_position - r.positions < np.int64(self.reach))
        elif r.last_time is not None:
            last = np.full(len(r.positions), r.last_time, dtype=r.times.dtype)
            keep = within_reach(self.unit, self.reach, r.positions, r.times, r.positions, last)
        else:
            return
        self.recent, self.codes = r.take(keep), self.codes[keep]
        self.kept = len(self.recent.positions)


__all__ = ["Blocking", "Horizon", "Lookback", "key_order", "within_reach"]
