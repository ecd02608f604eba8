"""MAX among the outputs of an end that fit the window (issue #17), found by a search
that never lists the outputs a larger one contains.

MAX keeps every output whose complex event C (its set of positions) no other output of
the end that fits the window strictly contains (docs/strategies.md). Listing every output
that fits and comparing them costs exponential time under ``+`` (``seq(a, plus(b), c)``
with 20 b's in the window has a million outputs per end, one of them maximal for each
a). Instead, the search walks the end's region (:func:`pycel.jit.choose.end_region`: the
nodes its runs inside the window go through) back from the end, one path at a time, the
way the CEL paper's MAX automaton runs forward (Theorem 4): beside the path p it keeps
the nodes E where other paths with exactly p's positions so far stand, and the nodes U
where paths with strictly more positions stand. At each position x, going down, p either
steps to one of its node's predecessors at x or skips x; E and U follow (a path of E that
takes x while p skips it moves to U; a path of U that skips x while p takes it is no
longer larger). Every region node lies on a run that starts inside the window, so:

- p ends (its node starts its run) with a maximal C unless a path of U can still end
  (its node starts a run, or steps further down) or a path of E can still step down;
- p is abandoned as soon as every node p's node can step to below x is a step of some
  node of U: each way p can go on, a larger path can too.

The second rule is what keeps the search small: where a ``+`` could have taken an event
that p skipped, the larger path is at the same node as p, or at one that reaches all of
p's, by the next step. Cost per end: each step of the search reads the steps of E's and
U's nodes at one position, O((|E| + |U|) · s) with s a node's steps; a path abandoned
costs the steps it took. The search visits a subset of the path prefixes that listing
every output walks, each for up to one step per position it skips; no polynomial bound
is proven for every pattern, and on the patterns measured (docs/benchmarks.md) the work
grows with the window's size and the output, not exponentially.

Example::

    (out_se, out_off, out_var, out_pos, n_out, n_ent, stack, emitted) = choose_max(
        finals, n_finals, end, lo, budget, E, U, ctr, label_masks, proj_mask, max_labels,
        out_se, out_off, out_var, out_pos, n_out, n_ent, stack)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arrays import Flags, Int, Int32s, Ints, Truth
from .choose import end_region
from .enumerate import _grow, emit_match
from .inner import inner
from .store import E_CHILD, E_POS, ZERO

#: The fields of one search frame in ``frames``: the position down to which p is decided,
#: p's node, its depth (p's nodes so far, less one), E and U as (offset, length) in the
#: pool, and the end of the pool this frame uses.
_P, _CUR, _DEPTH, _E_OFF, _E_LEN, _U_OFF, _U_LEN, _SEG_END = 0, 1, 2, 3, 4, 5, 6, 7
_FRAME = 8
#: Steps of one node sorted by insertion; longer lists by numpy's argsort.
_SHORT = 32


@njit(cache=True, inline="always")
def _first_below(to: Ints, pos: Ints, lo: Int, hi: Int, at: Int) -> Int:
    """The first step in ``to[lo:hi]`` (by position, descending) to a position below
    ``at``; ``hi`` if there is none."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if pos[to[mid]] < at:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def _steps_at(
    pool: Ints, off: Int, length: Int, x: Int, steps: Ints, to: Ints, pos: Ints, seen: Ints, stamp: Int,
    top: Int,
) -> Int:
    """Append to ``pool`` at ``top`` the nodes at position ``x`` that the nodes
    ``pool[off:off + length]`` step to, each once; return the new top (the caller has
    made room for every node)."""
    for k in range(off, off + length):
        y = pool[k]
        s = _first_below(to, pos, steps[y], steps[y + 1], x + 1)
        while s < steps[y + 1] and pos[to[s]] == x:
            z = to[s]
            if seen[z] != stamp:
                seen[z] = stamp
                pool[top] = z
                top += 1
            s += 1
    return top


@njit(cache=True, inline="always")
def _highest_below(y: Int, at: Int, steps: Ints, to: Ints, pos: Ints) -> Int:
    """The highest position below ``at`` that node y steps to; -1 if none."""
    s = _first_below(to, pos, steps[y], steps[y + 1], at)
    return pos[to[s]] if s < steps[y + 1] else np.int64(-1)


@njit(cache=True, inline="always")
def _can_go_below(y: Int, x: Int, steps: Ints, to: Ints, pos: Ints) -> Truth:
    """Whether node y steps to a position below ``x``."""
    found: Truth = _first_below(to, pos, steps[y], steps[y + 1], x) < steps[y + 1]
    return found


@njit(cache=True, inline="always")
def _outgrown(
    pool: Ints, e_off: Int, e_len: Int, u_off: Int, u_len: Int, x: Int, steps: Ints, to: Ints, pos: Ints,
    start: Flags,
) -> Truth:
    """Whether a path that ends at position ``x`` (E and U as at x) is strictly contained
    in another: a path of U can end too, or a path of E can take more positions."""
    for k in range(u_off, u_off + u_len):
        u = pool[k]
        if start[u] or _can_go_below(u, x, steps, to, pos):
            return True
    for k in range(e_off, e_off + e_len):
        if _can_go_below(pool[k], x, steps, to, pos):
            return True
    return False


@njit(cache=True, inline="always")
def _mark_steps(
    pool: Ints, off: Int, length: Int, x: Int, steps: Ints, to: Ints, pos: Ints, mark: Ints, stamp: Int
) -> None:
    """Stamp in ``mark`` every node that a node of ``pool[off:off + length]`` steps to
    below ``x``."""
    for k in range(off, off + length):
        u = pool[k]
        s = _first_below(to, pos, steps[u], steps[u + 1], x)
        while s < steps[u + 1]:
            mark[to[s]] = stamp
            s += 1


@njit(cache=True, inline="always")
def _covered(y: Int, x: Int, steps: Ints, to: Ints, pos: Ints, mark: Ints, stamp: Int) -> Truth:
    """Whether every node that ``y`` steps to below ``x`` is stamped (:func:`_mark_steps`
    with U's nodes: then each way on from y is also a way on for a path with more
    positions)."""
    s = _first_below(to, pos, steps[y], steps[y + 1], x)
    while s < steps[y + 1] and mark[to[s]] == stamp:
        s += 1
    covered: Truth = s == steps[y + 1]
    return covered


@njit(cache=True, inline="always")
def _push_frame(
    frames: Ints, n_frames: Int, at: Int, cur: Int, depth: Int, e_off: Int, e_len: Int, u_off: Int,
    u_len: Int, seg_end: Int,
) -> tuple[Ints, Int]:  # fmt: skip
    """``frames`` with one more search frame on top (grown if full), and their count."""
    frames = _grow(frames, _FRAME * (n_frames + 1))
    b = _FRAME * n_frames
    frames[b + _P] = at
    frames[b + _CUR] = cur
    frames[b + _DEPTH] = depth
    frames[b + _E_OFF] = e_off
    frames[b + _E_LEN] = e_len
    frames[b + _U_OFF] = u_off
    frames[b + _U_LEN] = u_len
    frames[b + _SEG_END] = seg_end
    return frames, n_frames + 1


@inner
def choose_max(
    finals: Ints, n_finals: Int, end: Int, lo: Int, budget: Int, E: Ints, U: Ints, ctr: Ints,
    label_masks: Ints, proj_mask: Int, max_labels: Int, out_se: Ints, out_off: Ints, out_var: Int32s,
    out_pos: Ints, n_out: np.int64, n_ent: np.int64, stack: Ints,
) -> tuple[Ints, Ints, Int32s, Ints, np.int64, np.int64, Ints, np.int64]:  # fmt: skip
    """Write the MAX outputs of the end at ``end`` (accepting extend nodes
    ``finals[:n_finals]``; window start ``lo``), at most ``budget``; return the output
    arrays and counts, the work stack and how many were written (module docstring)."""
    emask = E.shape[1] - 1
    count: Int = n_out  # (Int: emit_match's type)
    entries: Int = n_ent
    region, steps, to, _ahead, _links, n, stack = end_region(finals, n_finals, lo, E, U, ctr, stack)
    pos = np.empty(n, dtype=np.int64)
    start = np.empty(n, dtype=np.bool_)
    for y in range(n):
        pos[y] = E[E_POS, region[y] & emask]
        start[y] = E[E_CHILD, region[y] & emask] < 0
    for y in range(n):  # each node's steps by position, descending
        a, b = steps[y], steps[y + 1]
        if b - a > _SHORT:
            seg = to[a:b].copy()
            order = np.argsort(-pos[seg], kind="mergesort")
            for k in range(b - a):
                to[a + k] = seg[order[k]]
            continue
        for k in range(a + 1, b):  # (insertion: most nodes have a few steps)
            z = to[k]
            i = k
            while i > a and pos[to[i - 1]] < pos[z]:
                to[i] = to[i - 1]
                i -= 1
            to[i] = z
    seen = np.zeros(n, dtype=np.int64)  # stamps: a node already in the set being built
    mark = np.zeros(n, dtype=np.int64)  # stamps: the steps of U's nodes (_covered)
    stamp: Int = ZERO
    pool = np.empty(max(64, 4 * n), dtype=np.int64)
    for i in range(n_finals):  # E at the end: every final (the same position)
        pool[i] = i
    frames = np.empty(_FRAME * 16, dtype=np.int64)
    n_frames: Int = ZERO
    path = np.empty(16, dtype=np.int64)
    emitted = ZERO
    for f in range(n_finals):
        if start[f]:  # a one-event output: maximal unless another final steps back
            if not _outgrown(pool, ZERO, n_finals, ZERO, ZERO, end, steps, to, pos, start):
                path[0] = region[f]
                out_se, out_off, out_var, out_pos, count, entries = emit_match(
                    path, ZERO, end, E, label_masks, proj_mask,
                    out_se, out_off, out_var, out_pos, count, entries, max_labels,
                )  # fmt: skip
                emitted += 1
            continue
        # (E: every final; U: none yet)
        frames, n_frames = _push_frame(
            frames, n_frames, end, f, ZERO, ZERO, n_finals, n_finals, ZERO, n_finals
        )
    while n_frames > 0 and emitted < budget:
        n_frames -= 1
        b = _FRAME * n_frames
        at = frames[b + _P]
        cur = frames[b + _CUR]
        depth = frames[b + _DEPTH]
        e_off = frames[b + _E_OFF]
        e_len = frames[b + _E_LEN]
        u_off = frames[b + _U_OFF]
        u_len = frames[b + _U_LEN]
        top = frames[b + _SEG_END]  # later frames' sets are done with
        path = _grow(path, depth + 2)  # (p's extend nodes, from the end back)
        path[depth] = region[cur]
        # x: the highest position below ``at`` that a node of E or U steps to (cur has a
        # step below ``at``, so there is one); nothing changes at the positions between.
        x: Int = np.int64(-1)
        for k in range(e_off, e_off + e_len):
            x = max(x, _highest_below(pool[k], at, steps, to, pos))
        for k in range(u_off, u_off + u_len):
            x = max(x, _highest_below(pool[k], at, steps, to, pos))
        pool = _grow(pool, top + 3 * n)
        # E and U as p takes x: the nodes at x their nodes step to.
        stamp += 1
        ex_off = top
        top = _steps_at(pool, e_off, e_len, x, steps, to, pos, seen, stamp, top)
        ex_len = top - ex_off
        stamp += 1
        ux_off = top
        top = _steps_at(pool, u_off, u_len, x, steps, to, pos, seen, stamp, top)
        ux_len = top - ux_off
        taken_end = top
        stamp += 1
        _mark_steps(pool, ux_off, ux_len, x, steps, to, pos, mark, stamp)
        s = _first_below(to, pos, steps[cur], steps[cur + 1], x + 1)
        while s < steps[cur + 1] and pos[to[s]] == x and emitted < budget:
            m = to[s]
            s += 1
            if start[m]:
                if not _outgrown(pool, ex_off, ex_len, ux_off, ux_len, x, steps, to, pos, start):
                    path[depth + 1] = region[m]
                    out_se, out_off, out_var, out_pos, count, entries = emit_match(
                        path, depth + 1, end, E, label_masks, proj_mask,
                        out_se, out_off, out_var, out_pos, count, entries, max_labels,
                    )  # fmt: skip
                    emitted += 1
                continue
            if _covered(m, x, steps, to, pos, mark, stamp):
                continue
            frames, n_frames = _push_frame(
                frames, n_frames, x, m, depth + 1, ex_off, ex_len, ux_off, ux_len, taken_end
            )
        # p skips x (pushed last, so searched first: its sets lie above the others'): U
        # gains the nodes E's and U's paths reach by taking x. Only nodes that step below
        # x stay in it: p takes no more positions at or above x, and a node of U matters
        # again only if it takes the next one p takes.
        if not _can_go_below(cur, x, steps, to, pos):
            continue
        stamp += 1
        skip_off = top
        for k in range(u_off, u_off + u_len):
            y = pool[k]
            if seen[y] != stamp and _can_go_below(y, x, steps, to, pos):
                seen[y] = stamp
                pool[top] = y
                top += 1
        for k in range(ex_off, taken_end):
            y = pool[k]
            if seen[y] != stamp and _can_go_below(y, x, steps, to, pos):
                seen[y] = stamp
                pool[top] = y
                top += 1
        skip_len = top - skip_off
        stamp += 1
        _mark_steps(pool, skip_off, skip_len, x, steps, to, pos, mark, stamp)
        if _covered(cur, x, steps, to, pos, mark, stamp):
            continue
        frames, n_frames = _push_frame(frames, n_frames, x, cur, depth, e_off, e_len, skip_off, skip_len, top)
    return out_se, out_off, out_var, out_pos, np.int64(count), np.int64(entries), stack, emitted
