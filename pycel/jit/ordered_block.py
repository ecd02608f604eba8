"""Absence in the ordered loop (:mod:`pycel.jit.ordered`): an event that blocks runs moves
the treaps of its key out of the blocked states (docs/architecture.md, Absence), as
:func:`pycel.jit.runtime.block_runs` moves heaps.

A blocked state holds a subset of its source's atoms, so it orders its runs by the same
register or by none (the register of a state is that of the conditions leaving its atoms,
one per event type: :func:`pycel.plan.conditions.check_registers`). A move into an empty
target hands the treap over whole, O(1); into a non-empty one, each run of the moved treap
inside the window is inserted by its key, O(log n). A blocked state is a fixed point of its
block, so a run moves at most once per guard: amortized O(log n) per run.

Example::

    E, U, HT, walk, stack = block_ordered(E, U, HT, ctr, tables, state_register, c, k, lo,
                                          pos, window_lo, reserve, walk, stack)
"""

from __future__ import annotations

from .arrays import Int, Ints
from .enumerate import _grow
from .inner import inner
from .store import (
    C_H_COUNT,
    C_MAX_DEPTH,
    C_U_NEXT,
    H_VAL,
    LIVE_ONLY,
    ONE,
    U_CMS,
    U_CONTENT,
    U_KEY,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ht_find,
    ht_get,
    ht_put,
    ht_rebuild,
    live,
    make_room,
)
from .structs import DfaArrays
from .treap import treap_insert

#: H states of a conditioned state's runs whose register is NaN / null (the ordered
#: loop's; here to keep the import downward).
SIDE_NAN, SIDE_NULL = 1 << 41, 1 << 42


@inner
def _merge_treaps(
    E: Ints, U: Ints, ctr: Ints, root: Int, moved: Int, lo: Int, pos: Int, window_lo: Int, walk: Ints,
    stack: Ints,
) -> tuple[Ints, Ints, Int, Ints, Ints]:  # fmt: skip
    """(E, U, root ∪ the runs of treap ``moved`` inside the window, walk, stack): each run
    inserted by its key (any array may have been replaced by a larger one)."""
    fresh = ctr[C_U_NEXT]  # the merge's own copies change in place (treap_insert)
    walk[0] = moved
    top = 1
    while top > 0:
        top -= 1
        h = walk[top]
        if not live(U, ctr[C_U_NEXT], h) or U[U_MS, h & (U.shape[1] - 1)] < lo:
            continue
        if top + 2 > walk.shape[0]:
            walk = _grow(walk, top + 2)
        hs = h & (U.shape[1] - 1)
        walk[top] = U[U_LEFT, hs]
        walk[top + 1] = U[U_RIGHT, hs]
        top += 2
        x_ms = U[U_CMS, hs]
        if x_ms < lo:
            continue  # this node's own run left the window (a child's may not have)
        x, key = U[U_CONTENT, hs], U[U_KEY, hs]
        E, U = make_room(E, U, ctr, ONE, window_lo)
        if ctr[C_MAX_DEPTH] + 3 > stack.shape[0]:
            stack = _grow(stack, ctr[C_MAX_DEPTH] + 3)
        root = treap_insert(U, ctr, root, x, key, x_ms, lo, pos, stack, fresh)
    return E, U, root, walk, stack


@inner
def block_ordered(
    E: Ints, U: Ints, HT: Ints, ctr: Ints, tables: DfaArrays, state_register: Ints,
    c: Int, k: Int, lo: Int, pos: Int, window_lo: Int, reserve: Int, walk: Ints, stack: Ints,
) -> tuple[Ints, Ints, Ints, Ints, Ints]:  # fmt: skip
    """Absence: move the treaps of key ``k`` that an event of class ``c`` blocks (a
    state's runs ordered by register, and those whose register is NaN or null) into the
    blocked states; return (E, U, HT, walk, stack). H keeps room for ``reserve`` more
    entries (the nodes the loop indexes next)."""
    bptr, bsrc, bdst = tables.bptr, tables.bsrc, tables.bdst
    first, last = bptr[c], bptr[c + 1]
    if first == last:
        return E, U, HT, walk, stack
    need = 3 * (last - first) + reserve + 1
    if ctr[C_H_COUNT] + need > HT.shape[1] // 2:
        HT = ht_rebuild(HT, U, ctr, window_lo, need, LIVE_ONLY)
    for i in range(first, last):
        d = bdst[i]
        for side in (0, SIDE_NAN, SIDE_NULL):
            slot = ht_find(HT, bsrc[i] | side, k)
            if slot < 0:
                continue
            moved = HT[H_VAL, slot]
            HT[H_VAL, slot] = -1
            if d < 0 or not live(U, ctr[C_U_NEXT], moved) or U[U_MS, moved & (U.shape[1] - 1)] < lo:
                continue  # the runs end (no edge is left), or none is in the window
            # A target without a register keeps its runs in one treap, never split.
            to = d | side if state_register[d] >= 0 else d
            target = ht_get(HT, to, k)
            if target < 0 or not live(U, ctr[C_U_NEXT], target) or U[U_MS, target & (U.shape[1] - 1)] < lo:
                ht_put(HT, ctr, to, k, moved)
                continue
            E, U, root, walk, stack = _merge_treaps(E, U, ctr, target, moved, lo, pos, window_lo, walk, stack)
            ht_put(HT, ctr, to, k, root)
    return E, U, HT, walk, stack
