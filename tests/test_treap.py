"""The persistent treap of the ordered run index (pycel.jit.treap), operation by operation.

Each operation keeps older roots intact (runs that took a subtree keep it) and makes no
node it does not use: a split builds only the sides its caller keeps, and the insertions
of one event into one treap copy each node of the old treap once (the nodes the event
made change in place). Checked on treaps of random keys with repeats: the contents of
every root, the nodes made (all reachable from the results, as many as the kept sides of
the search path), and the stored heights.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from numba import njit

from pycel.jit.enumerate import U_CMS
from pycel.jit.store import C_U_NEXT, N_COUNTERS, U_BIT, U_CONTENT, U_LEFT, U_MS, U_RIGHT, ZERO
from pycel.jit.treap import (
    AT_MOST,
    BELOW,
    HEIGHT_SHIFT,
    KEEP_BOTH,
    KEEP_LEFT,
    KEEP_RIGHT,
    TREAP_ROWS,
    U_KEY,
    treap_insert,
    treap_split,
)

Ints = np.ndarray
# The wrappers pass int64 scalars (ZERO), not literals: a literal argument would compile
# another signature of the treap functions in this process (test_kernel_types counts them).


@njit(cache=False)
def _insert_one_each(U: Ints, ctr: Ints, root: int, keys: Ints, first: int, stack: Ints) -> int:
    """Content first + i with key keys[i], each at its own position (one event each)."""
    for i in range(keys.shape[0]):
        x = first + i
        root = treap_insert(U, ctr, root, x, keys[i], x, ZERO, x, stack, ctr[C_U_NEXT])
    return root


@njit(cache=False)
def _insert_in_one_event(U: Ints, ctr: Ints, root: int, keys: Ints, first: int, pos: int, stack: Ints) -> int:
    """Contents first + i with keys[i], all made by the event at ``pos``."""
    fresh = ctr[C_U_NEXT]
    for i in range(keys.shape[0]):
        root = treap_insert(U, ctr, root, first + i, keys[i], pos, ZERO, pos, stack, fresh)
    return root


@njit(cache=False)
def _split(U: Ints, ctr: Ints, root: int, v: int, or_equal: bool, keep: int, stack: Ints) -> tuple[int, int]:
    fresh = ctr[C_U_NEXT]
    return treap_split(U, ctr, root, v, or_equal, keep, ZERO, ctr[C_U_NEXT], stack, ZERO, fresh)


def _treap(keys: list[int]) -> tuple[Ints, Ints, Ints, int]:
    U = np.full((TREAP_ROWS, 1 << 14), -1, dtype=np.int64)
    ctr = np.zeros(N_COUNTERS, dtype=np.int64)
    stack = np.zeros(512, dtype=np.int64)
    root = _insert_one_each(U, ctr, np.int64(-1), np.array(keys, dtype=np.int64), np.int64(0), stack)
    return U, ctr, stack, int(root)


def _nodes(U: Ints, root: int) -> list[int]:
    """The node ids below ``root``, in key order."""
    mask = U.shape[1] - 1
    if root < 0:
        return []
    s = root & mask
    return [*_nodes(U, int(U[U_LEFT, s])), root, *_nodes(U, int(U[U_RIGHT, s]))]


def _contents(U: Ints, root: int) -> list[tuple[int, int]]:
    mask = U.shape[1] - 1
    return [(int(U[U_KEY, n & mask]), int(U[U_CONTENT, n & mask])) for n in _nodes(U, root)]


def _check_shape(U: Ints, root: int) -> None:
    """Keys in order, priorities a heap, and each stored height and max-start right."""
    mask = U.shape[1] - 1
    keys = [k for k, _ in _contents(U, root)]
    assert keys == sorted(keys)

    def walk(node: int) -> tuple[int, int]:  # (height, max-start)
        if node < 0:
            return 0, -1
        s = node & mask
        (hl, ml), (hr, mr) = walk(int(U[U_LEFT, s])), walk(int(U[U_RIGHT, s]))
        for child in (int(U[U_LEFT, s]), int(U[U_RIGHT, s])):
            if child >= 0:
                assert U[U_BIT, child & mask] & 0xFFFFFFFF <= U[U_BIT, s] & 0xFFFFFFFF
        assert int(U[U_BIT, s]) >> HEIGHT_SHIFT == 1 + max(hl, hr)
        ms = max(int(U[U_CMS, s]), ml, mr)
        assert U[U_MS, s] == ms
        return 1 + max(hl, hr), ms

    walk(root)


def _search_path(U: Ints, root: int, v: int, or_equal: bool) -> list[bool]:
    """For each node on the search path of v: whether it goes to the left side."""
    mask = U.shape[1] - 1
    sides = []
    node = root
    while node >= 0:
        key = int(U[U_KEY, node & mask])
        left = key < v or (or_equal and key == v)
        sides.append(left)
        node = int(U[U_RIGHT if left else U_LEFT, node & mask])
    return sides


KEYS = random.Random(3).choices(range(40), k=300)


@pytest.mark.parametrize("keep", [KEEP_LEFT, KEEP_RIGHT, KEEP_BOTH])
@pytest.mark.parametrize("or_equal", [BELOW, AT_MOST])
def test_a_split_builds_only_the_sides_kept(keep: np.int64, or_equal: np.bool_) -> None:
    U, ctr, stack, root = _treap(KEYS)
    _check_shape(U, root)
    before = _contents(U, root)
    for v in (-1, 0, 7, 20, 39, 50):
        made_from = int(ctr[C_U_NEXT])
        left, right = _split(U, ctr, np.int64(root), np.int64(v), or_equal, keep, stack)
        made = set(range(made_from, int(ctr[C_U_NEXT])))
        goes_left = [(k, c) for k, c in before if k < v or (or_equal and k == v)]
        goes_right = [(k, c) for k, c in before if (k, c) not in goes_left]
        assert _contents(U, left) == (goes_left if keep & KEEP_LEFT else [])
        assert _contents(U, right) == (goes_right if keep & KEEP_RIGHT else [])
        assert _contents(U, root) == before  # the old root is intact
        # Every node made is in a result, one per node of the search path on a kept side.
        used = {n for n in _nodes(U, int(left)) + _nodes(U, int(right)) if n >= made_from}
        assert made == used
        sides = _search_path(U, root, v, bool(or_equal))
        kept = sum(1 for s in sides if (KEEP_LEFT if s else KEEP_RIGHT) & keep)
        assert len(made) == kept
        for r in (left, right):
            _check_shape(U, int(r))


@pytest.mark.parametrize("new_keys", [[11, 11, 11], [11, 30, 2, 11, 39, 0]])
def test_the_insertions_of_one_event_copy_each_old_node_once(new_keys: list[int]) -> None:
    U, ctr, stack, root = _treap(KEYS)
    before = _contents(U, root)
    made_from = int(ctr[C_U_NEXT])
    first = len(KEYS)
    pos = 10_000  # later than every content, so the new nodes' max-start is theirs
    new_root = _insert_in_one_event(
        U, ctr, np.int64(root), np.array(new_keys, dtype=np.int64), np.int64(first), np.int64(pos), stack
    )
    added = [(k, first + i) for i, k in enumerate(new_keys)]
    assert sorted(_contents(U, int(new_root))) == sorted(before + added)
    assert _contents(U, root) == before  # the old root is intact
    # No garbage: every node the event made is in the new treap (a copy made by the first
    # insertion and copied again by the second would be unreachable).
    made = set(range(made_from, int(ctr[C_U_NEXT])))
    assert made <= set(_nodes(U, int(new_root)))
    _check_shape(U, int(new_root))
