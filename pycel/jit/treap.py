"""The ordered run index (docs/architecture.md): runs waiting in a state, ordered by their
register, as a persistent treap in the heap arena.

A treap node lives in ``U`` like a heap node, with two more rows: ``U_KEY`` (its content's
register, as an ordered int64 key) and ``U_CMS`` (its content's max-start). ``U_MS`` holds
the largest max-start of its subtree, so the enumerator prunes subtrees outside the window
as it does heaps; ``U_BIT`` holds ``TREAP + priority`` (a hash of the content, so a copy
keeps it) plus the subtree's height times 2^32, which marks the node: its own content may
have left the window while a child has not, so the enumerator checks ``U_CMS`` before it
reads the content.

Both operations copy the nodes on their path (older roots stay valid: runs that already
took a subtree keep it), except nodes the same event made for the same treap and no run
took yet (ids from ``fresh`` on: they change in place), and drop subtrees whose max-start
fell below ``lo``:

* :func:`treap_insert` adds a content, O(log n) expected;
* :func:`treap_split` cuts a root into the runs with key < v (or ≤ v) and the rest, O(log n)
  new nodes (only for the sides the caller keeps): an event takes the runs on one side of
  its value as one root.

Neither grows the arena nor the stack: each copies nodes of one root-to-leaf path, at
most the root's height, and ``ctr[C_MAX_DEPTH]`` holds the greatest height an insertion
has given a root, so the loop makes room once per event (a split makes nothing taller;
each insertion, one level at most). Growth, which replaces the arrays, stays in the loop:
these functions return ids only, and Numba compiles no reference counting of replaced
arrays and no growth path into them.

Example::

    root = treap_insert(U, ctr, root, x, key, x_ms, lo, pos, stack, fresh)
    left, right = treap_split(U, ctr, root, v, AT_MOST, KEEP_BOTH, lo, pos, stack, ZERO, fresh)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arrays import Int, Ints, Truth
from .inner import inner
from .store import (
    C_MAX_DEPTH,
    C_U_NEXT,
    TREAP,
    U_BIT,
    U_CMS,
    U_CONTENT,
    U_CREATED,
    U_KEY,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ZERO,
    live,
)

#: ``U_BIT`` of a treap node: ``TREAP + priority`` in the low 32 bits, the height above.
HEIGHT_SHIFT = 32
LOW_BITS = (1 << HEIGHT_SHIFT) - 1
#: Rows of a heap arena that also holds treap nodes.
TREAP_ROWS = 8
#: treap_split's ``or_equal`` as numpy bools (a literal would give it one signature each).
BELOW = np.bool_(False)
AT_MOST = np.bool_(True)
#: treap_split's ``keep``: the sides it builds (int64 scalars, for the same reason).
KEEP_LEFT, KEEP_RIGHT = np.int64(1), np.int64(2)
KEEP_BOTH = KEEP_LEFT | KEEP_RIGHT


@njit(cache=True, inline="always")
def _priority(content: Int) -> Int:
    """A pseudo-random priority from the content's id (splitmix64's finalizer, 62 bits)."""
    h = content & 0x3FFFFFFFFFFFFFFF
    h = ((h ^ (h >> 30)) * 0x3F58476D1CE4E5B9) & 0x3FFFFFFFFFFFFFFF
    h = ((h ^ (h >> 27)) * 0x14D049BB133111EB) & 0x3FFFFFFFFFFFFFFF
    p: Int = (h ^ (h >> 31)) & 0x3FFFFFFF
    return p


@inner
def _alive(U: Ints, ctr: Ints, node: Int, lo: Int) -> Truth:
    """Whether ``node`` is a live subtree with a run inside the window."""
    alive: Truth = live(U, ctr[C_U_NEXT], node) and U[U_MS, node & (U.shape[1] - 1)] >= lo
    return alive


@njit(cache=True, inline="always")
def _new(U: Ints, ctr: Ints, pos: Int) -> Int:
    """A new node id created at ``pos`` (the caller made room: :func:`treap_room`)."""
    new: Int = ctr[C_U_NEXT]
    ctr[C_U_NEXT] += 1
    U[U_CREATED, new & (U.shape[1] - 1)] = pos
    return new


@njit(cache=True, inline="always")
def _copy(U: Ints, ctr: Ints, node: Int, pos: Int) -> Int:
    new = _new(U, ctr, pos)
    a, b = node & (U.shape[1] - 1), new & (U.shape[1] - 1)
    for r in range(U.shape[0]):
        if r != U_CREATED:
            U[r, b] = U[r, a]
    return new


@inner
def _own(U: Ints, ctr: Ints, node: Int, pos: Int, fresh: Int) -> Int:
    """``node`` itself if it is at least ``fresh`` (made by the same operation on the
    same root, so nothing else refers to it yet: it may change in place), else a copy.
    Compiled apart: inlined into the split and the insertion, Numba copied its IR and ran
    its passes twice (about 0.4 s of a cold first query)."""
    if node >= fresh:
        return node
    return _copy(U, ctr, node, pos)


@njit(cache=True, inline="always")
def _height(U: Ints, node: Int) -> Int:
    h: Int = U[U_BIT, node & (U.shape[1] - 1)] >> HEIGHT_SHIFT
    return h


@inner
def _fix_max(U: Ints, ctr: Ints, node: Int, lo: Int) -> None:
    """U_MS and the height of ``node`` from its content and children (children outside
    the window or no longer live are cut off)."""
    mask = U.shape[1] - 1
    s = node & mask
    best = U[U_CMS, s]
    height: Int = ZERO
    for row in (U_LEFT, U_RIGHT):
        child = U[row, s]
        if child >= 0 and _alive(U, ctr, child, lo):
            best = max(best, U[U_MS, child & mask])
            height = max(height, _height(U, child))
        else:
            U[row, s] = -1
    U[U_MS, s] = best
    U[U_BIT, s] = (U[U_BIT, s] & LOW_BITS) + ((height + 1) << HEIGHT_SHIFT)


@inner
def treap_split(
    U: Ints, ctr: Ints, root: Int, v: Int, or_equal: Truth, keep: Int, lo: Int, pos: Int, stack: Ints,
    base: Int, fresh: Int,
) -> tuple[Int, Int]:  # fmt: skip
    """(runs of ``root`` with key < v — ≤ v if ``or_equal`` —, the others): two new roots
    (-1: empty); ``root`` is unchanged. Only the sides in ``keep`` (:data:`KEEP_LEFT`,
    :data:`KEEP_RIGHT` or both) are built: the other's root is -1 and its nodes are not
    copied (half the copies of a split whose caller uses one side, and copies live as
    long as the window). Nodes with ids from ``fresh`` on change in place (see
    :func:`_own`). The copies are noted in ``stack`` from ``base`` on (``U`` and ``stack``
    have room for the root's height more)."""
    mask = U.shape[1] - 1
    left_root: Int = -1
    right_root: Int = -1
    left_hook: Int = -1
    right_hook: Int = -1
    top = base
    cur = root
    while cur >= 0 and _alive(U, ctr, cur, lo):
        us = cur & mask
        key = U[U_KEY, us]
        # cur and its left subtree go left (cut off its right child), or cur and its right
        # subtree go right (cut off its left child): one copy site for both sides.
        left = key < v or (or_equal and key == v)
        cut = U_RIGHT if left else U_LEFT
        next_cur = U[cut, us]
        if keep & (KEEP_LEFT if left else KEEP_RIGHT):
            copy = _own(U, ctr, cur, pos, fresh)
            stack[top] = copy
            top += 1
            hook = left_hook if left else right_hook
            if hook >= 0:
                U[cut, hook & mask] = copy
            elif left:
                left_root = copy
            else:
                right_root = copy
            if left:
                left_hook = copy
            else:
                right_hook = copy
            U[cut, copy & mask] = -1
        cur = next_cur
    # Deeper copies were made later: fix the maxima from the bottom up.
    for k in range(top - 1, base - 1, -1):
        _fix_max(U, ctr, stack[k], lo)
    return left_root, right_root


@inner
def treap_insert(
    U: Ints, ctr: Ints, root: Int, x: Int, key: Int, x_ms: Int, lo: Int, pos: Int, stack: Ints, fresh: Int
) -> Int:
    """A new root for {x} ∪ root, x an extend node with register ``key`` and max-start
    ``x_ms`` (``U`` and ``stack`` have room for the root's height plus one more); the
    new root's height is noted in ``ctr[C_MAX_DEPTH]`` if it is the greatest yet. Nodes
    with ids from ``fresh`` on change in place (see :func:`_own`): an event that adds
    several runs to one treap copies its path once. Compiled apart, not inlined into the
    loop (Numba's inlining copies the IR and the loop's passes run over it again)."""
    mask = U.shape[1] - 1
    prio = _priority(x)
    new_root: Int = -1
    hook: Int = -1
    hook_row = U_LEFT
    top = 0
    cur = root
    # Down the path while the nodes outrank x (priority, then content id).
    while cur >= 0 and _alive(U, ctr, cur, lo):
        us = cur & mask
        p = (U[U_BIT, us] & LOW_BITS) - TREAP
        if p < prio or (p == prio and U[U_CONTENT, us] < x):
            break
        copy = _own(U, ctr, cur, pos, fresh)
        stack[top] = copy
        top += 1
        if hook < 0:
            new_root = copy
        else:
            U[hook_row, hook & mask] = copy
        hook = copy
        hook_row = U_LEFT if key < U[U_KEY, us] else U_RIGHT
        cur = U[hook_row, us]
    if cur >= 0 and not _alive(U, ctr, cur, lo):
        cur = -1
    below = top
    left, right = treap_split(U, ctr, cur, key, BELOW, KEEP_BOTH, lo, pos, stack, below, fresh)
    node = _new(U, ctr, pos)
    ns = node & mask
    U[U_CONTENT, ns] = x
    U[U_LEFT, ns] = left
    U[U_RIGHT, ns] = right
    U[U_BIT, ns] = TREAP + prio
    U[U_KEY, ns] = key
    U[U_CMS, ns] = x_ms
    _fix_max(U, ctr, node, lo)
    if hook < 0:
        new_root = node
    else:
        U[hook_row, hook & mask] = node
    for k in range(below - 1, -1, -1):
        _fix_max(U, ctr, stack[k], lo)
    height = _height(U, new_root)
    if height > ctr[C_MAX_DEPTH]:
        ctr[C_MAX_DEPTH] = height
    return new_root
