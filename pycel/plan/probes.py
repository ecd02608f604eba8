"""Which middle runs the enumerator may probe for emptiness (:mod:`pycel.jit.probe`).

A key-pruned comparison ``f(…) OP g(a)`` (:func:`pycel.plan.conditions.key_pruning`) is
decided at a's node. A middle variable c between a and the end is *probed* when the
automaton guarantees the prefix property: every run that binds c was made by an event
that binds c alone, from one state S whose runs all bind a alone and are ordered by the
comparison's register (a run order: no condition splits them, so c takes them all), and
its target state holds no other runs and orders them by creation. S and those targets
are never the source or target of an absence's blocking. Then the c runs of one
target index are snapshots of one growing index of a's runs, each containing the ones
before it; windows keep that (what left the window for an earlier snapshot left it for
every later one). The caller checks what the tables cannot show: no consumption, no
choice of outputs (LAST/NEXT/MAX walk the runs themselves), no contiguity.

Example::

    probes = prefix_probes(dfa.tables(), res.key_var, res.variables)   # bits of c per conjunct
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .determinize import DfaTables

Ints = npt.NDArray[np.int64]


def _probed(t: DfaTables, a: int, c: int) -> bool:
    """Whether the runs binding variable ``c`` have the prefix property over ``a``'s."""
    masks = t.label_masks[t.label]
    binds_c = (masks >> c) & 1 == 1
    if not binds_c.any() or (masks[binds_c] != 1 << c).any():
        return False
    blocked = set(t.bsrc.tolist()) | set(t.bdst.tolist()) if t.bptr[-1] > 0 else set()
    source_of: dict[int, int] = {}
    for s, d in zip(t.src[binds_c].tolist(), t.dst[binds_c].tolist(), strict=True):
        if source_of.setdefault(d, s) != s:
            return False  # runs of one index from two states: not one growing snapshot
    for d, s in source_of.items():
        if s == 0 or s in blocked or d in blocked or t.state_register[d] >= 0:
            return False
        if t.state_register[s] < 0 or t.cptr[s + 1] != t.cptr[s]:
            return False  # s's runs are not ordered by a register, or conditions split them
        into_s, into_d = t.dst == s, t.dst == d
        if (masks[into_s] != 1 << a).any() or (t.src[into_d] != s).any() or (masks[into_d] != 1 << c).any():
            return False
    return True


def prefix_probes(t: DfaTables, key_var: Ints, variables: Ints) -> Ints:
    """Per conjunct of a :class:`~pycel.jit.residual.Residual` (its ``key_var`` and
    ``variables`` arrays), the bits of the middle variables whose runs the enumerator may
    probe (0: none). The tables only grow, and a property that holds of all transitions
    now held of those that made older runs."""
    probes = np.zeros(len(key_var), dtype=np.int64)
    n_vars = int(t.label_masks.max()).bit_length() if len(t.label_masks) else 0
    for k, a in enumerate(key_var.tolist()):
        if a < 0:
            continue
        for c in range(n_vars):
            if c != a and not (int(variables[k]) >> c) & 1 and _probed(t, a, c):
                probes[k] |= 1 << c
    return probes
