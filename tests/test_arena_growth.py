"""The node arenas grow to what the window needs (pycel.jit.store.ensure_room).

An arena doubles until the slots the next allocations take hold only nodes created before
the window start, and at least until it holds them all. Each doubling must read the old
arena with its own mask: reading it with the doubled one read the wrong slot or past its
columns (compiled: the next row's values), so the arena could double again and again for
nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from pycel.jit.store import ensure_room


@njit(cache=False)
def _ensure_room_compiled(A: np.ndarray, next_id: int, need: int, row: int, lo: int) -> np.ndarray:
    return ensure_room(A, next_id, need, row, lo)


def _arena(created: list[int]) -> np.ndarray:
    """A 4-slot arena holding ids 4..7 (slot = id & 3) with these creation positions, and
    a second row of huge values (what a read past the creation row would see)."""
    A = np.empty((2, 4), dtype=np.int64)
    for node, c in zip(range(4, 8), created, strict=True):
        A[0, node & 3] = c
        A[1, node & 3] = 1 << 60
    return A


def _grow(compiled: bool, A: np.ndarray, need: int, lo: int) -> np.ndarray:
    f = _ensure_room_compiled if compiled else ensure_room.py_func
    return f(A, np.int64(8), np.int64(need), np.int64(0), np.int64(lo))


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize(
    ("need", "created", "expected"),
    [
        # Doubled to 8, the newest overwritten id (1) had been overwritten in A: room.
        (2, [0, 10, 11, 12], 8),
        # Five new ids do not fit in 4 slots; at 8 the newest overwritten id (4) is in A,
        # created before lo = 5: room.
        (5, [0, 10, 11, 12], 8),
        # Id 4 was created inside the window: one more doubling.
        (5, [6, 10, 11, 12], 16),
    ],
)
def test_arena_doubles_only_as_far_as_the_window_needs(
    compiled: bool, need: int, created: list[int], expected: int
) -> None:
    A = _arena(created)
    B = _grow(compiled, A, need, lo=5)
    assert B.shape == (2, expected)
    # Every id A held is where the larger arena keeps it (nothing lost).
    for node in range(4, 8):
        assert B[0, node & (expected - 1)] == A[0, node & 3]
        assert B[1, node & (expected - 1)] == A[1, node & 3]


def test_room_enough_keeps_the_arena() -> None:
    A = _arena([0, 1, 2, 3])  # all created before the window: their slots can be reused
    for compiled in (False, True):
        B = _grow(compiled, A, 4, lo=5)
        assert B.shape == A.shape and np.shares_memory(A, B)
