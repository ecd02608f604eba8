"""The per-event loop for patterns with comparisons between occurrences (ALL and ANY, and
the LAST/NEXT choice with a window, :mod:`pycel.jit.choose`):
the ALL loop (:mod:`pycel.jit.runtime`) where the runs of a state with edge conditions
are kept ordered by their register (:mod:`pycel.jit.treap`).

For such a state and an event, the conditions' thresholds (the event's values) cut the
register line into at most 2k+1 ranges (the open intervals between them and the values
themselves); on each range every condition is true or false, so the range's runs take the
transitions of that outcome (``tables.outcome``). Each range is one root split off the
state's treap: O(k log n) per event and state, and no run is looked at one by one. Runs
whose register is NaN or null are kept apart (``SIDE_NAN``/``SIDE_NULL``): a comparison
with null is false, and with NaN false except ``!=``. Those, and the runs of states
without conditions, are in treaps ordered by node id (creation), never split.

Example::

    step = run_batch_ordered(store, batch, tables, ordered)   # Step(store, out)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit

from .arrays import Int, Ints, Truth
from .choose import choose_last, choose_next, gather_finals
from .choose_max import choose_max
from .enumerate import (
    _enumerate_ordered,
    _enumerate_ordered_distinct,
    _enumerate_ordered_residual,
    _grow,
    drops_variables,
    new_buffers,
)
from .ordered_block import SIDE_NAN, SIDE_NULL, block_ordered
from .residual import Residual, empty_residual
from .runtime import _fire
from .store import (
    C_H_COUNT,
    C_MAX_DEPTH,
    C_U_NEXT,
    E_MS,
    H_STATE,
    LIVE_ONLY,
    NO_NODE,
    ONE,
    ZERO,
    consumed_start,
    ht_get,
    ht_put,
    ht_rebuild,
    make_room,
    record_barrier,
)
from .structs import BatchInput, Buffers, DfaArrays, NodeStore, RawOutput, Step, ints
from .treap import AT_MOST, BELOW, KEEP_LEFT, KEEP_RIGHT, treap_insert, treap_split

#: Condition operators (register OP threshold) and value kinds, as the tables hold them.
OP_LT, OP_LE, OP_GT, OP_GE, OP_NE, OP_EQ = 0, 1, 2, 3, 4, 5
NUMBER, NAN, NULL = 0, 1, 2
#: Threshold kinds: a number beyond every register (an int register, a float threshold
#: out of the int64 range; pycel.runtime.registers).
ABOVE_ALL, BELOW_ALL = 3, 4
#: The most conditions one state tests (the planner's limit) and the ranges they make,
#: plus the two side heaps.
MAX_STATE_CONDITIONS = 4
MAX_PIECES = 2 * MAX_STATE_CONDITIONS + 3
#: The most splits of one treap per event and state (two per threshold value).
MAX_SPLITS = np.int64(2 * MAX_STATE_CONDITIONS)


class OrderedInput(NamedTuple):
    """The edge conditions as the loop reads them: per δ_gap entry its ``outcome``; per
    state its register (-1: none) and conditions ``cond[cptr[s]:cptr[s+1]]``; per condition
    its operator and threshold row; per register / threshold row and event, the value as
    an ordered int64 key and its kind (:data:`NUMBER`, :data:`NAN`, :data:`NULL`; a
    threshold also :data:`ABOVE_ALL`, :data:`BELOW_ALL`)."""

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


#: Which relations of a register piece to a threshold piece (below, the same, above: bits
#: 0, 1, 2) each operator holds on, three bits per operator (a shift in place of a
#: function with six branches).
_HOLDS = sum(
    bits << 3 * op for op, bits in ((OP_LT, 1), (OP_LE, 3), (OP_GT, 4), (OP_GE, 6), (OP_NE, 5), (OP_EQ, 2))
)


@njit(cache=True, inline="always")
def _pieces(
    U: Ints, ctr: Ints, HT: Ints, s: Int, k: Int, j: Int, outcome: Ints, cptr: Ints, cond: Ints,
    cond_op: Ints, thr: Ints, thr_kind: Ints, t: Int, u: Int, lo: Int, pos: Int, rest: Int,
    roots: Ints, masks: Ints, values: Ints, piece_bits: Ints, stack: Ints, sides: Truth,
) -> Int:  # fmt: skip
    """How many pieces the runs of state ``s`` and key ``k`` (the treap ``rest``) were cut
    into, each a root (``roots``) whose runs all give the outcome bits ``masks`` for event
    ``j``; only the pieces whose outcome a transition of rows t..u-1 takes. ``U`` and
    ``stack`` have room for :data:`MAX_SPLITS` splits of ``rest``.

    The m number thresholds, sorted, cut the register line into pieces 0..2m: piece 2p
    holds the registers strictly between values[p-1] and values[p], piece 2p+1 the value
    values[p] (a value that repeats the one before leaves its two pieces empty). Pieces are
    ordered as their registers, so ``r OP t`` holds on piece P for a threshold in piece T
    exactly when ``P OP T`` (one comparison of two small ints, the same for points and
    intervals).

    Inlined into the loop: compiled apart it cost about 0.4 s less to compile, but the
    call, with its 23 arguments, made the warm trend of benchmarks/order.py a third
    slower."""
    first, last = cptr[s], cptr[s + 1]
    # The outcomes some transition of rows t..u-1 takes, as bits (at most 2^4 outcomes).
    taken = ZERO
    for r in range(t, u):
        taken |= ONE << outcome[r]
    const = ZERO  # bits that hold for every number register (thresholds NaN, with !=)
    nan_bits = ZERO  # bits that hold for a NaN register
    m = ZERO
    for i in range(first, last):
        c = cond[i]
        kind = thr_kind[c, j]
        if cond_op[c] == OP_NE and kind != NULL:
            nan_bits |= ONE << (i - first)
            if kind == NAN:
                const |= ONE << (i - first)
        if kind == NUMBER:
            m += 1
        elif kind == ABOVE_ALL or kind == BELOW_ALL:  # every register is below (above) it
            if _HOLDS >> 3 * cond_op[c] >> (ZERO if kind == ABOVE_ALL else 2 * ONE) & 1:
                const |= ONE << (i - first)
    # values[p]: the number thresholds sorted (equal ones by condition), each placed by
    # its rank; no sort loop (at most MAX_STATE_CONDITIONS of them).
    for piece in range(2 * m + 1):
        piece_bits[piece] = const
    for i in range(first, last):
        c = cond[i]
        if thr_kind[c, j] != NUMBER:
            continue
        v = thr[c, j]
        below = ZERO  # thresholds smaller than v: its piece is 2 * below + 1
        rank = ZERO
        for i2 in range(first, last):
            c2 = cond[i2]
            if thr_kind[c2, j] == NUMBER:
                v2 = thr[c2, j]
                if v2 < v:
                    below += 1
                if v2 < v or (v2 == v and i2 < i):
                    rank += 1
        values[rank] = v
        holds = _HOLDS >> 3 * cond_op[c]
        at = 2 * below + 1
        for piece in range(2 * m + 1):
            relation = ONE if piece == at else (2 * ONE if piece > at else ZERO)
            if holds >> relation & 1:
                piece_bits[piece] |= ONE << (i - first)
    last_used = -1
    for piece in range(2 * m + 1):
        if taken >> piece_bits[piece] & 1:
            last_used = piece
    n = ZERO
    fresh = ctr[C_U_NEXT]  # the right sides split off below: only ``rest`` refers to them
    for piece in range(last_used + 1):
        if rest < 0:
            break  # nothing left to cut (an empty treap: no split called at all)
        p = piece >> 1
        if piece < 2 * m and p > 0 and values[p] == values[p - 1]:
            continue  # a repeated value: both its pieces are empty
        used = taken >> piece_bits[piece] & 1
        if piece == 2 * m:
            root = rest
        else:
            # Build only the sides used: this piece if a transition takes it, the rest if
            # a later piece is used (a trend's split keeps one side: half the copies).
            keep = ZERO
            if used:
                keep |= KEEP_LEFT
            if piece < last_used:
                keep |= KEEP_RIGHT
            how = AT_MOST if piece & 1 else BELOW
            root, rest = treap_split(U, ctr, rest, values[p], how, keep, lo, pos, stack, ZERO, fresh)
        if root >= 0 and used:
            roots[n] = root
            masks[n] = piece_bits[piece]
            n += 1
    if not sides:
        return n
    side = ht_get(HT, s | SIDE_NAN, k)
    if side >= 0 and taken >> nan_bits & 1:
        roots[n] = side
        masks[n] = nan_bits
        n += 1
    side = ht_get(HT, s | SIDE_NULL, k)
    if side >= 0 and taken & 1:
        roots[n] = side
        masks[n] = 0
        n += 1
    return n


def _ordered_loop(
    consuming: bool, distinct: bool, blocking: bool, pruning: bool, last: bool, next_: bool, max_: bool
) -> OrderedLoop:
    """The loop compiled with the paths one kind of query uses (closure constants, as in
    :func:`pycel.jit.runtime._all_loop`): consumption, the projection's duplicate check,
    absence (``blocking``: events that block waiting runs, :mod:`pycel.jit.ordered_block`),
    pruning by the post-filters' programs ``res`` (:mod:`pycel.jit.residual`), and LAST's,
    NEXT's or MAX's choice among an end's outputs that fit the window instead of
    enumerating them all (:mod:`pycel.jit.choose`, :mod:`pycel.jit.choose_max`; their
    walks skip a treap node whose own run left the window, as the enumerator does)."""
    choosing = last or next_ or max_

    @njit(cache=True)
    def run_batch_ordered(
        store: NodeStore, batch: BatchInput, tables: DfaArrays, o: OrderedInput, work: Buffers, res: Residual
    ) -> Step:
        # One field per statement (see pycel.jit.runtime._all_loop).
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
        label_masks = tables.label_masks
        outcome = o.outcome
        state_register = o.state_register
        cptr = o.cptr
        cond = o.cond
        cond_op = o.cond_op
        thr = o.thr
        thr_kind = o.thr_kind
        reg = o.reg
        reg_kind = o.reg_kind
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
        roots = np.empty(MAX_PIECES, dtype=np.int64)
        masks = np.empty(MAX_PIECES, dtype=np.int64)
        values = np.empty(MAX_PIECES, dtype=np.int64)
        piece_bits = np.empty(MAX_PIECES, dtype=np.int64)
        n_out = ZERO
        n_ent = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        if pruning:  # (post-filters keep every variable: never distinct)
            enumerate_matches = _enumerate_ordered_residual
        elif distinct:
            enumerate_matches = _enumerate_ordered_distinct
        else:
            enumerate_matches = _enumerate_ordered
        if last:
            choose_end = choose_last
        elif next_:
            choose_end = choose_next
        else:
            choose_end = choose_max
        finals = np.empty(64, dtype=np.int64)
        walk = np.empty(64, dtype=np.int64)  # the treap a block moves, node by node
        # Whether a treap of NaN or null registers may exist: two lookups per conditioned
        # state and event saved when none does. A scan of H answers it when that is cheap
        # next to the batch (else assume one may); an insertion into one sets it.
        sides = True
        if n >= HT.shape[1] // 64:
            sides = False
            for i in range(HT.shape[1]):
                h_state = HT[H_STATE, i]
                if h_state >= 0 and h_state & (SIDE_NAN | SIDE_NULL) != 0:
                    sides = True
                    break
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
                if blocking:  # an absent event that starts or extends nothing still blocks
                    E, U, HT, walk, stack_h = block_ordered(
                        E, U, HT, ctr, tables, state_register, c, k, lo, pos, window_lo, ZERO, walk, stack_h
                    )
                continue
            moves = (last_t - first) * MAX_PIECES  # each transition fires once per piece at most
            # Room for everything this event makes, so that nothing moves while it is
            # processed (the treap operations never grow an array). A treap's height is at
            # most ctr[C_MAX_DEPTH] (D) when the event starts; a split copies at most D
            # nodes, at most MAX_SPLITS of them per row; the i-th insertion at most D + i.
            # make_room reserves room * (D + room + 1) heap nodes, which covers both.
            room = moves + (last_t - first) * MAX_SPLITS
            E, U = make_room(E, U, ctr, room, window_lo)
            if ctr[C_H_COUNT] + 2 * moves + 1 > HT.shape[1] // 2:
                HT = ht_rebuild(HT, U, ctr, window_lo, 2 * moves + 1, LIVE_ONLY)
            if moves > new_x.shape[0]:
                new_x = _grow(new_x, moves)
                new_d = _grow(new_d, moves)
                finals = _grow(finals, moves)
            if ctr[C_MAX_DEPTH] + room + 1 > stack_h.shape[0]:
                stack_h = _grow(stack_h, ctr[C_MAX_DEPTH] + room + 1)
            # (1) Fire transitions: read H (earlier positions only). A state's rows (one
            # per outcome and label) are together; its runs come as pieces, each a root whose
            # runs take the rows of one outcome (one piece of outcome 0 where the state has no
            # conditions; the start state's is the new run). One call site of the inlined
            # _fire, not one per kind of state.
            fired: Int = 0
            t = first
            while t < last_t:
                s = src[t]
                u = t + 1
                while u < last_t and src[u] == s:
                    u += 1
                count: Int = ZERO
                if s == 0:
                    roots[0] = NO_NODE
                    masks[0] = 0
                    count = ONE
                elif state_register[s] < 0:
                    roots[0] = ht_get(HT, s, k)
                    masks[0] = 0
                    if roots[0] >= 0:
                        count = ONE
                else:
                    count = _pieces(
                        U, ctr, HT, s, k, j, outcome, cptr, cond, cond_op, thr, thr_kind, t, u, lo, pos,
                        ht_get(HT, s, k), roots, masks, values, piece_bits, stack_h, sides,
                    )  # fmt: skip
                for p in range(count):
                    for r in range(t, u):
                        if outcome[r] == masks[p]:
                            fired = _fire(E, U, ctr, pos, label[r], dst[r], roots[p], lo, new_x, new_d, fired)
                t = u
            # (2) Enumerate the matches ending here.
            emitted = ZERO
            first_out = n_out
            if choosing:  # LAST/NEXT/MAX with a window: the end's chosen outputs, from all its finals
                n_finals = gather_finals(new_x, new_d, final, fired, finals)
                if n_finals > 0:
                    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack_h, emitted) = choose_end(
                        finals, n_finals, pos, lo, budget_all, E, U, ctr, label_masks, proj_mask, max_labels,
                        out_se, out_off, out_var, out_pos, n_out, n_ent, stack_h,
                    )
            if not choosing:  # (not compiled into a choosing variant)
                for f in range(fired):
                    if final[new_d[f]] and emitted < budget_all:
                        # (``res`` is read by the pruning variant only)
                        (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen,
                         got) = enumerate_matches(
                            new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                            max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h,
                            stack_d, seen, first_out, res,
                        )
                        emitted += got
            if consuming:
                if emitted > 0 and consume != 0:
                    record_barrier(HT, ctr, consume, k, pos)
                    continue
            if blocking:
                # Absence: the runs that skip this event and wait across one of its guards
                # are blocked (after firing: a run reading it as the next part was not).
                E, U, HT, walk, stack_h = block_ordered(
                    E, U, HT, ctr, tables, state_register, c, k, lo, pos, window_lo, fired, walk, stack_h
                )
                # The moves used up the room made for this event's insertions, and may have
                # made a treap taller: make it again.
                E, U = make_room(E, U, ctr, room, window_lo)
                if ctr[C_MAX_DEPTH] + room + 1 > stack_h.shape[0]:
                    stack_h = _grow(stack_h, ctr[C_MAX_DEPTH] + room + 1)
            # (3) Index the new nodes by (state, key), each in a treap: ordered by register
            # where the state has conditions; elsewhere (no conditions, or a NaN or null
            # register) by node id, i.e. by creation. Only treaps: the loop compiles no heap
            # insertion (about a second of a cold first query) for the states no event
            # splits, and an insertion at the treap's newest end copies its right spine,
            # ln n nodes expected, where a heap insertion copies log2 n.
            # The nodes these insertions make are in no run yet: a later insertion into the
            # same treap changes them in place (the treap's path is copied once per event).
            fresh = ctr[C_U_NEXT]
            for f in range(fired):
                d = new_d[f]
                if not extends[d]:
                    continue
                x = new_x[f]
                r_row = state_register[d]
                state = d
                order_key = x
                if r_row >= 0:
                    kind = reg_kind[r_row, j]
                    if kind == NUMBER:
                        order_key = reg[r_row, j]
                    elif kind == NAN:
                        state = d | SIDE_NAN
                        sides = True
                    else:
                        state = d | SIDE_NULL
                        sides = True
                x_ms = E[E_MS, x & (E.shape[1] - 1)]
                root = treap_insert(U, ctr, ht_get(HT, state, k), x, order_key, x_ms, lo, pos, stack_h, fresh)
                ht_put(HT, ctr, state, k, root)
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return Step(NodeStore(E, U, HT, ctr), out)

    return run_batch_ordered


OrderedLoop = Callable[[NodeStore, BatchInput, DfaArrays, OrderedInput, Buffers, Residual], Step]
_LOOPS: dict[tuple[bool, bool, bool, bool, bool, bool, bool], OrderedLoop] = {}
#: What the loops take for ``res`` when nothing prunes (one fixed type for every variant).
_NO_RESIDUAL = empty_residual()


def loop_variants() -> dict[tuple[bool, bool, bool, bool, bool, bool, bool], OrderedLoop]:
    """The ordered loop variants made so far, by (consuming, distinct, blocking, pruning,
    last, next, max)."""
    return dict(_LOOPS)


def run_batch_ordered(
    store: NodeStore,
    batch: BatchInput,
    tables: DfaArrays,
    ordered: OrderedInput,
    res: Residual | None = None,
    choose: str = "",
) -> Step:
    """Process one batch of a pattern with edge conditions (ALL/ANY, or the choice of
    ``choose`` "last"/"next"/"max" at each end, with a window; pruned by the post-filters'
    programs ``res`` if given); return the (possibly grown) store and the matches.
    ``store.U`` has :data:`~pycel.jit.treap.TREAP_ROWS` rows.

    Example::

        step = run_batch_ordered(store, batch_input(...), tables, ordered_input(...))
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    blocking = bool(tables.bptr[-1] > 0)  # some class blocks runs: the pattern has an absence
    chooser = (choose == "last", choose == "next", choose == "max")
    key = (bool(batch.consume), distinct, blocking, res is not None, *chooser)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _LOOPS[key] = _ordered_loop(*key)
    work = new_buffers(tables.label_masks, distinct)
    return loop(store, batch, tables, ordered, work, _NO_RESIDUAL if res is None else res)
