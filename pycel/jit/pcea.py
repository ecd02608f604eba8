"""The per-event loop for parallelized transitions (PCEA paper Algorithm 1 with |P| > 1):
hierarchical conjunctions with nested join classes (:mod:`pycel.plan.hcq`).

An extend node may have up to four children (heaps of the states the transition joins),
stored in extra rows of the same arena; its max-start is the minimum over the children,
so the window check stays O(1). Every state is indexed in H by its own *shape* (the join
classes above it): the node a transition creates in state v goes to H[v, key of v's
shape], and a transition reading atom i looks each child s up under H[s, atom i's key of
s's shape]. H is read for the whole event before anything is written.

Enumeration walks a product of heaps: a partial match is the chosen extend nodes plus an
*open list* of child heaps still to choose from (a linked list in scratch cells); taking
a content of the first open heap prepends that node's own children. Every heap pushed has
max-start ≥ the window start, so, as in :mod:`pycel.jit.enumerate`, each step leads to an
output: the delay is linear in the output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .arrays import Int, Int32s, Ints
from .enumerate import _grow, _seen_before, drops_variables, emit_match, new_buffers
from .inner import inner
from .store import (
    C_U_NEXT,
    E_LABEL,
    E_MS,
    E_POS,
    LIVE_ONLY,
    NO_NODE,
    U_CONTENT,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ZERO,
    heap_insert,
    ht_get,
    ht_put,
    ht_rebuild,
    live,
    make_room,
)
from .structs import Buffers, HcqArrays, HcqInput, NodeStore, RawOutput, Step

# Extend-node rows beyond the store's four: the child count and children 2-4 (the first
# child is the store's E_CHILD row).
E_NCH = 4
CHILD_ROWS = (2, 5, 6, 7)
E_ROWS = 8


def new_arena(capacity: int = 1024) -> np.ndarray:
    """An extend-node arena with room for four children per node."""
    return np.full((E_ROWS, capacity), -1, dtype=np.int64)


@njit(cache=True, inline="always")
def _child(E: Ints, node: Int, c: Int) -> Int:
    row = 2 if c == 0 else 4 + c
    value: Int = E[row, node]
    return value


@inner
def _open(
    E: Ints, node: Int, rest: Int, cell_h: Ints, cell_next: Ints, ncell: Int
) -> tuple[Int, Ints, Ints, Int]:
    """Prepend extend node ``node``'s child heaps to the open list ``rest`` (scratch cells)."""
    es = node & (E.shape[1] - 1)
    if ncell + E[E_NCH, es] > cell_h.shape[0]:
        cell_h = _grow(cell_h, ncell + E[E_NCH, es])
        cell_next = _grow(cell_next, ncell + E[E_NCH, es])
    for c in range(E[E_NCH, es] - 1, -1, -1):
        cell_h[ncell] = _child(E, es, c)
        cell_next[ncell] = rest
        rest = ncell
        ncell += 1
    return rest, cell_h, cell_next, ncell


@inner
def _sort_entries(out_var: Int32s, out_pos: Ints, lo: Int, hi: Int) -> None:
    """Order one match's entries as the chain enumerator does (latest position first,
    then by variable), so that equal matches have equal entry sequences."""
    for i in range(lo + 1, hi):
        v, p = out_var[i], out_pos[i]
        k = i
        while k > lo and (out_pos[k - 1] < p or (out_pos[k - 1] == p and out_var[k - 1] > v)):
            out_var[k], out_pos[k] = out_var[k - 1], out_pos[k - 1]
            k -= 1
        out_var[k], out_pos[k] = v, p


#: What the tree enumerator returns: the output arrays and counts, the duplicate set and
#: the number of matches it wrote.
TreeEnumerated = tuple[Ints, Ints, Int32s, Ints, Int, Int, Ints, Int]
TreeEnumerator = Callable[
    [Int, Int, Int, Int, Ints, Ints, Ints, Ints, Int, Int, Ints, Ints, Int32s, Ints, Int, Int, Ints, Int],
    TreeEnumerated,
]


def _tree_enumerator(distinct: bool) -> TreeEnumerator:
    """The tree enumerator with the projection's duplicate check (``distinct``) or
    without (a closure constant: see :func:`pycel.jit.enumerate._enumerator`)."""

    @inner
    def enumerate_tree(
        x: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints, label_masks: Ints,
        proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints,
        n_out: Int, n_ent: Int, seen: Ints, first: Int,
    ) -> TreeEnumerated:  # fmt: skip
        """Write the matches below extend node ``x`` (at most ``budget``); see the module
        doc. Under a projection, repeats of this end's matches are taken back (as in
        :func:`pycel.jit.enumerate._enumerate_distinct`)."""
        umask = U.shape[1] - 1
        unext = ctr[C_U_NEXT]
        chosen = np.empty(16, dtype=np.int64)
        cell_h = np.empty(64, dtype=np.int64)
        cell_next = np.empty(64, dtype=np.int64)
        fr_h = np.empty(64, dtype=np.int64)
        fr_rest = np.empty(64, dtype=np.int64)
        fr_d = np.empty(64, dtype=np.int64)
        chosen[0] = x
        # int64 scalars, not literals, where they reach jitted calls (see runtime.run_batch)
        rest, cell_h, cell_next, ncell = _open(E, x, NO_NODE, cell_h, cell_next, ZERO)
        d = ZERO
        top = ZERO
        emitted = ZERO
        while True:
            # chosen[0..d] is a partial match whose open heaps are ``rest``: emit or descend.
            if rest < 0:
                out_se, out_off, out_var, out_pos, n_out, n_ent = emit_match(
                    chosen, d, end, E, label_masks, proj_mask,
                    out_se, out_off, out_var, out_pos, n_out, n_ent, max_labels,
                )
                repeated = False
                if distinct:
                    _sort_entries(out_var, out_pos, out_off[n_out - 1], n_ent)
                    seen, repeated = _seen_before(
                        seen, out_se, out_off, out_var, out_pos, n_out - 1, first, end
                    )
                if repeated:
                    n_out -= 1
                    n_ent = out_off[n_out]
                else:
                    emitted += 1
            else:
                if top + 3 > fr_h.shape[0]:
                    fr_h = _grow(fr_h, top + 3)
                    fr_rest = _grow(fr_rest, top + 3)
                    fr_d = _grow(fr_d, top + 3)
                fr_h[top], fr_rest[top], fr_d[top] = cell_h[rest], cell_next[rest], d + 1
                top += 1
            # The next heap to choose from (its siblings first pushed for later).
            while top > 0:
                top -= 1
                h = fr_h[top]
                if live(U, unext, h):
                    break
            else:
                break
            if emitted >= budget:
                break
            rest, d = fr_rest[top], fr_d[top]
            hs = h & umask
            for side in (U_LEFT, U_RIGHT):
                u = U[side, hs]
                if live(U, unext, u) and U[U_MS, u & umask] >= lo:
                    if top + 1 > fr_h.shape[0]:
                        fr_h = _grow(fr_h, top + 1)
                        fr_rest = _grow(fr_rest, top + 1)
                        fr_d = _grow(fr_d, top + 1)
                    fr_h[top], fr_rest[top], fr_d[top] = u, rest, d
                    top += 1
            e = U[U_CONTENT, hs]
            if d >= chosen.shape[0]:
                chosen = _grow(chosen, d + 1)
            chosen[d] = e
            rest, cell_h, cell_next, ncell = _open(E, e, rest, cell_h, cell_next, ncell)
        return out_se, out_off, out_var, out_pos, n_out, n_ent, seen, emitted

    return enumerate_tree


_enumerate_tree = _tree_enumerator(False)
_enumerate_tree_distinct = _tree_enumerator(True)


def _hcq_loop(distinct: bool) -> HcqLoop:
    """The parallelized automaton's loop with the projection's duplicate check
    (``distinct``) or without (a closure constant: see :func:`pycel.jit.runtime._all_loop`)."""

    @njit(cache=True)
    def run_batch_parallel(store: NodeStore, batch: HcqInput, tables: HcqArrays, work: Buffers) -> Step:
        """See :func:`run_batch_hcq`."""
        # One field per statement (see pycel.jit.runtime._all_loop).
        E = store.E
        U = store.U
        HT = store.HT
        ctr = store.ctr
        bits = batch.bits
        keys = batch.keys
        key_valid = batch.key_valid
        same_ok = batch.same_ok
        lows = batch.window_starts
        offset = batch.offset
        proj_mask = batch.projection_mask
        limit = batch.limit
        mask = tables.mask
        dst = tables.dst
        final = tables.final
        same = tables.same
        nkids = tables.nkids
        kids = tables.kids
        kid_combo = tables.kid_combo
        dst_combo = tables.dst_combo
        label_masks = tables.label_masks
        n = bits.shape[0]
        n_trans = mask.shape[0]
        out_se = work.se
        out_off = work.offsets
        out_var = work.var_ids
        out_pos = work.positions
        seen = work.seen
        max_labels = work.max_labels
        new_x = np.empty(64, dtype=np.int64)
        new_d = np.empty(64, dtype=np.int64)
        new_t = np.empty(64, dtype=np.int64)
        ch = np.empty(4, dtype=np.int64)
        n_out: Int = ZERO  # int64 scalars, not literals: see pycel.jit.runtime.run_batch
        n_ent: Int = ZERO
        budget_all = limit if limit >= 0 else 1 << 62
        # The enumerator of this variant (Numba drops the other branch before typing).
        if distinct:
            enumerate_matches = _enumerate_tree_distinct
        else:
            enumerate_matches = _enumerate_tree
        for j in range(n):
            b = bits[j]
            if b == 0:
                continue
            pos = offset + j
            lo = lows[j]
            moves = ZERO
            for t in range(n_trans):
                if b & mask[t] == mask[t]:
                    moves += 1
            if moves == 0:
                continue
            E, U = make_room(E, U, ctr, moves, lo)
            HT = ht_rebuild(HT, U, ctr, lo, moves + 1, LIVE_ONLY)
            if moves > new_x.shape[0]:
                new_x = _grow(new_x, moves)
                new_d = _grow(new_d, moves)
                new_t = _grow(new_t, moves)
            umask = U.shape[1] - 1
            unext = ctr[C_U_NEXT]
            fired = ZERO
            # (1) Fire: every child joined under the reading event's key of its shape.
            for t in range(n_trans):
                if b & mask[t] != mask[t] or (same[t] >= 0 and not same_ok[same[t], j]):
                    continue
                ok = True
                ms = pos
                for c in range(nkids[t]):
                    k = kid_combo[t, c]
                    if not key_valid[k, j]:
                        ok = False
                        break
                    h = ht_get(HT, kids[t, c], keys[k, j])
                    if h < 0 or not live(U, unext, h) or U[U_MS, h & umask] < lo:
                        ok = False
                        break
                    ch[c] = h
                    ms = min(ms, U[U_MS, h & umask])
                if not ok:
                    continue
                node = ctr[0]
                ctr[0] += 1
                es = node & (E.shape[1] - 1)
                E[E_POS, es] = pos
                E[E_LABEL, es] = t
                E[E_MS, es] = ms
                E[E_NCH, es] = nkids[t]
                for c in range(4):
                    E[2 if c == 0 else 4 + c, es] = ch[c] if c < nkids[t] else -1
                new_x[fired], new_d[fired], new_t[fired] = node, dst[t], t
                fired += 1
            # (2) Enumerate the matches completed here.
            emitted: Int = ZERO
            first = n_out
            for f in range(fired):
                if final[new_t[f]] and emitted < budget_all:
                    out_se, out_off, out_var, out_pos, n_out, n_ent, seen, got = enumerate_matches(
                        new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask,
                        max_labels, out_se, out_off, out_var, out_pos, n_out, n_ent, seen, first,
                    )
                    emitted += got
            # (3) Index the new nodes under their state's shape.
            for f in range(fired):
                k = dst_combo[new_t[f]]
                if k < 0 or not key_valid[k, j]:
                    continue
                d = new_d[f]
                key = keys[k, j]
                ht_put(HT, ctr, d, key, heap_insert(U, E, ctr, ht_get(HT, d, key), new_x[f], lo, pos))
        out = RawOutput(out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent])
        return Step(NodeStore(E, U, HT, ctr), out)

    return run_batch_parallel


#: A compiled loop over the parallelized automaton.
HcqLoop = Callable[[NodeStore, HcqInput, HcqArrays, Buffers], Step]
_LOOPS: dict[bool, HcqLoop] = {}


def loop_variants() -> dict[bool, HcqLoop]:
    """The loop variants made so far, by whether they check for repeated matches."""
    return dict(_LOOPS)


def run_batch_hcq(store: NodeStore, batch: HcqInput, tables: HcqArrays) -> Step:
    """Process one batch: ``batch.bits[j]`` the atoms event j may be read as;
    ``batch.keys[c, j]`` (valid where ``batch.key_valid``) its key under combo c;
    ``batch.same_ok[s, j]`` whether it holds the attribute equalities s of a merged read.
    Transition t reads the atoms of ``tables.mask[t]`` and writes label set t. Node 0 is
    the root (never indexed). Returns the store and the matches.

    Example::

        step = run_batch_hcq(store, hcq_input(...), tables)   # Step(store, out)
    """
    distinct = drops_variables(tables.label_masks, batch.projection_mask)
    loop = _LOOPS.get(distinct)
    if loop is None:
        loop = _LOOPS[distinct] = _hcq_loop(distinct)
    return loop(store, batch, tables, new_buffers(tables.label_masks, distinct))
