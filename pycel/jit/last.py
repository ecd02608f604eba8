"""The per-event loop for the LAST and NEXT selection strategies (docs/semantics.md,
corrected CEL §4).

LAST keeps, among the complex events C (position sets) that end at the same position,
the maximum of ``C1 ≤ C2 iff C1 = C2 or max(C1 △ C2) ∈ C2``: walking back from the end,
the latest position at every step, and longer beats a prefix. Every valuation with the
chosen C is output; the window and consumption filter the choice afterwards.

Why one best set per deterministic state is enough: runs in the same state T continue
the same way, and appending the same events keeps their order (the comparison looks at
the newest differing position, and the appended ones are equal). So the runs in T that
can ever win are those with the best C among T's runs, and by induction they extend the
best runs of their source states. H[T, key] therefore holds one *best set*: a heap of
the nodes with T's best C (equal C: equal positions, several valuations), plus its
rank, position and max-start in the entry's extra rows.

Ranks are integers ordered like ≤last: every node created at position j outranks every
older node (its newest position is later), and nodes created at j are ordered by their
child's rank (a new run, with no child, ranks lowest), with equal ranks exactly for equal
C. A new node in T replaces T's best set if it outranks it, joins it if it ties.

Consumption comes first (docs/semantics.md): consumed runs take no part in the choice. After
an output at position p every existing run starts at or before p, so consumption simply
ignores the best sets that start before the barrier.

This loop runs LAST and NEXT without a window (with one, the windowed runner chooses
among the outputs that fit it: pycel/runtime/runners/windowed.py). H keeps every entry,
and its rank and max-start live in H itself. Memory is one entry per (state, key), plus
the live nodes.

Contiguity: a best set created at the partition's previous event fires δ_adj, an older
one δ_gap (a better run ends no earlier, so if the best is not adjacent, none is). Under
NEXT the best run may end earlier than a worse, adjacent one, so each state keeps two
best sets: the runs of its latest event (H[s | FRESH, key], δ_adj while adjacent) and
the older ones (H[s, key], δ_gap); a fresh set joins the older one when the state next
gets new runs.

NEXT keeps the maximum of ``C1 ≤ C2 iff C1 = C2 or min(C1 △ C2) ∈ C2``: comparing the
sorted positions from the start, the earliest position at the first difference wins, and
a run beats its own prefixes (appending a later event to the prefix loses to the longer
run's next, earlier position). Appending the same events keeps this order too, so the
same one-best-set-per-state argument holds. The order of the runs is the post-order of
their trie of position sequences: a new run r + [j] is the newest child of r, placed
right before r and after r's other extensions. An order-maintenance list
(:mod:`pycel.jit.order`) keeps the current best sets in that order; H's rank row holds
an entry of the list, and a run starting fresh at j goes to the end (it loses to every
run that started earlier). Entries no best set references are freed, so the list is as
long as H.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .arrays import Int, Ints, Truth
from .enumerate import _enumerate, _enumerate_distinct, _grow, drops_variables, new_buffers
from .inner import inner
from .order import O_LABEL, O_REFS, insert_before, release
from .runtime import _merge
from .store import (
    BARRIER_STATE,
    C_BARRIER,
    C_H_COUNT,
    C_RANK,
    E_MS,
    FRESH,
    H_MS,
    H_POS,
    H_RANK,
    H_VAL,
    KEEP_ALL,
    NO_NODE,
    PREV_STATE,
    ZERO,
    heap_insert,
    ht_find,
    ht_get,
    ht_put,
    ht_rebuild,
    ht_slot,
    make_room,
    new_extend,
    record_barrier,
)
from .structs import BatchInput, Buffers, DfaArrays, NodeStore, RankedStep, RawOutput


@inner
def _rank(new_r: Ints, fired: Int, order: Ints, base: Int) -> Int:
    """Replace the child ranks new_r[:fired] by new ranks base, base + 1, … in the
    (dense) order of the child ranks; return the next free rank."""
    for f in range(fired):  # insertion sort of the indices by child rank (fired is small)
        g = f
        while g > 0 and new_r[order[g - 1]] > new_r[f]:
            order[g] = order[g - 1]
            g -= 1
        order[g] = f
    rank = base - 1
    last = -2
    for g in range(fired):
        f = order[g]
        if g == 0 or new_r[f] != last:
            rank += 1
            last = new_r[f]
        new_r[f] = rank
    return rank + 1


@inner
def _next_entries(OL: Ints, new_r: Ints, fired: Int, made: Ints) -> tuple[Ints, Int]:
    """Replace the parent entries new_r[:fired] (-1: a fresh run) by the entries of the
    new runs: one per distinct parent, right before it (a fresh run: at the end), pinned
    by one reference until the event is done. Return (OL, how many entries were made,
    listed in made[:count])."""
    count = 0
    for f in range(fired):
        parent = new_r[f]
        entry: Int = -1
        for g in range(f):  # the same parent at the same event: the same position set
            if new_r[g] == parent:
                entry = made[g]
        if entry < 0:
            OL, entry = insert_before(OL, parent if parent >= 0 else 0)
            OL[O_REFS, entry] = 1  # pinned until the event is done
            made[fired + count] = entry
            count += 1
        made[f] = entry
    for f in range(fired):
        new_r[f] = made[f]
    for g in range(count):
        made[g] = made[fired + g]
    return OL, count


@njit(cache=True, inline="always")
def _better(OL: Ints, next_mode: Truth, a: Int, b: Int) -> Truth:
    """Whether rank token ``a`` beats ``b`` (LAST: larger rank; NEXT: earlier entry)."""
    if next_mode:
        earlier: Truth = OL[O_LABEL, a] < OL[O_LABEL, b]
        return earlier
    return a > b


@inner
def _retire(HT: Ints, ctr: Ints, OL: Ints, fresh: Int, d: Int, k: Int, alive: Int) -> None:
    """NEXT with contiguity: move the fresh best set in H slot ``fresh`` (created at an
    older event, so it can only skip from now on) into state d's older best set, if it
    beats it; then empty the fresh slot (its reference moves or is dropped)."""
    older = ht_slot(HT, ctr, d, k)  # open addressing: ``fresh`` stays where it is
    beats = HT[H_VAL, older] < 0 or HT[H_MS, older] < alive
    if HT[H_MS, fresh] >= alive and (beats or _better(OL, True, HT[H_RANK, fresh], HT[H_RANK, older])):
        if HT[H_VAL, older] >= 0:
            release(OL, HT[H_RANK, older], 1)
        for r in range(H_VAL, HT.shape[0]):  # a loop: see store.ensure_room
            HT[r, older] = HT[r, fresh]
    else:
        release(OL, HT[H_RANK, fresh], 1)
    HT[H_VAL, fresh] = -1


@inner
def _block_best(
    E: Ints, U: Ints, HT: Ints, ctr: Ints, OL: Ints, tables: DfaArrays, next_mode: Truth,
    c: Int, k: Int, alive: Int, pos: Int, window_lo: Int, reserve: Int, stack: Ints,
) -> tuple[Ints, Ints, Ints]:  # fmt: skip
    """Absence: move the best sets of key ``k`` that an event of class ``c`` blocks into
    their blocked states (docs/architecture.md, Absence); return (U, HT, stack). A state's
    runs are blocked together, so its best set stays the best of them; in the target it
    replaces a worse best set, joins an equal one (the same C: their heaps are united)
    or is dropped. Under NEXT with contiguity a state's fresh best set moves the same way,
    into the target's older one: the blocking event is of the same key, so it is no
    longer adjacent to the next one. H keeps room for ``reserve`` more entries."""
    bptr, bsrc, bdst = tables.bptr, tables.bsrc, tables.bdst
    first, last = bptr[c], bptr[c + 1]
    if first == last:
        return U, HT, stack
    if ctr[C_H_COUNT] + (last - first) + reserve + 1 > HT.shape[1] // 2:
        HT = ht_rebuild(HT, U, ctr, window_lo, last - first + reserve + 1, KEEP_ALL)
    split = next_mode and tables.contiguous
    for row in range(first, 2 * last - first if split else last):
        i = row if row < last else row - (last - first)  # the second pass: fresh best sets
        moved = ht_find(HT, bsrc[i] | FRESH if row >= last else bsrc[i], k)
        if moved < 0 or HT[H_VAL, moved] < 0:
            continue
        rank = HT[H_RANK, moved]
        gone = bdst[i] < 0 or HT[H_MS, moved] < alive  # nowhere to go, or consumed
        if not gone:
            to = ht_slot(HT, ctr, bdst[i], k)  # (open addressing: ``moved`` stays put)
            if HT[H_VAL, to] < 0 or HT[H_MS, to] < alive or _better(OL, next_mode, rank, HT[H_RANK, to]):
                if next_mode and HT[H_VAL, to] >= 0:
                    release(OL, HT[H_RANK, to], 1)
                for r in range(H_VAL, HT.shape[0]):  # the reference moves along
                    HT[r, to] = HT[r, moved]
            elif HT[H_RANK, to] == rank:  # the same C
                U, root, stack = _merge(
                    U, E, ctr, HT[H_VAL, to], HT[H_VAL, moved], max(window_lo, alive), pos, window_lo, stack
                )
                HT[H_VAL, to] = root
                gone = True
            else:
                gone = True
        if gone and next_mode:
            release(OL, rank, 1)
        # Emptied: the loop extends an entry whose max-start is at least ``alive`` (>= 0).
        HT[H_VAL, moved] = -1
        HT[H_MS, moved] = -1
    return U, HT, stack


@njit(cache=True, inline="always")
def _fire(
    E: Ints, ctr: Ints, HT: Ints, slot: Int, pos: Int, lab: Int, d: Int,
    new_x: Ints, new_d: Ints, new_r: Ints, fired: Int,
) -> Int:  # fmt: skip
    """Extend the best set in H slot ``slot`` (-1: start a run) into state d."""
    if slot < 0:
        child, crank, ms = NO_NODE, NO_NODE, pos
    else:
        child, crank, ms = HT[H_VAL, slot], HT[H_RANK, slot], HT[H_MS, slot]
    new_x[fired] = new_extend(E, ctr, pos, lab, child, ms)
    new_d[fired] = d
    new_r[fired] = crank
    return fired + 1


def _ranked_loop(
    next_mode: bool, contiguous: bool, consuming: bool, distinct: bool, blocking: bool
) -> RankedLoop:
    """The LAST (or NEXT) loop compiled with the paths one kind of query uses; each flag
    is a closure constant whose disabled branches Numba drops before typing (see
    :func:`pycel.jit.runtime._all_loop`): LAST never compiles NEXT's order list, a
    query without contiguity never compiles δ_adj, one without consumption never the
    barriers, one without projection never the duplicate check, one without absence
    never the blocking (:func:`_block_best`)."""
    split = next_mode and contiguous  # NEXT keeps fresh and older best sets apart
    next_flag = np.bool_(next_mode)  # a numpy bool: a literal would be a signature of its own

    @njit(cache=True)
    def run_batch_ranked(
        store: NodeStore, order: Ints, batch: BatchInput, tables: DfaArrays, work: Buffers
    ) -> RankedStep:
        """:func:`pycel.jit.runtime.run_batch` under LAST, or NEXT when ``next_mode`` (the
        same arguments plus the order list ``order``; the same results plus the order
        list)."""
        # One field per statement (see pycel.jit.runtime._all_loop).
        E = store.E
        U = store.U
        HT = store.HT
        ctr = store.ctr
        OL = order
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
        label_masks = tables.label_masks
        aptr = tables.aptr
        alabel = tables.alabel
        adst = tables.adst
        asrc = tables.asrc
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
        new_r = np.empty(64, dtype=np.int64)
        order = np.empty(64, dtype=np.int64)
        n_out = ZERO  # int64 scalars, not literals: see pycel.jit.runtime.run_batch
        n_ent = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        # The enumerator of this variant (Numba drops the other branch before typing).
        if distinct:
            enumerate_matches = _enumerate_distinct
        else:
            enumerate_matches = _enumerate
        for j in range(n):
            if not key_valid[j]:
                continue
            pos = offset + j
            c = classes[j]
            k = keys[j]
            window_lo = lows[j]
            alive: Int = ZERO  # runs that start before alive were consumed: they no longer exist
            if consuming:
                if consume == 1:
                    alive = ctr[C_BARRIER] + 1
                elif consume == 2:
                    alive = ht_get(HT, BARRIER_STATE, k) + 1
            lo = max(window_lo, alive)  # outputs start at or after lo
            moves = (2 if split else 1) * (ptr[c + 1] - ptr[c]) + aptr[c + 1] - aptr[c]
            if ctr[C_H_COUNT] + 2 * moves + 2 > HT.shape[1] // 2:
                HT = ht_rebuild(HT, U, ctr, window_lo, 2 * moves + 2, KEEP_ALL)
            prev: Int = -1
            if contiguous:
                prev = ht_get(HT, PREV_STATE, k)
                ht_put(HT, ctr, PREV_STATE, k, pos)
            if moves == 0:
                if blocking:  # an absent event that starts or extends nothing still blocks
                    U, HT, stack_h = _block_best(
                        E, U, HT, ctr, OL, tables, next_flag, c, k, alive, pos, window_lo, ZERO, stack_h
                    )
                continue
            E, U = make_room(E, U, ctr, moves, window_lo)
            if 2 * moves > order.shape[0]:
                new_x = _grow(new_x, moves)
                new_d = _grow(new_d, moves)
                new_r = _grow(new_r, moves)
                order = _grow(order, 2 * moves)
            # (1) Extend the best set of every source state (δ_adj if it is adjacent).
            fired: Int = ZERO
            for t in range(ptr[c], ptr[c + 1]):
                s = src[t]
                if s == 0:
                    fired = _fire(E, ctr, HT, NO_NODE, pos, label[t], dst[t], new_x, new_d, new_r, fired)
                    continue
                slot = ht_find(HT, s, k)
                if slot >= 0 and HT[H_MS, slot] >= alive:
                    if not (contiguous and not split and HT[H_POS, slot] == prev):  # LAST: δ_adj below
                        fired = _fire(E, ctr, HT, slot, pos, label[t], dst[t], new_x, new_d, new_r, fired)
                if split:  # a fresh best set of an older event can only skip now
                    slot = ht_find(HT, s | FRESH, k)
                    if slot >= 0 and HT[H_MS, slot] >= alive and HT[H_POS, slot] != prev:
                        fired = _fire(E, ctr, HT, slot, pos, label[t], dst[t], new_x, new_d, new_r, fired)
            if contiguous and prev >= 0:
                for t in range(aptr[c], aptr[c + 1]):
                    slot = ht_find(HT, asrc[t] | FRESH if split else asrc[t], k)
                    if slot >= 0 and HT[H_POS, slot] == prev and HT[H_MS, slot] >= alive:
                        fired = _fire(E, ctr, HT, slot, pos, alabel[t], adst[t], new_x, new_d, new_r, fired)
            made: Int = 0
            if next_mode:  # NEXT: each new run's entry in the order list
                OL, made = _next_entries(OL, new_r, fired, order)
            else:  # LAST: ranks above every older node, ordered (densely) by the child's rank
                ctr[C_RANK] = _rank(new_r, fired, order, ctr[C_RANK])
            best = NO_NODE
            for f in range(fired):
                if final[new_d[f]] and (best < 0 or _better(OL, next_mode, new_r[f], best)):
                    best = new_r[f]
            # (2) Enumerate every valuation of the best complex event ending here.
            emitted = ZERO
            first = n_out
            for f in range(fired):
                if new_r[f] == best and final[new_d[f]] and emitted < budget_all:
                    if E[E_MS, new_x[f] & (E.shape[1] - 1)] < lo:
                        break  # equal rank, equal C: all of them start before lo
                    (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                     got) = enumerate_matches(
                        new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                        max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d,
                        seen, first,
                    )
                    emitted += got
            if consuming:
                if emitted > 0 and consume != 0:
                    record_barrier(HT, ctr, consume, k, pos)
                    if next_mode:
                        for g in range(made):
                            release(OL, order[g], 1)
                    continue  # every run so far starts at or before pos: all are consumed
            if blocking:
                # Absence: the best sets that skip this event and wait across one of its
                # guards are blocked (after firing: a run reading it as the next part was not).
                U, HT, stack_h = _block_best(
                    E, U, HT, ctr, OL, tables, next_flag, c, k, alive, pos, window_lo, fired, stack_h
                )
                # Uniting heaps used up the room made for this event's nodes: make it again.
                E, U = make_room(E, U, ctr, moves, window_lo)
            # (3) The new nodes replace or join their state's best set.
            for f in range(fired):
                d = new_d[f]
                if not extends[d]:
                    continue
                if split:
                    slot = ht_slot(HT, ctr, d | FRESH, k)
                    if HT[H_VAL, slot] >= 0 and HT[H_POS, slot] != pos:
                        _retire(HT, ctr, OL, slot, d, k, alive)
                else:
                    slot = ht_slot(HT, ctr, d, k)
                x = new_x[f]
                # A consumed best set no longer exists (it started at or before the barrier).
                consumed = HT[H_VAL, slot] >= 0 and HT[H_MS, slot] < alive
                if HT[H_VAL, slot] < 0 or consumed or _better(OL, next_mode, new_r[f], HT[H_RANK, slot]):
                    if next_mode:
                        if HT[H_VAL, slot] >= 0:
                            release(OL, HT[H_RANK, slot], 1)
                        OL[O_REFS, new_r[f]] += 1
                    HT[H_VAL, slot] = heap_insert(U, E, ctr, NO_NODE, x, window_lo, pos)
                    HT[H_RANK, slot] = new_r[f]
                    HT[H_POS, slot] = pos
                    HT[H_MS, slot] = E[E_MS, x & (E.shape[1] - 1)]
                elif HT[H_RANK, slot] == new_r[f]:
                    HT[H_VAL, slot] = heap_insert(U, E, ctr, HT[H_VAL, slot], x, window_lo, pos)
            if next_mode:
                for g in range(made):  # unpin: the entries no best set took are freed
                    release(OL, order[g], 1)
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return RankedStep(NodeStore(E, U, HT, ctr), OL, out)

    return run_batch_ranked


#: A compiled LAST/NEXT loop.
RankedLoop = Callable[[NodeStore, Ints, BatchInput, DfaArrays, Buffers], RankedStep]
_LOOPS: dict[tuple[bool, bool, bool, bool, bool], RankedLoop] = {}


def loop_variants() -> dict[tuple[bool, bool, bool, bool, bool], RankedLoop]:
    """The LAST/NEXT loop variants made so far, by (next_mode, contiguous, consuming,
    distinct, blocking)."""
    return dict(_LOOPS)


def run_batch_last(
    store: NodeStore, order: Ints, batch: BatchInput, tables: DfaArrays, next_mode: bool
) -> RankedStep:
    """:func:`pycel.jit.runtime.run_batch` under LAST, or NEXT when ``next_mode`` (the
    same arguments plus the order list ``order``; the same results plus the order list).

    Runs the variant of the loop compiled for exactly the paths the batch uses.

    Example::

        step = run_batch_last(store, new_order(), batch, tables, next_mode=False)
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    blocking = bool(tables.bptr[-1] > 0)  # some class blocks runs: the pattern has an absence
    key = (bool(next_mode), bool(tables.contiguous), bool(batch.consume), distinct, blocking)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _LOOPS[key] = _ranked_loop(*key)
    return loop(store, order, batch, tables, new_buffers(tables.label_masks, distinct))
