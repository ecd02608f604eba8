"""LAST, NEXT and MAX among the matches that fit the window (docs/strategies.md).

The windowed runner enumerates every match of an end position that fits its window (the
sequential automaton's output, all variables, no limit) and these loops keep the ones the
strategy selects. Within a match the enumerator writes its entries by position,
descending (see :mod:`pycel.jit.dedupe`), so a match's complex event C (its set of
positions) is the entry positions without repeats, and two complex events compare in one
merge-like pass:

- NEXT: C1 < C2 iff min(C1 △ C2) ∈ C2 — compare from the smallest positions up;
- LAST: C1 < C2 iff max(C1 △ C2) ∈ C2 — compare from the largest positions down;
- MAX: C is kept unless another match of the same end is a strict superset.

Example::

    keep = strategy_mask(ends, offsets, positions, STRATEGY_CODES["next"])
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from .arrays import Flags, Int, Ints
from .inner import inner

#: The strategy codes :func:`strategy_mask` reads.
STRATEGY_CODES = {"next": 0, "last": 1, "max": 2}


@inner
def _distinct(offsets: Ints, positions: Ints, m: Int, out: Ints) -> Int:
    """Write match m's distinct positions (descending) to ``out``; return how many."""
    n = 0
    for k in range(offsets[m], offsets[m + 1]):
        p = positions[k]
        if n == 0 or out[n - 1] != p:
            out[n] = p
            n += 1
    return n


@inner
def _compare(a: Ints, na: Int, b: Ints, nb: Int, mode: Int) -> int:
    """+1 if C_a is preferred to C_b under NEXT (mode 0) or LAST (mode 1), -1 if C_b is,
    0 if they are equal (``a``, ``b``: distinct positions, descending)."""
    if mode == 0:  # from the smallest position up: the smaller one of a difference wins
        i, j = na - 1, nb - 1
        while i >= 0 and j >= 0:
            if a[i] != b[j]:
                return 1 if a[i] < b[j] else -1
            i -= 1
            j -= 1
        if i >= 0:
            return 1
        return -1 if j >= 0 else 0
    i, j = 0, 0  # LAST: from the largest position down: the larger one wins
    while i < na and j < nb:
        if a[i] != b[j]:
            return 1 if a[i] > b[j] else -1
        i += 1
        j += 1
    if i < na:
        return 1
    return -1 if j < nb else 0


@inner
def _strict_subset(a: Ints, na: Int, b: Ints, nb: Int) -> bool:
    """Whether C_a ⊂ C_b strictly (both descending)."""
    if na >= nb:
        return False
    j = 0
    for i in range(na):
        while j < nb and b[j] > a[i]:
            j += 1
        if j == nb or b[j] != a[i]:
            return False
        j += 1
    return True


@njit(cache=True)
def _mask_ranked(
    ends: Ints, offsets: Ints, positions: Ints, mode: Int, keep: Flags, a: Ints, b: Ints
) -> None:
    """NEXT (mode 0) or LAST (mode 1): set ``keep`` for the matches with the best complex
    event of their end (``a``, ``b``: scratch as long as the longest match)."""
    n = ends.shape[0]
    # int64, not the literal 0: lo reaches _distinct, which Numba would compile for it too
    lo: Int = np.int64(0)
    while lo < n:  # one group of matches with the same end at a time
        hi = lo + 1
        while hi < n and ends[hi] == ends[lo]:
            hi += 1
        nbest = _distinct(offsets, positions, lo, a)  # the best complex event so far
        for m in range(lo + 1, hi):
            nb = _distinct(offsets, positions, m, b)
            if _compare(b, nb, a, nbest, mode) > 0:
                nbest = _distinct(offsets, positions, m, a)
        for m in range(lo, hi):
            nb = _distinct(offsets, positions, m, b)
            keep[m] = _compare(b, nb, a, nbest, mode) == 0
        lo = hi


@inner
def _larger_first(sizes: Ints, longest: Int) -> Ints:
    """The indices of ``sizes`` (each at most ``longest``), largest first, equal sizes in
    index order (a counting sort: linear, and no general sort to compile)."""
    start = np.zeros(longest + 2, dtype=np.int64)
    for s in sizes:
        start[longest - s + 1] += 1
    for b in range(1, longest + 2):
        start[b] += start[b - 1]
    order = np.empty(sizes.shape[0], dtype=np.int64)
    for i in range(sizes.shape[0]):
        b = longest - sizes[i]
        order[start[b]] = i
        start[b] += 1
    return order


@njit(cache=True)
def _mask_max(ends: Ints, offsets: Ints, positions: Ints, keep: Flags, a: Ints, b: Ints) -> None:
    """MAX: set ``keep`` for the matches no other match of their end strictly contains
    (``a``, ``b``: scratch as long as the longest match)."""
    n = ends.shape[0]
    lo: Int = np.int64(0)  # int64: see _mask_ranked
    while lo < n:
        hi = lo + 1
        while hi < n and ends[hi] == ends[lo]:
            hi += 1
        # A strict superset has more positions: the matches are taken largest first and
        # each is compared only with the larger ones kept so far. A larger match that was
        # not kept lies inside a kept one, which then contains this one too; so the cost
        # is (matches) x (kept ones) comparisons, not (matches)^2.
        sizes = np.empty(hi - lo, dtype=np.int64)
        for m in range(lo, hi):
            sizes[m - lo] = _distinct(offsets, positions, m, a)
        larger_first = _larger_first(sizes, a.shape[0])
        kept = np.empty(hi - lo, dtype=np.int64)  # the kept matches, largest first
        n_kept: Int = np.int64(0)
        for r in range(hi - lo):
            m = lo + larger_first[r]
            na = _distinct(offsets, positions, m, a)
            keep[m] = True
            for q in range(n_kept):
                d = kept[q]
                if sizes[d - lo] <= na:
                    break
                nb = _distinct(offsets, positions, d, b)
                if _strict_subset(a, na, b, nb):
                    keep[m] = False
                    break
            if keep[m]:
                kept[n_kept] = m
                n_kept += 1
        lo = hi


def strategy_mask(
    ends: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64], positions: npt.NDArray[np.int64], mode: int
) -> npt.NDArray[np.bool_]:
    """Which matches the strategy ``mode`` (:data:`STRATEGY_CODES`) keeps; the matches of
    one end must be adjacent. Linear in the entries for NEXT/LAST; MAX compares each
    match with the larger ones of its end that it keeps.

    Example: ``strategy_mask(ends, offsets, positions, STRATEGY_CODES["max"])``
    """
    if len(ends) == 0:
        return np.zeros(0, dtype=np.bool_)
    # Allocated here, not in the loops (nothing to compile); two loops, so that a query
    # compiles only its strategy's comparison.
    longest = int(np.max(np.diff(offsets))) if len(offsets) > 1 else 0
    keep = np.zeros(len(ends), dtype=np.bool_)
    a, b = np.empty(longest, dtype=np.int64), np.empty(longest, dtype=np.int64)
    if mode == STRATEGY_CODES["max"]:
        _mask_max(ends, offsets, positions, keep, a, b)
    else:
        _mask_ranked(ends, offsets, positions, np.int64(mode), keep, a, b)
    return keep
