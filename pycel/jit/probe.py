"""Emptiness probes: the enumerator's delay for comparisons that are not adjacent.

In ``seq(a, c, b).where(b.x > a.y)`` the comparison is residual: the enumerator checks it
at a's node, the last of each walk, with a's runs ordered by ``a.y``
(:func:`pycel.jit.residual.residual_key_sides`). What that alone does not bound is a
middle c whose a's all fail: its walk finds no match and still costs O(log n), and a b
may see many such c's.

When the planner proves that every c run's completions end in snapshots of one index of
a's runs that only ever grows, each taken no later than the run was made
(:func:`pycel.plan.probes.prefix_probes`: c's first runs take a's state whole, which no
condition splits and no absence or consumption shrinks; later ones may continue c's, as
in ``plus(c)``), a c run made later has at least the in-window a's of one made earlier.
c's runs wait in indexes ordered by creation, so at a c node whose child is a's index the
enumerator looks at the one a where the comparison is likeliest to hold (the lowest
in-window key when it fails above, one descent by max-start); if it fails there, this c
has no valid a, and neither has any c run made before it: the enumerator skips the node
and the index's earlier side, and where the comparison's other side is bound by the last
event alone, every c run up to this id anywhere in the walk (:func:`below_floor`).

Runs whose ``a.y`` is NaN or null wait in creation-ordered indexes of their own; a c
holding one of those has no valid a either (an order comparison with them is never
true), but says nothing about earlier c's: only a number key transfers the emptiness.

Example::

    skip = probe_empty(res, E, U, unext, label_masks, proj_mask, path, d, x, lo)
"""

from __future__ import annotations

import numpy as np

from .arrays import Int, Ints, Truth
from .inner import inner
from .residual import (
    NODE_FAILS,
    SKIP_ABOVE,
    SKIP_BELOW,
    Residual,
    bound_variables,
    conjunct_fails,
    work_space,
)
from .store import E_CHILD, E_LABEL, E_POS, TREAP, U_BIT, U_CMS, U_CONTENT, U_LEFT, U_MS, U_RIGHT, live

_NO_FLOOR = np.int64(-(2**63))
_NO_CEILING = np.int64(2**63 - 1)


@inner
def _extreme(U: Ints, unext: Int, root: Int, lo: Int, lowest: Truth, visits: Ints) -> Int:
    """The node of treap ``root`` with the lowest (``lowest``) or highest key among those
    whose own run is inside the window (max-start ≥ ``lo``), or -1; one root-to-leaf
    descent, guided by the subtrees' max-starts (its nodes are counted in ``visits[0]``)."""
    umask = U.shape[1] - 1
    n = root
    if U[U_BIT, n & umask] < TREAP:
        return -1
    near_row = U_LEFT if lowest else U_RIGHT
    far_row = U_RIGHT if lowest else U_LEFT
    while True:
        visits[0] += 1
        ns = n & umask
        near = U[near_row, ns]
        if live(U, unext, near) and U[U_MS, near & umask] >= lo:
            n = near
            continue
        if U[U_CMS, ns] >= lo:
            return n
        far = U[far_row, ns]
        if not (live(U, unext, far) and U[U_MS, far & umask] >= lo):
            return -1
        n = far


@inner
def _is_number(res: Residual, k: Int, pos: Int) -> Truth:
    """Whether the register of conjunct ``k`` is a number (not null, not NaN) on the event
    at ``pos``: then its run is in the value-ordered index."""
    kind, row = res.key_column[k, 0], res.key_column[k, 1]
    at = pos - res.base
    if kind == 0 and 0 <= at < res.ints.shape[1]:
        number: Truth = res.int_valid[row, at]
        return number
    if kind == 1 and 0 <= at < res.floats.shape[1]:
        number = res.float_valid[row, at] and not np.isnan(res.floats[row, at])
        return number
    return False


@inner
def probe_empty(
    res: Residual, E: Ints, U: Ints, unext: Int, label_masks: Ints, proj_mask: Int, path: Ints, d: Int,
    x: Int, lo: Int,
) -> Int:  # fmt: skip
    """What to skip at the creation-ordered index node at path depth ``d`` whose content
    is the extend node ``x``: :data:`NODE_FAILS` if no in-window run of its child index
    passes a probed conjunct, with :data:`SKIP_BELOW` (the index's earlier side) when
    that holds for every node made before ``x`` too; 0 if it may pass. ``path`` holds
    ``x`` at depth ``d`` (the enumerator put it there) and has room for depth ``d + 1``,
    which this call overwrites."""
    emask, umask = E.shape[1] - 1, U.shape[1] - 1
    xs = x & emask
    mask = label_masks[E[E_LABEL, xs]]
    child = E[E_CHILD, xs]
    if not (live(U, unext, child) and U[U_MS, child & umask] >= lo):
        return 0
    above = bound_variables(path, d - 1) if d > 0 else 0  # the variables the path binds above x
    for k in range(res.key_probe.shape[0]):
        if not res.key_probe[k] & mask:
            continue
        a_bit = 1 << res.key_var[k]
        if res.variables[k] & ~above != a_bit:
            continue  # the other side is not bound yet (or reads x's variable)
        if x >= res.probe_ceiling[k]:
            continue  # made after a run with a valid a: it has that a too
        found = _extreme(U, unext, child, lo, res.key_side[k] == SKIP_ABOVE, res.visits)
        if found < 0:
            continue
        e = U[U_CONTENT, found & umask] & emask
        a_mask = label_masks[E[E_LABEL, e]]
        if a_mask != a_bit:
            continue
        path[2 * d + 2] = E[E_POS, e]
        path[2 * d + 3] = a_mask & proj_mask
        if conjunct_fails(res, path, d + 1, k, work_space(res, d + 1), False):
            if not _is_number(res, k, E[E_POS, e]):
                return NODE_FAILS
            if _end_only(path, d, res.variables[k] & ~a_bit):
                res.probe_floor[k] = max(res.probe_floor[k], x)
            return NODE_FAILS | SKIP_BELOW
        # A valid a: every run made later has it too (whatever the path binds above, it
        # may still fail: this only spares probing them).
        res.probe_ceiling[k] = min(res.probe_ceiling[k], x)
    return 0


@inner
def _end_only(path: Ints, d: Int, wanted: Int) -> Truth:
    """Whether the path's last event (node 0) binds the variables ``wanted``, and no node
    above depth ``d`` binds any of them again: then what failed here fails on every path
    of this enumeration (one that binds them again checks more combinations)."""
    if path[1] & wanted != wanted:
        return False
    for k in range(1, d):
        if path[2 * k + 1] & wanted:
            return False
    return True


@inner
def below_floor(res: Residual, E: Ints, enext: Int, label_masks: Ints, x: Int, key: Int) -> Truth:
    """Whether an index node with content ``x`` and key ``key`` is a probed run made no
    later than one found without a valid a in this enumeration (:func:`probe_empty`):
    then it, and every node made before it, has none either, at whatever depth the walk
    meets it. Only a live content's label says what it binds (the slot of a run that left
    the window may hold a newer node, and an index ordered by value has other keys)."""
    if not live(E, enext, x):
        return False
    mask = label_masks[E[E_LABEL, x & (E.shape[1] - 1)]]
    for k in range(res.key_probe.shape[0]):
        if res.key_probe[k] & mask and key <= res.probe_floor[k]:
            return True
    return False


@inner
def reset_floors(res: Residual) -> None:
    """A new enumeration (another last event): no run is known to fail or pass yet."""
    for k in range(res.probe_floor.shape[0]):
        res.probe_floor[k] = _NO_FLOOR
        res.probe_ceiling[k] = _NO_CEILING
