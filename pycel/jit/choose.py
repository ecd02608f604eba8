"""LAST and NEXT among the outputs of an end that fit the window (issue #17).

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

NEXT compares from the first positions up, which a walk back in time cannot decide
greedily; :func:`choose_next` keeps, for each node of the end's part of the DAG inside
the window, its best run back (a dynamic program in order of position), then writes the
valuations of the best final's C through the same layers.

This replaces enumerating every output of the end that fits the window (exponentially
many under ``+``) and comparing them. The cost per end: LAST O(|C| · a · h), a the nodes
of a layer (at most the automaton's transitions into one state), h the entries of a heap
inside the window (the heaps are ordered by max-start, not by position, so a step reads
every entry of the layer's heaps that is still inside the window); NEXT O(r · h · |C|),
r the nodes of the end's runs inside the window (each compares its entries' best runs,
as long as C at most); both plus the output.

Example::

    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted) = choose_last(
        finals, n_finals, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack)
"""

from __future__ import annotations

import numpy as np

from .arrays import Flags, Int, Int32s, Ints
from .enumerate import _grow, emit_match
from .inner import inner
from .store import C_U_NEXT, E_CHILD, E_POS, U_CONTENT, U_LEFT, U_MS, U_RIGHT, ZERO, live
from .windowed import STRATEGY_CODES, _compare

NEXT = np.int64(STRATEGY_CODES["next"])


@inner
def _push_children(U: Ints, unext: Int, hs: Int, lo: Int, stack: Ints, top: Int) -> tuple[Ints, Int]:
    """Push the children of heap slot ``hs`` that are live and inside the window (their
    max-start ≥ ``lo``); return the stack (grown if needed) and its new top."""
    umask = U.shape[1] - 1
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
    return stack, top


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
    top: Int = np.int64(1)
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
        stack, top = _push_children(U, unext, hs, lo, stack, top)
    return largest, nodes, stack, count


@inner
def gather_finals(new_x: Ints, new_d: Ints, final: Flags, fired: Int, finals: Ints) -> Int:
    """Copy the accepting ones of the ``fired`` new nodes to ``finals``; return how many."""
    n: Int = 0
    for f in range(fired):
        if final[new_d[f]]:
            finals[n] = new_x[f]
            n += 1
    return n


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
    nodes, lp = _first_layer(finals, n_finals)
    layers: Int = np.int64(1)
    no_position = np.int64(-1)
    while True:
        largest: Int = np.int64(-1)
        for i in range(lp[layers - 1], lp[layers]):
            child = E[E_CHILD, nodes[i] & emask]
            if child >= 0:
                p, nodes, stack, _ = _step_back(U, E, ctr, child, lo, no_position, nodes, ZERO, ZERO, stack)
                largest = max(largest, p)
        if largest < 0:
            break
        nodes, lp, stack = _add_layer(U, E, ctr, lo, largest, nodes, lp, layers, stack)
        layers += 1
    return _write_layers(
        nodes, lp, layers, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack,
    )  # fmt: skip


@inner
def _first_layer(finals: Ints, n_finals: Int) -> tuple[Ints, Ints]:
    """The layers of C as they start, with the end's accepting nodes: layer k is
    ``nodes[lp[k]:lp[k + 1]]``, by descending position (layer 0 at the end)."""
    nodes = np.empty(max(16, 2 * n_finals), dtype=np.int64)
    lp = np.empty(17, dtype=np.int64)
    for i in range(n_finals):
        nodes[i] = finals[i]
    lp[0] = 0
    lp[1] = n_finals
    return nodes, lp


@inner
def _add_layer(
    U: Ints, E: Ints, ctr: Ints, lo: Int, at: Int, nodes: Ints, lp: Ints, layers: Int, stack: Ints
) -> tuple[Ints, Ints, Ints]:
    """Append layer ``layers``: the entries at position ``at`` of the heaps of layer
    ``layers - 1``'s nodes (inside the window). Returns (nodes, lp, stack)."""
    emask = E.shape[1] - 1
    count = lp[layers]
    for i in range(lp[layers - 1], lp[layers]):
        child = E[E_CHILD, nodes[i] & emask]
        if child >= 0:
            _, nodes, stack, count = _step_back(U, E, ctr, child, lo, at, nodes, lp[layers], count, stack)
    if layers + 2 > lp.shape[0]:
        lp = _grow(lp, 2 * (layers + 2))
    lp[layers + 1] = count
    return nodes, lp, stack


@inner
def _write_layers(
    nodes: Ints, lp: Ints, layers: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write every valuation whose path goes through the layers (one node of each, each a
    heap entry of the one before, the last one starting its run), at most ``budget``."""
    emask = E.shape[1] - 1
    # Depth-first; choice[k]: the index of layer k's node on the path.
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
    top: Int = np.int64(1)
    while top > 0:
        top -= 1
        hs = stack[top] & umask
        if U[U_CONTENT, hs] == x:
            return True, stack
        stack, top = _push_children(U, unext, hs, lo, stack, top)
    return False, stack


@inner
def _region(
    finals: Ints, n_finals: Int, lo: Int, E: Ints, U: Ints, ctr: Ints, stack: Ints
) -> tuple[Ints, Ints, Ints]:
    """The extend nodes the end's runs inside the window go through (the finals and,
    transitively, the entries of their heaps with max-start ≥ ``lo``), each once; and the
    hash table (size a power of two, -1 empty) from node id to its index there.
    Returns (nodes, table, stack)."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    nodes = np.empty(max(16, 2 * n_finals), dtype=np.int64)
    table = np.full(64, -1, dtype=np.int64)
    count: Int = ZERO
    todo = np.empty(16, dtype=np.int64)
    n_todo: Int = ZERO
    for i in range(n_finals):
        table, nodes, count, todo, n_todo = _visit(finals[i], table, nodes, count, todo, n_todo)
    while n_todo > 0:
        n_todo -= 1
        root = E[E_CHILD, todo[n_todo] & emask]
        if root < 0 or not live(U, unext, root) or U[U_MS, root & umask] < lo:
            continue
        stack[0] = root
        top: Int = np.int64(1)
        while top > 0:
            top -= 1
            hs = stack[top] & umask
            table, nodes, count, todo, n_todo = _visit(U[U_CONTENT, hs], table, nodes, count, todo, n_todo)
            stack, top = _push_children(U, unext, hs, lo, stack, top)
    return nodes[:count], table, stack


@inner
def _visit(
    x: Int, table: Ints, nodes: Ints, count: Int, todo: Ints, n_todo: Int
) -> tuple[Ints, Ints, Int, Ints, Int]:
    """Add node x to the region (``nodes[:count]``, indexed by ``table``) and to the nodes
    whose heaps are still to read (``todo[:n_todo]``), unless it is there already.
    Returns (table, nodes, count, todo, n_todo)."""
    if _index_of(table, x) >= 0:
        return table, nodes, count, todo, n_todo
    if count + 1 > nodes.shape[0]:
        nodes = _grow(nodes, count + 1)
    if n_todo + 1 > todo.shape[0]:
        todo = _grow(todo, n_todo + 1)
    table = _remember(table, nodes, count, x)
    nodes[count] = x
    todo[n_todo] = x
    return table, nodes, count + 1, todo, n_todo + 1


@inner
def _index_of(table: Ints, x: Int) -> Int:
    """x's index in the region (``table`` rows: node id, index), or -1."""
    mask = table.shape[0] // 2 - 1
    s = (x * 0x5851F42D4C957F2D >> 17) & mask
    while table[2 * s] != -1:
        if table[2 * s] == x:
            found: Int = table[2 * s + 1]
            return found
        s = (s + 1) & mask
    return -1


@inner
def _remember(table: Ints, nodes: Ints, count: Int, x: Int) -> Ints:
    """``table`` with x at index ``count`` (``nodes[:count]`` are the ones before); it
    doubles when half full."""
    slots = table.shape[0] // 2
    if 2 * (count + 1) > slots:
        table = np.full(4 * slots, -1, dtype=np.int64)
        for i in range(count):
            table = _put(table, nodes[i], i)
    return _put(table, x, count)


@inner
def _put(table: Ints, x: Int, index: Int) -> Ints:
    mask = table.shape[0] // 2 - 1
    s = (x * 0x5851F42D4C957F2D >> 17) & mask
    while table[2 * s] != -1:
        s = (s + 1) & mask
    table[2 * s] = x
    table[2 * s + 1] = index
    return table


@inner
def _next_better(i: Int, j: Int, rep: Ints, pos: Ints, a: Ints, b: Ints) -> Int:
    """+1 if region node i's best run is preferred to j's under NEXT, -1 if j's is, 0 if
    they have the same positions (``rep``: the next node of each one's best run back,
    -1 at its start; ``a``, ``b``: work space as long as the region; compared by
    :func:`pycel.jit.windowed._compare`)."""
    na = 0
    while i >= 0:
        a[na] = pos[i]
        na += 1
        i = rep[i]
    nb = 0
    while j >= 0:
        b[nb] = pos[j]
        nb += 1
        j = rep[j]
    return _compare(a, na, b, nb, NEXT)  # the arrays run back in time, as there


@inner
def choose_next(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the NEXT outputs of the end at ``end`` (as :func:`choose_last`).

    NEXT compares from the first positions up, which the DAG (whose steps go back in
    time) cannot follow greedily: each node of the window's part of the DAG keeps the
    best run back from it (the best of its heap entries' best runs, compared from their
    starts, extended by the node; appending the same position keeps that order), nodes
    taken by ascending position so that a node's entries are done before it."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    region, table, stack = _region(finals, n_finals, lo, E, U, ctr, stack)
    n = region.shape[0]
    pos = np.empty(n, dtype=np.int64)
    for i in range(n):
        pos[i] = E[E_POS, region[i] & emask]
    rep = np.full(n, -1, dtype=np.int64)
    a = np.empty(n, dtype=np.int64)
    b = np.empty(n, dtype=np.int64)
    for i in np.argsort(pos, kind="mergesort"):
        root = E[E_CHILD, region[i] & emask]
        if root < 0:
            continue  # a run's first event: its best run is itself
        best: Int = np.int64(-1)
        stack[0] = root
        top: Int = np.int64(1)
        while top > 0:  # every entry of the heap inside the window (all in the region)
            top -= 1
            hs = stack[top] & umask
            y = _index_of(table, U[U_CONTENT, hs])
            if best < 0 or _next_better(y, best, rep, pos, a, b) > 0:
                best = y
            stack, top = _push_children(U, unext, hs, lo, stack, top)
        rep[i] = best
    # The best final's run gives C; every final at the end is layer 0 of the paths.
    chosen = _index_of(table, finals[0])
    for f in range(1, n_finals):
        other = _index_of(table, finals[f])
        if _next_better(other, chosen, rep, pos, a, b) > 0:
            chosen = other
    nodes, lp = _first_layer(finals, n_finals)
    layers: Int = np.int64(1)
    step = rep[chosen]
    while step >= 0:
        nodes, lp, stack = _add_layer(U, E, ctr, lo, pos[step], nodes, lp, layers, stack)
        layers += 1
        step = rep[step]
    return _write_layers(
        nodes, lp, layers, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack,
    )  # fmt: skip
