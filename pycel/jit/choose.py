"""LAST among the outputs of an end that fit the window, found by descent (issue #17).

LAST keeps the output whose complex event C (its set of positions) is greatest when the
sets are compared from their largest positions down: the first difference decides, the
larger position wins, and a longer C beats its own suffix (docs/strategies.md). So the
best C is found greedily, walking the run DAG from the end's accepting nodes back: its
next position is the largest position of any node the current nodes can step back to
that still reaches a run start inside the window (its max-start ≥ the window start),
and all nodes at that position are kept as the next layer, since C is a set of
positions, not one run. The descent stops when no node of the last layer can step
further back. Then every valuation with exactly that C is written: the paths through
the layers that step from each layer to the next and end in run starts.

This replaces enumerating every output of the end that fits the window (exponentially
many under ``+``) and comparing them. The cost per end is O(|C| · a · h): a the nodes of
a layer (at most the automaton's transitions into one state), h the entries of a heap
inside the window (the heaps are ordered by max-start, not by position, so a step reads
every entry of the layer's heaps that is still inside the window), plus the output.

Example::

    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted) = choose_last(
        finals, n_finals, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack)
"""

from __future__ import annotations

import numpy as np

from .arrays import Int, Int32s, Ints
from .enumerate import _grow, emit_match
from .inner import inner
from .store import C_U_NEXT, E_CHILD, E_POS, U_CONTENT, U_LEFT, U_MS, U_RIGHT, ZERO, live


@inner
def _step_back(
    U: Ints, E: Ints, ctr: Ints, root: Int, lo: Int, at: Int, nodes: Ints, first: Int, count: Int, stack: Ints
) -> tuple[Int, Ints, Ints, Int]:
    """Scan the entries of heap ``root`` inside the window (max-start ≥ ``lo``): return
    the largest position among them; if ``at`` ≥ 0, also append the entries at position
    ``at`` that ``nodes[first:count]`` does not hold yet. Returns (largest, nodes,
    stack, count)."""
    umask = U.shape[1] - 1
    emask = E.shape[1] - 1
    unext = ctr[C_U_NEXT]
    largest: Int = -1
    if not live(U, unext, root) or U[U_MS, root & umask] < lo:
        return largest, nodes, stack, count
    stack[0] = root
    top = 1
    while top > 0:
        top -= 1
        hs = stack[top] & umask
        e = U[U_CONTENT, hs]
        p = E[E_POS, e & emask]
        if p > largest:
            largest = p
        if p == at:
            seen = False
            for k in range(first, count):
                seen = seen or nodes[k] == e
            if not seen:
                if count + 1 > nodes.shape[0]:
                    nodes = _grow(nodes, count + 1)
                nodes[count] = e
                count += 1
        if top + 2 > stack.shape[0]:
            stack = _grow(stack, top + 2)
        left = U[U_LEFT, hs]
        if live(U, unext, left) and U[U_MS, left & umask] >= lo:
            stack[top] = left
            top += 1
        right = U[U_RIGHT, hs]
        if live(U, unext, right) and U[U_MS, right & umask] >= lo:
            stack[top] = right
            top += 1
    return largest, nodes, stack, count


@inner
def choose_last(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the LAST outputs of the end at ``end`` (accepting extend nodes
    ``finals[:n_finals]``; window start ``lo``), at most ``budget``; return the output
    arrays and counts, the work stack and how many were written."""
    emask = E.shape[1] - 1
    # The layers of C, by descending position: layer k is nodes[lp[k]:lp[k + 1]].
    nodes = np.empty(max(16, 2 * n_finals), dtype=np.int64)
    lp = np.empty(17, dtype=np.int64)
    for i in range(n_finals):
        nodes[i] = finals[i]
    lp[0] = 0
    lp[1] = n_finals
    layers = 1
    no_position = np.int64(-1)
    while True:
        largest: Int = -1
        for i in range(lp[layers - 1], lp[layers]):
            child = E[E_CHILD, nodes[i] & emask]
            if child >= 0:
                p, nodes, stack, _ = _step_back(U, E, ctr, child, lo, no_position, nodes, ZERO, ZERO, stack)
                largest = max(largest, p)
        if largest < 0:
            break
        count = lp[layers]
        for i in range(lp[layers - 1], lp[layers]):
            child = E[E_CHILD, nodes[i] & emask]
            if child >= 0:
                _, nodes, stack, count = _step_back(
                    U, E, ctr, child, lo, largest, nodes, lp[layers], count, stack
                )
        if layers + 2 > lp.shape[0]:
            lp = _grow(lp, 2 * (layers + 2))
        lp[layers + 1] = count
        layers += 1
    # Every path layer 0 → last layer whose steps are heap entries and whose last node
    # starts a run (depth-first; choice[k]: the index of layer k's node on the path).
    path = np.empty(layers, dtype=np.int64)
    choice = np.empty(layers, dtype=np.int64)
    emitted = np.int64(0)
    k = 0
    choice[0] = lp[0] - 1
    while k >= 0 and emitted < budget:
        choice[k] += 1
        if choice[k] >= lp[k + 1]:
            k -= 1
            continue
        x = nodes[choice[k]]
        if k > 0:
            held, stack = _holds_entry(U, E, ctr, E[E_CHILD, path[k - 1] & emask], lo, x, stack)
            if not held:
                continue
        path[k] = x
        child = E[E_CHILD, x & emask]
        if k + 1 < layers:
            if child >= 0:
                k += 1
                choice[k] = lp[k] - 1
            continue
        if child >= 0:
            continue  # C ends here: only a run's first event can be its last layer
        out_se, out_off, out_var, out_pos, outs, entries = emit_match(
            path, np.int64(layers - 1), end, E, label_masks, proj_mask,
            out_se, out_off, out_var, out_pos, n_out, n_ent, max_labels,
        )  # fmt: skip
        n_out, n_ent = np.int64(outs), np.int64(entries)
        emitted += 1
    return out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted


@inner
def _holds_entry(U: Ints, E: Ints, ctr: Ints, root: Int, lo: Int, x: Int, stack: Ints) -> tuple[bool, Ints]:
    """Whether heap ``root`` holds extend node ``x`` among its entries inside the window
    (and the work stack, possibly grown)."""
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    if root < 0 or not live(U, unext, root) or U[U_MS, root & umask] < lo:
        return False, stack
    stack[0] = root
    top = 1
    while top > 0:
        top -= 1
        hs = stack[top] & umask
        if U[U_CONTENT, hs] == x:
            return True, stack
        if top + 2 > stack.shape[0]:
            stack = _grow(stack, top + 2)
        left = U[U_LEFT, hs]
        if live(U, unext, left) and U[U_MS, left & umask] >= lo:
            stack[top] = left
            top += 1
        right = U[U_RIGHT, hs]
        if live(U, unext, right) and U[U_MS, right & umask] >= lo:
            stack[top] = right
            top += 1
    return False, stack
