"""The node arenas grow to what the window needs (pycel.jit.store.ensure_room), and the
growth code is compiled only when a store grows.

An arena doubles until the slots the next allocations take hold only nodes created before
the window start, and at least until it holds them all. Each doubling must read the old
arena with its own mask: reading it with the doubled one read the wrong slot or past its
columns (compiled: the next row's values), so the arena could double again and again for
nothing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from pycel.jit.store import ensure_room, grown_arena


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
    # Compiled: a loop's call, through the object-mode block into grown_arena.
    f = _ensure_room_compiled if compiled else grown_arena.py_func
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


_GROWTH_SCRIPT = textwrap.dedent(
    """
    import random
    import pycel
    from pycel.jit import store
    from pycel.reference import evaluate

    class R(pycel.Event):
        key: pycel.Field[int]
        v: pycel.Field[int]

    class A(R): ...

    class B(R): ...

    class C(R): ...

    def stream(n, keys, seed):
        rnd = random.Random(seed)
        return [rnd.choice([A, B, C])(key=rnd.randrange(keys), v=rnd.randrange(2)) for _ in range(n)]

    def check(pattern, events):
        got, want = pycel.compile(pattern).run(events), evaluate(pattern, events)
        assert got.keys() == want.keys() and len(got) == len(want), (len(got), len(want))
        return len(got)

    a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
    grown = lambda: (len(store.grown_arena.signatures), len(store.rebuilt_table.signatures))
    # A window of 4 events holds a few nodes and H entries: nothing grows, in any
    # family (a loop that called the growth without testing the need first, at every
    # event, would compile it here).
    c = pycel.alias(C, "c")
    small = 0
    for pattern in (
        pycel.seq(a, b).within(events=4),
        pycel.seq(a, b).strategy("last"),
        pycel.seq(a, b).strategy("max"),
        pycel.seq(a, b, c).within(events=4).strategy("last"),
        pycel.seq(a, b, c).within(events=4).strategy("next"),
        pycel.seq(a, b).where(b.key > a.key).within(events=4),
        (a & b & c).where((b.key == c.key) & (b.v == c.v)).within(events=4),
        pycel.seq(a, pycel.absent(c), b).within(events=4),
    ):
        small += check(pattern, stream(300, 3, 1))
    assert small > 0 and grown() == (0, 0), grown()
    # 3,000 events in the window over 2,000 keys: the arenas (1,024 slots) and H
    # (half of 1,024 entries: about 1,050 keys wait with an a) grow, and the matches
    # are still the reference's.
    big = check(pycel.seq(a, b).partition_by(R.key).within(events=3000), stream(3000, 2000, 2))
    assert big > 0 and grown() == (1, 1), grown()
    # What a Spark driver ships (load_growth) is what the loops call: no new signature.
    store.load_growth()
    assert grown() == (1, 1), grown()
    print("ok", small, big)
    """
)


def test_growth_is_compiled_only_when_a_store_grows() -> None:
    """A query whose store never grows compiles (or loads) no growth code: its loop calls
    it through an object-mode block (store.ensure_room, store.ht_rebuild). A store that
    grows compiles it then, and the matches are the reference's. (A fresh process: this
    one may have grown stores already.)"""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _GROWTH_SCRIPT], cwd=root, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok "), done.stdout


def test_a_push_that_runs_out_of_memory_raises_a_resource_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the output arrays cannot grow (numpy's MemoryError, from the object-mode block
    of pycel.jit.enumerate._reserve: e.g. the exponentially many matches of a + without a
    window), the push raises pycel.ResourceError (a MemoryError) saying why and what to
    do, and so do every later push and snapshot: the stream's state is partly advanced.
    The matches of the earlier pushes stand."""
    import pycel
    import pycel.jit.enumerate as enumerate_module

    class Tick(pycel.Event):
        x: pycel.Field[int]

    t = pycel.alias(Tick, "t")
    pattern = pycel.plus(t).within(events=12)
    stream = pycel.compile(pattern).stream()
    first = [Tick(x=i) for i in range(3)]
    earlier = stream.push(first)
    assert earlier.keys() == pycel.reference.evaluate(pattern, first).keys()
    assert len(earlier) == 7  # every non-empty subset of three ticks, by end

    def no_memory(*args: object) -> object:
        raise MemoryError("Unable to allocate 2.00 GiB for an array")

    monkeypatch.setattr(enumerate_module, "_grown_outputs", no_memory)
    with pytest.raises(pycel.ResourceError, match=r"out of memory \(Unable to allocate.*add a window, limit"):
        stream.push([Tick(x=i) for i in range(40)])
    monkeypatch.undo()
    with pytest.raises(pycel.ResourceError, match="cannot go on"):
        stream.push([Tick(x=1)])
    with pytest.raises(MemoryError):
        stream.snapshot()
