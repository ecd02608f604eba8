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
the layers along the steps recorded while they were built, ending in run starts.

NEXT compares from the first positions up, which a walk back in time cannot decide
greedily, but a walk forward can: :func:`choose_next` collects the end's part of the DAG
inside the window (its region: every node on a run of the end that starts inside the
window, and their steps back), turns the steps around, and picks C from its first
position up: the earliest start of a run, then the earliest position any node at C's
positions so far steps forward to, up to the end. Its layers are then the region's nodes
at C's positions that lie on such runs, and its valuations are written as LAST's.

This replaces enumerating every output of the end that fits the window (exponentially
many under ``+``) and comparing them. The cost per end: LAST O(|C| · a · h), a the nodes
of a layer (at most the automaton's transitions into one state), h the entries of a heap
inside the window (the heaps are ordered by max-start, not by position, so a step reads
every entry of the layer's heaps that is still inside the window); NEXT O(r + s), r the
nodes of the end's runs inside the window and s their steps; both plus the output.

Each chooser is one compiled function with its helpers inlined (``inline="always"``;
a variant of the ALL loop compiles one of the two choosers): Numba compiles every other
function apart, with its own pipeline, and optimizes it again inside each caller (its
IR is linked into theirs), so the helpers as functions of their own took about a second
more of a cold first query.

Example::

    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted) = choose_last(
        finals, n_finals, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arrays import Flags, Int, Int32s, Ints
from .enumerate import _grow, emit_match
from .inner import inner
from .store import C_U_NEXT, E_CHILD, E_POS, U_CONTENT, U_LEFT, U_MS, U_RIGHT, ZERO, live

#: ``at`` for :func:`_add_layer`: the largest position there is (LAST).
LARGEST = np.int64(-1)


@njit(cache=True, inline="always")
def gather_finals(new_x: Ints, new_d: Ints, final: Flags, fired: Int, finals: Ints) -> Int:
    """Copy the accepting ones of the ``fired`` new nodes to ``finals``; return how many."""
    n: Int = ZERO  # int64 from the start: a literal 0 would give the chooser a second signature
    for f in range(fired):
        if final[new_d[f]]:
            finals[n] = new_x[f]
            n += 1
    return n


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _first_layer(finals: Ints, n_finals: Int) -> tuple[Ints, Ints]:
    """The layers of C as they start: layer 0, the end's accepting nodes.

    The layers' nodes follow each other, layer 0 (at the end) first, then by descending
    position; node i is ``layered[2 * i]`` and steps back to the nodes of the next layer
    whose indices are ``to[s]``, s from ``layered[2 * i + 1]`` up to ``layered[2 * i + 3]``
    (one array for both: fewer allocations per end). Returns (layered, to)."""
    size = max(16, 2 * n_finals)
    layered = np.empty(2 * size + 2, dtype=np.int64)
    to = np.empty(size, dtype=np.int64)
    for i in range(n_finals):
        layered[2 * i] = finals[i]
    layered[1] = 0
    return layered, to


@njit(cache=True, inline="always")
def _add_layer(
    U: Ints,
    E: Ints,
    ctr: Ints,
    lo: Int,
    at: Int,
    layered: Ints,
    begin: Int,
    first: Int,
    to: Ints,
    stack: Ints,
) -> tuple[Int, Ints, Int, Ints, Ints]:
    """Add the layer after nodes ``begin`` to ``first - 1`` (the last one): the entries at
    position ``at`` (``LARGEST``: the largest position there is) of their heaps inside
    the window (max-start ≥ ``lo``), each once, as nodes ``first`` on, and record each
    node's steps to them. Returns (the layer's position, -1 if there is none and no layer
    was added; layered, the nodes' new count, to, stack)."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    # One walk of the heaps, twice for LAST: the first pass finds the position, the
    # second collects the entries there (a single walk body: it is compiled once).
    collect = at >= 0
    while True:
        count = first
        n_steps = layered[2 * begin + 1]
        largest: Int = np.int64(-1)
        for i in range(begin, first):
            layered[2 * i + 1] = n_steps
            root = E[E_CHILD, layered[2 * i] & emask]
            if root < 0 or not live(U, unext, root) or U[U_MS, root & umask] < lo:
                continue
            stack[0] = root
            top: Int = np.int64(1)
            while top > 0:
                top -= 1
                hs = stack[top] & umask
                e = U[U_CONTENT, hs]
                p = E[E_POS, e & emask]
                largest = max(largest, p)
                if collect and p == at:
                    j = first
                    while j < count and layered[2 * j] != e:
                        j += 1
                    if j == count:  # a node several heaps hold is one node of the layer
                        if 2 * count + 4 > layered.shape[0]:
                            layered = _grow(layered, 2 * count + 4)
                        layered[2 * count] = e
                        count += 1
                    if n_steps + 1 > to.shape[0]:
                        to = _grow(to, n_steps + 1)
                    to[n_steps] = j
                    n_steps += 1
                stack, top = _push_children(U, unext, hs, lo, stack, top)
        if collect:
            layered[2 * first + 1] = n_steps
            return at, layered, count, to, stack
        if largest < 0:
            return largest, layered, first, to, stack
        at = largest
        collect = True


@njit(cache=True, inline="always")
def _write_layers(
    layered: Ints, n_first: Int, layers: Int, to: Ints, end: Int, budget: Int, E: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, np.int64]:  # fmt: skip
    """Write every valuation whose path goes through the ``layers`` layers (a node of
    layer 0, the first ``n_first``, then a step to the next layer from each, the last
    one starting its run), at most ``budget``; return the output arrays, their counts
    and how many were written."""
    emask = E.shape[1] - 1
    # Depth-first. walk[k]: the path's node at depth k; at depth k the candidates are
    # walk[layers + k] up to walk[2 * layers + k] (layer 0's nodes, then the steps of the
    # node chosen at depth k - 1). One array: one allocation per end.
    walk = np.empty(3 * layers, dtype=np.int64)
    emitted = np.int64(0)
    k = 0
    walk[layers] = 0
    walk[2 * layers] = n_first
    while k >= 0 and emitted < budget:
        if walk[layers + k] >= walk[2 * layers + k]:
            k -= 1
            continue
        i = walk[layers + k] if k == 0 else to[walk[layers + k]]
        walk[layers + k] += 1
        walk[k] = layered[2 * i]
        if k + 1 < layers:
            k += 1
            walk[layers + k] = layered[2 * i + 1]
            walk[2 * layers + k] = layered[2 * i + 3]
            continue
        if E[E_CHILD, walk[k] & emask] >= 0:
            continue  # C ends here: only a run's first event can be its last layer
        out_se, out_off, out_var, out_pos, outs, entries = emit_match(
            walk, np.int64(layers - 1), end, E, label_masks, proj_mask,
            out_se, out_off, out_var, out_pos, n_out, n_ent, max_labels,
        )  # fmt: skip
        n_out, n_ent = np.int64(outs), np.int64(entries)
        emitted += 1
    return out_se, out_off, out_var, out_pos, n_out, n_ent, emitted


@inner
def choose_last(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the LAST outputs of the end at ``end`` (accepting extend nodes
    ``finals[:n_finals]``; window start ``lo``), at most ``budget``; return the output
    arrays and counts, the work stack and how many were written."""
    layered, to = _first_layer(finals, n_finals)
    layers: Int = np.int64(1)
    begin: Int = ZERO
    first = n_finals
    while True:
        at, layered, count, to, stack = _add_layer(U, E, ctr, lo, LARGEST, layered, begin, first, to, stack)
        if at < 0:
            break
        begin, first = first, count
        layers += 1
    out_se, out_off, out_var, out_pos, n_out, n_ent, emitted = _write_layers(
        layered, n_finals, layers, to, end, budget, E, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent,
    )  # fmt: skip
    return out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted


@njit(cache=True, inline="always")
def _region(
    finals: Ints, n_finals: Int, lo: Int, E: Ints, U: Ints, ctr: Ints, stack: Ints
) -> tuple[Ints, Ints, Ints, Ints]:
    """The extend nodes the end's runs inside the window go through, each once: the
    finals (indices 0 to ``n_finals - 1``) and, transitively, the entries of their heaps
    with max-start ≥ ``lo``; and their steps back: node i's entries are the nodes
    ``to[s]``, s in ``range(steps[i], steps[i + 1])``. Returns (nodes, steps, to, stack)."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    size = max(16, 2 * n_finals)
    nodes = np.empty(size, dtype=np.int64)
    steps = np.empty(size + 1, dtype=np.int64)
    to = np.empty(size, dtype=np.int64)
    # The finals are this event's new nodes: no heap holds them, so only the nodes found
    # in heaps go into the table (node id -> index; -1 empty).
    table = np.full(64, -1, dtype=np.int64)
    for i in range(n_finals):
        nodes[i] = finals[i]
    count: Int = n_finals
    n_steps: Int = ZERO
    done: Int = ZERO  # the nodes before ``done`` have their steps
    while done < count:
        steps[done] = n_steps
        root = E[E_CHILD, nodes[done] & emask]
        done += 1
        if root < 0 or not live(U, unext, root) or U[U_MS, root & umask] < lo:
            continue
        stack[0] = root
        top: Int = np.int64(1)
        while top > 0:
            top -= 1
            hs = stack[top] & umask
            table, nodes, steps, count, y = _visit(U[U_CONTENT, hs], table, nodes, steps, count)
            if n_steps + 1 > to.shape[0]:
                to = _grow(to, n_steps + 1)
            to[n_steps] = y
            n_steps += 1
            stack, top = _push_children(U, unext, hs, lo, stack, top)
    steps[count] = n_steps
    return nodes[:count], steps, to, stack


#: Multiplier of the region table's hash (Knuth's MMIX LCG constant: mixes the low bits up).
_MIX = 0x5851F42D4C957F2D


@njit(cache=True, inline="always")
def _visit(x: Int, table: Ints, nodes: Ints, steps: Ints, count: Int) -> tuple[Ints, Ints, Ints, Int, Int]:
    """Node x's index in the region (``nodes[:count]``; ``table``: rows of node id,
    index), added if it is new (the table doubles when half full). Returns (table,
    nodes, steps, count, index)."""
    mask = table.shape[0] // 2 - 1
    s = (x * _MIX >> 17) & mask
    while table[2 * s] != -1:
        if table[2 * s] == x:
            found: Int = table[2 * s + 1]
            return table, nodes, steps, count, found
        s = (s + 1) & mask
    if count + 1 > nodes.shape[0]:  # (steps: one more than nodes)
        nodes = _grow(nodes, count + 1)
        steps = _grow(steps, nodes.shape[0] + 1)
    nodes[count] = x
    first = count  # the nodes to put into the table: x, or all of them into a new one
    if 2 * (count + 1) > table.shape[0] // 2:
        table = np.full(2 * table.shape[0], -1, dtype=np.int64)
        mask = table.shape[0] // 2 - 1
        first = 0
    for i in range(first, count + 1):
        s = (nodes[i] * _MIX >> 17) & mask
        while table[2 * s] != -1:
            s = (s + 1) & mask
        table[2 * s] = nodes[i]
        table[2 * s + 1] = i
    return table, nodes, steps, count + 1, count


@njit(cache=True, inline="always")
def _forward(steps: Ints, to: Ints, n: Int) -> tuple[Ints, Ints]:
    """The steps of the region's ``n`` nodes turned around: node y is an entry of the
    nodes ``back[s]``, s in ``range(ahead[y], ahead[y + 1])``. Returns (ahead, back)."""
    n_steps = steps[n]
    ahead = np.full(n + 1, 0, dtype=np.int64)
    for s in range(n_steps):
        ahead[to[s] + 1] += 1
    for y in range(n):
        ahead[y + 1] += ahead[y]
    back = np.empty(n_steps + 1, dtype=np.int64)
    for i in range(n):  # ahead[y] advances to y's end as its steps are filled in
        for s in range(steps[i], steps[i + 1]):
            back[ahead[to[s]]] = i
            ahead[to[s]] += 1
    for y in range(n, 0, -1):
        ahead[y] = ahead[y - 1]
    ahead[0] = 0
    return ahead, back


@njit(cache=True, inline="always")
def _earliest(n: Int, end: Int, steps: Ints, ahead: Ints, back: Ints, pos: Ints) -> tuple[Ints, Int]:
    """C under NEXT, from its first position up: the earliest start of a run, then the
    earliest position any node of the frontier (the nodes at C's positions so far that
    runs reach through them) steps forward to, up to the end. Returns (the index in C of
    each region node's position if it is on such a run, else -1; the index of ``end``)."""
    at = np.full(n, -1, dtype=np.int64)
    candidates = np.empty(n + steps[n], dtype=np.int64)
    frontier = np.empty(n, dtype=np.int64)
    n_candidates = 0
    for i in range(n):
        # A run's first event: a node on runs that start inside the window has steps back
        # unless it starts its run (its max-start is that of an entry of its heap).
        if steps[i] == steps[i + 1]:
            candidates[n_candidates] = i
            n_candidates += 1
    k: Int = ZERO
    while True:
        c = end
        for t in range(n_candidates):
            c = min(c, pos[candidates[t]])
        n_frontier = 0
        for t in range(n_candidates):
            y = candidates[t]
            if pos[y] == c and at[y] < 0:
                at[y] = k
                frontier[n_frontier] = y
                n_frontier += 1
        if c == end:
            return at, k
        n_candidates = 0
        for t in range(n_frontier):
            for s in range(ahead[frontier[t]], ahead[frontier[t] + 1]):
                candidates[n_candidates] = back[s]
                n_candidates += 1
        k += 1


@njit(cache=True, inline="always")
def _chosen_layers(
    n_finals: Int, region: Ints, steps: Ints, to: Ints, at: Ints, last: Int
) -> tuple[Ints, Int, Ints]:
    """The layers of C (as :func:`_first_layer` describes them), from the finals back:
    layer j holds the region nodes at C's position ``last - j`` (their ``at``) that a
    node of layer j - 1 steps back to. Returns (layered, the nodes of layer 0, to)."""
    n = region.shape[0]
    index = np.full(n, -1, dtype=np.int64)  # a region node's index in the layers, or -1
    layered = np.empty(2 * n + 2, dtype=np.int64)  # region indices first, node ids at the end
    layer_to = np.empty(steps[n] + 1, dtype=np.int64)
    count: Int = ZERO
    for f in range(n_finals):
        if at[f] == last:  # (a final that no run with positions C reaches adds no path)
            layered[2 * count] = f
            count += 1
    n_first = count
    layered[1] = 0
    begin: Int = ZERO
    first = count
    n_steps: Int = ZERO
    for want in range(last - 1, -1, -1):
        for j in range(begin, first):
            layered[2 * j + 1] = n_steps
            i = layered[2 * j]
            for s in range(steps[i], steps[i + 1]):
                y = to[s]
                if at[y] != want:
                    continue
                if index[y] < 0:  # (a region node has one position: it is in one layer)
                    index[y] = count
                    layered[2 * count] = y
                    count += 1
                layer_to[n_steps] = index[y]
                n_steps += 1
        layered[2 * first + 1] = n_steps
        begin, first = first, count
    for j in range(count):
        layered[2 * j] = region[layered[2 * j]]
    return layered, n_first, layer_to


@inner
def choose_next(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the NEXT outputs of the end at ``end`` (as :func:`choose_last`): C is found
    from its first position up, on the end's runs inside the window (module docstring)."""
    emask = E.shape[1] - 1
    region, steps, to, stack = _region(finals, n_finals, lo, E, U, ctr, stack)
    n = region.shape[0]
    pos = np.empty(n, dtype=np.int64)
    for i in range(n):
        pos[i] = E[E_POS, region[i] & emask]
    ahead, back = _forward(steps, to, n)
    at, last = _earliest(n, end, steps, ahead, back, pos)
    layered, n_first, layer_to = _chosen_layers(n_finals, region, steps, to, at, last)
    out_se, out_off, out_var, out_pos, n_out, n_ent, emitted = _write_layers(
        layered, n_first, last + 1, layer_to, end, budget, E, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent,
    )  # fmt: skip
    return out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted
