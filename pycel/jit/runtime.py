"""The per-event loop (PCEA paper Algorithm 1; docs/architecture.md) for the ALL strategy.

:func:`run_batch` processes one batch of events given their class ids, partition keys
and window starts. For each event it (1) fires the deterministic transitions of its
class, reading H before anything is written, (2) enumerates the matches that end here
(:mod:`pycel.jit.enumerate`), (3) inserts the new nodes into H. Everything is flat
arrays; the query is data (the transition tables), so this code is compiled once for
every query (``cache=True``) — once per *variant*: the paths only some queries use
(contiguity, consumption, the projection's duplicate check, absence) are compiled into
the loop only for the queries that use them (see :func:`_all_loop`).

Absence (``seq(p, absent(C), q)``): between (2) and (3), an event of a class that blocks
moves the runs of its key waiting in the blocked states (:func:`block_runs`): after
firing, so a run that reads the event as q's first one was not blocked by it, and before
indexing, so runs ending at the event are not either.

Contiguity (``:``, ``:+``, STRICT): the nodes a partition's event creates in state d go
to a *fresh* heap H[d | FRESH, key] (its root records the event's position), and H keeps
the partition's previous position under the reserved state PREV. At the partition's next
event the fresh runs are adjacent and fire δ_adj (every edge); older runs, in the main
heap H[d, key] or in a fresh heap left from an earlier event, fire δ_gap (skipping edges
only). Each run lives in exactly one heap, so it fires exactly one of the two tables. A
fresh heap is moved into the main heap when the state next receives fresh nodes (only
if δ_gap can still extend it: under STRICT the main heaps stay empty).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .arrays import Int, Ints
from .choose import choose_last, choose_next, gather_finals
from .choose_max import choose_max
from .enumerate import (
    _enumerate,
    _enumerate_distinct,
    _enumerate_residual,
    _grow,
    drops_variables,
    new_buffers,
)
from .inner import inner
from .residual import Residual, empty_residual
from .store import (
    C_E_NEXT,
    C_H_COUNT,
    C_MAX_DEPTH,
    C_U_NEXT,
    E_MS,
    E_POS,
    EMPTY,
    FRESH,
    H_VAL,
    LIVE_ONLY,
    NO_NODE,
    PREV_STATE,
    U_CONTENT,
    U_CREATED,
    U_CREATED_ROW,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ZERO,
    consumed_start,
    ensure_room,
    has_room,
    heap_insert,
    ht_find,
    ht_get,
    ht_put,
    ht_rebuild,
    live,
    make_room,
    new_extend,
    record_barrier,
)
from .structs import BatchInput, Buffers, DfaArrays, NodeStore, RawOutput, Step

CONSUME_NONE, CONSUME_ANY, CONSUME_PARTITION = 0, 1, 2


@inner
def _insert(
    U: Ints, E: Ints, ctr: Ints, root: Int, x: Int, lo: Int, pos: Int, window_lo: Int
) -> tuple[Ints, Int]:
    """(U, heap_insert(root, x)) with room made first (an insertion is at most one level
    deeper than the deepest so far)."""
    need = ctr[C_MAX_DEPTH] + 2
    if not has_room(U, ctr[C_U_NEXT], need, U_CREATED, window_lo):
        U = ensure_room(U, ctr[C_U_NEXT], need, U_CREATED_ROW, window_lo)
    return U, heap_insert(U, E, ctr, root, x, lo, pos)


@inner
def _merge(
    U: Ints, E: Ints, ctr: Ints, root: Int, other: Int, lo: Int, pos: Int, window_lo: Int, stack: Ints
) -> tuple[Ints, Int, Ints]:
    """(U, root ∪ contents of heap ``other`` inside the window, stack); ``other`` is small
    (the nodes of one event), or a blocked state's runs (each moved once per guard)."""
    top = 0
    stack[0] = other
    top = 1
    while top > 0:
        top -= 1
        h = stack[top]
        if not live(U, ctr[C_U_NEXT], h):
            continue
        hs = h & (U.shape[1] - 1)
        if U[U_MS, hs] < lo:
            continue
        if top + 2 > stack.shape[0]:
            stack = _grow(stack, top + 2)
        stack[top] = U[U_LEFT, hs]
        stack[top + 1] = U[U_RIGHT, hs]
        top += 2
        x = U[U_CONTENT, hs]
        U, root = _insert(U, E, ctr, root, x, lo, pos, window_lo)
    return U, root, stack


@inner
def block_runs(
    E: Ints, U: Ints, HT: Ints, ctr: Ints, tables: DfaArrays,
    c: Int, k: Int, lo: Int, pos: Int, window_lo: Int, reserve: Int, stack: Ints,
) -> tuple[Ints, Ints, Ints]:  # fmt: skip
    """Absence: move the runs of key ``k`` that an event of class ``c`` blocks (their
    state's guards; docs/architecture.md, Absence); return (U, HT, stack)
    (any of them may have been replaced by a larger one). H keeps room for ``reserve``
    more entries (the nodes the loop indexes next). A blocked state is a fixed point of its
    block, so a run moves at most once per guard: amortized O(log n) per node. With
    contiguity a state's fresh runs move too, into the target's older runs: the blocking
    event is of the same key, so they are no longer adjacent to the next one."""
    bptr, bsrc, bdst = tables.bptr, tables.bsrc, tables.bdst
    first, last = bptr[c], bptr[c + 1]
    if first == last:
        return U, HT, stack
    if ctr[C_H_COUNT] + (last - first) + reserve + 1 > HT.shape[1] // 2:
        HT = ht_rebuild(HT, U, ctr, window_lo, last - first + reserve + 1, LIVE_ONLY)
    merged = False
    for row in range(first, 2 * last - first if tables.contiguous else last):
        i = row if row < last else row - (last - first)  # the second pass: fresh runs
        slot = ht_find(HT, bsrc[i] | FRESH if row >= last else bsrc[i], k)
        if slot < 0:
            continue
        moved = HT[H_VAL, slot]
        HT[H_VAL, slot] = -1
        if bdst[i] < 0 or not live(U, ctr[C_U_NEXT], moved) or U[U_MS, moved & (U.shape[1] - 1)] < lo:
            continue
        target = ht_get(HT, bdst[i], k)
        if target < 0 or not live(U, ctr[C_U_NEXT], target) or U[U_MS, target & (U.shape[1] - 1)] < lo:
            ht_put(HT, ctr, bdst[i], k, moved)
            continue
        U, root, stack = _merge(U, E, ctr, target, moved, lo, pos, window_lo, stack)
        ht_put(HT, ctr, bdst[i], k, root)
        merged = True
    if merged and reserve > 0:
        # The merges used up the room the loop made for this event's own insertions (and
        # may have deepened the heaps): make it again.
        need = reserve * (ctr[C_MAX_DEPTH] + reserve + 1)
        if not has_room(U, ctr[C_U_NEXT], need, U_CREATED, window_lo):
            U = ensure_room(U, ctr[C_U_NEXT], need, U_CREATED_ROW, window_lo)
    return U, HT, stack


@njit(cache=True, inline="always")
def _fire(
    E: Ints, U: Ints, ctr: Ints, pos: Int, lab: Int, d: Int, h: Int, lo: Int,
    new_x: Ints, new_d: Ints, fired: Int,
) -> Int:  # fmt: skip
    """Extend the runs of heap ``h`` (-1: start a run) into state d; return the new count."""
    if h < 0:
        ms = pos
    else:
        if not live(U, ctr[C_U_NEXT], h):
            return fired
        ms = U[U_MS, h & (U.shape[1] - 1)]
        if ms < lo:
            return fired
    new_x[fired] = new_extend(E, ctr, pos, lab, h, ms)
    new_d[fired] = d
    return fired + 1


def _all_loop(
    contiguous: bool, consuming: bool, distinct: bool, blocking: bool, pruning: bool, last: bool, next_: bool,
    max_: bool,
) -> Loop:
    """The ALL loop compiled with the paths one kind of query uses: contiguity (δ_adj, the
    fresh heaps), consumption, the projection's duplicate check (``distinct``), absence
    (``blocking``: events that block waiting runs, :func:`block_runs`), the post-filters'
    pruning during enumeration (``pruning``: ``res`` holds their programs,
    :mod:`pycel.jit.residual`), LAST, NEXT or MAX with a window (``last``, ``next_``,
    ``max_``: an end writes only the outputs the strategy keeps among those that fit the
    window, :mod:`pycel.jit.choose`, :mod:`pycel.jit.choose_max`).

    Each flag is a closure constant: Numba removes the branches it disables before typing
    the function, so their code (and the helpers only they call) is compiled only for a
    query that needs it, and each variant is cached on disk apart (the cache key includes
    the constants). An optional per-event step belongs here the same way: a new flag of
    :func:`_loop_for`, tested as ``if flag:`` around the step (a bare closure constant:
    ``if flag and x:`` is pruned too, ``x = flag; if x:`` is not)."""

    # Closure constants, as the flags: a choosing variant never runs the enumerator.
    choosing = last or next_ or max_
    enumerating = not choosing

    @njit(cache=True)
    def run_batch_all(
        store: NodeStore, batch: BatchInput, tables: DfaArrays, work: Buffers, res: Residual
    ) -> Step:
        """Process one batch; return the (possibly grown) store and the matches found.

        ``batch.window_starts[j]``: the window start for the event at position
        ``batch.offset + j``; ``batch.limit``: matches per end position (-1: all);
        ``batch.consume``: 0 none, 1 any, 2 partition (read only when ``consuming``);
        δ_adj (``tables.aptr``…) is read only when ``contiguous``.
        """
        # One field per statement: ``a, b = t.a, t.b`` builds and unpacks a temporary tuple
        # of arrays, whose reference counting Numba spells out field by field (about a tenth
        # of this function's LLVM IR, compiled for nothing).
        E = store.E
        U = store.U
        HT = store.HT
        ctr = store.ctr
        classes = batch.classes
        keys = batch.keys
        key_valid = batch.key_valid
        lows = batch.window_starts
        offset = batch.offset
        proj_mask = batch.projection_mask
        limit = batch.limit
        consume = batch.consume
        ptr = tables.ptr
        src = tables.src
        label = tables.label
        dst = tables.dst
        final = tables.final
        extends = tables.extends
        extends_gap = tables.extends_gap
        label_masks = tables.label_masks
        aptr = tables.aptr
        asrc = tables.asrc
        alabel = tables.alabel
        adst = tables.adst
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
        new_x = np.empty(64, dtype=np.int64)
        new_d = np.empty(64, dtype=np.int64)
        finals = np.empty(64, dtype=np.int64)
        # int64 from the start (ZERO, not 0): they reach _enumerate, which would otherwise
        # also be compiled for the literal 0 while Numba infers their types.
        n_out = ZERO
        n_ent = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        # The enumerator of this variant (Numba drops the other branch before typing).
        if distinct:
            enumerate_matches = _enumerate_distinct
        else:
            enumerate_matches = _enumerate
        if last:
            choose_end = choose_last
        elif next_:
            choose_end = choose_next
        else:
            choose_end = choose_max
        for j in range(n):
            if not key_valid[j]:
                continue
            pos = offset + j
            c = classes[j]
            k = keys[j]
            window_lo = lows[j]
            lo = window_lo
            if consuming:
                lo = consumed_start(HT, ctr, consume, k, lo)
            first, last_t = ptr[c], ptr[c + 1]
            moves = last_t - first
            prev: Int = -1
            if contiguous:
                moves = 2 * moves + aptr[c + 1] - aptr[c]
                # Every event of the partition moves its previous position, even one that
                # fires nothing: it breaks the adjacency of older runs.
                if ctr[C_H_COUNT] + 2 * moves + 2 > HT.shape[1] // 2:
                    HT = ht_rebuild(HT, U, ctr, window_lo, 2 * moves + 2, LIVE_ONLY)
                prev = ht_get(HT, PREV_STATE, k)
                ht_put(HT, ctr, PREV_STATE, k, pos)
            if moves == 0:
                if blocking:  # an absent event that starts or extends nothing still blocks
                    U, HT, stack_h = block_runs(
                        E, U, HT, ctr, tables, c, k, lo, pos, window_lo, ZERO, stack_h
                    )
                continue
            # Room for this event's nodes, so nothing moves while it is processed (the checks
            # are inlined: the calls, which may replace the arrays, are rare).
            E, U = make_room(E, U, ctr, moves, window_lo)
            if ctr[C_H_COUNT] + 2 * moves + 1 > HT.shape[1] // 2:
                HT = ht_rebuild(HT, U, ctr, window_lo, 2 * moves + 1, LIVE_ONLY)
            if moves > new_x.shape[0]:
                new_x = _grow(new_x, moves)
                new_d = _grow(new_d, moves)
                finals = _grow(finals, moves)
            umask = U.shape[1] - 1
            # (1) Fire transitions: read H (earlier positions only).
            fired: Int = 0
            for t in range(first, last_t):
                s = src[t]
                if s == 0:
                    fired = _fire(E, U, ctr, pos, label[t], dst[t], NO_NODE, lo, new_x, new_d, fired)
                    continue
                h = ht_get(HT, s, k)
                if h >= 0:
                    fired = _fire(E, U, ctr, pos, label[t], dst[t], h, lo, new_x, new_d, fired)
                if contiguous:
                    f = ht_get(HT, s | FRESH, k)
                    if f >= 0 and live(U, ctr[C_U_NEXT], f) and U[U_CREATED, f & umask] != prev:
                        fired = _fire(E, U, ctr, pos, label[t], dst[t], f, lo, new_x, new_d, fired)
            if contiguous and prev >= 0:
                for t in range(aptr[c], aptr[c + 1]):
                    f = ht_get(HT, asrc[t] | FRESH, k)
                    if f >= 0 and live(U, ctr[C_U_NEXT], f) and U[U_CREATED, f & umask] == prev:
                        fired = _fire(E, U, ctr, pos, alabel[t], adst[t], f, lo, new_x, new_d, fired)
            # (2) Enumerate the matches ending here.
            emitted = ZERO
            first = n_out
            if choosing:  # LAST/NEXT/MAX with a window: the end's chosen outputs, from all its finals
                n_finals = gather_finals(new_x, new_d, final, fired, finals)
                if n_finals > 0:
                    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack_h, emitted) = choose_end(
                        finals, n_finals, pos, lo, budget_all, E, U, ctr, label_masks, proj_mask, max_labels,
                        out_se, out_off, out_var, out_pos, n_out, n_ent, stack_h,
                    )
            if enumerating:  # (not compiled into a choosing variant: it never enumerates)
                for f in range(fired):
                    if final[new_d[f]] and emitted < budget_all:
                        if pruning:
                            (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                             got) = _enumerate_residual(
                                new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                                max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h,
                                stack_d, seen, first, res,
                            )
                        else:
                            (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                             got) = enumerate_matches(
                                new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                                max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h,
                                stack_d, seen, first,
                            )
                        emitted += got
            if consuming:
                if emitted > 0 and consume != 0:
                    record_barrier(HT, ctr, consume, k, pos)
                    continue  # runs through this event are consumed too
            if blocking:
                # Absence: the runs that skip this event and wait across one of its guards
                # are blocked (after firing: a run reading it as the next part was not).
                U, HT, stack_h = block_runs(E, U, HT, ctr, tables, c, k, lo, pos, window_lo, fired, stack_h)
            # (3) Index the new nodes by (state, key).
            for f in range(fired):
                d = new_d[f]
                if not extends[d]:
                    continue
                if contiguous:
                    fresh = ht_get(HT, d | FRESH, k)
                    fmask = U.shape[1] - 1  # U may have grown since umask (_insert, _merge)
                    if fresh >= 0 and live(U, ctr[C_U_NEXT], fresh) and U[U_CREATED, fresh & fmask] != pos:
                        if extends_gap[d]:  # runs of an earlier event: they can only skip now
                            U, root, stack_h = _merge(
                                U, E, ctr, ht_get(HT, d, k), fresh, lo, pos, window_lo, stack_h
                            )
                            ht_put(HT, ctr, d, k, root)
                        fresh = -1
                    U, root = _insert(U, E, ctr, fresh, new_x[f], lo, pos, window_lo)
                    ht_put(HT, ctr, d | FRESH, k, root)
                else:
                    root = ht_get(HT, d, k)
                    ht_put(HT, ctr, d, k, heap_insert(U, E, ctr, root, new_x[f], lo, pos))
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return Step(NodeStore(E, U, HT, ctr), out)

    return run_batch_all


#: A compiled per-event loop over the determinized automaton.
Loop = Callable[[NodeStore, BatchInput, DfaArrays, Buffers, Residual], Step]
_LOOPS: dict[tuple[bool, bool, bool, bool, bool, bool, bool, bool], Loop] = {}
#: What the loops take for ``res`` when nothing prunes (one fixed type for every variant).
_NO_RESIDUAL = empty_residual()


def _loop_for(
    contiguous: bool, consuming: bool, distinct: bool, blocking: bool, pruning: bool, last: bool, next_: bool,
    max_: bool,
) -> Loop:
    """The ALL loop variant for these paths, made at its first use (compiled or loaded
    from the cache at its first call)."""
    key = (contiguous, consuming, distinct, blocking, pruning, last, next_, max_)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _LOOPS[key] = _all_loop(*key)
    return loop


def loop_variants() -> dict[tuple[bool, bool, bool, bool, bool, bool, bool, bool], Loop]:
    """The ALL loop variants made so far, by (contiguous, consuming, distinct, blocking,
    pruning, last, next_, max_)."""
    return dict(_LOOPS)


def run_batch(
    store: NodeStore, batch: BatchInput, tables: DfaArrays, res: Residual | None = None, choose: str = ""
) -> Step:
    """Process one batch under ALL; return the (possibly grown) store and the matches.

    Runs the compiled variant of the loop that has exactly the paths this batch uses
    (see :func:`_all_loop`): contiguity if ``tables.contiguous``, consumption if
    ``batch.consume``, the duplicate check if the projection drops a bound variable,
    blocking once some class of the data blocks runs (an absence's event has arrived),
    pruning by the post-filters' programs ``res`` if given (:mod:`pycel.jit.residual`),
    the strategy's choice at each end if ``choose`` is "last", "next" or "max"
    (:mod:`pycel.jit.choose`, :mod:`pycel.jit.choose_max`; with a window).

    Example::

        step = run_batch(new_node_store(), batch_input(...), tables)   # Step(store, out)
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    blocking = bool(tables.bptr[-1] > 0)  # some class blocks runs: the pattern has an absence
    paths = (bool(tables.contiguous), bool(batch.consume), distinct, blocking, res is not None)
    loop = _loop_for(*paths, choose == "last", choose == "next", choose == "max")
    work = new_buffers(tables.label_masks, distinct)
    return loop(store, batch, tables, work, _NO_RESIDUAL if res is None else res)


def live_counts(
    E: np.ndarray, U: np.ndarray, HT: np.ndarray, ctr: np.ndarray, lo: int
) -> tuple[int, int, int]:
    """(extend nodes, heap nodes, H entries) that are still reachable inside the window."""
    e_next, u_next = int(ctr[C_E_NEXT]), int(ctr[C_U_NEXT])
    e_ids = np.arange(max(0, e_next - E.shape[1]), e_next)
    u_ids = np.arange(max(0, u_next - U.shape[1]), u_next)
    live_e = int(np.count_nonzero(E[E_POS, e_ids & (E.shape[1] - 1)] >= lo))
    live_u = int(np.count_nonzero(U[U_CREATED, u_ids & (U.shape[1] - 1)] >= lo))
    occupied = HT[0] != EMPTY  # run heaps and the reserved entries (barriers, MAX blocks)
    return live_e, live_u, int(np.count_nonzero(occupied))


__all__ = ["run_batch", "live_counts", "E_MS", "U_CONTENT"]
