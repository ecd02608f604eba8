"""The per-event loop for the MAX selection strategy (CEL paper Algorithm 7 on the node
store; the pair automaton is :mod:`pycel.plan.maximal`).

Under MAX a run's fate depends on the runs that contain it, so skipping is no longer
implicit: every event of a key moves *all* of the key's live pairs. A key's pairs are a
block of (pair, heap root) rows in the arena ``PS`` (row 0 of column 0 holds the next
free column), found through the H entry (ACTIVE, key): block start, length and the
position it was written at. Per event:

1. every pair marks the event (a new extend node per marking row, as in the ALL loop)
   and skips it (its whole heap moves to the skip target);
2. the new runs whose marking row is an output are enumerated;
3. the targets are gathered into a new block. Heaps meeting in one target are united:
   the first is kept as is, each further one is inserted as a *union node*, an extend
   node without an event (label -1) whose child is that heap. The enumerator walks
   through it at the same depth, so it adds no position; it adds one step per output,
   at most one per event of the key inside the window.

The pairs of runs that all started before the window are dropped (they can never be
output); the not-yet-started runs' pair is always kept. Its U remembers every state a
run of the key ever reached, so a key's entry is kept for the life of the stream, as
under LAST. Consumption (any, partition) resets a key's block to the start pair: the
consumed runs take no part in later choices.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .arrays import Int, Ints
from .enumerate import _enumerate, _enumerate_distinct, _grow, drops_variables, new_buffers
from .inner import inner
from .store import (
    C_BARRIER,
    C_H_COUNT,
    C_U_NEXT,
    H_POS,
    H_RANK,
    H_VAL,
    KEEP_ALL,
    NO_NODE,
    U_MS,
    ZERO,
    heap_insert,
    ht_find,
    ht_rebuild,
    ht_slot,
    live,
    make_room,
    new_extend,
)
from .structs import BatchInput, Buffers, MaxArrays, MaxStep, NodeStore, RawOutput

#: The reserved H state of a key's block of pairs.
ACTIVE = -4
#: The label of a union node (an extend node that only joins a heap into another).
UNION = -1
# As int64 scalars for jitted calls (a literal argument compiles the callee once more).
ACTIVE_STATE = np.int64(ACTIVE)
UNION_LABEL = np.int64(UNION)


def new_pair_arena(capacity: int = 1024) -> np.ndarray:
    """An empty pair arena: rows (pair, heap root); column 0 holds the next free column."""
    PS = np.full((2, capacity), -1, dtype=np.int64)
    PS[0, 0] = 1
    return PS


@inner
def _reserve(PS: Ints, HT: Ints, need: Int) -> Ints:
    """``PS`` with room for ``need`` more columns: full arenas are compacted (every key's
    current block is copied) and grown if the live blocks need it."""
    if PS[0, 0] + need <= PS.shape[1]:
        return PS
    used = 1
    for s in range(HT.shape[1]):
        if HT[0, s] == ACTIVE:
            used += HT[H_RANK, s]
    cap = PS.shape[1]
    while 2 * (used + need) > cap:
        cap *= 2
    new = np.full((2, cap), -1, dtype=np.int64)
    free = 1
    for s in range(HT.shape[1]):
        if HT[0, s] == ACTIVE:
            start, length = HT[H_VAL, s], HT[H_RANK, s]
            for i in range(length):  # loops, not a slice assignment: see store.ensure_room
                new[0, free + i] = PS[0, start + i]
                new[1, free + i] = PS[1, start + i]
            HT[H_VAL, s] = free
            free += length
    new[0, 0] = free
    return new


def _max_loop(distinct: bool) -> MaxLoop:
    """The MAX loop with the projection's duplicate check (``distinct``) or without: a
    closure constant, so a query that projects nothing away never compiles the check (see
    :func:`pycel.jit.runtime._all_loop`)."""

    @njit(cache=True)
    def run_batch_maximal(
        store: NodeStore, pairs: Ints, batch: BatchInput, tables: MaxArrays, work: Buffers
    ) -> MaxStep:
        """See :func:`run_batch_max`."""
        # One field per statement (see pycel.jit.runtime._all_loop).
        E = store.E
        U = store.U
        HT = store.HT
        ctr = store.ctr
        PS = pairs
        classes = batch.classes
        keys = batch.keys
        key_valid = batch.key_valid
        lows = batch.window_starts
        offset = batch.offset
        proj_mask = batch.projection_mask
        limit = batch.limit
        consume = batch.consume
        mark_ptr = tables.mark_ptr
        mark_label = tables.mark_label
        mark_dst = tables.mark_dst
        mark_out = tables.mark_out
        skip_dst = tables.skip_dst
        initial = tables.initial
        inert = tables.inert
        n_pairs = tables.n_pairs
        label_masks = tables.label_masks
        n = classes.shape[0]
        out_se = work.se
        out_off = work.offsets
        out_var = work.var_ids
        out_pos = work.positions
        path = work.path
        stack_h = work.stack_h
        stack_d = work.stack_d
        seen = work.seen
        max_labels = work.max_labels
        cur_p = np.empty(16, dtype=np.int64)  # the key's pairs and roots
        cur_r = np.empty(16, dtype=np.int64)
        mv_dst = np.empty(64, dtype=np.int64)  # moves: target pair, node, kind
        mv_node = np.empty(64, dtype=np.int64)
        mv_mark = np.empty(64, dtype=np.int64)  # 1: a mark (int64: _grow compiles once)
        n_out = ZERO  # int64 scalars, not literals: see pycel.jit.runtime.run_batch
        n_ent = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        # The enumerator of this variant (Numba drops the other branch before typing).
        if distinct:
            enumerate_matches = _enumerate_distinct
        else:
            enumerate_matches = _enumerate
        for j in range(n):
            c = classes[j]
            if not key_valid[j] or inert[c]:
                continue
            pos = offset + j
            k = keys[j]
            lo = lows[j]
            if ctr[C_H_COUNT] + 4 > HT.shape[1] // 2:
                HT = ht_rebuild(HT, U, ctr, lo, np.int64(4), KEEP_ALL)
            # The key's block (a key seen for the first time, or whose runs were consumed,
            # has only the start pair).
            slot = ht_find(HT, ACTIVE_STATE, k)
            count = 0
            if slot >= 0 and not (consume == 1 and HT[H_POS, slot] <= ctr[C_BARRIER]):
                start = HT[H_VAL, slot]
                length = HT[H_RANK, slot]
                if length > cur_p.shape[0]:
                    cur_p = _grow(cur_p, length)
                    cur_r = _grow(cur_r, length)
                for i in range(length):
                    p, r = PS[0, start + i], PS[1, start + i]
                    # Pairs whose runs all started before the window can never be output.
                    if initial[p] or (live(U, ctr[C_U_NEXT], r) and U[U_MS, r & (U.shape[1] - 1)] >= lo):
                        cur_p[count] = p
                        cur_r[count] = r
                        count += 1
            else:
                cur_p[0] = 0
                cur_r[0] = -1
                count = 1
            moves = ZERO
            for i in range(count):
                at = c * n_pairs + cur_p[i]
                moves += mark_ptr[at + 1] - mark_ptr[at] + 1
            E, U = make_room(E, U, ctr, moves, lo)
            if moves > mv_dst.shape[0]:
                mv_dst = _grow(mv_dst, moves)
                mv_node = _grow(mv_node, moves)
                mv_mark = _grow(mv_mark, moves)
            umask = U.shape[1] - 1
            # (1) Every pair marks the event and skips it.
            m: Int = ZERO
            emitted = ZERO
            first = n_out
            for i in range(count):
                p, r = cur_p[i], cur_r[i]
                at = c * n_pairs + p
                ms = pos if initial[p] else U[U_MS, r & umask]
                for t in range(mark_ptr[at], mark_ptr[at + 1]):
                    x = new_extend(E, ctr, pos, mark_label[t], -1 if initial[p] else r, ms)
                    # (2) Enumerate the maximal matches ending here.
                    if mark_out[t] and emitted < budget_all and ms >= lo:
                        (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                         got) = enumerate_matches(
                            x, pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask, max_labels,
                            out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                            first,
                        )
                        emitted += got
                    if mark_dst[t] >= 0:
                        mv_dst[m], mv_node[m], mv_mark[m] = mark_dst[t], x, 1
                        m += 1
                if skip_dst[at] >= 0:
                    mv_dst[m], mv_node[m], mv_mark[m] = skip_dst[at], r, 0
                    m += 1
            if emitted > 0 and consume != 0:
                if consume == 1:
                    ctr[C_BARRIER] = pos
                # Every run so far is consumed: the key restarts from the start pair alone.
                mv_dst[0], mv_node[0], mv_mark[0] = 0, -1, 0
                m = 1
            # (3) Gather the moves by target pair into the key's new block.
            PS = _reserve(PS, HT, m)
            free = PS[0, 0]
            written = 0
            for f in range(m):
                d = mv_dst[f]
                if d < 0:
                    continue
                root: Int = NO_NODE
                for g in range(f, m):
                    if mv_dst[g] != d:
                        continue
                    node = mv_node[g]
                    if initial[d]:  # the runs that have not started: no heap
                        root = -1
                    elif mv_mark[g] != 0:
                        root = heap_insert(U, E, ctr, root, node, lo, pos)
                    elif root < 0:
                        root = node  # the first heap into d is kept as it is
                    else:
                        union = new_extend(E, ctr, pos, UNION_LABEL, node, U[U_MS, node & umask])
                        root = heap_insert(U, E, ctr, root, union, lo, pos)
                    mv_dst[g] = -1
                PS[0, free + written] = d
                PS[1, free + written] = root
                written += 1
            PS[0, 0] = free + written
            slot = ht_slot(HT, ctr, ACTIVE_STATE, k)
            HT[H_VAL, slot] = free
            HT[H_RANK, slot] = written
            HT[H_POS, slot] = pos
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return MaxStep(NodeStore(E, U, HT, ctr), PS, out)

    return run_batch_maximal


#: A compiled MAX loop.
MaxLoop = Callable[[NodeStore, Ints, BatchInput, MaxArrays, Buffers], MaxStep]
_LOOPS: dict[bool, MaxLoop] = {}


def loop_variants() -> dict[bool, MaxLoop]:
    """The MAX loop variants made so far, by whether they check for repeated matches."""
    return dict(_LOOPS)


def run_batch_max(store: NodeStore, pairs: Ints, batch: BatchInput, tables: MaxArrays) -> MaxStep:
    """Process one batch under MAX; return the (possibly grown) store, pair arena and the
    matches found (the arguments mean what they mean for
    :func:`pycel.jit.runtime.run_batch`; the tables are :class:`pycel.plan.maximal.MaxTables`).

    Example::

        step = run_batch_max(store, new_pair_arena(), batch, tables)   # MaxStep(store, pairs, out)
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    loop = _LOOPS.get(distinct)
    if loop is None:
        loop = _LOOPS[distinct] = _max_loop(distinct)
    return loop(store, pairs, batch, tables, new_buffers(tables.label_masks, distinct))
