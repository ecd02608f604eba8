"""The ordered run index (docs/architecture.md): runs waiting in a state, ordered by their
register, as a persistent treap in the heap arena.

A treap node lives in ``U`` like a heap node, with two more rows: ``U_KEY`` (its content's
register, as an ordered int64 key) and ``U_CMS`` (its content's max-start). ``U_MS`` holds
the largest max-start of its subtree, so the enumerator prunes subtrees outside the window
as it does heaps; ``U_BIT`` holds ``TREAP + priority`` (a hash of the content, so a copy
keeps it), which marks the node: its own content may have left the window while a child
has not, so the enumerator checks ``U_CMS`` before it reads the content.

Both operations copy the nodes on their path (older roots stay valid: runs that already
took a subtree keep it) and drop subtrees whose max-start fell below ``lo``:

* :func:`treap_insert` adds a content, O(log n) expected;
* :func:`treap_split` cuts a root into the runs with key < v (or ≤ v) and the rest, O(log n)
  new nodes: an event takes the runs on one side of its value as one root.
"""

from __future__ import annotations

import numpy as np

from .arrays import Int, Ints, Truth
from .enumerate import TREAP, U_CMS, _grow
from .inner import inner
from .store import (
    C_MAX_DEPTH,
    C_U_NEXT,
    U_BIT,
    U_CONTENT,
    U_CREATED,
    U_CREATED_ROW,
    U_LEFT,
    U_MS,
    U_RIGHT,
    ensure_room,
    has_room,
    live,
)

U_KEY = 6
#: One node, as an int64 (a literal 1 would give ensure_room a signature of its own).
ONE = np.int64(1)
#: Rows of a heap arena that also holds treap nodes.
TREAP_ROWS = 8
#: treap_split's ``or_equal`` as numpy bools (a literal would give it one signature each).
BELOW = np.bool_(False)
AT_MOST = np.bool_(True)


@inner
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


@inner
def _new(U: Ints, ctr: Ints, pos: Int, window_lo: Int) -> tuple[Ints, Int]:
    """(U, a new node id created at ``pos``): the arena grows rather than overwrite a node
    created inside the window."""
    if not has_room(U, ctr[C_U_NEXT], ONE, U_CREATED, window_lo):
        U = ensure_room(U, ctr[C_U_NEXT], ONE, U_CREATED_ROW, window_lo)
    new: Int = ctr[C_U_NEXT]
    ctr[C_U_NEXT] += 1
    U[U_CREATED, new & (U.shape[1] - 1)] = pos
    return U, new


@inner
def _copy(U: Ints, ctr: Ints, node: Int, pos: Int, window_lo: Int) -> tuple[Ints, Int]:
    U, new = _new(U, ctr, pos, window_lo)
    a, b = node & (U.shape[1] - 1), new & (U.shape[1] - 1)
    for r in range(U.shape[0]):
        if r != U_CREATED:
            U[r, b] = U[r, a]
    return U, new


@inner
def _fix_max(U: Ints, ctr: Ints, node: Int, lo: Int) -> None:
    """U_MS of ``node`` from its content and children (children outside the window or
    no longer live are cut off)."""
    mask = U.shape[1] - 1
    s = node & mask
    best = U[U_CMS, s]
    for row in (U_LEFT, U_RIGHT):
        child = U[row, s]
        if child >= 0 and _alive(U, ctr, child, lo):
            best = max(best, U[U_MS, child & mask])
        else:
            U[row, s] = -1
    U[U_MS, s] = best


@inner
def treap_split(
    U: Ints, ctr: Ints, root: Int, v: Int, or_equal: Truth, lo: Int, pos: Int, window_lo: Int,
    stack: Ints, base: Int,
) -> tuple[Ints, Int, Int, Ints]:  # fmt: skip
    """(U, runs of ``root`` with key < v — ≤ v if ``or_equal`` —, the others, stack): two
    new roots (-1: empty); ``root`` is unchanged. The copies are noted in ``stack`` from
    ``base`` on."""
    left_root: Int = -1
    right_root: Int = -1
    left_hook: Int = -1
    right_hook: Int = -1
    top = base
    cur = root
    while cur >= 0 and _alive(U, ctr, cur, lo):
        U, copy = _copy(U, ctr, cur, pos, window_lo)
        mask = U.shape[1] - 1
        cs = copy & mask
        if top + 1 > stack.shape[0]:
            stack = _grow(stack, top + 1)
        stack[top] = copy
        top += 1
        key = U[U_KEY, cs]
        if key < v or (or_equal and key == v):  # cur and its left subtree go left
            if left_hook < 0:
                left_root = copy
            else:
                U[U_RIGHT, left_hook & mask] = copy
            left_hook = copy
            cur = U[U_RIGHT, cs]
            U[U_RIGHT, cs] = -1
        else:
            if right_hook < 0:
                right_root = copy
            else:
                U[U_LEFT, right_hook & mask] = copy
            right_hook = copy
            cur = U[U_LEFT, cs]
            U[U_LEFT, cs] = -1
    # Deeper copies were made later: fix the maxima from the bottom up.
    for k in range(top - 1, base - 1, -1):
        _fix_max(U, ctr, stack[k], lo)
    if top > ctr[C_MAX_DEPTH]:
        ctr[C_MAX_DEPTH] = top
    return U, left_root, right_root, stack


@inner
def treap_insert(
    U: Ints, ctr: Ints, root: Int, x: Int, key: Int, x_ms: Int, lo: Int, pos: Int, window_lo: Int,
    stack: Ints,
) -> tuple[Ints, Int, Ints]:  # fmt: skip
    """(U, a new root for {x} ∪ root, stack), x an extend node with register ``key`` and
    max-start ``x_ms``."""
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
        p = U[U_BIT, us] - TREAP
        if p < prio or (p == prio and U[U_CONTENT, us] < x):
            break
        U, copy = _copy(U, ctr, cur, pos, window_lo)
        mask = U.shape[1] - 1
        us = cur & mask
        if top + 1 > stack.shape[0]:
            stack = _grow(stack, top + 1)
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
    U, left, right, stack = treap_split(U, ctr, cur, key, BELOW, lo, pos, window_lo, stack, below)
    U, node = _new(U, ctr, pos, window_lo)
    mask = U.shape[1] - 1
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
    if below + 1 > ctr[C_MAX_DEPTH]:
        ctr[C_MAX_DEPTH] = below + 1
    return U, new_root, stack
