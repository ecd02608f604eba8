"""Column-wise predicate evaluation: a batch of events → one bit per atom → class ids.

Predicates are evaluated with numpy over whole columns (three-valued: a comparison with
a null is neither true nor false). Strings are dictionary codes, so ``name == "INTC"`` is
an integer compare; ordering and ``LIKE`` on strings are evaluated once per dictionary
entry and looked up by code. Numbers follow docs/data.md: integer arithmetic is exact
(an int64 overflow is a DataError naming the first event), int/float comparisons are
exact. The bits of all atoms form an int64 bit-vector per event; distinct bit-vectors get
small class ids (CORE §4).

Example::

    bits = atom_bits(nfa.atoms, batch)          # int64 per event
    classes = ClassTable(); ids = classes.classify(bits)
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.hashing import factorize
from pycel.data.ingest import EventBatch
from pycel.data.values import check_value
from pycel.errors import DataError
from pycel.language.evaluate import eval_scalar
from pycel.language.expr import (
    Arith,
    Attr,
    BoolOp,
    Compare,
    Const,
    Expr,
    IsIn,
    Like,
    Not,
    attributes_in,
)
from pycel.plan.automaton import AtomState

Mask = npt.NDArray[np.bool_]
_CMP = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_INT64_MIN = np.int64(-(2**63))


class Overflows:
    """The rows where integer arithmetic left the int64 range, with the expression that
    did (in evaluation order). ``scope``: the rows that count (None: all rows).

    Example::

        log = Overflows()
        truth(pred, batch, log)
        log.raise_first(batch)      # DataError naming the first row, if any
    """

    def __init__(self) -> None:
        self.found: list[tuple[Mask, Expr[Any]]] = []
        self.scope: Mask | None = None

    def note(self, e: Expr[Any], bad: Mask) -> None:
        if self.scope is not None:
            bad = bad & self.scope
        if bad.any():
            self.found.append((bad, e))

    def first(self) -> tuple[int, Expr[Any]] | None:
        """The first row that overflowed and the first expression that overflowed there."""
        if not self.found:
            return None
        row = min(int(np.argmax(bad)) for bad, _ in self.found)
        return row, next(e for bad, e in self.found if bad[row])

    def raise_first(self, batch: EventBatch) -> None:
        """Raise the :class:`DataError` of the first overflow (row relative to the batch)."""
        found = self.first()
        if found is None:
            return
        row, e = found
        names = sorted({a.name for a in attributes_in(e)})
        env: dict[str | None, dict[str, Any]] = {}
        for a in attributes_in(e):
            env.setdefault(a.var, {})[a.name] = batch.value(a.name, row)
        try:
            eval_scalar(e, env)  # the exact value, for the message (it raises)
        except DataError as err:
            raise DataError(str(err), row=row, column=names[0] if len(names) == 1 else None) from None
        raise DataError(
            f"integer arithmetic leaves the 64-bit range: {e!r}",
            row=row,
            column=names[0] if len(names) == 1 else None,
        )


def _int_arith(op: str, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> tuple[Any, Mask]:
    """``a op b`` on int64 (wrapping) and the rows where the exact result is outside int64
    (``%``: ``b`` nonzero; it cannot overflow)."""
    if op == "+":
        out = a + b
        return out, ((a ^ out) & (b ^ out)) < 0
    if op == "-":
        out = a - b
        return out, ((a ^ b) & (a ^ out)) < 0
    if op == "*":
        out = a * b
        # Without overflow out // a == b exactly; a wrapped product differs from a*b by a
        # multiple of 2**64, more than |a|. (-1) * MIN is the one case the check misses.
        safe = np.where(a == 0, 1, a)
        return out, (a != 0) & ((out // safe != b) | ((a == -1) & (b == _INT64_MIN)))
    return np.mod(a, b), np.zeros(len(a), dtype=np.bool_)


def _arith(e: Arith[Any], batch: EventBatch, log: Overflows) -> tuple[np.ndarray[Any, Any], Mask]:
    """Integer ops exact (overflow noted in ``log``); ``/`` and any float operand in
    float64 (the int converted first, as Python does)."""
    a, va, _ = _value(e.left, batch, log)
    b, vb, _ = _value(e.right, batch, log)
    valid = va & vb
    ints = a.dtype.kind in "biu" and b.dtype.kind in "biu" and e.op != "/"
    a = a.astype(np.int64 if ints else np.float64)
    b = b.astype(np.int64 if ints else np.float64)
    with np.errstate(all="ignore"):
        if e.op in ("/", "%"):
            valid = valid & (b != 0)
            b = np.where(b != 0, b, 1)
        if ints:
            out, over = _int_arith(e.op, a, b)
            log.note(e, valid & over)
        else:
            out = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.mod}[e.op](a, b)
    return out, valid


def _value(e: Expr[Any], batch: EventBatch, log: Overflows) -> tuple[np.ndarray[Any, Any], Mask, str]:
    """(values, valid, dtype) of a non-boolean expression over the batch."""
    n = len(batch)
    if isinstance(e, Attr):
        if e.name not in batch.columns:
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_), e.dtype
        return batch.columns[e.name], batch.valid[e.name], batch.schema.fields[e.name]
    if isinstance(e, Const):
        value = e.value
        if e.dtype == "time" and isinstance(value, datetime):
            value = check_value(value, "time", 0, "")
        if e.dtype == "str":
            # Strings compare as dictionary codes; -2 matches no code (and no null).
            value = batch.schema.string_codes.get(value, -2)
        return np.full(n, value), np.ones(n, dtype=np.bool_), e.dtype
    if isinstance(e, Arith):
        out, valid = _arith(e, batch, log)
        return out, valid, e.dtype
    true, false = _truth(e, batch, log)
    return true, true | false, "bool"


def expression_values(e: Expr[Any], batch: EventBatch, log: Overflows) -> tuple[np.ndarray[Any, Any], Mask]:
    """(values, valid) of a numeric expression over the batch (integer overflow noted in
    ``log``, within its scope)."""
    values, valid, _ = _value(e, batch, log)
    return values, valid


def compare(op: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> Mask:
    """``a op b`` elementwise, exact between int64 and float64 (as Python compares them:
    ``2**53 + 1 > 2.0**53``); NaN compares false except with ``!=``."""
    if a.dtype.kind in "biu" and b.dtype.kind == "f":
        return _int_float_compare(op, a.astype(np.int64), b.astype(np.float64))
    if a.dtype.kind == "f" and b.dtype.kind in "biu":
        return _int_float_compare(_FLIPPED[op], b.astype(np.int64), a.astype(np.float64))
    result: Mask = _CMP[op](a, b)
    return result


def _int_float_compare(op: str, i: npt.NDArray[np.int64], f: npt.NDArray[np.float64]) -> Mask:
    """``i op f`` exactly. Rounding to float64 is monotone and keeps floats, so where
    float(i) != f that comparison decides; where they are equal, f is an integer and
    compares exactly as int64 (or is 2**63, above every int64)."""
    fi = i.astype(np.float64)
    if not len(i) or (i.min() >= -(2**53) and i.max() <= 2**53):  # every int is a float exactly
        plain: Mask = _CMP[op](fi, f)
        return plain
    with np.errstate(invalid="ignore"):
        sign = (fi > f).astype(np.int64) - (fi < f)
        tie = fi == f
        if tie.any():
            above = f >= 2.0**63
            exact = np.where(tie & ~above, f, 0).astype(np.int64)
            tied = np.where(above, -1, (i > exact).astype(np.int64) - (i < exact))
            sign = np.where(tie, tied, sign)
    result: Mask = _CMP[op](sign, 0)
    nan = np.isnan(f)
    return result | nan if op == "!=" else result & ~nan


def _exactly_as(kind: str, consts: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """The constants of an ``isin`` that a column of numpy ``kind`` can equal exactly, in
    the column's own type (so ``np.isin`` never compares through a rounding cast): a float
    equals an int column's value only if it is an integer in range; an int equals a float
    column's value only if the float represents it exactly."""
    out: list[Any] = []
    for c in consts:
        if not len(c):
            continue
        v = c[0].item()
        if kind in "biu" and isinstance(v, float):
            if v.is_integer() and -(2.0**63) <= v < 2.0**63:
                out.append(int(v))
        elif kind == "f" and isinstance(v, int) and not isinstance(v, bool):
            if int(float(v)) == v:
                out.append(float(v))
        else:
            out.append(v)
    if kind in "biu" and all(isinstance(v, int) for v in out):
        return np.array(out, dtype=np.int64)
    return np.array(out, dtype=np.float64 if kind == "f" else None)


def _string_table(e: Expr[Any], batch: EventBatch, test: Any, log: Overflows) -> Mask:
    """Apply ``test`` to every dictionary string; index the result by the column's codes."""
    codes, valid, _ = _value(e, batch, log)
    table = np.array([bool(test(s)) for s in batch.schema.strings] + [False], dtype=np.bool_)
    return valid & table[np.where(valid, codes, len(batch.schema.strings))]


def truth(e: Expr[bool], batch: EventBatch, log: Overflows | None = None) -> tuple[Mask, Mask]:
    """(true, false) masks of predicate ``e``; where both are False the value is unknown.

    Integer arithmetic is exact: rows where it leaves int64 are noted in ``log``, or,
    without a log, raise a :class:`DataError` naming the first such row.
    """
    own = log if log is not None else Overflows()
    result = _truth(e, batch, own)
    if log is None:
        own.raise_first(batch)
    return result


def _truth(e: Expr[bool], batch: EventBatch, log: Overflows) -> tuple[Mask, Mask]:
    if isinstance(e, Compare):
        left, right = e.left, e.right
        str_order = left.dtype == "str" and e.op not in ("==", "!=")
        if str_order and isinstance(right, Const):
            c = right.value
            res = _string_table(left, batch, lambda s: _CMP[e.op](s, c), log)
            return res, _value(left, batch, log)[1] & ~res
        if str_order and isinstance(left, Const):
            c = left.value
            res = _string_table(right, batch, lambda s: _CMP[e.op](c, s), log)
            return res, _value(right, batch, log)[1] & ~res
        if str_order:
            strings = np.array(batch.schema.strings + [""], dtype=object)
            a, va, _ = _value(left, batch, log)
            b, vb, _ = _value(right, batch, log)
            valid = va & vb
            res = valid & np.array(
                [bool(_CMP[e.op](x, y)) for x, y in zip(strings[a], strings[b], strict=True)], dtype=np.bool_
            )
            return res, valid & ~res
        a, va, _ = _value(left, batch, log)
        b, vb, _ = _value(right, batch, log)
        valid = va & vb
        res = valid & compare(e.op, a, b)
        return res, valid & ~res
    if isinstance(e, IsIn):
        valid = _value(e.expr, batch, log)[1]
        if e.expr.dtype == "str":
            values = set(e.values)
            res = _string_table(e.expr, batch, lambda s: s in values, log)
        else:
            a = _value(e.expr, batch, log)[0]
            consts = [_value(Const(v), batch, log)[0][:1] for v in e.values]
            res = valid & np.isin(a, _exactly_as(a.dtype.kind, consts))
        if e.negated:
            res = valid & ~res
        return res, valid & ~res
    if isinstance(e, Like):
        rx = e.compiled()
        res = _string_table(e.expr, batch, lambda s: rx.fullmatch(s) is not None, log)
        valid = _value(e.expr, batch, log)[1]
        return res, valid & ~res
    if isinstance(e, BoolOp):
        parts = [_truth(a, batch, log) for a in e.args]
        trues, falses = [p[0] for p in parts], [p[1] for p in parts]
        if e.op == "and":
            return np.logical_and.reduce(trues), np.logical_or.reduce(falses)
        return np.logical_or.reduce(trues), np.logical_and.reduce(falses)
    if isinstance(e, Not):
        t, f = _truth(e.arg, batch, log)
        return f, t
    if isinstance(e, (Attr, Const)) and e.dtype == "bool":
        raw, present, _ = _value(e, batch, log)
        flag = raw.astype(np.bool_)
        return present & flag, present & ~flag
    raise TypeError(f"cannot evaluate {e!r} as a predicate")


def reads_event(atom: AtomState, batch: EventBatch, log: Overflows | None = None) -> Mask:
    """Which events of the batch ``atom`` may read (its type test and filters).

    Integer overflow counts on the events of the atom's type (on every event for the
    filters of a negated atom, which reads events of any type); see :func:`truth`.
    """
    own = log if log is not None else Overflows()
    schema = batch.schema
    is_type = np.array([atom.event in s for s in schema.supertypes] + [False], dtype=np.bool_)
    mask = is_type[batch.type_ids]
    own.scope = mask
    if atom.negated:
        if atom.type_predicate is not None:
            mask = mask & _truth(atom.type_predicate, batch, own)[0]
        mask = ~mask
        own.scope = None
    for f in atom.filters:
        mask = mask & _truth(f, batch, own)[0]
    own.scope = None
    if log is None:
        own.raise_first(batch)
    return mask


def atom_bits(atoms: Sequence[AtomState], batch: EventBatch) -> npt.NDArray[np.int64]:
    """Bit k of event j's value is set when atom k may read event j.

    Atoms that only test the event type are looked up by type id in one gather; atoms
    with filters are evaluated column by column. Raises :class:`DataError` at the first
    event where integer arithmetic of a filter leaves int64.
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
    log = Overflows()
    for atom in filtered:
        bits |= reads_event(atom, batch, log).astype(np.int64) << atom.index
    log.raise_first(batch)
    return bits


_READS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def columns_read_by(query: Any) -> dict[str, str]:
    """The attributes a compiled query reads, each with the first part of the query that
    reads it (computed once per query, from its plan: a query restored from a snapshot
    has no pattern AST). A columnar input must have a column for each.

    Example: ``columns_read_by(pycel.compile(b.where(b.price > 3)))`` is
    ``{"price": "the filter b.price > 3"}``.
    """
    reads = _READS.get(query)
    if reads is not None:
        return reads
    reads = {}
    if query.time_attribute is not None:
        reads[query.time_attribute] = "the window's time attribute"
    for key in query.partition:
        reads.setdefault(key, "PARTITION BY")
    for atom in query.nfa.atoms:
        preds = [*atom.filters, *([atom.type_predicate] if atom.type_predicate is not None else [])]
        for pred in preds:
            for name in sorted({a.name for a in attributes_in(pred)}):
                reads.setdefault(name, f"the filter {pred!r}")
    for join in query.join_keys:
        for _, name in sorted(join.attributes):
            reads.setdefault(name, "an equality join")
    if query.hcq is not None:
        for names in query.hcq.class_attrs:
            for name in names:
                if name is not None:
                    reads.setdefault(name, "an equality join")
    for cond in query.nfa.conditions:
        for name in sorted({a.name for e in (cond.register, cond.threshold) for a in attributes_in(e)}):
            reads.setdefault(name, f"the comparison {cond.text}")
    if query.post_filters is not None:
        for pred in query.post_filters.conjuncts:
            for name in sorted({a.name for a in attributes_in(pred)}):
                reads.setdefault(name, f"the post-filter {pred!r}")
    _READS[query] = reads
    return reads


class ClassTable:
    """Distinct atom bit-vectors → dense class ids, stable for the life of a stream."""

    def __init__(self) -> None:
        self.bits: list[int] = []
        self.ids: dict[int, int] = {}

    def classify(self, bits: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """Class id of every event (new bit-vectors get new ids)."""
        inverse, uniq = factorize(bits)  # hashing: no sort
        table = np.empty(len(uniq), dtype=np.int32)
        for k, b in enumerate(uniq.tolist()):
            cid = self.ids.get(b)
            if cid is None:
                cid = self.ids[b] = len(self.bits)
                self.bits.append(b)
            table[k] = cid
        return table[inverse]
