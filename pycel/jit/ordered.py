"""The per-event loop for patterns with comparisons between occurrences (ALL and ANY):
the ALL loop (:mod:`pycel.jit.runtime`) where the runs of a state with edge conditions
are kept ordered by their register (:mod:`pycel.jit.treap`).

For such a state and an event, the conditions' thresholds (the event's values) cut the
register line into at most 2k+1 ranges (the open intervals between them and the values
themselves); on each range every condition is true or false, so the range's runs take the
transitions of that outcome (``tables.outcome``). Each range is one root split off the
state's treap: O(k log n) per event and state, and no run is looked at one by one. Runs
whose register is NaN or null are kept apart in plain heaps (``SIDE_NAN``/``SIDE_NULL``):
a comparison with null is false, and with NaN false except ``!=``.

Example::

    step = run_batch_ordered(store, batch, tables, ordered)   # Step(store, out)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit

from .arrays import Int, Ints, Truth
from .enumerate import _enumerate_ordered, _enumerate_ordered_distinct, _grow, drops_variables, new_buffers
from .inner import inner
from .runtime import _fire, _insert
from .store import (
    C_H_COUNT,
    E_MS,
    LIVE_ONLY,
    NO_NODE,
    ZERO,
    consumed_start,
    ht_get,
    ht_put,
    ht_rebuild,
    make_room,
    record_barrier,
)
from .structs import BatchInput, Buffers, DfaArrays, NodeStore, RawOutput, Step, ints
from .treap import AT_MOST, BELOW, treap_insert, treap_split

#: H states of a conditioned state's runs whose register is NaN / null.
SIDE_NAN, SIDE_NULL = 1 << 41, 1 << 42
#: Condition operators (register OP threshold) and value kinds, as the tables hold them.
OP_LT, OP_LE, OP_GT, OP_GE, OP_NE, OP_EQ = 0, 1, 2, 3, 4, 5
NUMBER, NAN, NULL = 0, 1, 2
#: The most conditions one state tests (the planner's limit) and the ranges they make,
#: plus the two side heaps.
MAX_STATE_CONDITIONS = 4
MAX_PIECES = 2 * MAX_STATE_CONDITIONS + 3


class OrderedInput(NamedTuple):
    """The edge conditions as the loop reads them: per δ_gap entry its ``outcome``; per
    state its register (-1: none) and conditions ``cond[cptr[s]:cptr[s+1]]``; per condition
    its operator and threshold row; per register / threshold row and event, the value as
    an ordered int64 key and its kind (:data:`NUMBER`, :data:`NAN`, :data:`NULL`)."""

    outcome: Ints
    state_register: Ints
    cptr: Ints
    cond: Ints
    cond_op: Ints
    cond_threshold: Ints
    reg: Ints
    reg_kind: Ints
    thr: Ints
    thr_kind: Ints


def ordered_input(*arrays: object) -> OrderedInput:
    """An :class:`OrderedInput` with every field a C-contiguous int64 array."""
    return OrderedInput(*(ints(a) for a in arrays))


@inner
def _holds(op: Int, r: Int, t: Int) -> Truth:
    if op == OP_LT:
        return r < t
    if op == OP_LE:
        return r <= t
    if op == OP_GT:
        return r > t
    if op == OP_GE:
        return r >= t
    if op == OP_EQ:
        return r == t
    return r != t


@inner
def _between_holds(op: Int, a: Int, has_a: Truth, b: Int, has_b: Truth, t: Int) -> Truth:
    """Whether ``r OP t`` holds for every r strictly between a and b (no threshold lies
    strictly between them; ``has_a``/``has_b`` False: unbounded)."""
    if op == OP_LT or op == OP_LE:
        return has_b and t >= b
    if op == OP_GT or op == OP_GE:
        return has_a and t <= a
    return op == OP_NE  # == holds at a threshold only


@inner
def _used(outcome: Ints, t: Int, u: Int, mask: Int) -> bool:
    """Whether a transition of rows t..u-1 is taken on outcome ``mask``."""
    for r in range(t, u):
        if outcome[r] == mask:
            return True
    return False


@inner
def _pieces(
    U: Ints, ctr: Ints, HT: Ints, s: Int, k: Int, j: Int, o: OrderedInput, t: Int, u: Int, lo: Int,
    pos: Int, window_lo: Int, roots: Ints, masks: Ints, values: Ints, piece_bits: Ints, stack: Ints,
) -> tuple[Ints, Int, Ints]:  # fmt: skip
    """(U, count, stack): the runs of state ``s`` and key ``k`` cut into pieces, each a root
    (``roots``) whose runs all give the outcome bits ``masks`` for event ``j``; only the
    pieces whose outcome a transition of rows t..u-1 takes."""
    first, last = o.cptr[s], o.cptr[s + 1]
    const = 0  # bits that hold for every number register (thresholds NaN, with !=)
    nan_bits = 0  # bits that hold for a NaN register
    m = 0
    for i in range(first, last):
        c = o.cond[i]
        kind = o.thr_kind[o.cond_threshold[c], j]
        ne = o.cond_op[c] == OP_NE
        if kind == NUMBER:
            if ne:
                nan_bits |= 1 << (i - first)
            v = o.thr[o.cond_threshold[c], j]
            q = m  # insert v into the sorted distinct values
            seen = False
            for p in range(m):
                if values[p] == v:
                    seen = True
            if not seen:
                while q > 0 and values[q - 1] > v:
                    values[q] = values[q - 1]
                    q -= 1
                values[q] = v
                m += 1
        elif kind == NAN and ne:
            const |= 1 << (i - first)
            nan_bits |= 1 << (i - first)
    # Piece 2p: the registers strictly between values[p-1] and values[p]; 2p+1: values[p].
    # Their outcome bits first, so that the treap is split only as far as the last piece
    # some transition takes (the splits' path copies live as long as the window).
    last_used = -1
    for piece in range(2 * m + 1):
        p = piece // 2
        bits = const
        for i in range(first, last):
            c = o.cond[i]
            if o.thr_kind[o.cond_threshold[c], j] != NUMBER:
                continue
            thr = o.thr[o.cond_threshold[c], j]
            if piece % 2 == 1:
                ok = _holds(o.cond_op[c], values[p], thr)
            else:
                a = values[p - 1] if p > 0 else 0
                b = values[p] if p < m else 0
                ok = _between_holds(o.cond_op[c], a, p > 0, b, p < m, thr)
            if ok:
                bits |= 1 << (i - first)
        piece_bits[piece] = bits
        if _used(o.outcome, t, u, bits):
            last_used = piece
    n = 0
    rest = ht_get(HT, s, k)
    for piece in range(last_used + 1):
        p = piece // 2
        if piece == 2 * m:
            root = rest
        else:
            v = values[p]
            how = BELOW if piece % 2 == 0 else AT_MOST
            U, root, rest, stack = treap_split(U, ctr, rest, v, how, lo, pos, window_lo, stack, ZERO)
        if root >= 0 and _used(o.outcome, t, u, piece_bits[piece]):
            roots[n] = root
            masks[n] = piece_bits[piece]
            n += 1
    side = ht_get(HT, s | SIDE_NAN, k)
    if side >= 0 and _used(o.outcome, t, u, nan_bits):
        roots[n] = side
        masks[n] = nan_bits
        n += 1
    side = ht_get(HT, s | SIDE_NULL, k)
    if side >= 0 and _used(o.outcome, t, u, ZERO):
        roots[n] = side
        masks[n] = 0
        n += 1
    return U, n, stack


def _ordered_loop(consuming: bool, distinct: bool) -> OrderedLoop:
    """The loop compiled with the paths one kind of query uses (closure constants, as in
    :func:`pycel.jit.runtime._all_loop`): consumption, the projection's duplicate check."""

    @njit(cache=True)
    def run_batch_ordered(
        store: NodeStore, batch: BatchInput, tables: DfaArrays, o: OrderedInput, work: Buffers
    ) -> Step:
        E, U, HT, ctr = store.E, store.U, store.HT, store.ctr
        classes, keys, key_valid, lows = batch.classes, batch.keys, batch.key_valid, batch.window_starts
        offset, proj_mask, limit, consume = batch.offset, batch.projection_mask, batch.limit, batch.consume
        ptr, src, label, dst, final = tables.ptr, tables.src, tables.label, tables.dst, tables.final
        extends, label_masks = tables.extends, tables.label_masks
        outcome, state_register = o.outcome, o.state_register
        n = classes.shape[0]
        out_se, out_off, out_var, out_pos, path, stack_h, stack_d, seen, max_labels = work
        new_x = np.empty(64, dtype=np.int64)
        new_d = np.empty(64, dtype=np.int64)
        roots = np.empty(MAX_PIECES, dtype=np.int64)
        masks = np.empty(MAX_PIECES, dtype=np.int64)
        values = np.empty(MAX_PIECES, dtype=np.int64)
        piece_bits = np.empty(MAX_PIECES, dtype=np.int64)
        n_out = ZERO
        n_ent = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        if distinct:
            enumerate_matches = _enumerate_ordered_distinct
        else:
            enumerate_matches = _enumerate_ordered
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
            if last_t == first:
                continue
            moves = (last_t - first) * MAX_PIECES  # each transition fires once per piece at most
            E, U = make_room(E, U, ctr, moves, window_lo)
            if ctr[C_H_COUNT] + 2 * moves + 1 > HT.shape[1] // 2:
                HT = ht_rebuild(HT, U, ctr, window_lo, 2 * moves + 1, LIVE_ONLY)
            if moves > new_x.shape[0]:
                new_x = _grow(new_x, moves)
                new_d = _grow(new_d, moves)
            # (1) Fire transitions: read H (earlier positions only).
            fired: Int = 0
            t = first
            while t < last_t:
                s = src[t]
                if s == 0:
                    fired = _fire(E, U, ctr, pos, label[t], dst[t], NO_NODE, lo, new_x, new_d, fired)
                    t += 1
                    continue
                if state_register[s] < 0:
                    h = ht_get(HT, s, k)
                    if h >= 0:
                        fired = _fire(E, U, ctr, pos, label[t], dst[t], h, lo, new_x, new_d, fired)
                    t += 1
                    continue
                # A state with conditions: its rows (one per outcome and label) are together.
                u = t
                while u < last_t and src[u] == s:
                    u += 1
                U, count, stack_h = _pieces(
                    U, ctr, HT, s, k, j, o, t, u, lo, pos, window_lo,
                    roots, masks, values, piece_bits, stack_h,
                )  # fmt: skip
                for p in range(count):
                    for r in range(t, u):
                        if outcome[r] == masks[p]:
                            fired = _fire(E, U, ctr, pos, label[r], dst[r], roots[p], lo, new_x, new_d, fired)
                t = u
            # (2) Enumerate the matches ending here.
            emitted = ZERO
            first_out = n_out
            for f in range(fired):
                if final[new_d[f]] and emitted < budget_all:
                    (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                     got) = enumerate_matches(
                        new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                        max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d,
                        seen, first_out,
                    )
                    emitted += got
            if consuming:
                if emitted > 0 and consume != 0:
                    record_barrier(HT, ctr, consume, k, pos)
                    continue
            # (3) Index the new nodes by (state, key): ordered by register where the state
            # has conditions.
            for f in range(fired):
                d = new_d[f]
                if not extends[d]:
                    continue
                x = new_x[f]
                reg = state_register[d]
                state = d
                if reg >= 0:
                    kind = o.reg_kind[reg, j]
                    if kind == NUMBER:
                        root = ht_get(HT, d, k)
                        x_ms = E[E_MS, x & (E.shape[1] - 1)]
                        U, root, stack_h = treap_insert(
                            U, ctr, root, x, o.reg[reg, j], x_ms, lo, pos, window_lo, stack_h
                        )
                        ht_put(HT, ctr, d, k, root)
                        continue
                    state = d | (SIDE_NAN if kind == NAN else SIDE_NULL)
                U, root = _insert(U, E, ctr, ht_get(HT, state, k), x, lo, pos, window_lo)
                ht_put(HT, ctr, state, k, root)
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return Step(NodeStore(E, U, HT, ctr), out)

    return run_batch_ordered


OrderedLoop = Callable[[NodeStore, BatchInput, DfaArrays, OrderedInput, Buffers], Step]
_LOOPS: dict[tuple[bool, bool], OrderedLoop] = {}


def run_batch_ordered(store: NodeStore, batch: BatchInput, tables: DfaArrays, ordered: OrderedInput) -> Step:
    """Process one batch of a pattern with edge conditions (ALL/ANY); return the (possibly
    grown) store and the matches. ``store.U`` has :data:`~pycel.jit.treap.TREAP_ROWS` rows.

    Example::

        step = run_batch_ordered(store, batch_input(...), tables, ordered_input(...))
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    key = (bool(batch.consume), distinct)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _LOOPS[key] = _ordered_loop(*key)
    return loop(store, batch, tables, ordered, new_buffers(tables.label_masks, distinct))
