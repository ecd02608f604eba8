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
more of a cold first query. NEXT's steps are written out in its body instead, and both
write their valuations with room reserved once per end (see :func:`choose_next` and
:func:`_write_layers` for what that saved).

Example::

    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted) = choose_last(
        finals, n_finals, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arrays import Flags, Int, Int32s, Ints
from .enumerate import _grow, _reserve, has_output_room
from .inner import inner
from .store import (
    C_U_NEXT,
    E_CHILD,
    E_LABEL,
    E_POS,
    TREAP,
    U_BIT,
    U_CMS,
    U_CONTENT,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ZERO,
    live,
)

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
                # An ordered index node (pycel.jit.ordered) is ordered by register, not
                # max-start: its own run may have left the window while its children did not.
                inside = U[U_BIT, hs] < TREAP or U[U_CMS, hs] >= lo
                if inside:
                    largest = max(largest, p)
                if inside and collect and p == at:
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
        if largest < 0:  # (the last layer: its nodes' steps, none, are recorded)
            layered[2 * first + 1] = n_steps
            return largest, layered, first, to, stack
        at = largest
        collect = True


@njit(cache=True, inline="always")
def _write_layers(
    layered: Ints, n_first: Int, n_nodes: Int, layers: Int, to: Ints, end: Int, budget: Int, E: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, np.int64]:  # fmt: skip
    """Write every valuation whose path goes through the ``layers`` layers (a node of
    layer 0, the first ``n_first`` of the ``n_nodes``, then a step to the next layer
    from each, the last one starting its run), at most ``budget``; return the output
    arrays, their counts and how many were written. Every node's steps must be recorded,
    the last layer's as none."""
    emask = E.shape[1] - 1
    # The output arrays grow once per end, for at most as many valuations as paths from
    # layer 0 end in a run's first event (counted from the last node back, at most
    # ``budget`` each): growing them per valuation (emit_match) took a quarter of
    # the chooser's compiled code.
    paths = np.empty(n_nodes, dtype=np.int64)
    i = n_nodes - 1
    while i >= 0:
        s = layered[2 * i + 1]
        if s == layered[2 * i + 3]:
            paths[i] = 1 if E[E_CHILD, layered[2 * i] & emask] < 0 else 0
        else:
            paths[i] = 0
            while s < layered[2 * i + 3]:
                paths[i] = min(budget, paths[i] + paths[to[s]])
                s += 1
        i -= 1
    # (at most 2**61 / the entries of a valuation: the sizes below do not overflow, and
    # memory runs out first: the allocation fails before anything is written)
    most = min(budget, (1 << 61) // (layers * max_labels + 1))
    room: Int = ZERO
    i = ZERO
    while i < n_first:
        room = min(most, room + paths[i])
        i += 1
    entries = room * layers * max_labels
    if not has_output_room(out_se, out_off, out_var, n_out, n_ent, room, entries):
        out_se, out_off, out_var, out_pos = _reserve(
            out_se, out_off, out_var, out_pos, n_out, n_ent, room, entries
        )
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
        start = end  # the valuation: its entries (variable, position) in node order
        d = 0
        while d < layers:
            e = walk[d] & emask
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
            d += 1
        out_se[2 * n_out] = start
        out_se[2 * n_out + 1] = end
        n_out += 1
        out_off[n_out] = n_ent
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
        layered, n_finals, first, layers, to, end, budget, E, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent,
    )  # fmt: skip
    return out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted


#: Multiplier of the region table's hash (Knuth's MMIX LCG constant: mixes the low bits up).
_MIX = 0x5851F42D4C957F2D


@njit(cache=True, inline="always")
def end_region(
    finals: Ints, n_finals: Int, lo: Int, E: Ints, U: Ints, ctr: Ints, stack: Ints
) -> tuple[Ints, Ints, Ints, Ints, Ints, Int, Ints]:
    """The end's region: the extend nodes its runs inside the window go through, each
    once: the finals (indices 0 to n_finals - 1) and, transitively, the entries of their
    heaps with max-start ≥ ``lo``. Node i is ``region[i]``; its steps back are to the
    nodes ``to[s]``, s from ``steps[i]`` to ``steps[i + 1] - 1``. The steps are also
    listed by the node they step to: node y's are ``ahead[y]``, then ``links[2s]`` from
    each step s (-1: none), from the nodes ``links[2s + 1]``. Returns (region, steps, to,
    ahead, links, the node count, the work stack). O(r + s), r the nodes and s the steps.

    m slots each, the table (rows of node id, index) 2m rows: at most half full; the
    region is found again in twice the room if it does not fit (no array grows). The
    finals are this event's new nodes: no heap holds them, so only the nodes found in
    heaps go into the table."""
    emask = E.shape[1] - 1
    umask = U.shape[1] - 1
    unext = ctr[C_U_NEXT]
    m: Int = np.int64(16)
    while m < 2 * n_finals:
        m *= 2
    while True:
        region = np.empty(m, dtype=np.int64)
        steps = np.empty(m + 1, dtype=np.int64)
        to = np.empty(m, dtype=np.int64)
        table = np.empty(4 * m, dtype=np.int64)
        ahead = np.empty(m, dtype=np.int64)
        links = np.empty(2 * m, dtype=np.int64)
        if stack.shape[0] < m:
            stack = np.empty(m, dtype=np.int64)  # (the walk's scratch: nothing to keep)
        mask = 2 * m - 1
        s: Int = ZERO
        while s <= mask:
            table[2 * s] = -1
            s += 1
        n: Int = ZERO
        while n < n_finals:
            region[n] = finals[n]
            ahead[n] = -1
            n += 1
        n_steps: Int = ZERO
        done: Int = ZERO  # the nodes before ``done`` have their steps
        while done < n:  # (n: -1 once the region does not fit)
            steps[done] = n_steps
            root = E[E_CHILD, region[done] & emask]
            done += 1
            if root < 0 or not live(U, unext, root) or U[U_MS, root & umask] < lo:
                continue
            stack[0] = root
            top: Int = np.int64(1)
            while top > 0:
                if n == m or n_steps == m or top + 2 > m:
                    n = -1
                    break
                top -= 1
                hs = stack[top] & umask
                left = U[U_LEFT, hs]
                if live(U, unext, left) and U[U_MS, left & umask] >= lo:
                    stack[top] = left
                    top += 1
                right = U[U_RIGHT, hs]
                if live(U, unext, right) and U[U_MS, right & umask] >= lo:
                    stack[top] = right
                    top += 1
                if U[U_BIT, hs] >= TREAP and U[U_CMS, hs] < lo:
                    continue  # an ordered index node whose own run left the window
                x = U[U_CONTENT, hs]
                s = (x * _MIX >> 17) & mask
                while table[2 * s] != -1 and table[2 * s] != x:
                    s = (s + 1) & mask
                if table[2 * s] == -1:
                    table[2 * s] = x
                    table[2 * s + 1] = n
                    region[n] = x
                    ahead[n] = -1
                    n += 1
                y: Int = table[2 * s + 1]
                to[n_steps] = y
                links[2 * n_steps] = ahead[y]
                links[2 * n_steps + 1] = done - 1
                ahead[y] = n_steps
                n_steps += 1
        if n >= 0:
            steps[n] = n_steps
            break
        m *= 2
    return region, steps, to, ahead, links, n, stack


@inner
def choose_next(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the NEXT outputs of the end at ``end`` (as :func:`choose_last`): C is found
    from its first position up, on the end's runs inside the window (module docstring).

    One body in three steps, written for a short compile (a query compiles it on its first
    run; Numba's IR, measured): no inlined helpers (each was inlined by copying and
    re-running passes on its IR, 0.1-0.2 s apiece, and those that returned arrays built
    and unpacked tuples), ``while`` loops (a ``for ... in range`` lowers to about three
    times the code), no array that grows (the region is found again in twice the room
    if it does not fit: O(r + s) in all), and arrays reused once done with."""
    emask = E.shape[1] - 1
    # 1. The region (end_region): the nodes the end's runs inside the window go through.
    region, steps, to, ahead, links, n, stack = end_region(finals, n_finals, lo, E, U, ctr, stack)
    n_steps = steps[n]
    pos = np.empty(n, dtype=np.int64)
    y = ZERO
    while y < n:
        pos[y] = E[E_POS, region[y] & emask]
        y += 1
    # 2. C, from its first position up: the earliest start of a run, then the earliest
    # position any node of the frontier (the nodes at C's positions so far that runs
    # reach through them) steps forward to, up to the end. at[y]: the index in C of
    # node y's position if it is on such a run, else -1; last: the index of the end.
    at = np.empty(n, dtype=np.int64)
    candidates = np.empty(n + n_steps, dtype=np.int64)
    frontier = np.empty(n, dtype=np.int64)
    n_candidates: Int = ZERO
    i = ZERO
    while i < n:
        at[i] = -1
        # A run's first event: a node on runs that start inside the window has steps back
        # unless it starts its run (its max-start is that of an entry of its heap).
        if steps[i] == steps[i + 1]:
            candidates[n_candidates] = i
            n_candidates += 1
        i += 1
    last: Int = ZERO
    while True:
        c = end
        t: Int = ZERO
        while t < n_candidates:
            c = min(c, pos[candidates[t]])
            t += 1
        n_frontier: Int = ZERO
        t = ZERO
        while t < n_candidates:
            y = candidates[t]
            if pos[y] == c and at[y] < 0:
                at[y] = last
                frontier[n_frontier] = y
                n_frontier += 1
            t += 1
        if c == end:
            break
        n_candidates = ZERO
        t = ZERO
        while t < n_frontier:
            s = ahead[frontier[t]]
            while s >= 0:
                candidates[n_candidates] = links[2 * s + 1]
                n_candidates += 1
                s = links[2 * s]
            t += 1
        last += 1
    # 3. The layers of C (as _first_layer describes them), from the finals back: layer j
    # holds the region nodes at C's position last - j that a node of layer j - 1 steps
    # back to. Reused: candidates (n + steps) for their steps, pos for index (a region
    # node's index in the layers, or -1).
    layered = np.empty(2 * n + 2, dtype=np.int64)
    layer_to = candidates
    index = pos
    y = ZERO
    while y < n:
        index[y] = -1
        y += 1
    count: Int = ZERO  # (layered holds region indices first, node ids at the end)
    i = ZERO
    while i < n_finals:
        if at[i] == last:  # (a final that no run with positions C reaches adds no path)
            layered[2 * count] = i
            count += 1
        i += 1
    n_first = count
    layered[1] = 0
    begin: Int = ZERO
    first = count
    n_layer_steps: Int = ZERO
    want = last - 1
    while want >= -1:
        j = begin
        while j < first:
            layered[2 * j + 1] = n_layer_steps
            i = layered[2 * j]
            s = steps[i]
            while want >= 0 and s < steps[i + 1]:  # (want -1: the last layer, no steps)
                y = to[s]
                s += 1
                if at[y] != want:
                    continue
                if index[y] < 0:  # (a region node has one position: it is in one layer)
                    index[y] = count
                    layered[2 * count] = y
                    count += 1
                layer_to[n_layer_steps] = index[y]
                n_layer_steps += 1
            j += 1
        layered[2 * first + 1] = n_layer_steps
        begin, first = first, count
        want -= 1
    j = ZERO
    while j < count:
        layered[2 * j] = region[layered[2 * j]]
        j += 1
    out_se, out_off, out_var, out_pos, n_out, n_ent, emitted = _write_layers(
        layered, n_first, count, last + 1, layer_to, end, budget, E, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent,
    )  # fmt: skip
    return out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted
