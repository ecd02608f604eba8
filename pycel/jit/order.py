"""An order-maintenance list for the NEXT strategy: entries kept in a total order, with
"insert right before this entry" and "compare two entries" in (amortized) constant time.

Entries live in a flat array ``OL[:, e]``: next, previous, an integer label increasing
along the list, and a reference count. Entry 0 is the sentinel that closes the circular
list; the free entries are chained through ``next`` from ``OL[O_REFS, 0]``. An insertion
takes the label halfway between its neighbours; when there is no room left, every label
is spread out again (the list only holds the current best sets, so it is short).

Example::

    OL = new_order()
    OL, a = insert_before(OL, 0)        # at the end
    OL, b = insert_before(OL, a)        # b < a
    OL[O_LABEL, b] < OL[O_LABEL, a]     # True
"""

from __future__ import annotations

import numpy as np

from .arrays import Int, Ints
from .inner import inner

O_NEXT, O_PREV, O_LABEL, O_REFS = 0, 1, 2, 3
TOP = 1 << 62  # the sentinel's label: above every entry


def new_order(capacity: int = 64) -> Ints:
    """An empty list (the sentinel, and every other entry free). Plain numpy: it is
    called from Python only, so there is nothing to compile."""
    OL = np.zeros((4, capacity), dtype=np.int64)
    OL[O_LABEL, 0] = TOP
    free_next = np.arange(2, capacity + 1, dtype=np.int64)  # entry e -> e + 1, the last -> 0
    if capacity > 1:
        free_next[-1] = 0
    OL[O_NEXT, 1:] = free_next
    OL[O_REFS, 0] = 1 if capacity > 1 else 0  # the free list's head (0: none)
    return OL


@inner
def _alloc(OL: Ints) -> tuple[Ints, Int]:
    """(OL, a free entry), doubling the array when none is left."""
    if OL[O_REFS, 0] == 0:
        cap = OL.shape[1]
        grown = np.zeros((4, 2 * cap), dtype=np.int64)
        for r in range(4):  # a loop, not a slice assignment: see store.ensure_room
            for e in range(cap):
                grown[r, e] = OL[r, e]
        for e in range(cap, 2 * cap):
            grown[O_NEXT, e] = e + 1 if e + 1 < 2 * cap else 0
        grown[O_REFS, 0] = cap
        OL = grown
    e = OL[O_REFS, 0]
    OL[O_REFS, 0] = OL[O_NEXT, e]
    return OL, e


@inner
def _relabel(OL: Ints) -> None:
    """Spread the labels evenly over (0, TOP)."""
    n = 0
    e = OL[O_NEXT, 0]
    while e != 0:
        n += 1
        e = OL[O_NEXT, e]
    step = TOP // (n + 1)
    label = step
    e = OL[O_NEXT, 0]
    while e != 0:
        OL[O_LABEL, e] = label
        label += step
        e = OL[O_NEXT, e]


@inner
def insert_before(OL: Ints, at: Int) -> tuple[Ints, Int]:
    """(OL, a new entry placed right before entry ``at``; 0: at the end), unreferenced."""
    OL, e = _alloc(OL)
    before = OL[O_PREV, at]
    lo = 0 if before == 0 else OL[O_LABEL, before]
    OL[O_NEXT, e], OL[O_PREV, e] = at, before
    OL[O_NEXT, before], OL[O_PREV, at] = e, e
    OL[O_REFS, e] = 0
    if OL[O_LABEL, at] - lo < 2:
        OL[O_LABEL, e] = lo
        _relabel(OL)
    else:
        OL[O_LABEL, e] = lo + (OL[O_LABEL, at] - lo) // 2
    return OL, e


@inner
def release(OL: Ints, e: Int, count: Int) -> None:
    """Drop ``count`` references to entry ``e``; unlink and free it when none is left."""
    OL[O_REFS, e] -= count
    if OL[O_REFS, e] > 0:
        return
    before, after = OL[O_PREV, e], OL[O_NEXT, e]
    OL[O_NEXT, before], OL[O_PREV, after] = after, before
    OL[O_NEXT, e] = OL[O_REFS, 0]
    OL[O_REFS, 0] = e
    OL[O_REFS, e] = 0


def order_size(OL: np.ndarray) -> int:
    """How many entries the list holds (for tests and stats)."""
    n, e = 0, int(OL[O_NEXT, 0])
    while e != 0:
        n, e = n + 1, int(OL[O_NEXT, e])
    return n
