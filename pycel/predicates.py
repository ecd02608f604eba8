"""Column-wise predicate evaluation: a batch of events → one bit per atom → class ids.

Predicates are evaluated with numpy over whole columns (three-valued: a comparison with
a null is neither true nor false). Strings are dictionary codes, so ``name == "INTC"`` is
an integer compare; ordering and ``LIKE`` on strings are evaluated once per dictionary
entry and looked up by code. The bits of all atoms form an int64 bit-vector per event;
distinct bit-vectors get small class ids (CORE §4).

Example::

    bits = atom_bits(nfa.atoms, batch)          # int64 per event
    classes = ClassTable(); ids = classes.classify(bits)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from .automaton import AtomState
from .expr import Arith, Attr, BoolOp, Compare, Const, Expr, IsIn, Like, Not
from .ingest import EventBatch, _check_value

Mask = npt.NDArray[np.bool_]
_CMP = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _value(e: Expr[Any], batch: EventBatch) -> tuple[np.ndarray[Any, Any], Mask, str]:
    """(values, valid, dtype) of a non-boolean expression over the batch."""
    n = len(batch)
    if isinstance(e, Attr):
        if e.name not in batch.columns:
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_), e.dtype
        return batch.columns[e.name], batch.valid[e.name], batch.schema.fields[e.name]
    if isinstance(e, Const):
        value = e.value
        if e.dtype == "time" and isinstance(value, datetime):
            value = _check_value(value, "time", 0, "", batch.schema)
        if e.dtype == "str":
            # Strings compare as dictionary codes; -2 matches no code (and no null).
            value = batch.schema.string_codes.get(value, -2)
        return np.full(n, value), np.ones(n, dtype=np.bool_), e.dtype
    if isinstance(e, Arith):
        a, va, _ = _value(e.left, batch)
        b, vb, _ = _value(e.right, batch)
        valid = va & vb
        with np.errstate(all="ignore"):
            if e.op in ("/", "%"):
                valid = valid & (b != 0)
                safe = np.where(b != 0, b, 1)
                out = a / safe if e.op == "/" else np.mod(a, safe)
            else:
                out = {"+": np.add, "-": np.subtract, "*": np.multiply}[e.op](a, b)
        return out, valid, e.dtype
    true, false = truth(e, batch)
    return true, true | false, "bool"


def _string_table(e: Expr[Any], batch: EventBatch, test: Any) -> Mask:
    """Apply ``test`` to every dictionary string; index the result by the column's codes."""
    codes, valid, _ = _value(e, batch)
    table = np.array([bool(test(s)) for s in batch.schema.strings] + [False], dtype=np.bool_)
    return valid & table[np.where(valid, codes, len(batch.schema.strings))]


def truth(e: Expr[bool], batch: EventBatch) -> tuple[Mask, Mask]:
    """(true, false) masks of predicate ``e``; where both are False the value is unknown."""
    if isinstance(e, Compare):
        left, right = e.left, e.right
        str_order = left.dtype == "str" and e.op not in ("==", "!=")
        if str_order and isinstance(right, Const):
            c = right.value
            res = _string_table(left, batch, lambda s: _CMP[e.op](s, c))
            return res, _value(left, batch)[1] & ~res
        if str_order and isinstance(left, Const):
            c = left.value
            res = _string_table(right, batch, lambda s: _CMP[e.op](c, s))
            return res, _value(right, batch)[1] & ~res
        if str_order:
            strings = np.array(batch.schema.strings + [""], dtype=object)
            a, va, _ = _value(left, batch)
            b, vb, _ = _value(right, batch)
            valid = va & vb
            res = valid & np.array(
                [bool(_CMP[e.op](x, y)) for x, y in zip(strings[a], strings[b], strict=True)], dtype=np.bool_
            )
            return res, valid & ~res
        a, va, _ = _value(left, batch)
        b, vb, _ = _value(right, batch)
        valid = va & vb
        res = valid & _CMP[e.op](a, b)
        return res, valid & ~res
    if isinstance(e, IsIn):
        if e.expr.dtype == "str":
            values = set(e.values)
            res = _string_table(e.expr, batch, lambda s: s in values)
        else:
            a, valid, _ = _value(e.expr, batch)
            res = valid & np.isin(a, np.array(list(e.values)))
        valid = _value(e.expr, batch)[1]
        if e.negated:
            res = valid & ~res
        return res, valid & ~res
    if isinstance(e, Like):
        rx = e.compiled()
        res = _string_table(e.expr, batch, lambda s: rx.fullmatch(s) is not None)
        valid = _value(e.expr, batch)[1]
        return res, valid & ~res
    if isinstance(e, BoolOp):
        parts = [truth(a, batch) for a in e.args]
        trues, falses = [p[0] for p in parts], [p[1] for p in parts]
        if e.op == "and":
            return np.logical_and.reduce(trues), np.logical_or.reduce(falses)
        return np.logical_or.reduce(trues), np.logical_and.reduce(falses)
    if isinstance(e, Not):
        t, f = truth(e.arg, batch)
        return f, t
    if isinstance(e, (Attr, Const)) and e.dtype == "bool":
        raw, present, _ = _value(e, batch)
        flag = raw.astype(np.bool_)
        return present & flag, present & ~flag
    raise TypeError(f"cannot evaluate {e!r} as a predicate")


def reads_event(atom: AtomState, batch: EventBatch) -> Mask:
    """Which events of the batch ``atom`` may read (its type test and filters)."""
    schema = batch.schema
    is_type = np.array([atom.event in s for s in schema.supertypes] + [False], dtype=np.bool_)
    mask = is_type[batch.type_ids]
    if atom.negated:
        if atom.type_predicate is not None:
            mask = mask & truth(atom.type_predicate, batch)[0]
        mask = ~mask
    for f in atom.filters:
        mask = mask & truth(f, batch)[0]
    return mask


def atom_bits(atoms: Sequence[AtomState], batch: EventBatch) -> npt.NDArray[np.int64]:
    """Bit k of event j's value is set when atom k may read event j.

    Atoms that only test the event type are looked up by type id in one gather; atoms
    with filters are evaluated column by column.
    """
    by_type = np.zeros(len(batch.schema.type_names) + 1, dtype=np.int64)
    filtered = []
    for atom in atoms:
        if atom.filters or atom.type_predicate is not None:
            filtered.append(atom)
            continue
        is_type = np.array([atom.event in s for s in batch.schema.supertypes] + [False], dtype=np.bool_)
        if atom.negated:
            is_type = ~is_type
        by_type |= is_type.astype(np.int64) << atom.index
    bits = by_type[batch.type_ids]
    for atom in filtered:
        bits |= reads_event(atom, batch).astype(np.int64) << atom.index
    return bits


class ClassTable:
    """Distinct atom bit-vectors → dense class ids, stable for the life of a stream."""

    def __init__(self) -> None:
        self.bits: list[int] = []
        self.ids: dict[int, int] = {}

    def classify(self, bits: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """Class id of every event (new bit-vectors get new ids)."""
        inverse, uniq = pd.factorize(bits)  # hashing: no sort
        table = np.empty(len(uniq), dtype=np.int32)
        for k, b in enumerate(uniq.tolist()):
            cid = self.ids.get(b)
            if cid is None:
                cid = self.ids[b] = len(self.bits)
                self.bits.append(b)
            table[k] = cid
        return table[inverse]
