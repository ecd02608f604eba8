"""The values edge conditions compare, per event, as the ordered loop reads them
(:mod:`pycel.jit.ordered`): each register and threshold as an ordered int64 key and a kind
(a number, NaN, or null).

Ints (and times, bools) are their own keys. A float's key is its IEEE bits with the
magnitude bits flipped below zero, so keys order as the floats do (``-0.0`` is ``0.0``
first); NaN and null are not keys but kinds: a comparison with null is false, with NaN
false except ``!=``.

Example::

    keys, kinds = ordered_keys([cond.register], "float", batch, scopes)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch
from pycel.jit.ordered import NAN, NULL, NUMBER, OrderedInput, ordered_input
from pycel.language.expr import Expr
from pycel.plan.determinize import DfaTables
from pycel.plan.planner import Plan

from .predicates import Overflows, expression_values

Ints = npt.NDArray[np.int64]
_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "!=": 4, "==": 5}
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)


def ordered_keys(
    exprs: Sequence[tuple[Expr[Any], str, str]], batch: EventBatch
) -> tuple[Ints, Ints]:
    """(keys, kinds), one row per (expression, kind "int"/"float", event type it is read
    on) and one column per event. Integer overflow on an event of that type is the
    DataError of a filter (docs/data.md)."""
    n = len(batch)
    keys = np.zeros((max(1, len(exprs)), n), dtype=np.int64)
    kinds = np.full((max(1, len(exprs)), n), NULL, dtype=np.int64)
    log = Overflows()
    supertypes = batch.schema.supertypes
    for row, (e, kind, event) in enumerate(exprs):
        is_type = np.array([event in s for s in supertypes] + [False], dtype=np.bool_)
        log.scope = is_type[batch.type_ids]
        values, valid = expression_values(e, batch, log)
        if kind == "int":
            keys[row] = np.where(valid, values, 0).astype(np.int64)
            kinds[row] = np.where(valid, NUMBER, NULL)
            continue
        f = np.where(valid, values, 0.0).astype(np.float64) + 0.0  # -0.0 → 0.0
        bits = f.view(np.int64)
        keys[row] = np.where(bits >= 0, bits, bits ^ _MAGNITUDE)
        kinds[row] = np.where(~valid, NULL, np.where(np.isnan(f), NAN, NUMBER))
    log.scope = None
    log.raise_first(batch)
    return keys, kinds


def ordered_tables(plan: Plan, t: DfaTables, batch: EventBatch) -> OrderedInput:
    """The loop's view of ``plan``'s edge conditions for one batch (``t``: the automaton's
    current tables)."""
    conds = plan.nfa.conditions
    atoms = plan.nfa.atoms
    registers: dict[str, int] = {}
    reg_exprs: list[tuple[Expr[Any], str, str]] = []
    for cond in conds:
        if cond.register_key not in registers:
            registers[cond.register_key] = len(reg_exprs)
            reg_exprs.append((cond.register, cond.kind, atoms[cond.source].event))
    thr_exprs = [(c.threshold, c.kind, atoms[c.target].event) for c in conds]
    reg, reg_kind = ordered_keys(reg_exprs, batch)
    thr, thr_kind = ordered_keys(thr_exprs, batch)
    return ordered_input(
        t.outcome, t.state_register, t.cptr, t.cond,
        np.array([_OPS[c.op] for c in conds] or [0], dtype=np.int64),
        np.arange(max(1, len(conds)), dtype=np.int64),
        reg, reg_kind, thr, thr_kind,
    )  # fmt: skip
