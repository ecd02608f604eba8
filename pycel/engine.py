"""The engine facade: ``pycel.compile(pattern)`` → a reusable, picklable query.

The query owns plain data only (the labeled automaton, the schema, the clauses); each
:class:`Stream` owns the runtime state (node store, H, determinized tables, string
dictionary, window bookkeeping) and can be snapshot to bytes and restored.

Per batch, Python does the column-wise work (ingestion, predicate bits, class ids,
partition keys, window starts) and one call to the Numba loop does the per-event work.

Example::

    query = pycel.compile(pycel.seq(Sell, Buy).within(events=100))
    matches = query.run(events)                  # Matches: iterable of Match
    stream = query.stream()
    stream.push(batch1); stream.push(batch2)     # new matches per batch
    saved = stream.snapshot(); stream = pycel.Stream.restore(saved)
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.ingest import (
    DEFAULT_TYPE_COLUMN,
    EventBatch,
    Schema,
    check_input_columns,
    time_values,
    to_batch,
)
from pycel.data.matches import Matches, take
from pycel.errors import DataError, UnsupportedError
from pycel.jit.dedupe import unique_matches
from pycel.jit.last import run_batch_last
from pycel.jit.maximal import new_pair_arena, run_batch_max
from pycel.jit.order import new_order
from pycel.jit.pcea import new_arena, run_batch_hcq
from pycel.jit.runtime import live_counts, run_batch
from pycel.jit.store import C_MAX_DEPTH, new_store
from pycel.language.checks import check, event_types
from pycel.language.clauses import QuerySpec, split_query
from pycel.language.events import Event, event_name
from pycel.language.expr import Arith, Expr
from pycel.limits import MAX_VARIABLES
from pycel.plan.automaton import AtomState, Nfa, build_nfa
from pycel.plan.conjunction import expand_conjunctions
from pycel.plan.determinize import Dfa
from pycel.plan.hcq import HcqPlan, plan_hcq, transition_arrays
from pycel.plan.joins import JoinKey, plan_joins
from pycel.plan.maximal import MaxDfa
from pycel.plan.postfilter import PostFilters, Tail, check_clauses, limit_per_end, split_post_filters
from pycel.plan.postfilter import apply as apply_post_filters
from pycel.runtime.keys import TupleIds, join_values, key_values
from pycel.runtime.predicates import ClassTable, atom_bits, columns_read_by

_CONSUME = {"none": 0, "any": 1, "partition": 2}
_STRATEGIES = ("all", "any", "strict", "last", "next", "max")


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _post_filters_may_overflow(post: PostFilters | None) -> bool:
    """Whether a post-filter does integer arithmetic (+, -, *, %), so evaluating it on a
    match may raise a :class:`DataError` for leaving int64."""

    def has_int_arith(e: Expr[Any]) -> bool:
        if isinstance(e, Arith) and e.dtype == "int":
            return True
        return any(has_int_arith(c) for c in e.children())

    return post is not None and any(has_int_arith(c) for c in post.conjuncts)


class CompiledQuery:
    """A compiled pattern: run it on data, or open an incremental :meth:`stream`.

    Picklable (it holds plain data only), so it can be shipped to Spark executors.
    """

    #: The where(..., post_filter=True) predicates, checked on complete matches (or None).
    post_filters: PostFilters | None = None
    #: The parallelized automaton of a hierarchical conjunction (pycel/plan/hcq.py), or None.
    hcq: HcqPlan | None = None

    def __init__(
        self, spec: QuerySpec, nfa: Nfa, schema: Schema, text: str, join_keys: tuple[JoinKey, ...] = ()
    ) -> None:
        self.spec = spec
        self.join_keys = join_keys
        self.nfa = nfa
        self.schema = schema
        self.text = text
        window = spec.window
        self.window_unit = window.unit if window is not None else None
        self.window_size = window.size if window is not None else 0.0
        self.time_attribute = window.on if window is not None else None
        self.partition = spec.partition
        self.variables = nfa.variables
        kept = spec.select if spec.select is not None else nfa.variables
        self.projection_mask = sum(1 << k for k, v in enumerate(nfa.variables) if v in kept)
        self.projected = spec.select is not None
        self.limit = spec.limit if spec.limit is not None else -1
        self.consume = _CONSUME[spec.consume]
        if join_keys and self.consume == _CONSUME["partition"] and not spec.partition:
            self.consume = _CONSUME["any"]  # one partition: the stream (the keys are joins)
        self.spec_strategy = spec.strategy

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["spec"] = None  # the AST references user classes; the rest is plain data
        return state

    def __repr__(self) -> str:
        return f"CompiledQuery({self.text})"

    def stream(self) -> Stream:
        """A new incremental evaluator at position 0."""
        return Stream(self)

    def run(self, data: Any, *, type_column: str = DEFAULT_TYPE_COLUMN) -> Matches:
        """All matches of the query over ``data`` (events, dicts, pandas or Arrow).

        Example: ``pycel.compile(seq(A, B)).run(df).to_pandas()``
        """
        return self.stream().push(data, type_column=type_column)


def compile(pattern: object, *, types: Iterable[type[Event]] = ()) -> CompiledQuery:
    """Check and compile ``pattern`` for the engine; raise a clear error if it cannot run.

    ``types``: extra event types the data may carry besides those of the pattern.

    Example::

        query = pycel.compile(pycel.seq(Sell, Buy).within(events=100))
    """
    spec = split_query(pattern)
    check(spec)
    if spec.strategy not in _STRATEGIES:
        raise UnsupportedError(f"selection strategy {spec.strategy!r} is not supported by the engine yet")
    body, post = split_post_filters(spec.body)
    if post:
        check_clauses(spec.strategy, spec.consume)
    try:
        # AND runs as an OR of interleavings (pycel/plan/conjunction.py); checks saw the original.
        planned, join_keys = plan_joins(expand_conjunctions(body))
    except UnsupportedError:
        # Nested join classes over an AND of single events: the parallelized automaton.
        hcq = plan_hcq(body, spec.partition) if _hcq_clauses_ok(spec) else None
        if hcq is None:
            raise
        return _compile_hcq(spec, hcq, post, types, repr(pattern))
    body = planned
    # STRICT keeps the matches whose positions form an interval of the (partition's)
    # stream: exactly the matches of the pattern with every ; and + made contiguous.
    nfa = build_nfa(body, strict=spec.strategy == "strict")
    if len(nfa.variables) > MAX_VARIABLES:
        raise UnsupportedError(f"the engine supports at most {MAX_VARIABLES} variables per pattern")
    if join_keys:
        _check_join_clauses(spec, nfa)
    schema = Schema.for_types([*event_types(spec.body), *types])
    query = CompiledQuery(spec, nfa, schema, repr(pattern), join_keys)
    query.post_filters = PostFilters.of(post) if post else None
    return query


def _hcq_clauses_ok(spec: QuerySpec) -> bool:
    """The clauses the parallelized automaton supports: windows, PARTITION BY (as a join
    class over every atom), SELECT and LIMIT."""
    return spec.strategy in ("all", "any") and spec.consume == "none"


def _compile_hcq(
    spec: QuerySpec, hcq: HcqPlan, post: tuple[Any, ...], types: Iterable[type[Event]], text: str
) -> CompiledQuery:
    variables = tuple(sorted(a.var for a in hcq.atoms))
    atoms = tuple(
        AtomState(k, event_name(a.event), False, None, a.filters, frozenset([a.var]))
        for k, a in enumerate(hcq.atoms)
    )
    everything = frozenset(range(len(atoms)))
    nfa = Nfa(atoms, everything, everything, {k: frozenset() for k in everything}, variables)
    schema = Schema.for_types([*event_types(spec.body), *types])
    query = CompiledQuery(spec, nfa, schema, text)
    query.hcq = hcq
    query.post_filters = PostFilters.of(post) if post else None
    return query


def _check_join_clauses(spec: QuerySpec, nfa: Nfa) -> None:
    """Reject the clauses whose meaning depends on the partition when joins are run keys
    (a run key is finer than the partition: adjacency and consumption are per partition)."""
    if nfa.contiguous or spec.strategy == "strict":
        raise UnsupportedError(
            "contiguity (:, :+, STRICT) together with an equality join is not supported by the "
            "engine; use PARTITION BY for the correlation, or where(..., post_filter=True)"
        )
    if spec.consume == "partition" and spec.partition:
        raise UnsupportedError(
            "CONSUME BY PARTITION together with an equality join is not supported by the engine"
        )


class Stream:
    """Incremental evaluation: :meth:`push` batches in stream order, get new matches.

    A batch that raises (bad data, time going backwards) changes nothing; the stream
    continues as if it had not been pushed.
    """

    #: Post-filter mode: the columns of the events a future match may include.
    post_tail: Tail | None = None

    def __init__(self, query: CompiledQuery) -> None:
        self.query = query
        self.schema = query.schema.copy()
        self.classes = ClassTable()
        self.dfa = Dfa(query.nfa)
        self.E, self.U, self.HT, self.ctr = new_store()
        if query.hcq is not None:
            self.E = new_arena()
        self.shape_tuples: dict[int, TupleIds] = {}  # hcq: per state, its tuple keys
        self.offset = 0
        self.last_time: int | float | None = None  # an int for integer times (exact)
        self.tail_pos = np.zeros(0, dtype=np.int64)
        self.tail_time = np.zeros(0, dtype=np.int64)  # float64 once float times arrive
        # Multi-column keys: tuple → id, forgotten once the tuple left every window.
        self.key_tuples = TupleIds()
        self.order = new_order()  # NEXT: the best sets in strategy order (pycel.jit.order)
        self.max_dfa = MaxDfa(query.nfa) if query.spec_strategy == "max" else None
        self.pairs = new_pair_arena()  # MAX: every key's live pairs (pycel.jit.maximal)
        self.seconds = 0.0  # time spent in push, for reports
        # Sub-stream mode (push(..., positions=...)): the global position of the events at
        # local positions global_base, global_base + 1, ...; None until then.
        self.global_map: npt.NDArray[np.int64] | None = None
        self.global_base = 0

    # -- per batch ---------------------------------------------------------------------
    def push(
        self,
        data: Any,
        *,
        type_column: str = DEFAULT_TYPE_COLUMN,
        positions: npt.ArrayLike | None = None,
    ) -> Matches:
        """Evaluate the next events; return the matches that end in them.

        ``positions``: the events' global stream positions, strictly increasing and after
        every position pushed before, when this stream evaluates a sub-stream (e.g. the
        events of one partition key, as Spark runs them). Contiguity and the run are then
        those of the sub-stream, while count windows and the returned matches use these
        positions. A stream given positions once needs them on every push.
        """
        began = time.perf_counter()
        batch = data if isinstance(data, EventBatch) else to_batch(
            data, self.schema.copy(), type_column=type_column, offset=self.offset
        )
        if isinstance(data, EventBatch) and data.offset != self.offset:
            raise DataError(f"batch starts at position {data.offset}, expected {self.offset}")
        check_input_columns(batch.input_columns, columns_read_by(self.query))
        # A post-filter's integer overflow is found only once the matches are enumerated,
        # after the automaton advanced: keep the state to put back (a failed push changes
        # nothing). Only queries whose post-filters do integer arithmetic pay for it.
        # An in-memory copy (arrays copied whole), not a snapshot: no encoding or hashing.
        saved = self._state_copy() if _post_filters_may_overflow(self.query.post_filters) else None
        try:
            return self._push(batch, positions, began)
        except DataError:
            if saved is not None:
                self.__dict__.update(saved)
            raise

    def _state_copy(self) -> dict[str, Any]:
        """A deep copy of the evaluation state (the compiled query is shared, not copied:
        a push never changes it)."""
        state = {k: v for k, v in self.__dict__.items() if k != "query"}
        return copy.deepcopy(state)

    def _push(self, batch: EventBatch, positions: npt.ArrayLike | None, began: float) -> Matches:
        """:meth:`push` of a checked batch."""
        gpos = self._check_positions(positions, len(batch))
        lows, tail = self._window_starts(batch, gpos)
        q = self.query
        post = q.post_filters
        if q.hcq is not None:
            bits = atom_bits(q.nfa.atoms, batch)
            arrays = transition_arrays(q.hcq)
            keys, key_valid, same_ok = self._combo_keys(batch, q.hcq, arrays)
            self.schema = batch.schema  # accepted
            label_masks = np.array(
                [sum(1 << q.variables.index(q.hcq.atoms[i].var) for i in t.reads) for t in q.hcq.transitions],
                dtype=np.int64,
            )
            self.E, self.U, self.HT, se, off, var, pos = run_batch_hcq(
                self.E, self.U, self.HT, self.ctr, bits, keys, key_valid, same_ok, lows,
                np.int64(self.offset), arrays["mask"], arrays["dst"], arrays["final"], arrays["same"],
                arrays["nkids"], arrays["kids"], arrays["kid_combo"], arrays["dst_combo"], label_masks,
                np.int64(q.projection_mask if post is None else (1 << len(q.variables)) - 1),
                np.int64(q.limit if post is None else -1),
            )
        else:
            keys, key_valid = self._keys(batch)
            class_ids = self.classes.classify(atom_bits(q.nfa.atoms, batch))
            # All checks passed: from here on the batch is accepted.
            self.schema = batch.schema
            se, off, var, pos = self._run_automaton(class_ids, keys, key_valid, lows, post)
        self.offset += len(batch)
        return self._finish(batch, gpos, lows, tail, se, off, var, pos, began)

    def _run_automaton(
        self, class_ids: Any, keys: Any, key_valid: Any, lows: Any, post: Any
    ) -> tuple[Any, ...]:
        """One call of the ALL, LAST or NEXT loop over the determinized automaton, or of
        the MAX loop over the pair automaton."""
        q = self.query
        clauses = (  # post-filters see whole matches: project and limit after filtering
            np.int64(q.projection_mask if post is None else (1 << len(q.variables)) - 1),
            np.int64(q.limit if post is None else -1),
            np.int64(q.consume),
        )
        if q.spec_strategy == "max":
            return self._run_max(class_ids, keys, key_valid, lows, clauses)
        self.dfa.expand(self.classes.bits)
        t = self.dfa.tables()
        args = (
            self.E, self.U, self.HT, self.ctr,
            class_ids, keys, key_valid, lows, np.int64(self.offset),
            t.ptr, t.src, t.label, t.dst, t.final, t.extends, t.label_masks,
            *clauses,
            t.aptr, t.asrc, t.alabel, t.adst, t.extends_gap, self.dfa.contiguous,
        )
        if q.spec_strategy in ("last", "next"):
            *out, self.order = run_batch_last(*args, self.order, q.spec_strategy == "next")
            self.E, self.U, self.HT, se, off, var, pos = out
        else:
            self.E, self.U, self.HT, se, off, var, pos = run_batch(*args)
        return se, off, var, pos

    def _run_max(
        self, class_ids: Any, keys: Any, key_valid: Any, lows: Any, clauses: tuple[np.int64, ...]
    ) -> tuple[Any, ...]:
        """One call of the MAX loop (``clauses``: projection mask, limit, consumption)."""
        dfa = self.max_dfa
        assert dfa is not None
        dfa.expand(self.classes.bits)
        t = dfa.tables()
        self.E, self.U, self.HT, self.pairs, se, off, var, pos = run_batch_max(
            self.E, self.U, self.HT, self.ctr, self.pairs,
            class_ids, keys, key_valid, lows, np.int64(self.offset),
            t.mark_ptr, t.mark_label, t.mark_dst, t.mark_out, t.skip_dst, t.initial, t.inert,
            np.int64(t.n_pairs), t.label_masks, *clauses,
        )
        return se, off, var, pos

    def _finish(
        self, batch: EventBatch, gpos: Any, lows: Any, tail: Any,
        se: Any, off: Any, var: Any, pos: Any, began: float,
    ) -> Matches:
        """The batch's matches (global positions, post-filters, projection, limit), and
        the bookkeeping after an accepted batch."""
        q = self.query
        post = q.post_filters
        if q.window_unit is not None and len(lows):
            self._forget_keys(int(lows[-1]))
        if tail is not None:
            self.tail_pos, self.tail_time, self.last_time = tail
        starts, ends = se[0::2].copy(), se[1::2].copy()
        source: Any = batch
        if gpos is not None:
            starts, ends, pos, source = self._to_global(gpos, starts, ends, pos, batch)
        matches = Matches(starts, ends, off, var, pos, q.variables, source)
        if post is not None:
            at = gpos if gpos is not None else np.arange(batch.offset, batch.offset + len(batch))
            matches, self.post_tail = apply_post_filters(
                post, self.post_tail or Tail(), batch, at.astype(np.int64), matches, self.schema,
                self._post_keep_from(), q.projection_mask,
            )
            starts, ends, off, var, pos = (
                matches.starts, matches.ends, matches.offsets, matches.var_ids, matches.positions
            )
        if q.projected and post is not None:  # otherwise the enumerator drops repeats itself
            keep = unique_matches(starts, ends, off, var, pos)
            if not keep.all():
                matches = take(matches, keep)
        if post is not None and q.limit >= 0:
            matches = limit_per_end(matches, q.limit)
        self.seconds += time.perf_counter() - began
        return matches

    def _post_keep_from(self) -> int:
        """The first position a future match may include (what the post-filter tail keeps):
        all without a window (the tail then grows with the stream)."""
        q = self.query
        if self.global_map is not None:  # sub-stream: _to_global kept what a window may reach
            return int(self.global_map[0]) if len(self.global_map) else 0
        if q.window_unit == "events":
            return self.offset - int(q.window_size)
        if q.window_unit is not None and len(self.tail_pos):
            return int(self.tail_pos[0])
        return 0

    def _check_positions(self, positions: npt.ArrayLike | None, n: int) -> npt.NDArray[np.int64] | None:
        """``positions`` as int64, checked against the stream's mode and past positions."""
        if positions is None:
            if self.global_map is not None:
                raise DataError("this stream evaluates a sub-stream: push(..., positions=) is required")
            return None
        if self.global_map is None and self.offset > 0:
            raise DataError("positions= must be given from the first push of a stream on")
        gpos = np.asarray(positions, dtype=np.int64)
        if gpos.shape != (n,):
            raise DataError(f"positions= has shape {gpos.shape}, expected ({n},)")
        last = self.global_map[-1] if self.global_map is not None and len(self.global_map) else -1
        prev = np.concatenate([[last], gpos[:-1]])
        bad = np.flatnonzero(gpos <= prev)
        if len(bad):
            k = int(bad[0])
            raise DataError(f"positions must increase: {gpos[k]} after {prev[k]}", row=k)
        return gpos

    def _known_positions(
        self, gpos: npt.NDArray[np.int64], batch: EventBatch
    ) -> tuple[npt.NDArray[np.int64], int]:
        """Global positions of the local positions base, base + 1, ... through ``gpos``."""
        if self.global_map is None:
            return gpos, batch.offset
        return np.concatenate([self.global_map, gpos]), self.global_base

    def _to_global(
        self,
        gpos: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        pos: npt.NDArray[np.int64],
        batch: EventBatch,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], Any]:
        """Map local positions to global ones; keep only the map a future match can use."""
        if not len(gpos):
            return starts, ends, pos, _SubStreamEvents(batch, gpos)
        full, base = self._known_positions(gpos, batch)
        starts, ends, pos = full[starts - base], full[ends - base], full[pos - base]
        q = self.query
        keep_from = base  # no window: any past event may still match
        if q.window_unit == "events":
            keep_from = base + int(np.searchsorted(full, full[-1] - np.int64(q.window_size)))
        elif q.window_unit is not None and len(self.tail_pos):
            keep_from = int(self.tail_pos[0])
        self.global_map, self.global_base = full[keep_from - base :], keep_from
        return starts, ends, pos, _SubStreamEvents(batch, gpos)

    def _window_starts(
        self, batch: EventBatch, gpos: npt.NDArray[np.int64] | None = None
    ) -> tuple[npt.NDArray[np.int64], tuple[Any, Any, float] | None]:
        """The first position inside each event's window, and the new time tail."""
        q = self.query
        n = len(batch)
        positions = np.arange(self.offset, self.offset + n, dtype=np.int64)
        if q.window_unit is None:
            return np.zeros(n, dtype=np.int64), None
        if q.window_unit == "events":
            if gpos is None:
                return positions - np.int64(q.window_size), None
            # Count windows are global: the first local position whose global position is
            # inside the window (everything before global_base is outside every new window).
            known, base = self._known_positions(gpos, batch)
            first = np.searchsorted(known, gpos - np.int64(q.window_size), side="left")
            return first.astype(np.int64) + np.int64(base), None
        assert q.time_attribute is not None
        times = time_values(batch, q.time_attribute, self.last_time)
        size = q.window_size
        if q.window_unit == "seconds" and self.schema.fields.get(q.time_attribute) == "time":
            size = size * 1_000_000_000  # timestamps are nanoseconds (an int size stays exact)
        if times.dtype.kind in "iu":
            # Integer times stay integers: time(end) - time(start) <= size holds exactly when
            # time(start) >= time(end) - floor(size); float64 would round above 2**53 (ns).
            times = times.astype(np.int64)
            reach = min(math.floor(size), _I64_MAX)
            lower = np.maximum(times, np.int64(_I64_MIN + reach)) - np.int64(reach)
        else:
            times = times.astype(np.float64)
            lower = times - size
        all_t = np.concatenate([self.tail_time.astype(times.dtype, copy=False), times])
        all_p = np.concatenate([self.tail_pos, positions])
        lows = all_p[np.searchsorted(all_t, lower, side="left")] if n else positions
        if n == 0:
            return lows, None
        keep = all_t >= lower[-1]
        return lows, (all_p[keep], all_t[keep], times[-1].item())

    def _combo_keys(
        self, batch: EventBatch, hcq: HcqPlan, arrays: dict[str, Any]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """For the parallelized automaton: per key combo (a state and the attributes an
        event reads its classes from), each event's key (a tuple of several values gets an
        id stable per state) and whether it has one; per set of attribute equalities of a
        merged read, whether the event holds them."""
        n = len(batch)
        dtype_of = {
            attr: dtype
            for per_atom, dtype in zip(hcq.class_attrs, hcq.class_dtypes, strict=True)
            for attr in per_atom
            if attr is not None
        }

        def column(attr: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
            if attr not in batch.columns:
                return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
            return key_values(batch.columns[attr], dtype_of[attr], batch.valid[attr], attr), batch.valid[attr]

        keys = np.zeros((max(1, len(arrays["combos"])), n), dtype=np.int64)
        valid = np.ones((max(1, len(arrays["combos"])), n), dtype=np.bool_)
        for k, (node, attributes) in enumerate(arrays["combos"]):
            cols = [column(a) for a in attributes]
            for _, present in cols:
                valid[k] &= present
            if len(cols) == 1:
                keys[k] = cols[0][0]
            elif cols:
                tuples = self.shape_tuples.setdefault(node, TupleIds())
                keys[k] = tuples.assign([c for c, _ in cols], valid[k], batch.offset)
        same_ok = np.ones((max(1, len(arrays["sames"])), n), dtype=np.bool_)
        for k, pairs in enumerate(arrays["sames"]):
            for a, b in pairs:
                (va, pa), (vb, pb) = column(a), column(b)
                same_ok[k] &= pa & pb & (va == vb)
        return keys, valid, same_ok

    def _keys(self, batch: EventBatch) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Run key per event (an int64: the partition's and the joins' values) and whether
        the event has one."""
        n = len(batch)
        q = self.query
        if not q.partition and not q.join_keys:
            return np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.bool_)
        cols = []
        valid = np.ones(n, dtype=np.bool_)
        for k in q.partition:
            if k not in batch.columns:
                return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
            cols.append(key_values(batch.columns[k], batch.schema.fields[k]))
            valid &= batch.valid[k]
        for join in q.join_keys:
            col, present = join_values(batch, join)
            cols.append(col)
            valid &= present
        if len(cols) == 1:
            return cols[0], valid
        return self.key_tuples.assign(cols, valid, batch.offset), valid

    def _forget_keys(self, window_start: int) -> None:
        """Forget the key tuples that left every window (memory follows the window). Not
        under LAST, NEXT or MAX, whose choices look at runs before the window."""
        for tuples in self.shape_tuples.values():
            tuples.forget(window_start)
        if self.query.spec_strategy not in ("last", "next", "max"):
            self.key_tuples.forget(window_start)

    # -- state ---------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole evaluation state as bytes of pycel's snapshot format (data only:
        arrays, scalars and the query as data; versioned and checksummed, see
        docs/snapshots.md); :meth:`restore` continues from it."""
        from pycel.snapshot import encode

        return encode(self)

    @classmethod
    def restore(cls, data: bytes) -> Stream:
        """A stream that continues exactly where the snapshotted one stopped.

        Raises :class:`DataError` for anything but an intact snapshot of this format
        (truncated, corrupted, foreign or older bytes); never runs code from ``data``.
        """
        from pycel.snapshot import decode

        return decode(data)

    def stats(self) -> dict[str, int]:
        """Store sizes: nodes still inside the window, allocated capacity, H entries (and
        the MAX strategy's pair arena)."""
        lo = self.offset - 1 - int(self.query.window_size) if self.query.window_unit == "events" else 0
        live_e, live_u, h = live_counts(self.E, self.U, self.HT, self.ctr, lo)
        return {
            "live_extend_nodes": live_e,
            "live_heap_nodes": live_u,
            "h_entries": h,
            "extend_capacity": int(self.E.shape[1]),
            "heap_capacity": int(self.U.shape[1]),
            "h_capacity": int(self.HT.shape[1]),
            "max_heap_depth": int(self.ctr[C_MAX_DEPTH]),
            "pair_capacity": int(self.pairs.shape[1]),  # MAX: the keys' blocks of pairs
        }


class _SubStreamEvents:
    """The events of a batch pushed with ``positions=``, looked up by global position."""

    def __init__(self, batch: EventBatch, positions: npt.NDArray[np.int64]) -> None:
        self.batch, self.positions = batch, positions

    def event(self, position: int) -> tuple[str, dict[str, Any]]:
        k = int(np.searchsorted(self.positions, position))
        if k == len(self.positions) or self.positions[k] != position:
            raise KeyError(f"position {position} is not an event of this batch")
        return self.batch.row(k)
