"""Incremental evaluation of a plan: :class:`Stream` (push batches, get new matches).

Per batch the stream does, once, what every automaton family needs: ingestion, the atom
bits of each event (:mod:`pycel.runtime.predicates`), run keys (:mod:`pycel.runtime.keys`)
and window starts (:mod:`pycel.runtime.windows`). It hands them to its *runner*
(:mod:`pycel.runtime.runners`, chosen by the plan's family), which advances the automaton
in one Numba call and returns the matches that end in the batch; then the stream maps
them to global positions and applies post-filters, projection and limit.

Example::

    stream = pycel.compile(pycel.seq(Sell, Buy).within(events=100)).stream()
    stream.push(batch1); stream.push(batch2)     # new matches per batch
    saved = stream.snapshot(); stream = pycel.Stream.restore(saved)
"""

from __future__ import annotations

import copy
import time
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.batch import not_held
from pycel.data.ingest import DEFAULT_TYPE_COLUMN, EventBatch, check_input_columns, to_batch
from pycel.data.matches import Matches, take
from pycel.errors import DataError, ResourceError
from pycel.jit.dedupe import unique_matches
from pycel.jit.residual import Residual
from pycel.language.expr import Arith, Expr
from pycel.limits import MAX_POSITION
from pycel.plan.planner import Plan
from pycel.plan.postfilter import PostFilters
from pycel.runtime.horizon import Blocking, Horizon, Lookback
from pycel.runtime.keys import TupleIds, run_keys
from pycel.runtime.postfilter import Tail, limit_per_end, passing
from pycel.runtime.postfilter import apply as apply_post_filters
from pycel.runtime.predicates import atom_bits, columns_read_by
from pycel.runtime.residual import Pruning
from pycel.runtime.runners import PreparedBatch, RawMatches, new_runner
from pycel.runtime.runners.windowed import choose
from pycel.runtime.snapshot.state import decode, encode
from pycel.runtime.windows import count_window_starts, time_window_starts, window_reach, window_times

Ints = npt.NDArray[np.int64]


class Stream:
    """Incremental evaluation: :meth:`push` batches in stream order, get new matches.

    A batch that raises (bad data, time going backwards) changes nothing; the stream
    continues as if it had not been pushed. A push that runs out of memory raises
    :class:`pycel.ResourceError`, and so does every later push and snapshot.
    """

    #: Post-filter mode: the columns of the events a future match may include.
    post_tail: Tail | None = None
    #: Why the stream cannot go on (a push ran out of memory), or None.
    failed: str | None = None

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.runner = new_runner(plan)
        self.schema = plan.schema.copy()
        self.offset = 0
        self.last_time: int | float | None = None  # an int for integer times (exact)
        self.tail_pos = np.zeros(0, dtype=np.int64)
        self.tail_time = np.zeros(0, dtype=np.int64)  # float64 once float times arrive
        # Multi-column keys: tuple → id, forgotten once the tuple left every window.
        self.key_tuples = TupleIds()
        self.seconds = 0.0  # time spent in push, for reports
        # Sub-stream mode (push(..., positions=...)): the global position of the events at
        # local positions global_base, global_base + 1, ...; None until then.
        self.global_map: Ints | None = None
        self.global_base = 0
        # A pattern that ends in an absence: its matches wait here until their window passed.
        reach = window_reach(plan, plan.schema)
        self.horizon = Horizon.of(plan, reach) if plan.nfa.end_atoms else None
        # A pattern that starts with an absence: its recent events, as far as a window reaches.
        self.lookback = Lookback.of(plan, reach) if plan.nfa.start_atoms else None
        self.closed = False

    # -- per batch ---------------------------------------------------------------------
    def push(
        self,
        data: Any,
        *,
        type_column: str = DEFAULT_TYPE_COLUMN,
        positions: npt.ArrayLike | None = None,
    ) -> Matches:
        """Evaluate the next events; return the matches that end in them.

        ``positions``: the events' global stream positions, integers in 0..2**62 - 1
        (:data:`pycel.limits.MAX_POSITION`), strictly increasing and after every position
        pushed before, when this stream evaluates a sub-stream (e.g. the
        events of one partition key, as Spark runs them). Contiguity and the run are then
        those of the sub-stream, while count windows and the returned matches use these
        positions. A stream given positions once needs them on every push.

        Example: ``stream.push([Sell(name="INTC", price=10.0), Buy(name="QQQ", price=9.5)])``
        """
        began = time.perf_counter()
        if self.closed:
            raise DataError("this stream is closed (Stream.close): open a new one to push more events")
        if self.failed is not None:
            raise ResourceError(self.failed)
        reads = columns_read_by(self.plan)
        # Only the attributes the query reads are encoded; the others are checked and kept
        # as given (decoded when a match's events are shown).
        batch = data if isinstance(data, EventBatch) else to_batch(
            data, self.schema.copy(), type_column=type_column, offset=self.offset, columns=reads
        )
        if isinstance(data, EventBatch) and data.offset != self.offset:
            raise DataError(f"batch starts at position {data.offset}, expected {self.offset}")
        check_input_columns(batch.input_columns, reads)
        # A post-filter's integer overflow is found only once the matches are enumerated,
        # after the automaton advanced: keep the state to put back (a failed push changes
        # nothing). Only queries whose post-filters do integer arithmetic pay for it.
        # An in-memory copy (arrays copied whole), not a snapshot: no encoding or hashing.
        saved = self._state_copy() if _post_filters_may_overflow(self.plan.post_filters) else None
        try:
            return self._push(batch, positions, began)
        except DataError:
            if saved is not None:
                self.__dict__.update(saved)
            raise
        except MemoryError as err:  # (numpy's, from an array that grows; not our own)
            if isinstance(err, ResourceError):
                raise
            self.failed = (
                f"a push ran out of memory ({err}); the stream's state is partly advanced, so "
                "it cannot go on or be snapshotted (the matches of earlier pushes stand). A "
                "pattern with + (or a trend) and a wide or no window can have exponentially "
                "many matches: add a window, limit(n), a selection strategy or filters"
            )
            raise ResourceError(self.failed) from None

    def _state_copy(self) -> dict[str, Any]:
        """A deep copy of the evaluation state (the plan is shared, not copied: a push
        never changes it)."""
        state = {k: v for k, v in self.__dict__.items() if k != "plan"}
        return copy.deepcopy(state, memo={id(self.plan): self.plan})

    def _push(self, batch: EventBatch, positions: npt.ArrayLike | None, began: float) -> Matches:
        """:meth:`push` of a checked batch."""
        plan = self.plan
        gpos = self._check_positions(positions, len(batch))
        starts, tail, times = self._window_starts(batch, gpos)
        keys, key_valid = run_keys(plan, batch, self.key_tuples)
        whole = plan.outputs_filtered
        post_tail, residual = self._post_tail_and_pruning(batch, gpos)
        prepared = PreparedBatch(
            batch=batch,
            offset=self.offset,
            bits=atom_bits(plan.nfa.atoms, batch),
            keys=keys,
            key_valid=key_valid,
            window_starts=starts,
            # Post-filters and window absences see whole matches: project and limit after them.
            projection_mask=(1 << len(plan.variables)) - 1 if whole else plan.projection_mask,
            limit=-1 if whole else plan.limit,
            consume=plan.consume,
            residual=residual,
        )
        raw = self.runner.advance(prepared)
        if residual is not None:
            self._pruning().record(residual)
        edges = plan.nfa.end_atoms or plan.nfa.start_atoms
        waiting = self._window_absence_inputs(prepared, raw, gpos, times) if edges else None
        self.schema = batch.schema  # accepted
        self.offset += len(batch)
        return self._finish(batch, gpos, starts, tail, raw, began, post_tail, waiting)

    def _post_tail_and_pruning(
        self, batch: EventBatch, gpos: Ints | None
    ) -> tuple[Tail | None, Residual | None]:
        """With post-filters: the tail with ``batch`` appended, and the programs the
        enumerator prunes with (pycel.runtime.residual; None if no conjunct can, or the
        runner's loop does not prune)."""
        post = self.plan.post_filters
        if post is None:
            return None, None
        n = len(batch)
        at = gpos if gpos is not None else np.arange(self.offset, self.offset + n, dtype=np.int64)
        tail = (self.post_tail or Tail()).extended(batch, at.astype(np.int64), post.attributes)
        if not self.runner.prunes_post_filters:
            return tail, None
        # The tail's rows are the events pushed since the first one it keeps, in order, so
        # row r holds the event at local position base + r.
        base = self.offset + n - len(tail.positions)
        return tail, self._pruning().program(tail, batch.schema, base, exact=self.plan.consume != 0)

    def _pruning(self) -> Pruning:
        """The post-filters' pruning state (made at first use: also after a restore)."""
        pruning: Pruning | None = self.__dict__.get("pruning")
        if pruning is None:
            post, plan = self.plan.post_filters, self.plan
            assert post is not None
            pruning = self.__dict__["pruning"] = Pruning(post, plan.variables, plan.nfa)
        return pruning

    def _finish(
        self, batch: EventBatch, gpos: Ints | None, starts: Ints, tail: Any, raw: RawMatches, began: float,
        post_tail: Tail | None = None, waiting: _WindowAbsenceInputs | None = None,
    ) -> Matches:  # fmt: skip
        """The batch's matches (global positions, post-filters, window absences,
        projection, limit), and the bookkeeping after an accepted batch."""
        plan = self.plan
        post = plan.post_filters
        if plan.window_unit is not None and len(starts):
            self._forget_keys(int(starts[-1]))
        if tail is not None:
            self.tail_pos, self.tail_time, self.last_time = tail
        m_starts, m_ends, pos = raw.starts, raw.ends, raw.positions
        source: Any = batch
        if gpos is not None:
            m_starts, m_ends, pos, source = self._to_global(gpos, m_starts, m_ends, pos, batch)
        matches = Matches(m_starts, m_ends, raw.offsets, raw.var_ids, pos, plan.variables, source)
        if waiting is not None:
            matches = self._after_window_absences(matches, waiting, batch, post_tail)
        elif post is not None:
            assert post_tail is not None  # _post_tail_and_pruning made it
            # A windowed strategy chooses among the outputs that pass: project after it.
            windowed = plan.family == "windowed"
            mask = (1 << len(plan.variables)) - 1 if windowed else plan.projection_mask
            matches, self.post_tail = apply_post_filters(
                post, post_tail, batch, matches, self.schema, self._post_keep_from(), mask
            )
            if windowed:
                matches = choose(plan.strategy, matches, plan.projection_mask, plan.limit)
            elif plan.projected:  # otherwise the enumerator drops repeats itself
                keep = unique_matches(
                    matches.starts, matches.ends, matches.offsets, matches.var_ids, matches.positions
                )
                if not keep.all():
                    matches = take(matches, keep)
            if plan.limit >= 0 and not windowed:
                matches = limit_per_end(matches, plan.limit)
        self.seconds += time.perf_counter() - began
        return matches

    def _window_absence_inputs(
        self, prepared: PreparedBatch, raw: RawMatches, gpos: Ints | None, times: npt.NDArray[Any]
    ) -> _WindowAbsenceInputs:
        """What the absences that start or end the pattern need of a batch, read before
        the stream moves on: each new output's run key and its start's and end's times
        (``times``: the batch's window times; empty for a count window), and the batch's
        events of each kind of absence."""
        plan, batch = self.plan, prepared.batch
        n = len(batch)
        at = gpos if gpos is not None else np.arange(self.offset, self.offset + n, dtype=np.int64)
        start_times: npt.NDArray[Any] = np.zeros(len(raw.starts), dtype=np.int64)
        end_times: npt.NDArray[Any] = start_times
        if plan.window_unit != "events":
            # A start lies inside its end's window: in the time tail or in this batch.
            all_t = np.concatenate([self.tail_time.astype(times.dtype, copy=False), times])
            all_p = np.concatenate([self.tail_pos, np.arange(self.offset, self.offset + n, dtype=np.int64)])
            start_times = all_t[np.searchsorted(all_p, raw.starts)]
            end_times = times[raw.ends - self.offset]

        def blocking(atoms: tuple[int, ...]) -> Blocking:
            mask = np.int64(sum(1 << a for a in atoms))
            rows = np.flatnonzero((prepared.bits & mask != 0) & prepared.key_valid)
            return Blocking(
                at[rows],
                prepared.keys[rows],
                times[rows] if len(times) else times,
                int(at[-1]) if n else None,
                times[-1].item() if len(times) else None,
            )

        keys = prepared.keys[raw.ends - self.offset]
        return _WindowAbsenceInputs(
            keys, start_times, end_times, blocking(plan.nfa.start_atoms), blocking(plan.nfa.end_atoms)
        )

    def _after_window_absences(
        self, matches: Matches, given: _WindowAbsenceInputs, batch: EventBatch, post_tail: Tail | None
    ) -> Matches:
        """The matches with no event of an absence that starts the pattern before them
        inside their window, and (the horizon holds the others) whose window has passed
        with no event of an absence that ends it after them; chosen, projected, limited."""
        post = self.plan.post_filters
        keep = np.ones(len(matches), dtype=np.bool_)
        if post is not None:
            assert post_tail is not None  # _post_tail_and_pruning made it
            keep_from = self._post_keep_from()
            keep, self.post_tail = passing(post, post_tail, batch, matches, self.schema, keep_from)
        if self.lookback is not None:
            keep[keep] = self.lookback.admits(
                take(matches, keep), given.keys[keep], given.end_times[keep], given.before
            )
        matches = take(matches, keep)
        if self.horizon is not None:
            found = matches
            matches = self.horizon.advance(found, given.keys[keep], given.start_times[keep], given.after)
            matches = attrs.evolve(matches, source=found.source)
        return self._chosen(matches)

    def _chosen(self, emitted: Matches) -> Matches:
        """Whole matches by end → the strategy's choice (windowed), projection, limit."""
        plan = self.plan
        strategy = plan.strategy if plan.family == "windowed" else None
        return choose(strategy, emitted, plan.projection_mask, plan.limit)

    def close(self) -> Matches:
        """End the stream: return the matches still waiting for their window to pass (a
        pattern that ends in an absence; no later event can drop them now). Later pushes
        raise. Without such an absence nothing waits: the result is empty.

        Example::

            late = seq(order, absent(payment)).within(minutes=30, on=Order.time)
            stream = pycel.compile(late).stream()
            stream.push(events)        # the orders whose 30 minutes have passed unpaid
            stream.close()             # and those still unpaid when the events end
        """
        self.closed = True
        if self.horizon is None:
            return Matches.empty(self.plan.variables)
        return self._chosen(self.horizon.close())

    def _post_keep_from(self) -> int:
        """The first position a future match may include (what the post-filter tail keeps):
        all without a window (the tail then grows with the stream)."""
        plan = self.plan
        if self.global_map is not None:  # sub-stream: _to_global kept what a window may reach
            return int(self.global_map[0]) if len(self.global_map) else 0
        if plan.window_unit == "events":
            return self.offset - int(plan.window_size)
        if plan.window_unit is not None and len(self.tail_pos):
            return int(self.tail_pos[0])
        return 0

    def _check_positions(self, positions: npt.ArrayLike | None, n: int) -> Ints | None:
        """``positions`` as int64, checked against the stream's mode and past positions."""
        if positions is None:
            if self.global_map is not None:
                raise DataError("this stream evaluates a sub-stream: push(..., positions=) is required")
            return None
        if self.global_map is None and self.offset > 0:
            raise DataError("positions= must be given from the first push of a stream on")
        given = np.asarray(positions)
        if given.shape != (n,):
            raise DataError(f"positions= has shape {given.shape}, expected ({n},)")
        if n == 0:
            return np.zeros(0, np.int64)
        if given.dtype.kind not in "iu":  # not floats: 1.5 is no position
            raise DataError(f"positions= must be integers, got {given.tolist()[0]!r} ({given.dtype})")
        outside = np.flatnonzero((given < 0) | (given > MAX_POSITION))
        if len(outside):
            k = int(outside[0])
            raise DataError(f"position {given[k]} is outside 0..{MAX_POSITION}", row=k)
        gpos = given.astype(np.int64)
        last = self.global_map[-1] if self.global_map is not None and len(self.global_map) else -1
        prev = np.concatenate([[last], gpos[:-1]])
        bad = np.flatnonzero(gpos <= prev)
        if len(bad):
            k = int(bad[0])
            raise DataError(f"positions must increase: {gpos[k]} after {prev[k]}", row=k)
        return gpos

    def _known_positions(self, gpos: Ints, batch: EventBatch) -> tuple[Ints, int]:
        """Global positions of the local positions base, base + 1, ... through ``gpos``."""
        if self.global_map is None:
            return gpos, batch.offset
        return np.concatenate([self.global_map, gpos]), self.global_base

    def _to_global(
        self, gpos: Ints, starts: Ints, ends: Ints, pos: Ints, batch: EventBatch
    ) -> tuple[Ints, Ints, Ints, Any]:
        """Map local positions to global ones; keep only the map a future match can use."""
        if not len(gpos):
            return starts, ends, pos, _SubStreamEvents(batch, gpos)
        full, base = self._known_positions(gpos, batch)
        starts, ends, pos = full[starts - base], full[ends - base], full[pos - base]
        plan = self.plan
        keep_from = base  # no window: any past event may still match
        if plan.window_unit == "events":
            keep_from = base + int(np.searchsorted(full, full[-1] - np.int64(plan.window_size)))
        elif plan.window_unit is not None and len(self.tail_pos):
            keep_from = int(self.tail_pos[0])
        self.global_map, self.global_base = full[keep_from - base :], keep_from
        return starts, ends, pos, _SubStreamEvents(batch, gpos)

    def _window_starts(self, batch: EventBatch, gpos: Ints | None) -> tuple[Ints, Any, npt.NDArray[Any]]:
        """The first position inside each event's window, the new time tail, and the
        events' window times (empty without a time window). Raises DataError when time
        goes backwards."""
        plan = self.plan
        n = len(batch)
        positions = np.arange(self.offset, self.offset + n, dtype=np.int64)
        no_times = np.zeros(0, dtype=np.int64)
        if plan.window_unit is None:
            return np.zeros(n, dtype=np.int64), None, no_times
        if plan.window_unit == "events":
            if gpos is None:
                return count_window_starts(positions, plan.window_size), None, no_times
            # Count windows are global: the first local position whose global position is
            # inside the window (everything before global_base is outside every new window).
            known, base = self._known_positions(gpos, batch)
            first = np.searchsorted(known, count_window_starts(gpos, plan.window_size), side="left")
            return first.astype(np.int64) + np.int64(base), None, no_times
        times = window_times(plan, batch, self.last_time)
        tail_pos, tail_time = self.tail_pos, self.tail_time
        starts, tail = time_window_starts(plan, batch, self.schema, positions, tail_pos, tail_time, times)
        return starts, tail, times

    def _forget_keys(self, window_start: int) -> None:
        """Forget the key tuples that left every window (memory follows the window). Not
        when the runner's choices look at runs before the window (LAST, NEXT, MAX without
        a window, which never forget anyway)."""
        self.runner.forget(window_start)
        if not self.runner.looks_before_window:
            self.key_tuples.forget(window_start)

    # -- state ---------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole evaluation state as bytes of pycel's snapshot format (data only:
        arrays, scalars and the plan as data; versioned and checksummed, see
        docs/snapshots.md); :meth:`restore` continues from it.

        Example: ``again = pycel.Stream.restore(stream.snapshot())``
        """
        if self.failed is not None:
            raise ResourceError(self.failed)
        # The post-filters' observed selectivity only orders their tries: a restored
        # stream learns it again.
        fields = {k: v for k, v in self.__dict__.items() if k not in ("plan", "runner", "pruning")}
        return encode(self.plan, fields, self.runner)

    @classmethod
    def restore(cls, data: bytes) -> Stream:
        """A stream that continues exactly where the snapshotted one stopped.

        Raises :class:`DataError` for anything but an intact snapshot of this format
        (truncated, corrupted, foreign or older bytes); never runs code from ``data``.
        """
        plan, fields, runner = decode(data)
        stream = cls.__new__(cls)
        stream.plan, stream.runner = plan, runner
        stream.__dict__.update(fields)
        return stream

    def stats(self) -> dict[str, int]:
        """Store sizes: nodes still inside the window, allocated capacity, H entries (and
        the MAX strategy's pair arena; the matches waiting for their window and the
        remembered absent events of an absence at the pattern's end or start).

        Example: ``stream.stats()["live_extend_nodes"]``
        """
        plan = self.plan
        lo = self.offset - 1 - int(plan.window_size) if plan.window_unit == "events" else 0
        found = self.runner.stats(lo)
        if self.horizon is not None:
            found["waiting_matches"] = self.horizon.waiting
        if self.lookback is not None:
            found["recent_absent_events"] = len(self.lookback.recent.positions)
        return found


def _post_filters_may_overflow(post: PostFilters | None) -> bool:
    """Whether a post-filter does integer arithmetic (+, -, *, %), so evaluating it on a
    match may raise a :class:`DataError` for leaving int64."""

    def has_int_arith(e: Expr[Any]) -> bool:
        if isinstance(e, Arith) and e.dtype == "int":
            return True
        return any(has_int_arith(c) for c in e.children())

    return post is not None and any(has_int_arith(c) for c in post.conjuncts)


@attrs.frozen
class _WindowAbsenceInputs:
    """A batch's new outputs' run keys, start and end times; its events of absences that
    start the pattern (``before``) and that end it (``after``)."""

    keys: Ints
    start_times: npt.NDArray[Any]
    end_times: npt.NDArray[Any]
    before: Blocking
    after: Blocking


class _SubStreamEvents:
    """The events of a batch pushed with ``positions=``, looked up by global position."""

    def __init__(self, batch: EventBatch, positions: Ints) -> None:
        self.batch, self.positions = batch, positions

    def event(self, position: int) -> tuple[str, dict[str, Any]]:
        k = int(np.searchsorted(self.positions, position))
        if k == len(self.positions) or self.positions[k] != position:
            raise not_held(position)
        return self.batch.row(k)
