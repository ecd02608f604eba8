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
inside the window (not output-linear in the pattern's own). A push reads only the pending
matches it decides: those of the keys its blocking events have (found by key in an index)
and those whose window it closes (a prefix of an index by start); see :class:`Horizon`.

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

from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.matches import Matches, gather
from pycel.plan.planner import Plan
from pycel.runtime.windows import integer_reach, plus_saturating

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
        top = plus_saturating(earlier_time.astype(np.int64), integer_reach(reach))
        return np.asarray(later_time.astype(np.int64) <= top)
    return np.asarray(later_time.astype(np.float64) - earlier_time.astype(np.float64) <= reach)


#: Entry states of a :class:`Horizon`: waiting for its window or a blocking event, dropped
#: by a blocking event, decided (its window passed) but waiting for its end's other
#: matches, and emitted.
_UNDECIDED, _KILLED, _PASSED, _EMITTED = 0, 1, 2, 3
_NONE = np.zeros(0, dtype=np.int64)
#: A horizon compacts its arrays once they hold this many more gone entries than live ones.
COMPACT_SLACK = 1024


@attrs.define
class Horizon:
    """The pending matches of one stream (full matches, global positions), with each
    one's run key and its start's window time.

    Entries are numbered in arrival order, which is end order (each push's matches end
    after the last push's), so an end's matches are one range of numbers (its *group*).
    Besides those arrays in arrival order it keeps two indexes, so that a push reads only
    the entries it decides, not every pending one:

    * by key (``key_keys``, ``key_ids``): the undecided entries ordered by (key,
      number). An entry found before this push ends before every blocking event of the
      push, so the first blocking event of its key decides it: dropped if inside its
      window, else its window has passed. All of a blocked key's entries are therefore
      decided at once, and its whole range leaves the index.
    * by start (``by_start``, ``start_keys``): the entries ordered by their start
      (position for a count window, time for a time window) from ``head`` on; the window
      has passed exactly for a prefix of that order (the stream's last position or time
      only grows), which leaves by moving ``head``.

    A push costs O((f + b) log(f + b) + b log P) searches for f new matches, b blocking
    events and P pending, plus the entries it decides and copying the two indexes (one
    insertion each, O(P) bytes moved); the arrays are compacted once gone entries
    outnumber live ones (amortized O(log P) per match)."""

    unit: str  # "events", or "time" (seconds and units alike: times are numbers here)
    reach: float  # the window: n events, or d in the time column's units
    variables: tuple[str, ...]
    last_position: int = -1
    last_time: int | float | None = None
    # Entries in arrival order (number i = row i, i < size), and their matches in chunks.
    starts: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    ends: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    entry_keys: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    entry_times: npt.NDArray[Any] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    state: npt.NDArray[np.int8] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int8))
    group: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    chunks: list[Matches] = attrs.field(factory=list)
    chunk_first: list[int] = attrs.field(factory=list)
    # Per group (an end's matches): its first entry and how many are undecided.
    group_first: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    group_left: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    key_keys: Ints = attrs.field(factory=lambda: _NONE)  # the key index: keys, ascending
    key_ids: Ints = attrs.field(factory=lambda: _NONE)  # and the entry numbers
    by_start: Ints = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))  # entry numbers
    start_keys: npt.NDArray[Any] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))  # their starts
    head: int = 0
    gone: int = 0  # entries killed or emitted (compaction drops them)
    size: int = 0  # entries held (the arrays above have room for more)
    groups: int = 0

    @classmethod
    def of(cls, plan: Plan, reach: float) -> Horizon:
        """An empty horizon for ``plan`` (which ends in an absence and has a window);
        ``reach``: the window in the time column's units (nanoseconds for timestamps)."""
        unit = "events" if plan.window_unit == "events" else "time"
        return cls(unit, reach, plan.variables)

    def holding(
        self,
        pending: Matches,
        keys: Ints,
        start_times: npt.NDArray[Any],
        last_position: int,
        last_time: int | float | None,
    ) -> Horizon:
        """This (empty) horizon holding ``pending`` (what :attr:`pending` gave: by end),
        as a snapshot restores it."""
        fresh = Horizon(self.unit, self.reach, self.variables, last_position, last_time)
        fresh._append(pending, keys, start_times)
        return fresh

    @property
    def waiting(self) -> int:
        """How many matches wait (for their window to pass, or for their end's others)."""
        return len(self._waiting_entries())

    @property
    def pending(self) -> Matches:
        """The waiting matches, by end (what a snapshot writes)."""
        return self._gather(self._waiting_entries())

    @property
    def keys(self) -> Ints:
        """The waiting matches' run keys, as :attr:`pending` orders them."""
        return self.entry_keys[self._waiting_entries()]

    @property
    def start_times(self) -> npt.NDArray[Any]:
        """The waiting matches' start times, as :attr:`pending` orders them."""
        return self.entry_times[self._waiting_entries()]

    def advance(self, found: Matches, keys: Ints, start_times: npt.NDArray[Any], block: Blocking) -> Matches:
        """Take the batch's new outputs ``found`` (full matches, global positions, each
        with its run key and its start's time) and its ``block``ing events; return the
        matches whose window has passed with no blocking event of their key in it, by
        end (the pending ones whose end still has an undecided match wait)."""
        if block.last_position is not None:
            self.last_position = block.last_position
        if block.last_time is not None:
            self.last_time = block.last_time
        new = self._append(found, keys, start_times)
        decided = [self._kill(block, new)] if len(block.positions) else []
        decided.append(self._pass())
        touched = np.concatenate(decided)
        out = self._emit(touched) if len(touched) else np.zeros(0, dtype=np.int64)
        emitted = self._gather(out)
        self._compact_if_sparse()
        return emitted

    def close(self) -> Matches:
        """The stream ends: every pending match holds (no later event can drop it)."""
        waiting = self._waiting_entries()
        emitted = self._gather(waiting)
        self.state[waiting] = _EMITTED
        self.gone += len(waiting)
        self._compact_if_sparse()
        return emitted

    # -- arrival -------------------------------------------------------------------------

    def _append(self, found: Matches, keys: Ints, start_times: npt.NDArray[Any]) -> Ints:
        """Number ``found`` after the entries held (by end); index them; their numbers."""
        if not len(found):
            return np.zeros(0, dtype=np.int64)
        if np.any(found.ends[1:] < found.ends[:-1]):  # (the loops find them by end)
            order = np.argsort(found.ends, kind="stable")
            found, keys, start_times = gather(found, order), keys[order], start_times[order]
        keys = keys.astype(np.int64)
        first, count = self.size, len(found)
        ids = np.arange(first, first + count, dtype=np.int64)
        self.chunks.append(found)
        self.chunk_first.append(first)
        self.starts = _appended(self.starts, first, found.starts)
        self.ends = _appended(self.ends, first, found.ends)
        self.entry_keys = _appended(self.entry_keys, first, keys)
        self.entry_times = _appended(self.entry_times, first, start_times)
        self.state = _appended(self.state, first, np.zeros(count, dtype=np.int8))
        # Groups: a new one wherever the end changes (the first end is past every held one).
        new_group = np.ones(count, dtype=np.bool_)
        new_group[1:] = found.ends[1:] != found.ends[:-1]
        starts_at = ids[new_group]
        self.group = _appended(self.group, first, self.groups + np.cumsum(new_group) - 1)
        self.group_first = _appended(self.group_first, self.groups, starts_at)
        sizes = np.diff(np.append(starts_at, first + count))
        self.group_left = _appended(self.group_left, self.groups, sizes)
        self.size += count
        self.groups += len(starts_at)
        # The indexes: one insertion each (the new entries in their own order first).
        # (a new entry's number is above every held one: it goes after its key's)
        by_key = np.argsort(keys, kind="stable")
        at = np.searchsorted(self.key_keys, keys[by_key], side="right")
        self.key_keys = np.insert(self.key_keys, at, keys[by_key])
        self.key_ids = np.insert(self.key_ids, at, ids[by_key])
        new_keys = found.starts if self.unit == "events" else start_times
        order = np.argsort(new_keys, kind="stable")
        held = self.start_keys.astype(new_keys.dtype, copy=False) if len(self.start_keys) else new_keys[:0]
        at = self.head + np.searchsorted(held[self.head :], new_keys[order], side="right")
        self.by_start = np.insert(self.by_start, at, ids[order])
        self.start_keys = np.insert(held, at, new_keys[order])
        return ids

    # -- decisions -----------------------------------------------------------------------

    def _kill(self, block: Blocking, new: Ints) -> Ints:
        """Drop the entries with a blocking event of their key inside their window; every
        earlier entry of a blocked key is decided now and leaves the key index. The
        entries dropped."""
        blocked = np.unique(block.keys)
        lo = np.searchsorted(self.key_keys, blocked)
        counts = np.searchsorted(self.key_keys, blocked, side="right") - lo
        total = int(counts.sum())
        if not total:
            return _NONE
        at = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total, dtype=np.int64)
        held = self.key_ids[at]
        candidates = held[self.state[held] == _UNDECIDED]
        found, first = block.first_after(self.entry_keys[candidates], self.ends[candidates])
        time = block.times[first] if len(block.times) else block.times
        starts, times = self.starts[candidates], self.entry_times[candidates]
        inside = within_reach(self.unit, self.reach, starts, times, block.positions[first], time)
        killed: Ints = candidates[found & inside]
        self.state[killed] = _KILLED
        self.gone += len(killed)
        # The entries found before this push are all decided (killed, or passed below):
        # their ranges leave the index; this push's survivors stay (a later block decides).
        gone = (held < (new[0] if len(new) else self.size)) | (self.state[held] == _KILLED)
        self.key_keys, self.key_ids = np.delete(self.key_keys, at[gone]), np.delete(self.key_ids, at[gone])
        return killed

    def _pass(self) -> Ints:
        """Decide the entries whose window has passed (a prefix of ``by_start``); the
        undecided among them."""
        keys = self.start_keys
        lo, hi = self.head, len(keys)
        while lo < hi:  # binary search with the exact test, on Python numbers
            mid = (lo + hi) // 2
            if self._has_passed(keys[mid].item()):
                lo = mid + 1
            else:
                hi = mid
        prefix = self.by_start[self.head : lo]
        self.head = lo
        passed: Ints = prefix[self.state[prefix] == _UNDECIDED]
        self.state[passed] = _PASSED
        return passed

    def _has_passed(self, start: int | float) -> bool:
        """Whether the stream has seen every event that may lie in the window of a match
        starting at ``start`` (its position, or its time), as :func:`within_reach` tests."""
        if self.unit == "events":
            return self.last_position - int(start) >= int(self.reach)
        last = self.last_time
        if last is None:
            return False
        if isinstance(start, int) and isinstance(last, int):
            return last > min(start + integer_reach(self.reach), _I64_MAX)
        return not float(last) - float(start) <= self.reach

    def _emit(self, decided: Ints) -> Ints:
        """Count ``decided`` off their groups; the passed entries of the groups now fully
        decided, in arrival (end) order."""
        groups = self.group[decided]
        np.subtract.at(self.group_left, groups, 1)
        done = np.unique(groups[self.group_left[groups] == 0])
        if not len(done):
            return np.zeros(0, dtype=np.int64)
        stop = np.append(self.group_first[: self.groups], self.size)[done + 1]
        sizes = stop - self.group_first[done]
        ids = np.repeat(self.group_first[done] - np.cumsum(sizes) + sizes, sizes) + np.arange(
            int(sizes.sum()), dtype=np.int64
        )
        out: Ints = ids[self.state[ids] == _PASSED]
        self.state[out] = _EMITTED
        self.gone += len(out)
        return out

    # -- matches and memory --------------------------------------------------------------

    def _waiting_entries(self) -> Ints:
        state = self.state[: self.size]
        return np.flatnonzero((state == _UNDECIDED) | (state == _PASSED)).astype(np.int64)

    def _gather(self, ids: Ints) -> Matches:
        """The matches of entries ``ids`` (ascending), one Matches."""
        if not len(ids):
            return Matches.empty(self.variables)
        firsts = np.asarray(self.chunk_first, dtype=np.int64)
        chunk = np.searchsorted(firsts, ids, side="right") - 1
        parts = []
        for c in np.unique(chunk):
            mine = ids[chunk == c] - firsts[c]
            parts.append(gather(self.chunks[c], mine))
        return parts[0] if len(parts) == 1 else Matches.concat(parts)

    def _compact_if_sparse(self) -> None:
        """Drop the killed and emitted entries once they outnumber the live ones."""
        total = self.size
        if self.gone <= total - self.gone + COMPACT_SLACK:
            return
        # The live ones again, undecided: the next push finds again that the window of
        # those that had passed has passed.
        live = self._waiting_entries()
        matches, keys, times = self._gather(live), self.entry_keys[live], self.entry_times[live]
        fresh = Horizon(self.unit, self.reach, self.variables, self.last_position, self.last_time)
        fresh._append(matches, keys, times)
        for field in attrs.fields(Horizon):
            setattr(self, field.name, getattr(fresh, field.name))


def _appended(array: npt.NDArray[Any], size: int, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``array`` holding ``values`` after its first ``size`` items: the same array if it has
    room, else one twice as large (amortized O(1) per item); in ``values``' dtype if they
    differ (int times, then float ones)."""
    if array.dtype != values.dtype:
        array = array.astype(values.dtype)
    need = size + len(values)
    if need > len(array):
        grown = np.empty(max(2 * len(array), need, 64), dtype=array.dtype)
        grown[:size] = array[:size]
        array = grown
    array[size:need] = values
    return array


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
