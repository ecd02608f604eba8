"""The post-filters as the enumerator prunes with them (:mod:`pycel.jit.residual`).

Per push, each conjunct of a query's post-filters becomes a stack program over the
attribute columns of the post-filter tail (:class:`pycel.runtime.postfilter.Tail`), with
the same types the column-wise evaluator (:mod:`pycel.runtime.predicates`) gives each
subexpression: integer arithmetic when both operands are integer columns or constants,
float64 otherwise, strings compared by dictionary code. A conjunct with a part the
interpreter does not run (``IN``, ``LIKE``, string ordering, a time constant, ``%`` on
floats) is left to the complete-match check alone. Which conjuncts are tried first
follows how often each one failed so far (the most selective first: the lazy chain
idea of trying the cheapest way to fail first).

Example::

    pruning = Pruning(plan.post_filters, plan.variables, plan.nfa)
    res = pruning.program(tail, schema, base)   # None: nothing to prune with
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from pycel.data.columns import TARGET
from pycel.data.ingest import Schema
from pycel.errors import DataError, UnsupportedError
from pycel.jit import residual as op
from pycel.jit.arrays import Ints
from pycel.jit.residual import Residual
from pycel.language.expr import Arith, Attr, BoolOp, Compare, Const, Expr, Not
from pycel.plan.automaton import Nfa
from pycel.plan.conditions import key_pruning
from pycel.plan.postfilter import PostFilters
from pycel.runtime.postfilter import Tail

_CMP = {"==": op.EQ, "!=": op.NE, "<": op.LT, "<=": op.LE, ">": op.GT, ">=": op.GE}
_INT_OPS = {"+": op.ADD_I, "-": op.SUB_I, "*": op.MUL_I, "%": op.MOD_I}
_FLOAT_OPS = {"+": op.ADD_F, "-": op.SUB_F, "*": op.MUL_F, "/": op.DIV_F}
_INT64 = (-(2**63), 2**63 - 1)
_SIDES = {"above": op.SKIP_ABOVE, "below": op.SKIP_BELOW}
#: Path depths whose index the enumerator bounds by key (deeper: by each node's check).
_KEY_DEPTH = 256


class _Unsupported(Exception):
    """A part of a conjunct the interpreter does not run."""


class _Program:
    """One push's program: code rows, float constants and the columns it loads."""

    def __init__(self, tail: Tail, schema: Schema, variables: tuple[str, ...]) -> None:
        self.tail, self.schema, self.variables = tail, schema, variables
        self.code: list[tuple[int, int, int]] = []
        self.fconst: list[float] = []
        self.int_cols: dict[str, int] = {}
        self.float_cols: dict[str, int] = {}

    def value(self, e: Expr[Any]) -> str:
        """Emit ``e``; return its kind: "i" (int64 stack) or "f" (float64 stack)."""
        if isinstance(e, Attr):
            if e.prev or e.var is None or e.name not in self.tail.values:
                raise _Unsupported
            kind = self.tail.values[e.name].dtype.kind
            var = self.variables.index(e.var)
            if kind in "biu":
                col = self.int_cols.setdefault(e.name, len(self.int_cols))
                self.code.append((op.LOAD_I, var, col))
                return "i"
            if kind == "f":
                col = self.float_cols.setdefault(e.name, len(self.float_cols))
                self.code.append((op.LOAD_F, var, col))
                return "f"
            raise _Unsupported
        if isinstance(e, Const):
            v = e.value
            if isinstance(v, bool):
                self.code.append((op.CONST_I, int(v), 0))
                return "i"
            if isinstance(v, int) and _INT64[0] <= v <= _INT64[1]:
                self.code.append((op.CONST_I, v, 0))
                return "i"
            if isinstance(v, float):
                self.code.append((op.CONST_F, len(self.fconst), 0))
                self.fconst.append(v)
                return "f"
            if isinstance(v, str):  # its dictionary code; -2 equals no code
                self.code.append((op.CONST_I, self.schema.string_codes.get(v, -2), 0))
                return "i"
            raise _Unsupported
        if isinstance(e, Arith):
            left = self.value(e.left)
            at_left = len(self.code)
            right = self.value(e.right)
            if left == right == "i" and e.op in _INT_OPS:
                self.code.append((_INT_OPS[e.op], 0, 0))
                return "i"
            if e.op not in _FLOAT_OPS:
                raise _Unsupported
            if left == "i":  # converted where it was pushed, before the right operand
                self.code.insert(at_left, (op.TO_F, 0, 0))
            if right == "i":
                self.code.append((op.TO_F, 0, 0))
            self.code.append((_FLOAT_OPS[e.op], 0, 0))
            return "f"
        self.predicate(e)
        return "i"

    def predicate(self, e: Expr[Any]) -> None:
        """Emit predicate ``e`` (a 0/1 value with its validity: three-valued)."""
        if isinstance(e, Compare):
            if e.left.dtype == "str" and e.op not in ("==", "!="):
                raise _Unsupported
            kinds = self.value(e.left) + self.value(e.right)
            code = {"ii": op.CMP_I, "ff": op.CMP_F, "if": op.CMP_IF, "fi": op.CMP_FI}[kinds]
            self.code.append((code, _CMP[e.op], 0))
        elif isinstance(e, BoolOp):
            for a in e.args:
                self.predicate(a)
            self.code.append((op.AND if e.op == "and" else op.OR, len(e.args), 0))
        elif isinstance(e, Not):
            self.predicate(e.arg)
            self.code.append((op.NOT, 0, 0))
        elif isinstance(e, (Attr, Const)) and e.dtype == "bool":
            if self.value(e) != "i":
                raise _Unsupported
            self.code.append((op.TRUTHY, 0, 0))
        else:
            raise _Unsupported


def _not_interpreted(conjuncts: list[Expr[bool]]) -> str:
    return (
        f"consume() with a post-filter (where(..., post_filter=True), or a comparison the "
        f"automaton cannot index) needs every conjunct checked while the engine enumerates, "
        f"and {', '.join(map(repr, conjuncts))} cannot be (IN, LIKE, a "
        "string ordering, a time constant and % on floats are checked on complete "
        "matches only): drop consume(), or write the condition without them"
    )


def check_consumable(post: PostFilters, schema: Schema, variables: tuple[str, ...]) -> None:
    """Raise UnsupportedError if some conjunct of ``post`` is one the interpreter does not
    run: with consumption every conjunct must be (:meth:`Pruning.program`, ``exact``).
    Decided on the schema's attribute types, as the tail will hold them.

    Example: ``check_consumable(plan.post_filters, plan.schema, plan.variables)``"""
    dtypes = {name: TARGET.get(schema.fields.get(name, "int"), np.int64) for name in post.attributes}
    values: dict[str, np.ndarray[Any, Any]] = {name: np.zeros(0, dtype=d) for name, d in dtypes.items()}
    tail = Tail(np.zeros(0, dtype=np.int64), values, {name: np.zeros(0, dtype=np.bool_) for name in values})
    missing = []
    for conjunct in post.conjuncts:
        try:
            _Program(tail, schema, variables).predicate(conjunct)
        except _Unsupported:
            missing.append(conjunct)
    if missing:
        raise UnsupportedError(_not_interpreted(missing))


def _may_overflow(conjuncts: tuple[Expr[bool], ...], tail: Tail) -> bool:
    """Whether integer arithmetic in some conjunct can leave int64 on the tail's values
    (interval arithmetic over each int column's smallest and largest valid value)."""
    bounds: dict[str, tuple[int, int]] = {}
    for name, values in tail.values.items():
        if values.dtype.kind in "biu":
            held = values[tail.valid[name]]
            bounds[name] = (int(held.min()), int(held.max())) if len(held) else (0, 0)

    def interval(e: Expr[Any]) -> tuple[int, int] | None:
        """e's int values as [lo, hi]; None where they are not ints (floats, strings)."""
        inner = [interval(c) for c in e.children()]
        if isinstance(e, Attr):
            return bounds.get(e.name)  # int columns only (floats have none)
        if isinstance(e, Const):
            v = e.value
            return (int(v), int(v)) if isinstance(v, int) else None
        if isinstance(e, Arith):
            a, b = inner
            if a is None or b is None or e.op == "/":
                return None
            if e.op == "%":
                m = max(abs(b[0]), abs(b[1]))
                return (-m, m)
            f = {"+": operator.add, "-": operator.sub, "*": operator.mul}[e.op]
            corners = [f(p, q) for p in a for q in b]
            lo, hi = min(corners), max(corners)
            if lo < _INT64[0] or hi > _INT64[1]:
                raise OverflowError
            return lo, hi
        return (0, 1) if e.dtype == "bool" else None

    try:
        for c in conjuncts:
            interval(c)
    except OverflowError:
        return True
    return False


class Pruning:
    """A query's post-filters as pruning programs, and what each conjunct did so far
    (how often it was checked and failed, which orders the next push's tries)."""

    def __init__(self, post: PostFilters, variables: tuple[str, ...], nfa: Nfa) -> None:
        self.post = post
        self.variables = variables
        # Per conjunct, the register whose order prunes it (pycel.plan.conditions).
        self.keyed = [key_pruning(c, nfa) for c in post.conjuncts]
        self.stats = np.zeros((len(post.conjuncts), 2), dtype=np.int64)
        self.visits = 0

    def program(self, tail: Tail, schema: Schema, base: int, exact: bool = False) -> Residual | None:
        """The programs over ``tail`` (row r holds the event at local position
        ``base + r``), or None if no conjunct can prune.

        ``exact``: the loop consumes on the matches that survive pruning, so every
        conjunct must be checked there (UnsupportedError for one the interpreter does not
        run) and no integer arithmetic may overflow (DataError: the push is refused)."""
        prog = _Program(tail, schema, self.variables)
        ptr, masks, kept = [0], [], []
        for c, conjunct in enumerate(self.post.conjuncts):
            mark = (len(prog.code), len(prog.fconst))
            try:
                prog.predicate(conjunct)
            except _Unsupported:
                del prog.code[mark[0] :], prog.fconst[mark[1] :]
                if exact:
                    raise UnsupportedError(_not_interpreted([conjunct])) from None
                continue
            ptr.append(len(prog.code))
            masks.append(sum(1 << self.variables.index(v) for v in self.post.variables[c]))
            kept.append(c)
        if not kept or _may_overflow(self.post.conjuncts, tail):
            if exact and kept:
                raise DataError(
                    "the post-filters' integer arithmetic could leave the 64-bit range on "
                    "the values of this push; with consume() the engine checks them while it "
                    "enumerates and must do so exactly, so it refuses the push (nothing of it "
                    "was taken). Use float attributes, or smaller values"
                )
            # An overflow is a DataError of the complete match, even one another conjunct
            # rejects: pruning could hide it, so this push enumerates everything.
            return None
        self._kept = kept
        key_var, key_side = self._keyed_sides(kept)
        n = len(tail.positions)

        def block(cols: dict[str, int], dtype: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            values = np.zeros((max(len(cols), 1), n), dtype=dtype)
            valid = np.zeros((max(len(cols), 1), n), dtype=np.bool_)
            for name, k in cols.items():
                values[k] = tail.values[name]
                valid[k] = tail.valid[name]
            return values, valid

        ints, int_valid = block(prog.int_cols, np.int64)
        floats, float_valid = block(prog.float_cols, np.float64)
        stats = self.stats[kept]
        # Most failing first (a conjunct never checked counts as failing half the time).
        rate = (stats[:, 1] + 1) / (stats[:, 0] + 2)
        order = np.argsort(-rate, kind="stable").astype(np.int64)
        depth = max(len(prog.code), 1)
        return Residual(
            np.array(prog.code, dtype=np.int64).reshape(-1, 3),
            np.array(prog.fconst, dtype=np.float64),
            np.array(ptr, dtype=np.int64),
            np.array(masks, dtype=np.int64),
            order,
            ints, int_valid, floats, float_valid, np.int64(base),
            np.zeros((len(kept), 2), dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros(64, dtype=np.int64),
            np.zeros(depth, dtype=np.int64),
            np.zeros(depth, dtype=np.float64),
            np.zeros(depth, dtype=np.bool_),
            np.zeros(1024, dtype=np.int64),
            np.zeros(64, dtype=np.int64),
            key_var, key_side,
            np.zeros(_KEY_DEPTH, dtype=np.int64), np.zeros(_KEY_DEPTH, dtype=np.int64),
            np.zeros(len(kept), dtype=np.int64), self._key_columns(kept, prog),
            np.zeros(len(kept), dtype=np.int64), np.zeros(len(kept), dtype=np.int64),
        )  # fmt: skip

    def _keyed_sides(self, kept: list[int]) -> tuple[Ints, Ints]:
        """(key_var, key_side) of :class:`~pycel.jit.residual.Residual` for the ``kept``
        conjuncts."""
        key_var, key_side = [], []
        for c in kept:
            keyed = self.keyed[c]
            g, where = keyed if keyed is not None else (None, "")
            key_var.append(-1 if g is None or g.var is None else self.variables.index(g.var))
            key_side.append(_SIDES.get(where, 0))
        return np.array(key_var, dtype=np.int64), np.array(key_side, dtype=np.int64)

    def _key_columns(self, kept: list[int], prog: _Program) -> Ints:
        """``key_column`` of :class:`~pycel.jit.residual.Residual`: per ``kept`` conjunct
        with a key, where its register's values are (kind 0: ``ints``, 1: ``floats``)."""
        columns = np.full((len(kept), 2), -1, dtype=np.int64)
        for i, c in enumerate(kept):
            keyed = self.keyed[c]
            name = keyed[0].name if keyed is not None else ""
            for kind, cols in enumerate((prog.int_cols, prog.float_cols)):
                if name in cols:
                    columns[i] = (kind, cols[name])
        return columns

    def record(self, res: Residual) -> None:
        """Add a push's counts (after its loop ran) to the totals."""
        self.stats[self._kept] += res.stats
        self.visits += int(res.visits[0])
