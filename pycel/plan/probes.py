"""Which middle runs the enumerator may probe for emptiness (:mod:`pycel.jit.probe`).

A key-pruned comparison ``f(…) OP g(a)`` (:func:`pycel.plan.conditions.key_pruning`) is
decided at a's node. A middle variable c is *probed* when the automaton guarantees the
prefix property: every event that binds c binds c alone; c's runs start from one state S
whose runs all bind a alone and are ordered by a register without conditions (a run
order: c takes S's index whole), and otherwise continue runs of c (``plus(c)``); the
states of c's runs order them by creation and hold nothing else; no absence blocks S or
them. Then every c run's completions end in snapshots of S's one growing index taken no
later than the run was made, so a c run made later has at least the in-window a's of one
made earlier (what left the window for the later snapshot left it for the earlier one).
The caller checks what the tables cannot show: no consumption, no choice of outputs
(LAST/NEXT/MAX walk the runs themselves), no contiguity.

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
        return False  # an event binding c binds c alone
    c_states = set(t.dst[binds_c].tolist())
    sources = set(t.src[binds_c].tolist()) - c_states
    if len(sources) != 1:
        return False  # c's first runs come from a's state alone (later ones from c's)
    (s,) = sources
    blocked = set(t.bsrc.tolist()) | set(t.bdst.tolist()) if t.bptr[-1] > 0 else set()
    if s == 0 or s in blocked or t.state_register[s] < 0 or t.cptr[s + 1] != t.cptr[s]:
        return False  # a's runs are not one ordered index that only grows and c takes whole
    if (masks[t.dst == s] != 1 << a).any():
        return False  # a's state holds runs of other variables
    for d in c_states:
        into = t.dst == d
        if d in blocked or t.state_register[d] >= 0 or (masks[into] != 1 << c).any():
            return False
        if not set(t.src[into].tolist()) <= c_states | {s}:
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
