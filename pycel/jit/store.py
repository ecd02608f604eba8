"""Node store of the runtime: flat int64 arenas, the persistent heap union, the index H.

Two arenas hold the nodes (docs/architecture.md). Ids grow monotonically; a node lives in
slot ``id & (capacity - 1)``, and an id is live while no newer node has taken its slot
(``id >= next_id - capacity``). A slot is only reused when its node was created before
the window start, so it can never be followed again; otherwise the arena doubles.

* Extend nodes ``E[:, slot]``: position, label-set id, child heap (or -1), max-start.
* Heap (union) nodes ``U[:, slot]``: content (an extend node), left, right, direction
  bit, max-start of the content, creation position. A heap node stands for the set
  {content} ∪ left ∪ right, and its max-start is the largest in its subtree.
* H is an open-addressing hash table ``HT[:, slot]`` from (state, key) to a heap root;
  reserved states hold a partition's consumption barrier (-1) or its previous event's
  position (-3, for contiguity), and state ``s | FRESH`` the runs of state s created at
  one event (the partition's latest, while it is the previous one). Under LAST an entry
  also carries the rank, position and max-start of its best set. It is rebuilt with only
  live entries when it fills up, so it follows the window, not the number of keys ever
  seen (under LAST every entry is kept: an expired best set still outranks newer runs).
"""

from __future__ import annotations

import numpy as np
from numba import njit, objmode

from .arrays import Int, Ints, Truth
from .inner import inner

# Extend node rows
E_POS, E_LABEL, E_CHILD, E_MS = 0, 1, 2, 3
# Heap node rows
U_CONTENT, U_LEFT, U_RIGHT, U_BIT, U_MS, U_CREATED = 0, 1, 2, 3, 4, 5
# Ordered index nodes (pycel.jit.treap): U_BIT ≥ TREAP marks them; U_KEY is their register
# as an ordered key, U_CMS their own run's max-start.
TREAP, U_KEY, U_CMS = 2, 6, 7
# Hash table rows; an empty slot has state EMPTY
H_STATE, H_KEY, H_VAL, H_RANK, H_POS, H_MS = 0, 1, 2, 3, 4, 5
H_ROWS = 6
EMPTY = -2
BARRIER = -1
PREV = -3
FRESH = 1 << 40
# Counters
C_E_NEXT, C_U_NEXT, C_H_COUNT, C_MAX_DEPTH, C_BARRIER, C_LIVE_E, C_LIVE_U, C_PEAK_H, C_RANK = range(9)
N_COUNTERS = 9
# The same constants as int64 scalars, for arguments of jitted calls inside the loops: a
# Python int constant passed to another jitted function is typed as a literal, and Numba
# compiles that function once per constant (seconds each with an empty cache); a numpy
# scalar global, or a variable started from one, is plain int64.
BARRIER_STATE = np.int64(BARRIER)
PREV_STATE = np.int64(PREV)
NO_NODE = np.int64(-1)
ZERO = np.int64(0)
ONE = np.int64(1)  # (likewise: a literal 1 where an int64 starts)
E_POS_ROW = np.int64(E_POS)
U_CREATED_ROW = np.int64(U_CREATED)
# ht_rebuild's keep_all, as numpy bools for the same reason (a literal True would give the
# function another signature: every family then compiles its own copy).
KEEP_ALL = np.bool_(True)
LIVE_ONLY = np.bool_(False)


def new_store(capacity: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty arenas, hash table and counters."""
    E = np.full((4, capacity), -1, dtype=np.int64)
    U = np.full((6, capacity), -1, dtype=np.int64)
    HT = np.full((H_ROWS, capacity), EMPTY, dtype=np.int64)
    ctr = np.zeros(N_COUNTERS, dtype=np.int64)
    ctr[C_BARRIER] = -1
    return E, U, HT, ctr


@njit(cache=True, inline="always")
def live(A: Ints, next_id: Int, node: Int) -> Truth:
    alive: Truth = node >= 0 and node >= next_id - A.shape[1]
    return alive


@njit(cache=True, inline="always")
def has_room(A: Ints, next_id: Int, need: Int, created_row: Int, lo: Int) -> Truth:
    """Whether ``need`` new nodes fit without overwriting one created at or after ``lo``
    (ids are allocated in creation order, so checking the newest overwritten one suffices),
    nor one another (``need`` at most the capacity: more would wrap around onto the
    nodes just made)."""
    cap = A.shape[1]
    oldest = next_id + need - 1 - cap
    fits: Truth = need <= cap and (oldest < 0 or A[created_row, oldest & (cap - 1)] < lo)
    return fits


@njit(cache=True)
def grown_arena(A: Ints, next_id: Int, need: Int, created_row: Int, lo: Int) -> Ints:
    """``A`` with room for ``need`` new nodes without overwriting one created at or after
    ``lo`` (doubling and moving the live ids when needed). The loops call it through
    :func:`ensure_room`; Python may call it directly."""
    old = A.shape[1]
    cap = old
    while True:
        oldest = next_id + need - 1 - cap  # the newest id the next allocations overwrite
        # Room when the newest id overwritten is older than the new ones (need <= cap) and
        # either A no longer holds it (overwritten: it had left the window) or it was
        # created before lo. A is read with its own mask: the doubled one read past its
        # columns (compiled: the next row's values, so the arena could double again and
        # again for nothing).
        if oldest < next_id and (oldest < max(0, next_id - old) or A[created_row, oldest & (old - 1)] < lo):
            break
        cap *= 2
    if cap == old:
        return A
    B = np.full((A.shape[0], cap), -1, dtype=np.int64)
    # Element loops, not slice assignments: those compile Numba's shape-mismatch error
    # message (string formatting, seconds of cold compile) for a copy this simple.
    for node in range(max(0, next_id - old), next_id):
        for r in range(A.shape[0]):
            B[r, node & (cap - 1)] = A[r, node & (old - 1)]
    return B


@inner
def ensure_room(A: Ints, next_id: Int, need: Int, created_row: Int, lo: Int) -> Ints:
    """:func:`grown_arena`, called from the loops through Python (see :func:`ht_rebuild`)
    only when ``A`` lacks the room."""
    if has_room(A, next_id, need, created_row, lo):
        return A
    with objmode(B="int64[:, ::1]"):
        B = grown_arena(A, next_id, need, created_row, lo)
    return B


@njit(cache=True, inline="always")
def make_room(E: Ints, U: Ints, ctr: Ints, moves: Int, lo: Int) -> tuple[Ints, Ints]:
    """Arenas with room for one event's nodes (``moves`` fired transitions: an extend
    node each, and a heap insertion each at most one level deeper than any before), so
    nothing moves while the event is processed. Inlined: the check runs per event, the
    growth (which replaces the arrays) rarely."""
    if not has_room(E, ctr[C_E_NEXT], moves, E_POS, lo):
        E = ensure_room(E, ctr[C_E_NEXT], moves, E_POS_ROW, lo)
    need_u = moves * (ctr[C_MAX_DEPTH] + moves + 1)
    if not has_room(U, ctr[C_U_NEXT], need_u, U_CREATED, lo):
        U = ensure_room(U, ctr[C_U_NEXT], need_u, U_CREATED_ROW, lo)
    return E, U


@inner
def new_extend(E: Ints, ctr: Ints, pos: Int, label: Int, child: Int, ms: Int) -> Int:
    node: Int = ctr[C_E_NEXT]
    ctr[C_E_NEXT] += 1
    s = node & (E.shape[1] - 1)
    E[E_POS, s] = pos
    E[E_LABEL, s] = label
    E[E_CHILD, s] = child
    E[E_MS, s] = ms
    return node


@inner
def heap_insert(U: Ints, E: Ints, ctr: Ints, root: Int, x: Int, lo: Int, pos: Int) -> Int:
    """A new heap root for {x} ∪ root, keeping ``root`` intact (path copying).

    Contents sift down along the direction bits, so the slot at depth d is rewritten once
    every 2^d insertions; subtrees whose max-start fell below ``lo`` are dropped.
    """
    ucap = U.shape[1]
    ecap = E.shape[1]
    new_root: Int = ctr[C_U_NEXT]
    ctr[C_U_NEXT] += 1
    cur = new_root
    u = root
    xc = x
    xms = E[E_MS, x & (ecap - 1)]
    depth = 1
    while True:
        cs = cur & (ucap - 1)
        U[U_CREATED, cs] = pos
        if not live(U, ctr[C_U_NEXT], u) or U[U_MS, u & (ucap - 1)] < lo:
            U[U_CONTENT, cs] = xc
            U[U_LEFT, cs] = -1
            U[U_RIGHT, cs] = -1
            U[U_BIT, cs] = 0
            U[U_MS, cs] = xms
            break
        us = u & (ucap - 1)
        uc = U[U_CONTENT, us]
        ums = U[U_MS, us]
        if xms > ums or (xms == ums and xc > uc):
            top, topms, down, downms = xc, xms, uc, ums
        else:
            top, topms, down, downms = uc, ums, xc, xms
        nxt = ctr[C_U_NEXT]
        ctr[C_U_NEXT] += 1
        U[U_CONTENT, cs] = top
        U[U_MS, cs] = topms
        if U[U_BIT, us] == 0:
            other = U[U_RIGHT, us]
            U[U_LEFT, cs] = nxt
            U[U_RIGHT, cs] = other
            U[U_BIT, cs] = 1
            u = U[U_LEFT, us]
        else:
            other = U[U_LEFT, us]
            U[U_LEFT, cs] = other
            U[U_RIGHT, cs] = nxt
            U[U_BIT, cs] = 0
            u = U[U_RIGHT, us]
        xc, xms = down, downms
        cur = nxt
        depth += 1
    if depth > ctr[C_MAX_DEPTH]:
        ctr[C_MAX_DEPTH] = depth
    return new_root


@njit(cache=True, inline="always")
def _hash(state: Int, key: Int, mask: Int) -> Int:
    h = (state * 0x9E3779B1 + key * 0x85EBCA77) & 0x7FFFFFFFFFFFFFFF
    h ^= h >> 29
    return h & mask


@inner
def ht_find(HT: Ints, state: Int, key: Int) -> Int:
    """The slot of (state, key), or -1."""
    mask = HT.shape[1] - 1
    s = _hash(state, key, mask)
    while HT[H_STATE, s] != EMPTY:
        if HT[H_STATE, s] == state and HT[H_KEY, s] == key:
            return s
        s = (s + 1) & mask
    return -1


@inner
def ht_get(HT: Ints, state: Int, key: Int) -> Int:
    """The value stored for (state, key), or -1."""
    s = ht_find(HT, state, key)
    return -1 if s < 0 else HT[H_VAL, s]


@inner
def ht_slot(HT: Ints, ctr: Ints, state: Int, key: Int) -> Int:
    """The slot of (state, key), created (value -1) if missing; the caller ensures room."""
    mask = HT.shape[1] - 1
    s = _hash(state, key, mask)
    while HT[H_STATE, s] != EMPTY:
        if HT[H_STATE, s] == state and HT[H_KEY, s] == key:
            return s
        s = (s + 1) & mask
    HT[H_STATE, s] = state
    HT[H_KEY, s] = key
    HT[H_VAL, s] = -1
    ctr[C_H_COUNT] += 1
    return s


@inner
def ht_put(HT: Ints, ctr: Ints, state: Int, key: Int, value: Int) -> None:
    HT[H_VAL, ht_slot(HT, ctr, state, key)] = value


@njit(cache=True, inline="always")
def _entry_alive(HT: Ints, U: Ints, ctr: Ints, s: Int, lo: Int, keep_all: Truth) -> Truth:
    """Whether H slot ``s`` holds a reserved position (barrier, previous event) or a heap
    root still inside the window; with ``keep_all``, whether it holds anything."""
    st = HT[H_STATE, s]
    if st == EMPTY:
        return False
    if keep_all:
        return True
    v = HT[H_VAL, s]
    if st < 0:  # a reserved entry holds a position
        in_window: Truth = v >= lo
        return in_window
    alive: Truth = live(U, ctr[C_U_NEXT], v) and U[U_MS, v & (U.shape[1] - 1)] >= lo
    return alive


@njit(cache=True)
def rebuilt_table(HT: Ints, U: Ints, ctr: Ints, lo: Int, room: Int, keep_all: Truth) -> Ints:
    """``HT`` with at least ``room`` free entries: dead entries (heap roots below the
    window, stale positions) are dropped unless ``keep_all``, and the table grows only if
    the live ones need it. The loops call it through :func:`ht_rebuild`."""
    if ctr[C_H_COUNT] + room <= HT.shape[1] // 2:
        return HT
    # One pass tests every entry and marks the dead ones empty (HT is replaced below, so
    # it may be written): the test, inlined, is compiled once instead of twice.
    alive = 0
    for s in range(HT.shape[1]):
        if _entry_alive(HT, U, ctr, s, lo, keep_all):
            alive += 1
        else:
            HT[H_STATE, s] = EMPTY
    cap = HT.shape[1]
    while (alive + room) * 4 > cap:
        cap *= 2
    while cap > 1024 and (alive + room) * 16 < cap:
        cap //= 2
    new = np.full((H_ROWS, cap), EMPTY, dtype=np.int64)
    ctr[C_H_COUNT] = 0
    for s in range(HT.shape[1]):
        if HT[H_STATE, s] != EMPTY:
            t = ht_slot(new, ctr, HT[H_STATE, s], HT[H_KEY, s])
            for r in range(H_VAL, H_ROWS):
                new[r, t] = HT[r, s]
    if ctr[C_H_COUNT] > ctr[C_PEAK_H]:
        ctr[C_PEAK_H] = ctr[C_H_COUNT]
    return new


@inner
def ht_rebuild(HT: Ints, U: Ints, ctr: Ints, lo: Int, room: Int, keep_all: Truth) -> Ints:
    """:func:`rebuilt_table`, called from the loops through Python.

    Growth is rare (the arenas and H double), so the loops reach it through an object-mode
    block: a loop then compiles a call into the interpreter instead of the growth code, and
    the growth code is compiled the first time some stream of the process needs it (once,
    then cached like the loops). Every loop carried both growth functions and LLVM
    optimized them again inside each: about a fifth of a cold first query's compile time.
    The test whether H needs it stays here, compiled: a call into the interpreter per
    event would cost what the event's whole work does.
    """
    if ctr[C_H_COUNT] + room <= HT.shape[1] // 2:
        return HT
    with objmode(new="int64[:, ::1]"):
        new = rebuilt_table(HT, U, ctr, lo, room, keep_all)
    return new


def load_growth() -> None:
    """Compile (or load from the cache) :func:`grown_arena` and :func:`rebuilt_table` now,
    on a tiny store, instead of at a stream's first growth: a Spark driver does so before
    it ships the kernels it used (``pycel.spark._runner.warm_kernels``), so executors do
    not compile them in a group.

    Example: ``load_growth(); entries = used_entries()``"""
    E, U, HT, ctr = new_store(4)
    grown_arena(E, ctr[C_E_NEXT], np.int64(1), E_POS_ROW, np.int64(0))
    rebuilt_table(HT, U, ctr, np.int64(0), np.int64(1), LIVE_ONLY)


@njit(cache=True, inline="always")
def consumed_start(HT: Ints, ctr: Ints, consume: Int, key: Int, lo: Int) -> Int:
    """The first position a run may start at under CONSUME BY (``consume`` 1: after the
    stream's barrier, 2: after ``key``'s partition's), given the window's ``lo``: the
    counterpart of :func:`record_barrier`."""
    if consume == 1 and ctr[C_BARRIER] + 1 > lo:
        after: Int = ctr[C_BARRIER] + 1
        return after
    if consume == 2:
        b = ht_get(HT, BARRIER_STATE, key)
        if b >= 0 and b + 1 > lo:
            return b + 1
    return lo


@inner
def record_barrier(HT: Ints, ctr: Ints, consume: Int, key: Int, pos: Int) -> None:
    """CONSUME BY after an output at ``pos``: runs that start at or before it are consumed,
    for the whole stream (``consume`` 1, ANY) or for ``key``'s partition (2, PARTITION)."""
    if consume == 1:
        ctr[C_BARRIER] = pos
    else:
        ht_put(HT, ctr, BARRIER_STATE, key, pos)
