"""Drop repeated matches after a projection (``select``).

Projection drops variables, so distinct runs may print the same match. Within a match
the runtime writes entries in a canonical order (positions descending, variables by
index), so equal projected matches have equal entry sequences and can be compared as is.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arrays import Flags, Int, Int32s, Ints
from .inner import inner


@njit(cache=True)
def _hashes(starts: Ints, ends: Ints, offsets: Ints, var_ids: Int32s, positions: Ints) -> Ints:
    n = starts.shape[0]
    out = np.empty(n, dtype=np.int64)
    for m in range(n):
        h = starts[m] * 1000003 + ends[m]
        for k in range(offsets[m], offsets[m + 1]):
            h = (h * 31 + var_ids[k] * 7919 + positions[k]) & 0x3FFFFFFFFFFFFFFF
        out[m] = h
    return out


@inner
def _same(offsets: Ints, var_ids: Int32s, positions: Ints, a: Int, b: Int) -> bool:
    la, lb = offsets[a + 1] - offsets[a], offsets[b + 1] - offsets[b]
    if la != lb:
        return False
    for k in range(la):
        if var_ids[offsets[a] + k] != var_ids[offsets[b] + k]:
            return False
        if positions[offsets[a] + k] != positions[offsets[b] + k]:
            return False
    return True


@njit(cache=True)
def _keep(
    order: Ints, starts: Ints, ends: Ints, hashes: Ints, offsets: Ints, var_ids: Int32s, positions: Ints
) -> Flags:
    keep = np.ones(order.shape[0], dtype=np.bool_)
    group = 0
    for i in range(1, order.shape[0]):
        a = order[i]
        g = order[group]
        if ends[a] != ends[g] or starts[a] != starts[g] or hashes[a] != hashes[g]:
            group = i
            continue
        for j in range(group, i):
            b = order[j]
            if keep[b] and _same(offsets, var_ids, positions, a, b):
                keep[a] = False
                break
    return keep


def unique_matches(
    starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, var_ids: np.ndarray, positions: np.ndarray
) -> np.ndarray:
    """A mask of the first occurrence of every distinct match (True: keep it)."""
    if len(starts) < 2:
        return np.ones(len(starts), dtype=np.bool_)
    hashes = _hashes(starts, ends, offsets, var_ids, positions)
    order = np.lexsort((np.arange(len(starts)), hashes, starts, ends))
    keep: np.ndarray = _keep(order, starts, ends, hashes, offsets, var_ids, positions)
    return keep  # indexed by match, not by ``order``
