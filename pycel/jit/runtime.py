"""The per-event loop and the enumerator (PCEA paper Algorithm 1; DESIGN.md §3.1, §3.4).

:func:`run_batch` processes one batch of events given their class ids, partition keys
and window starts. For each event it (1) fires the deterministic transitions of its
class, reading H before anything is written, (2) enumerates the matches that end here,
(3) inserts the new nodes into H. Everything is flat arrays; the query is data (the
transition tables), so this code is compiled once for every query (``cache=True``).

Enumeration is a depth-first walk with an explicit stack: a match is a path of extend
nodes from the new node down to a run's first event, choosing one content per heap.
Only heap nodes with max-start ≥ the window start are pushed, and by the heap property
each of them leads to at least one output, so the delay is linear in the output.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .store import (
    BARRIER,
    C_BARRIER,
    C_E_NEXT,
    C_H_COUNT,
    C_MAX_DEPTH,
    C_U_NEXT,
    E_CHILD,
    E_LABEL,
    E_MS,
    E_POS,
    U_CONTENT,
    U_CREATED,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ensure_room,
    has_room,
    heap_insert,
    ht_get,
    ht_put,
    ht_rebuild,
    live,
    new_extend,
)

CONSUME_NONE, CONSUME_ANY, CONSUME_PARTITION = 0, 1, 2


@njit(cache=True)
def _grow(a, need):  # type: ignore[no-untyped-def]
    if need <= a.shape[0]:
        return a
    cap = a.shape[0] * 2
    while cap < need:
        cap *= 2
    b = np.empty(cap, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True)
def _enumerate(  # type: ignore[no-untyped-def]
    x, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
    out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d,
):
    """Write the matches of extend node ``x`` (at most ``budget``) to the output arrays."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    emitted = 0
    path[0] = x
    top = 0
    child = E[E_CHILD, x & emask]
    if child < 0:
        depth_done = 0  # a one-event match
    else:
        depth_done = -1
        stack_h[0] = child
        stack_d[0] = 1
        top = 1
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
            left = U[U_LEFT, hs]
            if live(U, unext, left) and U[U_MS, left & umask] >= lo:
                stack_h[top] = left
                stack_d[top] = d
                top += 1
            right = U[U_RIGHT, hs]
            if live(U, unext, right) and U[U_MS, right & umask] >= lo:
                stack_h[top] = right
                stack_d[top] = d
                top += 1
            e = U[U_CONTENT, hs]
            if d >= path.shape[0]:
                path = _grow(path, d + 1)
            path[d] = e
            ch = E[E_CHILD, e & emask]
            if ch >= 0 and live(U, unext, ch):
                stack_h[top] = ch
                stack_d[top] = d + 1
                top += 1
                continue
            depth_done = d
        # Emit the match path[0..depth_done].
        if 2 * (n_out + 1) > out_se.shape[0]:
            out_se = _grow(out_se, 2 * (n_out + 1))
        if n_out + 2 > out_off.shape[0]:
            out_off = _grow(out_off, n_out + 2)
        if n_ent + (depth_done + 1) * max_labels > out_var.shape[0]:
            out_var = _grow(out_var, n_ent + (depth_done + 1) * max_labels)
            out_pos = _grow(out_pos, n_ent + (depth_done + 1) * max_labels)
        for k in range(depth_done + 1):
            e = path[k] & emask
            m = label_masks[E[E_LABEL, e]] & proj_mask
            p = E[E_POS, e]
            v = 0
            while m != 0:
                if m & 1:
                    out_var[n_ent] = v
                    out_pos[n_ent] = p
                    n_ent += 1
                m >>= 1
                v += 1
        out_se[2 * n_out] = E[E_POS, path[depth_done] & emask]
        out_se[2 * n_out + 1] = end
        n_out += 1
        out_off[n_out] = n_ent
        emitted += 1
        depth_done = -1
    return out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d, emitted


@njit(cache=True)
def run_batch(  # type: ignore[no-untyped-def]
    E, U, HT, ctr,
    classes, keys, key_valid, lows, offset,
    ptr, src, label, dst, final, extends, label_masks,
    proj_mask, limit, consume,
):
    """Process one batch; return the (possibly grown) store and the matches found.

    ``lows[j]``: the window start for the event at position ``offset + j``; ``limit``:
    matches per end position (-1: all); ``consume``: 0 none, 1 any, 2 partition.
    """
    n = classes.shape[0]
    out_se = np.empty(64, dtype=np.int64)
    out_off = np.zeros(33, dtype=np.int64)
    out_var = np.empty(64, dtype=np.int32)
    out_pos = np.empty(64, dtype=np.int64)
    path = np.empty(64, dtype=np.int64)
    stack_h = np.empty(64, dtype=np.int64)
    stack_d = np.empty(64, dtype=np.int64)
    new_x = np.empty(64, dtype=np.int64)
    new_d = np.empty(64, dtype=np.int64)
    n_out = 0
    n_ent = 0
    budget_all = limit if limit >= 0 else 1 << 62
    max_labels = 1
    for lm in label_masks:
        bits = 0
        while lm != 0:
            bits += lm & 1
            lm >>= 1
        if bits > max_labels:
            max_labels = bits
    for j in range(n):
        if not key_valid[j]:
            continue
        pos = offset + j
        c = classes[j]
        k = keys[j]
        window_lo = lows[j]
        lo = window_lo
        if consume == 1 and ctr[C_BARRIER] + 1 > lo:
            lo = ctr[C_BARRIER] + 1
        elif consume == 2:
            b = ht_get(HT, BARRIER, k)
            if b >= 0 and b + 1 > lo:
                lo = b + 1
        first, last_t = ptr[c], ptr[c + 1]
        moves = last_t - first
        if moves == 0:
            continue
        # Room for this event's nodes, so nothing moves while it is processed (the checks
        # are inlined: the calls, which may replace the arrays, are rare).
        if not has_room(E, ctr[C_E_NEXT], moves, E_POS, window_lo):
            E = ensure_room(E, ctr[C_E_NEXT], moves, E_POS, window_lo)
        need_u = moves * (ctr[C_MAX_DEPTH] + moves + 1)
        if not has_room(U, ctr[C_U_NEXT], need_u, U_CREATED, window_lo):
            U = ensure_room(U, ctr[C_U_NEXT], need_u, U_CREATED, window_lo)
        if ctr[C_H_COUNT] + moves + 1 > HT.shape[1] // 2:
            HT = ht_rebuild(HT, U, ctr, window_lo, moves + 1)
        if moves > new_x.shape[0]:
            new_x = _grow(new_x, moves)
            new_d = _grow(new_d, moves)
        ecap = E.shape[1]
        ucap = U.shape[1]
        # (1) Fire transitions: read H (earlier positions only).
        fired = 0
        for t in range(first, last_t):
            s = src[t]
            if s == 0:
                child = -1
                ms = pos
            else:
                h = ht_get(HT, s, k)
                if h < 0 or not live(U, ctr[C_U_NEXT], h):
                    continue
                ms = U[U_MS, h & (ucap - 1)]
                if ms < lo:
                    continue
                child = h
            new_x[fired] = new_extend(E, ctr, pos, label[t], child, ms)
            new_d[fired] = dst[t]
            fired += 1
        # (2) Enumerate the matches ending here.
        emitted = 0
        for f in range(fired):
            if final[new_d[f]] and emitted < budget_all:
                (out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d,
                 got) = _enumerate(
                    new_x[f], pos, lo, budget_all - emitted, E, U, ctr, label_masks, proj_mask, max_labels,
                    out_se, out_off, out_var, out_pos, n_out, n_ent, path, stack_h, stack_d,
                )
                emitted += got
        if emitted > 0 and consume != 0:
            if consume == 1:
                ctr[C_BARRIER] = pos
            else:
                ht_put(HT, ctr, BARRIER, k, pos)
            continue  # runs through this event are consumed too
        # (3) Index the new nodes by (state, key).
        for f in range(fired):
            d = new_d[f]
            if extends[d]:
                root = ht_get(HT, d, k)
                ht_put(HT, ctr, d, k, heap_insert(U, E, ctr, root, new_x[f], lo, pos))
        _ = ecap
    return E, U, HT, out_se[: 2 * n_out], out_off[: n_out + 1], out_var[:n_ent], out_pos[:n_ent]


def live_counts(
    E: np.ndarray, U: np.ndarray, HT: np.ndarray, ctr: np.ndarray, lo: int
) -> tuple[int, int, int]:
    """(extend nodes, heap nodes, H entries) that are still reachable inside the window."""
    e_next, u_next = int(ctr[C_E_NEXT]), int(ctr[C_U_NEXT])
    e_ids = np.arange(max(0, e_next - E.shape[1]), e_next)
    u_ids = np.arange(max(0, u_next - U.shape[1]), u_next)
    live_e = int(np.count_nonzero(E[E_POS, e_ids & (E.shape[1] - 1)] >= lo))
    live_u = int(np.count_nonzero(U[U_CREATED, u_ids & (U.shape[1] - 1)] >= lo))
    occupied = HT[0] >= 0
    return live_e, live_u, int(np.count_nonzero(occupied))


__all__ = ["run_batch", "live_counts", "E_MS", "U_CONTENT"]
