"""The enumerator (docs/architecture.md): write the matches below a new node to output arrays.

A match is a path of extend nodes from the new node down to a run's first event, choosing
one content per heap. The walk is depth-first with an explicit stack; only heap nodes with
max-start ≥ the window start are pushed, and by the heap property each of them leads to at
least one output, so the delay is linear in the output. A union node (an extend node
with label -1, made by the MAX loop) stands for its child heap: the walk enters that heap
at the same depth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numba import njit, objmode

from .arrays import Int, Int32s, Ints, Truth
from .inner import inner
from .probe import below_floor, probe_empty, reset_floors
from .residual import (
    NODE_FAILS,
    PASSED_SHIFT,
    SKIP_ABOVE,
    SKIP_BELOW,
    Residual,
    residual_holds,
    residual_key_sides,
)
from .store import (
    C_E_NEXT,
    C_U_NEXT,
    E_CHILD,
    E_LABEL,
    E_POS,
    ONE,
    TREAP,
    U_BIT,
    U_CMS,
    U_CONTENT,
    U_KEY,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ZERO,
    live,
)
from .structs import Buffers

_KEY_MAX = np.int64(2**63 - 1)
_KEY_MIN = np.int64(-(2**63))


@njit(cache=True, inline="always")
def _unbound_keys(res: Residual, d: Int) -> None:
    """A new index enters the path at depth ``d``: no key bounds it yet."""
    if d < res.key_above.shape[0]:
        res.key_above[d] = _KEY_MAX
        res.key_below[d] = _KEY_MIN


#: The arrays :func:`_prefix_copy` copies (its result has the argument's type).
_Array = TypeVar("_Array", Ints, Int32s)


def _prefix_copy(a: _Array, cap: Int, n: Int) -> _Array:
    """A new array of ``cap`` entries of ``a``'s type starting with ``a[:n]`` (plain
    Python, run from an object-mode block: see :func:`_grow`, :func:`_reserve`)."""
    b = np.empty(cap, dtype=a.dtype)
    b[:n] = a[:n]
    return b


@inner
def _grow(a: Ints, need: Int) -> Ints:
    """``a``, or a copy of it with room for ``need`` entries (doubled). Work arrays only:
    the output arrays grow by :func:`_reserve`. The copy is made in Python, like the
    store's growth (pycel.jit.store.ht_rebuild): the loops compile one call, not the
    allocation and the copy loop."""
    if need <= a.shape[0]:
        return a
    cap = a.shape[0] * 2
    while cap < need:
        cap *= 2
    with objmode(b="int64[::1]"):
        b = _prefix_copy(a, cap, a.shape[0])
    return b


def _grown_outputs(
    out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, n_out: Int, n_ent: Int,
    se_cap: Int, off_cap: Int, ent_cap: Int,
) -> tuple[Ints, Ints, Int32s, Ints]:  # fmt: skip
    """The output arrays at these capacities holding what was written (plain Python: the
    object-mode block of :func:`_reserve` compiles one call, cheaper than four)."""
    return (
        _prefix_copy(out_se, se_cap, 2 * n_out),
        _prefix_copy(out_off, off_cap, n_out + 1),
        _prefix_copy(out_var, ent_cap, n_ent),
        _prefix_copy(out_pos, ent_cap, n_ent),
    )


@inner
def _reserve(
    out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, n_out: Int, n_ent: Int, matches: Int,
    entries: Int,
) -> tuple[Ints, Ints, Int32s, Ints]:  # fmt: skip
    """The output arrays with room for ``matches`` more matches of ``entries`` entries in
    all; the caller calls it only when they lack room (:func:`has_output_room`).

    They grow fourfold, allocated by numpy (in object mode, a few times per batch): numpy
    backs large arrays with huge pages, 512 times fewer page faults than the 4 KiB pages of
    Numba's allocator (filling 96 MB took about a third of the time on the benchmark
    machine); with millions of matches, mapping fresh memory is most of the cost of
    writing them. Every writer of matches grows them here: one compiled growth, one
    object-mode block, for all of them."""
    se_cap, off_cap, ent_cap = out_se.shape[0], out_off.shape[0], out_var.shape[0]
    # Four times: each growth copies what was written, and capacity that is never
    # written costs address space only (its pages are not mapped until written).
    while se_cap < 2 * (n_out + matches):
        se_cap *= 4
    while off_cap < n_out + matches + 1:
        off_cap *= 4
    while ent_cap < n_ent + entries:
        ent_cap *= 4
    with objmode(se="int64[::1]", off="int64[::1]", var="int32[::1]", pos="int64[::1]"):
        se, off, var, pos = _grown_outputs(
            out_se, out_off, out_var, out_pos, n_out, n_ent, se_cap, off_cap, ent_cap
        )
    return se, off, var, pos


@njit(cache=True, inline="always")
def has_output_room(
    out_se: Ints, out_off: Ints, out_var: Int32s, n_out: Int, n_ent: Int, matches: Int, entries: Int
) -> Truth:
    """Whether the output arrays hold ``matches`` more matches of ``entries`` entries."""
    fits: Truth = (
        2 * (n_out + matches) <= out_se.shape[0]
        and n_out + matches + 1 <= out_off.shape[0]
        and n_ent + entries <= out_var.shape[0]
    )
    return fits


@njit(cache=True, inline="always")
def emit_match(
    nodes: Ints, d: Int, end: Int, E: Ints, label_masks: Ints, proj_mask: Int,
    out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, n_out: Int, n_ent: Int, max_labels: Int,
) -> tuple[Ints, Ints, Int32s, Ints, Int, Int]:  # fmt: skip
    """Append the match made of extend nodes ``nodes[0..d]`` (ending at ``end``) to the
    output arrays: its entries (variable, position) in node order, its start and end."""
    emask = E.shape[1] - 1
    if not has_output_room(out_se, out_off, out_var, n_out, n_ent, ONE, (d + 1) * max_labels):
        out_se, out_off, out_var, out_pos = _reserve(
            out_se, out_off, out_var, out_pos, n_out, n_ent, ONE, (d + 1) * max_labels
        )
    start = end
    for k in range(d + 1):
        e = nodes[k] & emask
        p = E[E_POS, e]
        start = min(start, p)
        m = label_masks[E[E_LABEL, e]] & proj_mask
        v = 0
        while m != 0:
            if m & 1:
                out_var[n_ent] = v
                out_pos[n_ent] = p
                n_ent += 1
            m >>= 1
            v += 1
    out_se[2 * n_out] = start
    out_se[2 * n_out + 1] = end
    n_out += 1
    out_off[n_out] = n_ent
    return out_se, out_off, out_var, out_pos, n_out, n_ent


@njit(cache=True, inline="always")
def _match_hash(out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, i: Int) -> Int:
    h = out_se[2 * i] * 0x9E3779B1 + out_se[2 * i + 1]
    for e in range(out_off[i], out_off[i + 1]):
        h = (h * 0x85EBCA77 + out_var[e]) * 0xC2B2AE3D + out_pos[e]
    h ^= h >> 29
    hashed: Int = h & 0x7FFFFFFFFFFFFFFF
    return hashed


@njit(cache=True, inline="always")
def _same_match(out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, i: Int, j: Int) -> bool:
    if out_se[2 * i] != out_se[2 * j] or out_off[i + 1] - out_off[i] != out_off[j + 1] - out_off[j]:
        return False
    for e in range(out_off[i + 1] - out_off[i]):
        a, b = out_off[i] + e, out_off[j] + e
        if out_var[a] != out_var[b] or out_pos[a] != out_pos[b]:
            return False
    return True


@inner
def _seen_before(
    seen: Ints, out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints, i: Int, first: Int, end: Int
) -> tuple[Ints, bool]:
    """(seen, whether match i repeats one of the matches first..i-1, which all end at
    ``end``); a new match is recorded. ``seen`` is an open-addressing set of match ids
    (row 0) valid while row 1 holds ``end``, so it empties itself at the next end."""
    if 2 * (i - first + 1) > seen.shape[1]:  # grow, and re-insert this end's matches
        seen = np.full((2, 2 * seen.shape[1]), -1, dtype=np.int64)
        for j in range(first, i):
            s = _match_hash(out_se, out_off, out_var, out_pos, j) & (seen.shape[1] - 1)
            while seen[1, s] == end:
                s = (s + 1) & (seen.shape[1] - 1)
            seen[0, s], seen[1, s] = j, end
    s = _match_hash(out_se, out_off, out_var, out_pos, i) & (seen.shape[1] - 1)
    while seen[1, s] == end:
        if _same_match(out_se, out_off, out_var, out_pos, seen[0, s], i):
            return seen, True
        s = (s + 1) & (seen.shape[1] - 1)
    seen[0, s], seen[1, s] = i, end
    return seen, False


#: What an enumerator returns: the output arrays and counts, the work arrays (possibly
#: grown) and the number of matches it wrote.
Enumerated = tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, Ints, Ints, Ints, np.int64]
#: (x, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels, the four output
#: arrays, n_out, n_ent, path, stack_h, stack_d, seen, first[, res]) → Enumerated; ``res``
#: (the post-filters' programs) only for the residual variant.
Enumerator = Callable[..., Enumerated]


def _enumerator(distinct: bool, ordered: bool = False, residual: bool = False) -> Enumerator:
    """The enumerator, with the duplicate check of a projection (``distinct``) or without.

    Two compiled functions rather than a test at run time, so that a query which projects
    nothing away never compiles the check (:func:`_seen_before`, about a second of cold
    compile); ``distinct`` is a closure constant, so Numba drops the branch it disables
    before typing it, and caches each variant apart (keyed by the constant). ``ordered``
    likewise adds the treap nodes' check (pycel.jit.treap) for the ordered loop only, and
    ``residual`` the post-filters' pruning (pycel.jit.residual: ``res`` is read only then)."""

    @inner
    def enumerate_matches(
        x: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints, label_masks: Ints,
        proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s, out_pos: Ints,
        n_out: np.int64, n_ent: np.int64, path: Ints, stack_h: Ints, stack_d: Ints, seen: Ints, first: Int,
        res: Residual | None = None,
    ) -> Enumerated:  # fmt: skip
        """Write the matches of extend node ``x`` (at most ``budget``) to the output arrays.

        With a projection (``distinct``; ``seen`` has columns), several valuations can give
        one match: a match equal to one already written for this end (matches ``first``…)
        is taken back and does not count towards ``budget``, so LIMIT n keeps n distinct
        matches."""
        emask = E.shape[1] - 1
        umask = U.shape[1] - 1
        unext = ctr[C_U_NEXT]
        emitted = ZERO
        # Whether to walk an ordered index from its low keys (a key-pruned comparison
        # fails above: pycel.jit.residual.residual_key_sides).
        low_first = False
        probing = False  # whether some conjunct has emptiness probes
        floored = False  # whether a probe may have set a floor in this enumeration
        if ordered and residual and res is not None:
            for c in range(res.key_side.shape[0]):
                if res.key_side[c] != 0:
                    low_first = res.key_side[c] == SKIP_ABOVE
                    break
            for c in range(res.key_probe.shape[0]):
                probing = probing or res.key_probe[c] != 0
            if probing:
                reset_floors(res)
        # path caches each node of the current path as (position, projected variable mask),
        # so a match reads its prefix from two cache lines instead of the arena.
        path[0] = E[E_POS, x & emask]
        path[1] = label_masks[E[E_LABEL, x & emask]] & proj_mask
        top = 0
        child = E[E_CHILD, x & emask]
        if child < 0:
            depth_done = 0  # a one-event match
        else:
            depth_done = -1
            stack_h[0] = child
            stack_d[0] = 1
            top = 1
            if ordered and residual and res is not None:
                _unbound_keys(res, ONE)
        if residual and res is not None and not residual_holds(res, path, ZERO, ZERO):
            depth_done = -1  # a post-filter fails on the last event already: no match
            top = 0
        while emitted < budget:
            if depth_done < 0:
                if top == 0:
                    break
                top -= 1
                h = stack_h[top]
                d = stack_d[top]
                hs = h & umask
                if top + 3 > stack_h.shape[0]:
                    stack_h = _grow(stack_h, top + 3)
                    stack_d = _grow(stack_d, top + 3)
                e = U[U_CONTENT, hs]
                skip: Int = ZERO
                if ordered and residual and res is not None and res.key_var.shape[0] > 0:
                    if U[U_BIT, hs] >= TREAP:
                        # An index node ordered by a register a residual conjunct
                        # compares: where it fails, the runs on one side of this one fail
                        # too. The keys where it failed bound the index under this path
                        # (one index per path): a node beyond them is skipped by its key
                        # alone, also one whose own run left the window (its event is no
                        # longer there to check).
                        key = U[U_KEY, hs]
                        bounded = d < res.key_above.shape[0]
                        # (_KEY_MAX and _KEY_MIN are also "no bound": a key may be either)
                        above = res.key_above[d] if bounded else _KEY_MAX
                        below = res.key_below[d] if bounded else _KEY_MIN
                        if above != _KEY_MAX and key >= above:
                            skip = SKIP_ABOVE | NODE_FAILS
                        elif below != _KEY_MIN and key <= below:
                            skip = SKIP_BELOW | NODE_FAILS
                        elif floored and below_floor(res, E, ctr[C_E_NEXT], label_masks, e, key):
                            skip = SKIP_BELOW | NODE_FAILS  # a probed run no later than one that failed
                        elif U[U_CMS, hs] >= lo:
                            if 2 * d + 4 > path.shape[0]:
                                path = _grow(path, 2 * d + 4)
                            path[2 * d] = E[E_POS, e & emask]
                            path[2 * d + 1] = label_masks[E[E_LABEL, e & emask]] & proj_mask
                            skip = residual_key_sides(res, path, d)
                            if not skip & NODE_FAILS and probing:
                                # Maybe a middle run whose snapshot of a's runs has no valid
                                # a, and nor have those made before it (pycel.jit.probe).
                                skip |= probe_empty(res, E, U, unext, label_masks, proj_mask, path, d, e, lo)
                                floored = floored or skip & SKIP_BELOW != 0  # (a floor may be set)
                            if bounded and skip & SKIP_ABOVE:
                                res.key_above[d] = min(res.key_above[d], key)
                            if bounded and skip & SKIP_BELOW:
                                res.key_below[d] = max(res.key_below[d], key)
                left = U[U_LEFT, hs]
                pushed_left = False
                if not skip & SKIP_BELOW and live(U, unext, left) and U[U_MS, left & umask] >= lo:
                    stack_h[top] = left
                    stack_d[top] = d
                    top += 1
                    pushed_left = True
                right = U[U_RIGHT, hs]
                if not skip & SKIP_ABOVE and live(U, unext, right) and U[U_MS, right & umask] >= lo:
                    stack_h[top] = right
                    stack_d[top] = d
                    top += 1
                    if low_first and pushed_left:
                        # The lower keys first (popped first): there a comparison that fails
                        # above bounds the rest of the index early.
                        stack_h[top - 2], stack_h[top - 1] = right, left
                if ordered and U[U_BIT, hs] >= TREAP and U[U_CMS, hs] < lo:
                    continue  # an ordered index node whose own run left the window (its children did not)
                if residual and res is not None and skip & NODE_FAILS:
                    res.visits[0] += 1  # (a node visited; residual_holds counts the others)
                    continue
                if E[E_LABEL, e & emask] < 0:  # a union node (MAX): its heap, same depth
                    stack_h[top] = E[E_CHILD, e & emask]
                    stack_d[top] = d
                    top += 1
                    continue
                if 2 * d + 2 > path.shape[0]:
                    path = _grow(path, 2 * d + 2)
                es = e & emask
                path[2 * d] = E[E_POS, es]
                path[2 * d + 1] = label_masks[E[E_LABEL, es]] & proj_mask
                if residual and res is not None and not residual_holds(res, path, d, skip >> PASSED_SHIFT):
                    continue  # no completion of this path passes the post-filters
                ch = E[E_CHILD, es]
                if ch >= 0 and live(U, unext, ch):
                    stack_h[top] = ch
                    stack_d[top] = d + 1
                    top += 1
                    if ordered and residual and res is not None:
                        _unbound_keys(res, d + 1)
                    continue
                depth_done = d
            # Emit the match path[0..depth_done] from the cached path; the output arrays
            # are replaced only when they grow.
            d = depth_done
            if not has_output_room(out_se, out_off, out_var, n_out, n_ent, ONE, (d + 1) * max_labels):
                out_se, out_off, out_var, out_pos = _reserve(
                    out_se, out_off, out_var, out_pos, n_out, n_ent, ONE, (d + 1) * max_labels
                )
            start = end
            for k in range(d + 1):
                p = path[2 * k]
                if p < start:
                    start = p
                m = path[2 * k + 1]
                v = 0
                while m != 0:
                    if m & 1:
                        out_var[n_ent] = v
                        out_pos[n_ent] = p
                        n_ent += 1
                    m >>= 1
                    v += 1
            out_se[2 * n_out] = start
            out_se[2 * n_out + 1] = end
            n_out += 1
            out_off[n_out] = n_ent
            depth_done = -1
            if distinct:
                seen, repeated = _seen_before(seen, out_se, out_off, out_var, out_pos, n_out - 1, first, end)
                if repeated:
                    n_out -= 1
                    n_ent = out_off[n_out]
                    continue
            emitted += 1
        return out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, seen, emitted

    return enumerate_matches


#: Every valuation is a distinct match (nothing is projected away).
_enumerate = _enumerator(False)
#: A projection drops variables: repeated matches of one end are taken back.
_enumerate_distinct = _enumerator(True)
#: The same over ordered run indexes (pycel.jit.treap), for the ordered loop only.
_enumerate_ordered = _enumerator(False, True)
_enumerate_ordered_distinct = _enumerator(True, True)
#: Pruned by the post-filters (pycel.jit.residual) as it goes, for queries that have them.
_enumerate_residual = _enumerator(False, False, True)
_enumerate_ordered_residual = _enumerator(False, True, True)


def drops_variables(label_masks: Ints, proj_mask: Int) -> bool:
    """Whether the projection ``proj_mask`` drops a variable some label binds: then runs
    can repeat a match, and the loops need :data:`_enumerate_distinct` (see
    :func:`new_buffers`, which gives the duplicate check its set then).

    Example::

        drops_variables(np.array([0b01, 0b11]), proj_mask=0b01)   # True
    """
    bound = int(np.bitwise_or.reduce(label_masks)) if label_masks.shape[0] else 0
    return bool(bound & ~int(proj_mask))


def new_buffers(label_masks: Ints, distinct: bool) -> Buffers:
    """Empty, growable output arrays and the enumerator's work arrays as a per-event loop
    starts with them (:class:`~pycel.jit.structs.Buffers`); the duplicate check gets its
    set if ``distinct`` (see :func:`drops_variables`).

    Example::

        work = new_buffers(tables.label_masks, drops_variables(tables.label_masks, proj_mask))
    """
    masks = label_masks.tolist()
    most = max([1, *(int(m).bit_count() for m in masks)])
    return Buffers(
        np.empty(64, dtype=np.int64), np.zeros(33, dtype=np.int64), np.empty(64, dtype=np.int32),
        np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64),
        np.empty(64, dtype=np.int64),
        np.full((2, 64 if distinct else 0), -1, dtype=np.int64),
        np.int64(most),
    )  # fmt: skip
